"""Compile ksqlDB expressions (sqlglot trees from the dialect) into Spark SQL expression text.

Why a compiler of our own rather than sqlglot's Spark generator: ksqlDB and Spark disagree in
small ways that change results (integer division, ``+`` on strings, 1-based array subscripts,
string-literal escapes, comparisons Spark would silently coerce), and ksqlDB rejects type errors
at statement time with messages naming the operands. So each node is translated here, and typed
on the way, from the column types in scope and the function catalog.

Types are inferred where they are cheap to know; ``None`` means "not known here" and the planner
learns the final output types from Spark's analysis of the built DataFrame.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from sqlglot import exp

from streamsql import types as t
from streamsql.errors import AnalysisError, located
from streamsql.functions.compiled import Compiled, literal_number, quote, string_literal

if TYPE_CHECKING:
    from streamsql.functions.registry import FunctionRegistry
    from streamsql.functions.table_functions import TableFunctionCollector


@dataclass(frozen=True)
class ScopeColumn:
    name: str
    type: t.SqlType | None  # None: not known statically (lambda parameters)
    ref: str  # Spark SQL text that reads this column
    qualifier: str | None = None  # the source alias it belongs to


@dataclass
class Scope:
    """The columns an expression may reference, and the aliases of the sources they come from."""

    columns: list[ScopeColumn]
    qualifiers: set[str] = field(default_factory=set)
    clause: str = "SELECT"  # used in messages: "WHERE column 'X' cannot be resolved."

    def resolve(self, name: str, qualifier: str | None, node: exp.Expr | None = None) -> ScopeColumn:
        """The column ``qualifier.name`` stands for; an error names ``node``'s position."""
        if qualifier is not None and qualifier not in self.qualifiers:
            raise AnalysisError(f"'{qualifier}' is not a valid stream/table name or alias.")
        matches = [c for c in self.columns if c.name == name and (qualifier is None or c.qualifier == qualifier)]
        if not matches:
            shown = f"{qualifier}.{name}" if qualifier else name
            if self.clause == "WHERE" and name in (t.WINDOWSTART, t.WINDOWEND):
                # the window of a windowed aggregation is made after WHERE runs (ksqlDB's wording)
                raise AnalysisError(f"Error in WHERE expression: Unknown column {name}.")
            hint = ""
            if self.clause == "PARTITION BY":
                hint = f" '{shown}' must be a column in the source schema since PARTITION BY is applied on the input."
            raise AnalysisError(f"{located(node)}{self.clause} column '{shown}' cannot be resolved.{hint}")
        if len(matches) > 1 and qualifier is None:
            own = [c for c in matches if c.qualifier is None]  # a join's own ROWTIME etc.
            if len(own) == 1:
                return own[0]
            if len(matches) == 2:
                raise AnalysisError(f"{located(node)}Column '{name}' is ambiguous. Could be "
                                    f"{matches[0].qualifier}.{name} or {matches[1].qualifier}.{name}.")
            raise AnalysisError(f"{located(node)}Column '{name}' is ambiguous. Could be any of: "
                                + ", ".join(f"{c.qualifier}.{c.name}" for c in matches))
        return matches[0]

    def with_clause(self, clause: str) -> Scope:
        return Scope(self.columns, self.qualifiers, clause)


_COMPARISONS = {
    exp.EQ: ("=", "EQUAL"),
    exp.NEQ: ("<>", "NOT_EQUAL"),
    exp.GT: (">", "GREATER_THAN"),
    exp.GTE: (">=", "GREATER_THAN_OR_EQUAL"),
    exp.LT: ("<", "LESS_THAN"),
    exp.LTE: ("<=", "LESS_THAN_OR_EQUAL"),
}
_ARITHMETIC: dict[type[exp.Expr], str] = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%"}
_TIME_COLUMNS = {t.ROWTIME, t.WINDOWSTART, t.WINDOWEND}

