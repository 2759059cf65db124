"""Pull queries: which rows of a table's store a ``WHERE`` needs (so the store reads by index).

ksqlDB serves ``SELECT ... FROM table WHERE key = x`` / ``key IN (...)`` / a range on the key /
a WINDOWSTART range from its state store. :func:`lookup_for` reads the top-level ``AND``
conjuncts of the WHERE and turns those it recognises into a :class:`Lookup`; the rest (and the
recognised ones too) are then evaluated on the rows read, so the lookup only needs to select a
superset. A literal whose type does not match the key's (``'5'`` for an INT key) is not used.
"""

from __future__ import annotations

import base64
import decimal
import functools
import json
import threading
from dataclasses import dataclass
from typing import Any, cast

from sqlglot import exp

from streamsql import types as t
from streamsql.catalog import Source
from streamsql.planner.expressions import COMPARISON_SYMBOLS, ksql_text
from streamsql.runtime.materialized import Lookup

_FLIP: dict[type[exp.Binary], type[exp.Binary]] = {
    exp.GT: exp.LT, exp.GTE: exp.LTE, exp.LT: exp.GT, exp.LTE: exp.GTE, exp.EQ: exp.EQ}


def _conjuncts(node: exp.Expr) -> list[exp.Expr]:
    if isinstance(node, exp.Paren):
        return _conjuncts(node.this)
    if isinstance(node, exp.And):
        return _conjuncts(node.left) + _conjuncts(node.right)
    return [node]


def _literal(node: exp.Expr, kind: t.Kind) -> tuple[bool, Any]:
    neg = False
    if isinstance(node, exp.Neg):
        neg, node = True, node.this
    if not isinstance(node, exp.Literal):
        return False, None
    if node.is_string:
        if kind == t.Kind.STRING and not neg:
            return True, node.this
        return False, None
    if kind not in (t.Kind.INTEGER, t.Kind.BIGINT, t.Kind.DOUBLE):
        return False, None
    text = node.this
    try:
        value: Any = int(text)
    except ValueError:
        value = float(text)
    if kind == t.Kind.DOUBLE:
        value = float(value)  # the store's key text of a DOUBLE key is "10.0", never "10"
    elif isinstance(value, float):
        return False, None  # 10.5 never equals an INT/BIGINT key; let the WHERE decide
    return True, -value if neg else value


def lookup_for(where: exp.Expr | None, table: Source) -> Lookup:
    lookup = Lookup()
    if where is None:
        return lookup
    keys = table.key_columns
    key = keys[0] if len(keys) == 1 else None
    for c in _conjuncts(where):
        if isinstance(c, exp.In) and isinstance(c.this, exp.Column) and key is not None \
                and c.this.name.upper() == key.name.upper() and not c.args.get("query"):
            values = [_literal(v, key.type.kind) for v in c.expressions]
            if values and all(ok for ok, _ in values):
                _set_keys(lookup, [[v] for _, v in values])
            continue
        if not isinstance(c, exp.Binary) or type(c) not in _FLIP:
            continue
        left, right, op = c.left, c.right, type(c)
        if not isinstance(left, exp.Column):
            left, right, op = right, left, _FLIP[op]
        if not isinstance(left, exp.Column):
            continue
        name = left.name.upper()
        if name == t.WINDOWSTART:
            ok, value = _literal(right, t.Kind.BIGINT)
            if ok:
                _bound(lookup, "wstart", op, int(value))
        elif key is not None and name == key.name.upper():
            ok, value = _literal(right, key.type.kind)
            if not ok:
                continue
            if op is exp.EQ:
                _set_keys(lookup, [[value]])
            else:
                _bound(lookup, "key", op, value)
    return lookup


def _set_keys(lookup: Lookup, keys: list[list[Any]]) -> None:
    if lookup.keys is None:
        lookup.keys = keys
    else:  # two key conditions ANDed: the rows satisfying both
        lookup.keys = [k for k in lookup.keys if k in keys]


