"""Pull queries: which rows of a table's store a ``WHERE`` needs (so the store reads by index).

ksqlDB serves ``SELECT ... FROM table WHERE key = x`` / ``key IN (...)`` / a range on the key /
a WINDOWSTART range from its state store. :func:`lookup_for` reads the top-level ``AND``
conjuncts of the WHERE and turns those it recognises into a :class:`Lookup`; the rest (and the
recognised ones too) are then evaluated on the rows read, so the lookup only needs to select a
superset. A literal whose type does not match the key's (``'5'`` for an INT key) is not used.
"""

from __future__ import annotations

from typing import Any

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