#: A chain of one operator (``a + b + c ...``, ``x AND y AND ...``) is a left-deep tree, as long
#: as it has terms. It is compiled in a loop (never one Python frame per term), and from this many
#: links on, when every term has the chain's type, it is written as a fold over an array,
#: ``aggregate(array(b, c, ...), a, (acc, x) -> acc + x)``: the same left-to-right evaluation,
#: null and overflow behaviour, but flat text. Spark's SQL parser cannot read a left-deep
#: expression a few hundred levels deep (FAILED_TO_PARSE_TOO_COMPLEX, or a StackOverflowError
#: in its JVM), and its optimizer recurses per level of a conjunction.
_FOLD_FROM = 64
#: Longest chain whose terms' types differ (so it cannot be folded) that is compiled as written;
#: a longer one is refused with an AnalysisError rather than failing inside Spark.
_MAX_UNFOLDED = 100
_FOLD_ACC, _FOLD_TERM = "__chain_acc", "__chain_term"


def generated_name(counter: int, taken: set[str]) -> tuple[str, int]:
    """ksqlDB's name for an unaliased SELECT expression: the next ``KSQL_COL_<n>`` that no
    source column already has; returns it and the next counter."""
    while f"KSQL_COL_{counter}" in taken:
        counter += 1
    return f"KSQL_COL_{counter}", counter + 1


_NUMBERED = re.compile(r"(.*?)(?:_(\d+))?")


def _numbered(name: str) -> tuple[str, int]:
    match = _NUMBERED.fullmatch(name)
    assert match is not None  # every text matches
    return match.group(1), int(match.group(2) or 0)


class FieldAliases:
    """ksqlDB's names for unaliased struct dereferences (``A->B``), one query's worth
    (ColumnNames' ``StructFieldAliasGenerator``): the field's name without a trailing ``_<n>``,
    then ``_1``, ``_2``…, skipping the numbers the sources' column names already use (a source
    column ``B`` makes ``A->B`` ``B_1``)."""

    def __init__(self, source_names: Iterable[str]) -> None:
        self._used: dict[str, set[int]] = {}
        for name in source_names:
            base, number = _numbered(name)
            self._used.setdefault(base, set()).add(number)
        self._next: dict[str, int] = {}

    def name(self, field: str) -> str:
        base = _numbered(field)[0]
        used, index = self._used.get(base, set()), self._next.get(base, 0)
        while index in used:
            index += 1
        self._next[base] = index + 1
        return base if index == 0 else f"{base}_{index}"


def _category(ty: t.SqlType) -> str:
    if t.is_numeric(ty):
        return "numeric"
    if ty.kind in (t.Kind.DATE, t.Kind.TIME, t.Kind.TIMESTAMP):
        return "time"
    return ty.kind.value


def numeric_result(a: t.SqlType, b: t.SqlType) -> t.SqlType:
    """ksqlDB's arithmetic result type for two numeric operands."""
    kinds = {a.kind, b.kind}
    if t.Kind.DOUBLE in kinds:
        return t.DOUBLE
    if t.Kind.DECIMAL in kinds:
        return a if a.kind == t.Kind.DECIMAL else b
    if t.Kind.BIGINT in kinds:
        return t.BIGINT
    return t.INTEGER



def _equatable(value: Compiled) -> str:
    """Spark SQL of a value ``=``/``<=>`` can compare: a MAP (which Spark cannot compare) as its
    entries sorted by key, so two maps are equal when they hold the same entries (ksqlDB)."""
    if value.type is not None and value.type.kind == t.Kind.MAP:
        return f"array_sort(map_entries({value.sql}))"
    return value.sql


def iso_to_millis(text: str) -> int:
    """ksqlDB lets ROWTIME/WINDOWSTART be compared with ISO-8601 text; partial strings are
    zero-padded and UTC is assumed."""
    s = text.strip()
    m = re.fullmatch(r"(\d{4})(?:-(\d{2}))?(?:-(\d{2}))?"
                     r"(?:T(\d{2})(?::(\d{2}))?(?::(\d{2}))?(?:\.(\d{1,3}))?)?(Z|[+-]\d{2}:?\d{2})?", s)
    if not m:
        raise AnalysisError(f"Failed to parse timestamp '{text}': expected ISO-8601, e.g. 2020-01-01T00:00:00")
    year, month, day, hour, minute, second, ms, tz = m.groups()
    try:
        # the time of day is added, not set, so "T24" is the next midnight (as ksqlDB reads it)
        dt = datetime(int(year), int(month or 1), int(day or 1), tzinfo=UTC) + timedelta(
            hours=int(hour or 0), minutes=int(minute or 0), seconds=int(second or 0),
            milliseconds=int((ms or "0").ljust(3, "0")))
    except ValueError as e:
        raise AnalysisError(f"Failed to parse timestamp '{text}': {e}") from None
    millis = int(dt.timestamp() * 1000)
    if tz and tz != "Z":
        sign = 1 if tz[0] == "+" else -1
        digits = tz[1:].replace(":", "")
        millis -= sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60) * 1000
    return millis