def _bound(lookup: Lookup, prefix: str, op: type, value: Any) -> None:
    if op is exp.EQ:
        setattr(lookup, f"{prefix}_low", (value, True))
        setattr(lookup, f"{prefix}_high", (value, True))
    elif op in (exp.GT, exp.GTE):
        setattr(lookup, f"{prefix}_low", (value, op is exp.GTE))
    else:
        setattr(lookup, f"{prefix}_high", (value, op is exp.LTE))


# --- which access path a pull query needs (ksqlDB's QueryFilterNode + PullPhysicalPlanBuilder) ---

_MAX_DISJUNCTS = 256
#: key types a literal must already match (no text to number or number to text conversion)
_STRICT_KINDS = (t.Kind.STRING, t.Kind.INTEGER, t.Kind.BIGINT, t.Kind.DOUBLE, t.Kind.DECIMAL)
TABLE_SCAN_REQUIRED = ("Query requires table scan to be enabled. Table scans can be enabled by setting "
                       "ksql.query.pull.table.scan.enabled=true")


def _check_key_value(leaf: exp.Expr, other: exp.Expr, name: str, key_type: t.SqlType) -> None:
    """A key lookup's value must be a key (ksqlDB's ``resolveKey``): not NULL, and a literal
    that converts to the key column's type without a cast."""
    from streamsql.errors import AnalysisError

    if isinstance(other, exp.Null):
        raise AnalysisError(f"Primary key columns can not be NULL: {ksql_text(leaf)}")
    if isinstance(other, exp.Literal) and key_type.kind in _STRICT_KINDS:
        is_text = key_type.kind == t.Kind.STRING
        if other.is_string != is_text:
            raise AnalysisError(f"'{other.this}' can not be converted to the type of the key column: "
                                f"{name} {key_type} KEY")


def disjuncts(where: exp.Expr) -> list[list[exp.Expr]]:
    """``where`` in disjunctive normal form: a list of disjuncts, each a list of ANDed leaves; an
    ``IN`` list on a column becomes one equality per value (as ksqlDB rewrites it)."""
    if isinstance(where, exp.Paren):
        return disjuncts(where.this)
    if isinstance(where, exp.Or):
        return disjuncts(where.left) + disjuncts(where.right)
    if isinstance(where, exp.And):
        left, right = disjuncts(where.left), disjuncts(where.right)
        if len(left) * len(right) > _MAX_DISJUNCTS:
            return [[where]]  # too large to expand: treated as one opaque condition
        return [a + b for a in left for b in right]
    if isinstance(where, exp.In) and isinstance(where.this, exp.Column) and not where.args.get("query") \
            and where.expressions:
        return [[exp.EQ(this=where.this.copy(), expression=v.copy())] for v in where.expressions]
    return [[where]]


def _has_column(node: exp.Expr) -> bool:
    return any(True for _ in node.find_all(exp.Column))