class ExpressionCompiler:
    """Translates one expression tree against a :class:`Scope`. Function calls are delegated to
    ``functions``, the registry of the engine whose statement it analyses."""

    def __init__(self, scope: Scope, functions: FunctionRegistry) -> None:
        self.scope = scope
        self.functions = functions
        #: set by the planner for a stream's SELECT list, the one place table functions may appear
        self.table_functions: TableFunctionCollector | None = None

    def in_lambda(self, params: Sequence[tuple[str, t.SqlType | None, str]]) -> ExpressionCompiler:
        """A compiler of a lambda's body: its parameters (name, type, the Spark ref that reads
        it) in scope, shadowing columns of the same name."""
        names = {name for name, _, _ in params}
        outer = [col for col in self.scope.columns if col.name not in names]
        inner = Scope([ScopeColumn(name, ty, ref) for name, ty, ref in params] + outer,
                      self.scope.qualifiers, self.scope.clause)
        return ExpressionCompiler(inner, self.functions)

    def table_function(self, name: str, array: Compiled) -> Compiled:
        """A table-function call: ``array`` holds its rows; see functions/table_functions.py."""
        if self.table_functions is None:
            raise AnalysisError(f"Table function {name} can only be used in the SELECT list of a query "
                                f"over a STREAM ({self.scope.clause} is not allowed).")
        return self.table_functions.add(array)

    def compile(self, node: exp.Expr) -> Compiled:
        method = getattr(self, f"_{type(node).__name__.lower()}", None)
        if method is None:
            for cls, (op, name) in _COMPARISONS.items():
                if isinstance(node, cls):
                    return self._comparison(node, op, name)
            for arithmetic, op in _ARITHMETIC.items():
                if isinstance(node, arithmetic):
                    return self._arithmetic(node, op)
            raise AnalysisError(f"Unsupported expression: {node.sql()}")
        return method(node)

    # --- leaves --------------------------------------------------------------------------------

    def _column(self, node: exp.Column) -> Compiled:
        if isinstance(node.this, exp.Star):
            raise AnalysisError("'*' is only allowed in the SELECT list or COUNT(*)")
        col = self.scope.resolve(node.name, node.table or None, node)
        return Compiled(col.ref, col.type)

    def _identifier(self, node: exp.Identifier) -> Compiled:
        col = self.scope.resolve(node.name, None)
        return Compiled(col.ref, col.type)

    def _literal(self, node: exp.Literal) -> Compiled:
        if node.is_string:
            return Compiled(string_literal(node.this), t.STRING)
        return literal_number(node.this)

    def _boolean(self, node: exp.Boolean) -> Compiled:
        return Compiled("TRUE" if node.this else "FALSE", t.BOOLEAN)

    def _null(self, node: exp.Null) -> Compiled:
        return Compiled("NULL", None)

    def _paren(self, node: exp.Paren) -> Compiled:
        inner = self.compile(node.this)
        return Compiled(f"({inner.sql})", inner.type)

    # --- operators ----------------------------------------------------------------------------

    def _neg(self, node: exp.Neg) -> Compiled:
        inner = self.compile(node.this)
        return Compiled(f"(-{inner.sql})", inner.type)

    def _not(self, node: exp.Not) -> Compiled:
        inner = self.compile(node.this)
        return Compiled(f"(NOT {inner.sql})", t.BOOLEAN)

    def _and(self, node: exp.And) -> Compiled:
        return self._logical(node, "AND")

    def _or(self, node: exp.Or) -> Compiled:
        return self._logical(node, "OR")

    def _logical(self, node: exp.Expr, op: str) -> Compiled:
        return self._chain(node, type(node), lambda link, left, right: self._logical_step(op, left, right))

    def _logical_step(self, op: str, left: Compiled, right: Compiled) -> Compiled:
        for side in (left, right):
            if side.type is not None and side.type != t.BOOLEAN:
                raise AnalysisError(f"Logical operator {op} requires BOOLEAN operands, got {side.type}")
        return Compiled(f"({left.sql} {op} {right.sql})", t.BOOLEAN)

    def _comparison(self, node: exp.Expr, op: str, name: str) -> Compiled:
        left = self._time_aware(node.this, node.expression)
        right = self._time_aware(node.expression, node.this)
        self._check_comparable(node, left, right, name)
        # ksqlDB: a comparison with a null operand is false, never null
        return Compiled(f"coalesce(({_equatable(left)} {op} {_equatable(right)}), FALSE)", t.BOOLEAN)

    def _nullsafeeq(self, node: exp.NullSafeEQ) -> Compiled:
        """``a IS NOT DISTINCT FROM b``: equal, or both null."""
        return self._distinct(node, negate=False)

    def _nullsafeneq(self, node: exp.NullSafeNEQ) -> Compiled:
        """``a IS DISTINCT FROM b``."""
        return self._distinct(node, negate=True)

    def _distinct(self, node: exp.Expr, negate: bool) -> Compiled:
        left = self._time_aware(node.this, node.expression)
        right = self._time_aware(node.expression, node.this)
        self._check_comparable(node, left, right, "IS_DISTINCT_FROM" if negate else "IS_NOT_DISTINCT_FROM")
        test = f"({_equatable(left)} <=> {_equatable(right)})"
        return Compiled(f"(NOT {test})" if negate else test, t.BOOLEAN)

    def _time_aware(self, node: exp.Expr, other: exp.Expr) -> Compiled:
        """A string literal compared with ROWTIME/WINDOWSTART/WINDOWEND is an ISO timestamp; a
        string compared with a TIME is an ISO time of day (TIME is an INT of milliseconds here,
        which Spark would otherwise compare with the string as a number)."""
        if (isinstance(node, exp.Literal) and node.is_string and isinstance(other, exp.Column)
                and other.name in _TIME_COLUMNS):
            return Compiled(f"{iso_to_millis(node.this)}L", t.BIGINT)
        compiled = self.compile(node)
        if compiled.type == t.STRING:
            peer = self.compile(other)
            if peer.type is not None and peer.type.kind == t.Kind.TIME:
                from streamsql.functions.casts import cast_value

                return Compiled(cast_value(compiled.sql, t.STRING, t.TIME), t.TIME)
        return compiled

    def _check_comparable(self, node: exp.Expr, left: Compiled, right: Compiled, name: str) -> None:
        if isinstance(node.this, exp.Null) or isinstance(node.expression, exp.Null):
            # ksqlDB types a bare NULL as "null", which compares with nothing
            lt = "NULL" if isinstance(node.this, exp.Null) else str(left.type)
            rt = "NULL" if isinstance(node.expression, exp.Null) else str(right.type)
            self._comparison_error(node, f"Comparison with NULL not supported: {lt} {_SYMBOLS.get(name, name)} "
                                         f"{rt}\nUse 'IS NULL' or 'IS NOT NULL' instead.")
        if left.type is None or right.type is None:
            return
        lc, rc = _category(left.type), _category(right.type)
        comparable = lc == rc or {lc, rc} == {"time", "STRING"}
        if lc in ("ARRAY", "MAP", "STRUCT") and name not in ("EQUAL", "NOT_EQUAL", "IS_DISTINCT_FROM",
                                                            "IS_NOT_DISTINCT_FROM"):
            comparable = False
        if not comparable:
            self._comparison_error(node, f"Cannot compare {node.this.sql()} ({left.type}) to {node.expression.sql()} "
                                         f"({right.type}) with {name}.")

    def _comparison_error(self, node: exp.Expr, message: str) -> None:
        """ksqlDB names the clause and the comparison for errors in a WHERE."""
        if self.scope.clause == "WHERE":
            raise AnalysisError(f"Error in WHERE expression: {message}\nStatement: {ksql_text(node)}")
        raise AnalysisError(message)

    def _chain(
        self, node: exp.Expr, kinds: type[exp.Expr] | tuple[type[exp.Expr], ...],
        step: Callable[[exp.Expr, Compiled, Compiled], Compiled],
    ) -> Compiled:
        """A left-deep chain of ``kinds`` nodes, compiled link by link in a loop; ``step``
        combines one link's compiled operands (see :data:`_FOLD_FROM`)."""
        links: list[exp.Expr] = []
        while isinstance(node, kinds):
            links.append(node)
            node = node.this
        links.reverse()
        first = result = self.compile(node)
        if len(links) < _FOLD_FROM:
            for link in links:
                result = step(link, result, self.compile(link.expression))
            return result
        # a long chain: each link is typed and checked on placeholders, so the text stays linear
        acc = Compiled(_FOLD_ACC, first.type)
        folds = first.type is not None and len({type(link) for link in links}) == 1
        terms = []
        for link in links:
            terms.append(term := self.compile(link.expression))
            merge = step(link, acc, Compiled(_FOLD_TERM, term.type))
            folds = folds and term.type == first.type and merge.type == first.type
        if folds:
            merge = step(links[-1], acc, Compiled(_FOLD_TERM, first.type))
            array = ", ".join(term.sql for term in terms)
            return Compiled(f"aggregate(array({array}), {first.sql}, ({_FOLD_ACC}, {_FOLD_TERM}) -> {merge.sql})",
                            first.type)
        if len(links) > _MAX_UNFOLDED:
            raise AnalysisError(f"Expression is too long to run: a chain of {len(links) + 1} operands whose types "
                                f"or operators differ (at most {_MAX_UNFOLDED + 1}; a longer chain needs all "
                                f"operands of one type and one operator)")
        for link, term in zip(links, terms, strict=True):
            result = step(link, result, term)
        return result

    def _arithmetic(self, node: exp.Expr, op: str) -> Compiled:
        return self._chain(node, tuple(_ARITHMETIC), lambda link, left, right: self._arithmetic_step(
            link, _ARITHMETIC[type(link)], left, right))

    def _arithmetic_step(self, node: exp.Expr, op: str, left: Compiled, right: Compiled) -> Compiled:
        if isinstance(node.this, exp.Null) or isinstance(node.expression, exp.Null):
            # ksqlDB types a bare NULL as "null", with which no arithmetic is defined
            lt = "null" if isinstance(node.this, exp.Null) else str(left.type)
            rt = "null" if isinstance(node.expression, exp.Null) else str(right.type)
            raise AnalysisError(f"Error processing expression: ({ksql_text(node.this)} {op} "
                                f"{ksql_text(node.expression)}). Arithmetic on types {lt} and {rt} are not supported.")
        if op == "+" and (left.type == t.STRING or right.type == t.STRING):
            return Compiled(f"concat({left.sql}, {right.sql})", t.STRING)
        for side, expr in ((left, node.this), (right, node.expression)):
            if side.type is not None and not t.is_numeric(side.type):
                raise AnalysisError(
                    f"Error processing expression: {node.sql()}. Unsupported arithmetic types. "
                    f"{left.type} {right.type}" if side.type else f"Unsupported operand: {expr.sql()}"
                )
        if left.type is None or right.type is None:
            return Compiled(f"({left.sql} {op} {right.sql})", left.type or right.type)
        result = numeric_result(left.type, right.type)
        if op == "/" and result.kind in (t.Kind.INTEGER, t.Kind.BIGINT):
            # ksqlDB divides integers as integers (Java semantics: truncate toward zero).
            return Compiled(f"CAST(({left.sql} DIV {right.sql}) AS {t.to_spark(result).simpleString()})", result)
        if result.kind == t.Kind.DECIMAL:
            return Compiled(f"({left.sql} {op} {right.sql})", None)
        return Compiled(f"({left.sql} {op} {right.sql})", result)

    def _like(self, node: exp.Like) -> Compiled:
        left, right = self.compile(node.this), self.compile(node.expression)
        return Compiled(f"({left.sql} LIKE {right.sql})", t.BOOLEAN)

    def _escape(self, node: exp.Escape) -> Compiled:
        like = node.this
        left, right = self.compile(like.this), self.compile(like.expression)
        esc = self.compile(node.expression)
        return Compiled(f"({left.sql} LIKE {right.sql} ESCAPE {esc.sql})", t.BOOLEAN)

    def _in(self, node: exp.In) -> Compiled:
        from streamsql.planner.membership import compile_in

        return compile_in(self, node)

    def _between(self, node: exp.Between) -> Compiled:
        value = self.compile(node.this)
        low = self._time_aware(node.args["low"], node.this)
        high = self._time_aware(node.args["high"], node.this)
        self._check_comparable(exp.GTE(this=node.this, expression=node.args["low"]), value, low, "BETWEEN")
        return Compiled(f"({value.sql} BETWEEN {low.sql} AND {high.sql})", t.BOOLEAN)

    def _is(self, node: exp.Is) -> Compiled:
        value = self.compile(node.this)
        target = node.expression
        if isinstance(target, exp.Null):
            return Compiled(f"({value.sql} IS NULL)", t.BOOLEAN)
        return Compiled(f"({value.sql} IS {self.compile(target).sql})", t.BOOLEAN)

    def _case(self, node: exp.Case) -> Compiled:
        results = [b.args["true"] for b in node.args.get("ifs") or []] + [node.args.get("default")]
        if all(r is None or isinstance(r, exp.Null) for r in results):
            raise AnalysisError("Invalid Case expression. All case branches have NULL type")
        parts = ["CASE"]
        result_type: t.SqlType | None = None
        if node.this is not None:
            parts.append(self.compile(node.this).sql)
        for branch in node.args.get("ifs") or []:
            cond, then = self.compile(branch.this), self.compile(branch.args["true"])
            result_type = result_type or then.type
            parts.append(f"WHEN {cond.sql} THEN {then.sql}")
        default = node.args.get("default")
        if default is not None:
            d = self.compile(default)
            result_type = result_type or d.type
            parts.append(f"ELSE {d.sql}")
        parts.append("END")
        return Compiled("(" + " ".join(parts) + ")", result_type)

    def _if(self, node: exp.If) -> Compiled:
        cond, then = self.compile(node.this), self.compile(node.args["true"])
        other = node.args.get("false")
        else_sql = self.compile(other).sql if other is not None else "NULL"
        return Compiled(f"(CASE WHEN {cond.sql} THEN {then.sql} ELSE {else_sql} END)", then.type)

    def _cast(self, node: exp.Cast) -> Compiled:
        from streamsql.sql import to_sql_type

        inner = self.compile(node.this)
        target = to_sql_type(node.args["to"])
        return Compiled(cast_sql(inner, target), target)

    # --- structure access ---------------------------------------------------------------------

    def _dot(self, node: exp.Dot) -> Compiled:
        base = self.compile(node.this)
        field_name = node.expression.name
        if base.type is not None and not isinstance(base.type, t.Struct):
            raise AnalysisError(f"Expected STRUCT type for '{node.this.sql()}' in '->' dereference, got {base.type}")
        f = base.type.field(field_name) if isinstance(base.type, t.Struct) else None
        if isinstance(base.type, t.Struct) and f is None:
            raise AnalysisError(f"Could not find field '{field_name}' in '{node.this.sql()}'.")
        name = f.name if f else field_name
        return Compiled(f"({base.sql}).{quote(name)}", f.type if f else None)

    def _bracket(self, node: exp.Bracket) -> Compiled:
        base = self.compile(node.this)
        index = self.compile(node.expressions[0])
        if isinstance(base.type, t.Array):
            # ksqlDB: 1-based, negative from the end, NULL when out of range (never an error).
            idx = index.sql
            return Compiled(
                f"(CASE WHEN {idx} IS NULL OR {idx} = 0 OR abs({idx}) > size({base.sql}) THEN NULL "
                f"ELSE element_at({base.sql}, {idx}) END)",
                base.type.element,
            )
        if isinstance(base.type, t.Map):
            return Compiled(f"element_at({base.sql}, {index.sql})", base.type.value)
        if base.type is not None or isinstance(node.this, exp.Null):
            # ksqlDB's ExpressionTypeManager: only an ARRAY or a MAP has elements to subscript
            hint = (f" Use the dereference operator for STRUCTS: {node.this.sql()}->{node.expressions[0].sql()}"
                    if isinstance(base.type, t.Struct) else "")
            raise AnalysisError(f"Subscript expression ({node.sql()}) do not apply to "
                                f"{'null' if base.type is None else base.type}.{hint}")
        return Compiled(f"element_at({base.sql}, {index.sql})", None)

    # --- functions ----------------------------------------------------------------------------

    def _anonymous(self, node: exp.Anonymous) -> Compiled:
        name = str(node.this).upper()
        if self.functions.get(name) is None:
            from streamsql.functions.registry import unknown_function

            raise unknown_function(name, node)
        return self.functions.compile_call(name, node.expressions, self)

    def _array(self, node: exp.Array) -> Compiled:
        """``ARRAY[a, b]``: the ARRAY constructor in the function catalog."""
        return self.functions.compile_call("ARRAY", node.expressions, self)

    def _lambda(self, node: exp.Lambda) -> Compiled:
        params = [p.name for p in node.expressions]
        inner_scope = Scope(
            [ScopeColumn(p, None, quote(p)) for p in params] + self.scope.columns,
            self.scope.qualifiers,
            self.scope.clause,
        )
        body = ExpressionCompiler(inner_scope, self.functions).compile(node.this)
        head = params[0] if len(params) == 1 else "(" + ", ".join(params) + ")"
        return Compiled(f"{quote(head) if len(params) == 1 else head} -> {body.sql}", body.type)