def check_access_path(where: exp.Expr | None, table: Source, table_scans: bool, range_scans: bool) -> str:
    """Decide how a pull query over ``table`` reads its store — ``key-lookup``, ``range-scan`` or
    ``table-scan`` — and raise ksqlDB's errors when the WHERE needs a table scan but
    ``ksql.query.pull.table.scan.enabled`` is false (or a range scan the engine may not do)."""
    from streamsql.errors import AnalysisError

    def scan_or_raise(message: str) -> None:
        if not table_scans:
            raise AnalysisError(message)

    if where is None:
        scan_or_raise(TABLE_SCAN_REQUIRED)
        return "table-scan"
    keys = [c.name.upper() for c in table.key_columns]
    key_types = {c.name.upper(): c.type for c in table.key_columns}
    column_types = {c.name.upper(): c.type for c in table.columns}
    windowed = bool(table.window_type)
    needs_scan = False
    constraints: list[str | None] = []  # per disjunct: the operator of a usable key constraint
    lookups: list[tuple[exp.Expr, exp.Expr, str]] = []  # key = value comparisons
    for leaves in disjuncts(where):
        seen: list[str] = []
        operators: dict[str, type] = {}
        for leaf in leaves:
            while isinstance(leaf, exp.Paren):
                leaf = leaf.this
            if isinstance(leaf, exp.Like):
                if isinstance(leaf.this, exp.Column):
                    column_type = column_types.get(leaf.this.name.upper())
                    if column_type is not None and column_type.kind != t.Kind.STRING:
                        raise AnalysisError(f"The column type for Like condition must be VARCHAR. The column "
                                            f"type is {column_type.kind.value}")
                else:
                    scan_or_raise("Like condition must be between strings")
                    needs_scan = True
                continue
            if not isinstance(leaf, exp.Binary) or type(leaf) not in COMPARISON_SYMBOLS:
                scan_or_raise(f"Unsupported expression in WHERE clause: {ksql_text(leaf)}")
                needs_scan = True
                continue
            left, right = leaf.left, leaf.right
            column = right if isinstance(right, exp.Column) else left if isinstance(left, exp.Column) else None
            if column is None:
                scan_or_raise("A comparison must directly reference a key column.")
                needs_scan = True
                continue
            other = left if column is right else right
            if _has_column(other):
                scan_or_raise("A comparison must be between a key column and a resolvable expression.")
                needs_scan = True
                continue
            name = column.name.upper()
            if name in (t.WINDOWSTART, t.WINDOWEND) or name not in keys:
                continue
            op = type(leaf) if column is left else _FLIP.get(type(leaf), type(leaf))
            if op in (exp.NEQ, exp.NullSafeEQ, exp.NullSafeNEQ):
                scan_or_raise(f"Bound on key columns '{', '.join(keys)}' must currently be '='")
                needs_scan = True
            if name in seen and not table_scans:
                raise AnalysisError("A comparison condition on the key column cannot be combined with other "
                                    "comparisons such as an IN predicate")
            if name not in seen:
                seen.append(name)
            if operators.get(name) is not exp.EQ and (op is exp.EQ or name not in operators):
                operators[name] = op
            if op is exp.EQ:
                lookups.append((leaf, other, name))
        if not seen:
            scan_or_raise(f"WHERE clause missing key column for disjunct: {ksql_text(exp.and_(*leaves))}")
            needs_scan = True
        elif len(seen) != len(keys):
            scan_or_raise(f"Multi-column sources must specify every key in the WHERE clause. Specified: "
                          f"[{', '.join(seen)}] Expected: [{', '.join(keys)}]")
            needs_scan = True
        if not seen:
            constraints.append(None)
        elif all(op is exp.EQ for op in operators.values()):
            constraints.append("=")
        elif len(operators) == 1 and next(iter(key_types[n] for n in operators)).kind in (t.Kind.STRING, t.Kind.BYTES):
            constraints.append("range")
        else:
            constraints.append(None)
    if not needs_scan:
        for leaf, other, name in lookups:
            _check_key_value(leaf, other, name, key_types[name])
    if needs_scan or any(c is None for c in constraints):
        path = "table-scan"
    elif all(c == "=" for c in constraints):
        path = "key-lookup"
    elif len(constraints) == 1:
        path = "range-scan" if range_scans and not windowed else "table-scan"
    else:
        path = "table-scan"
    if path == "table-scan":
        scan_or_raise(TABLE_SCAN_REQUIRED)
    return path


# --- a pull query's WHERE and projection without Spark -------------------------------------------

#: the Arrow type a store column is built as when the WHERE or an arithmetic column reads it (the
#: kinds ``planner/pushdown.py`` compares and ``physical/in_reader.py`` computes with)
_ARROW_KINDS = {t.Kind.INTEGER: "int32", t.Kind.BIGINT: "int64", t.Kind.DOUBLE: "float64",
                t.Kind.STRING: "string", t.Kind.BOOLEAN: "bool"}
#: the program types of ``physical/in_reader.py`` as the result's SQL types (what Spark types them)
_PROGRAM_TYPES = {"int32": t.INTEGER, "int64": t.BIGINT, "float64": t.DOUBLE}
_ROW_INDEX = "__ROW"

StoredRow = tuple[list[Any], "int | None", "int | None", dict[str, Any], int]