def cast_sql(inner: Compiled, target: t.SqlType) -> str:
    """CAST with ksqlDB's results where Spark's differ (e.g. DOUBLE → STRING keeps ``.0``)."""
    from streamsql.functions.casts import compile_cast

    return compile_cast(inner, target)


#: ksqlDB's comparison names (ComparisonExpression.Type) -> SQL symbols, for messages
_SYMBOLS = {"EQUAL": "=", "NOT_EQUAL": "<>", "LESS_THAN": "<", "LESS_THAN_OR_EQUAL": "<=", "GREATER_THAN": ">",
            "GREATER_THAN_OR_EQUAL": ">=", "IS_DISTINCT_FROM": "IS DISTINCT FROM",
            "IS_NOT_DISTINCT_FROM": "IS NOT DISTINCT FROM"}
#: comparison nodes -> the symbols ksqlDB prints for them
COMPARISON_SYMBOLS: dict[type[exp.Binary], str] = {exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">",
                                       exp.GTE: ">=", exp.NullSafeEQ: "IS NOT DISTINCT FROM",
                                       exp.NullSafeNEQ: "IS DISTINCT FROM"}


def ksql_text(node: exp.Expr) -> str:
    """An expression as ksqlDB prints it in error messages (``null``, ``ARRAY[1, 2]``, ``'x'``,
    every comparison and AND/OR in parentheses: ``((ID = 1) AND (V > 'a'))``)."""
    if isinstance(node, exp.Paren):
        return ksql_text(node.this)
    if isinstance(node, (exp.And, exp.Or)):
        return f"({ksql_text(node.left)} {'AND' if isinstance(node, exp.And) else 'OR'} {ksql_text(node.right)})"
    if isinstance(node, exp.Binary) and type(node) in COMPARISON_SYMBOLS:
        return f"({ksql_text(node.left)} {COMPARISON_SYMBOLS[type(node)]} {ksql_text(node.right)})"
    if isinstance(node, exp.Null):
        return "null"
    if isinstance(node, exp.Array):
        return "ARRAY[" + ", ".join(ksql_text(e) for e in node.expressions) + "]"
    if isinstance(node, exp.Literal):
        return f"'{node.this}'" if node.is_string else str(node.this)
    return node.sql()