@dataclass(frozen=True)
class ArrowPull:
    """A pull query's WHERE and projection as the programs a stream's reader task runs over its
    decoded batches (``planner/pushdown.exact_filter``, ``physical/in_reader.column_program``,
    evaluated by ``kafka/filters.filter_expression`` and ``kafka/pipe.evaluate``), applied to
    the store's rows: the same translation, so the same answer as Spark's for every row, and no
    Spark job (tens of milliseconds each) per query. Made only when the whole WHERE and every
    output column translate (:func:`arrow_pull`); otherwise the query keeps Spark's plan.

    ``where``: the WHERE's JSON tree or None; ``columns``: (output name, program) per output
    column; ``inputs``: the store columns the WHERE and the arithmetic read, with their Arrow
    types; ``types``: per store column, its SQL type (a passed-through value is shaped as
    Spark returns it); ``result``: the output columns' SQL types as Spark types them."""

    where: str | None
    columns: tuple[tuple[str, Any], ...]
    inputs: tuple[tuple[str, str], ...]
    types: dict[str, t.SqlType]
    result: tuple[t.Column, ...]

    @functools.cached_property
    def where_tree(self) -> dict[str, Any]:
        """``where`` read once (a frozen dataclass keeps it in its ``__dict__``)."""
        assert self.where is not None
        return cast(dict[str, Any], json.loads(self.where))

    def run(self, rows: list[StoredRow], key_names: list[str]) -> list[list[Any]]:
        """The query's output rows, in the store's order, as Spark's path returns them."""
        import pyarrow as pa

        records = [_record(row, key_names) for row in rows]
        arrays = [pa.array([rec.get(name) for rec in records], type=_arrow_type(kind)) for name, kind in self.inputs]
        names = [name for name, _ in self.inputs]
        batch = pa.RecordBatch.from_arrays([*arrays, pa.array(range(len(records)), pa.int64())],
                                           names=[*names, _ROW_INDEX])
        if self.where is not None:
            from streamsql.kafka.filters import filter_mask

            batch = batch.filter(filter_mask(self.where_tree, batch))
        kept = batch.column(_ROW_INDEX).to_pylist()
        out: list[list[Any]] = [[] for _ in kept]
        for _, program in self.columns:
            if set(program) <= {"column", "type"}:  # a stored value, as Spark's collect returns it
                name, sql_type = program["column"], self.types[program["column"]]
                values = [spark_shaped(records[i].get(name), sql_type) for i in kept]
            else:
                from streamsql.kafka.pipe import evaluate

                values = evaluate(program, batch).to_pylist()
            for row, value in zip(out, values):
                row.append(value)
        return out


_CACHE_SIZE = 512
_cache: dict[tuple[Any, ...], tuple[Source, ArrowPull | None]] = {}
_cache_lock = threading.Lock()


def cached_arrow_pull(where: exp.Expr | None, plan: Any, table: Source, scope: Any) -> ArrowPull | None:
    """:func:`arrow_pull`, remembered per table and compiled query (the same pull query sent
    again — a dashboard's — costs no translation): keyed by the table object (a catalog change
    makes a new one), the WHERE's and the columns' compiled Spark SQL, which fix the answer."""
    key = (id(table), plan.alias, plan.where, tuple((c.name, c.sql, c.is_key) for c in plan.columns))
    with _cache_lock:
        hit = _cache.get(key)
    if hit is not None and hit[0] is table:
        return hit[1]
    made = arrow_pull(where, plan, table, scope)
    with _cache_lock:
        if len(_cache) >= _CACHE_SIZE:
            _cache.clear()
        _cache[key] = (table, made)
    return made


def arrow_pull(where: exp.Expr | None, plan: Any, table: Source, scope: Any) -> ArrowPull | None:
    """The :class:`ArrowPull` of a pull query over ``table`` (``plan``: its QueryPlan, ``scope``:
    the planner's scope of the table), or None where the WHERE or a column does not translate
    whole. The columns the translation sees: the table's key and value columns, WINDOWSTART and
    WINDOWEND of a windowed table, and ROWTIME (all BIGINT, as the Spark path's rows hold them);
    ROWPARTITION and ROWOFFSET are not stored, so a query reading them keeps Spark's plan."""
    from streamsql.physical.in_reader import decoded_types, reader_columns
    from streamsql.planner import pushdown
    from streamsql.planner.planner import source_columns

    if plan.table_functions:
        return None
    columns = source_columns(table)
    stored = {c.name: c.type for c in columns}
    stored[t.ROWTIME] = t.BIGINT
    tree = None
    if where is not None:
        tree = pushdown.exact_filter(where, scope.with_clause("WHERE"),
                                     [*columns, t.Column(t.ROWTIME, t.BIGINT, "value")])
        if tree is None:
            return None
    program_types = {name: kind for name, kind in decoded_types(plan).items() if name in stored}
    program_types.update({name: "int64" for name in stored if name in (t.WINDOWSTART, t.WINDOWEND)})
    translated = reader_columns(plan, program_types)
    if translated is None:
        return None
    programs = list(translated)
    result = []
    for c, (_, program) in zip(plan.columns, programs):
        if set(program) <= {"column", "type"}:
            sql_type = t.from_spark(t.to_spark(stored[program["column"]]))
        else:
            sql_type = program_type(str(program["type"]))
        result.append(t.Column(c.name, sql_type, "key" if c.is_key else "value"))
    read = _tree_columns(json.loads(tree)) if tree is not None else set()
    for _, program in programs:
        if not set(program) <= {"column", "type"}:
            read |= _tree_columns(program)
    inputs = []
    for name in sorted(read):
        kind = stored.get(name)
        arrow = _ARROW_KINDS.get(kind.kind) if isinstance(kind, t.Primitive) else None
        if arrow is None:
            return None
        inputs.append((name, arrow))
    return ArrowPull(tree, tuple(programs), tuple(inputs), stored, tuple(result))


def _record(row: StoredRow, key_names: list[str]) -> dict[str, Any]:
    key, wstart, wend, value, rowtime = row
    rec = dict(zip(key_names, key))
    rec.update(value)
    rec.update({t.WINDOWSTART: wstart, t.WINDOWEND: wend, t.ROWTIME: rowtime})
    return rec


def _tree_columns(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {node["column"]} if "column" in node else set()
        for arg in node.get("args", ()):
            found |= _tree_columns(arg)
        return found
    return set()


def program_type(kind: str) -> t.SqlType:
    if kind.startswith("decimal("):
        precision, scale = kind[len("decimal("):-1].split(",")
        return t.Decimal(int(precision), int(scale))
    return _PROGRAM_TYPES[kind]


def _arrow_type(kind: str) -> Any:
    import pyarrow as pa

    return {"string": pa.string(), "bool": pa.bool_()}.get(kind) or _numeric_arrow_type(kind)


def _numeric_arrow_type(kind: str) -> Any:
    from streamsql.kafka.pipe import arrow_type

    return arrow_type(kind)


def spark_shaped(value: Any, sql_type: t.SqlType) -> Any:
    """A stored value as the Spark path hands it to the client (a DataFrame built from it,
    collected, then ``_to_python``): maps as dicts, structs as dicts of every field, bytes as
    base64 text, decimals at their type's scale, timestamps converted as pyspark converts them
    into a DataFrame and back out of one (a naive datetime in the process's time zone)."""
    if value is None:
        return None
    kind = sql_type.kind
    if isinstance(sql_type, t.Map):
        pairs = value.items() if isinstance(value, dict) else value
        return {k: spark_shaped(v, sql_type.value) for k, v in pairs}
    if isinstance(sql_type, t.Array):
        return [spark_shaped(v, sql_type.element) for v in value]
    if isinstance(sql_type, t.Struct):
        return {f.name: spark_shaped(value.get(f.name), f.type) for f in sql_type.fields}
    if kind == t.Kind.BYTES:
        return base64.b64encode(bytes(value)).decode()
    if isinstance(sql_type, t.Decimal):
        return value.quantize(decimal.Decimal(1).scaleb(-sql_type.scale))
    if kind == t.Kind.TIMESTAMP:
        from pyspark.sql.types import TimestampType

        timestamps = TimestampType()
        return timestamps.fromInternal(timestamps.toInternal(value))
    return value
