"""ksqlDB's aggregate functions, as Python accumulators run by the aggregation processor.

This module is the ONE place where the built-in aggregate functions are defined; :func:`register`
puts them in the function registry, where the planner finds one by name
(``FunctionRegistry.aggregate``), :meth:`AggregateFunction.bind` checks the argument types and
gives the result type, and the processor (``streamsql.physical.aggregator``) creates one
accumulator per group (and window) with :meth:`BoundAggregate.create`. Python UDAFs register in
the same registry (``streamsql.functions.python.aggregate``).

Why Python accumulators rather than Spark's aggregates: ksqlDB emits one update per input record,
retracts the old value of a changed table row (``remove``), merges session windows (``merge``)
and drops late records against stream time; Spark's streaming aggregations do none of these.

Accumulators are plain picklable objects; their state is saved in the table's state store.
Null handling follows ksqlDB: null inputs are skipped except by COUNT(*), COLLECT_LIST,
COLLECT_SET and the *_BY_OFFSET functions without ``ignoreNulls``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from streamsql import types as t
from streamsql.errors import AnalysisError
from streamsql.functions.registry import rejected_types

if TYPE_CHECKING:
    from streamsql.functions.registry import FunctionRegistry

#: ksqlDB's ``ksql.functions.collect_list.limit`` / ``collect_set.limit`` / histogram limit
COLLECTION_LIMIT = 1000


class Accumulator:
    """One group's running aggregate. ``args`` are the evaluated (non-literal) arguments."""

    def add(self, args: Sequence[Any]) -> None:
        raise NotImplementedError

    def remove(self, args: Sequence[Any]) -> None:  # the undo of add, for aggregations over tables
        raise NotImplementedError

    def merge(self, other: Accumulator) -> None:  # session windows
        raise NotImplementedError

    def result(self) -> Any:
        raise NotImplementedError


@dataclass
class BoundAggregate:
    """An aggregate call with its argument types checked: ``params`` are the literal arguments."""

    name: str
    arg_types: list[t.SqlType | None]
    params: list[Any]
    result_type: t.SqlType | None
    factory: Callable[[BoundAggregate], Accumulator]
    #: False when the function cannot retract (aggregating a TABLE is then rejected)
    undoable: bool = True

    def create(self) -> Accumulator:
        return self.factory(self)

    @property
    def complex_state(self) -> bool:
        """Whether ksqlDB keeps this aggregate's running state as a STRUCT, ARRAY or MAP (its
        UDAF's aggregate type), which it serializes in the query's value format: a DELIMITED
        aggregation is then rejected (ksqlDB's MaterializationUtil; its issue 3950)."""
        complex_kinds = (t.Kind.ARRAY, t.Kind.MAP, t.Kind.STRUCT)
        return self.name in COMPLEX_STATE or (self.result_type is not None and self.result_type.kind in complex_kinds)


@dataclass
class AggregateFunction:
    """``bind(arg types, literal params) -> BoundAggregate``; ``columns`` is how many leading
    arguments are column expressions (the rest must be literals), or a callable of the arity."""

    name: str
    bind: Callable[[list[t.SqlType | None], list[Any]], BoundAggregate]
    columns: Callable[[int], int]
    min_args: int
    max_args: int
    description: str = ""
    signatures: list[str] = field(default_factory=list)
    #: SHOW FUNCTIONS' category (Python UDAFs list as PYTHON)
    category: str = "AGGREGATE"


def _reject(name: str, types: Sequence[t.SqlType | None]) -> AnalysisError:
    return rejected_types(name, types)


def _is_numeric(ty: t.SqlType | None) -> bool:
    return ty is not None and ty.kind in (t.Kind.INTEGER, t.Kind.BIGINT, t.Kind.DOUBLE, t.Kind.DECIMAL)


def _fixed(first: int) -> Callable[[int], int]:
    return lambda n: min(n, first)


# --- accumulators -------------------------------------------------------------------------------

class Count(Accumulator):
    def __init__(self, star: bool) -> None:
        self.star = star
        self.n = 0

    def add(self, args: Sequence[Any]) -> None:
        if self.star or args[0] is not None:
            self.n += 1

    def remove(self, args: Sequence[Any]) -> None:
        if self.star or args[0] is not None:
            self.n -= 1

    def merge(self, other: Accumulator) -> None:
        self.n += other.n  # type: ignore[attr-defined]

    def result(self) -> Any:
        return self.n


class CountDistinct(Accumulator):
    def __init__(self) -> None:
        self.values: dict[Any, int] = {}

    def add(self, args: Sequence[Any]) -> None:
        if args[0] is not None:
            k = _hashable(args[0])
            self.values[k] = self.values.get(k, 0) + 1

    def remove(self, args: Sequence[Any]) -> None:
        if args[0] is not None:
            k = _hashable(args[0])
            n = self.values.get(k, 0) - 1
            if n > 0:
                self.values[k] = n
            else:
                self.values.pop(k, None)

    def merge(self, other: Accumulator) -> None:
        for k, n in other.values.items():  # type: ignore[attr-defined]
            self.values[k] = self.values.get(k, 0) + n

    def result(self) -> Any:
        return len(self.values)


class Sum(Accumulator):
    def __init__(self, bound: BoundAggregate) -> None:
        ty = bound.result_type
        self.kind = ty.kind if ty is not None else t.Kind.BIGINT
        self.precision = getattr(ty, "precision", None) if ty is not None and ty.kind == t.Kind.DECIMAL else None
        self.scale = getattr(ty, "scale", None)
        self.total: Any = Decimal(0) if self.kind == t.Kind.DECIMAL else (0.0 if self.kind == t.Kind.DOUBLE else 0)

    def add(self, args: Sequence[Any]) -> None:
        if args[0] is not None:
            self.total = self._check(self.total + args[0])

    def remove(self, args: Sequence[Any]) -> None:
        if args[0] is not None:
            self.total = self._check(self.total - args[0])

    def merge(self, other: Accumulator) -> None:
        self.total = self._check(self.total + other.total)  # type: ignore[attr-defined]

    def _check(self, value: Any) -> Any:
        if self.kind == t.Kind.INTEGER:
            return ((value + 2 ** 31) % 2 ** 32) - 2 ** 31  # Java int overflow wraps
        if self.kind == t.Kind.BIGINT:
            return ((value + 2 ** 63) % 2 ** 64) - 2 ** 63
        if self.kind == t.Kind.DECIMAL and self.precision is not None:
            digits = len(str(abs(int(value))).lstrip("0")) if value else 0
            if digits > self.precision - (self.scale or 0):
                raise ValueError(f"Numeric field overflow: A field with precision {self.precision} and scale "
                                 f"{self.scale} must round to an absolute value less than "
                                 f"10^{self.precision - (self.scale or 0)}. Got {value}")
        return value

    def result(self) -> Any:
        return self.total


class SumList(Sum):
    """SUM_LIST: the running total of every element of every (non-null) array."""

    def add(self, args: Sequence[Any]) -> None:
        for x in args[0] or ():
            if x is not None:
                self.total = self._check(self.total + x)

    def remove(self, args: Sequence[Any]) -> None:
        for x in args[0] or ():
            if x is not None:
                self.total = self._check(self.total - x)


class Average(Accumulator):
    def __init__(self) -> None:
        self.total: Any = 0
        self.n = 0

    def add(self, args: Sequence[Any]) -> None:
        if args[0] is not None:
            self.total += args[0]
            self.n += 1

    def remove(self, args: Sequence[Any]) -> None:
        if args[0] is not None:
            self.total -= args[0]
            self.n -= 1

    def merge(self, other: Accumulator) -> None:
        self.total += other.total  # type: ignore[attr-defined]
        self.n += other.n  # type: ignore[attr-defined]

    def result(self) -> Any:
        return float(self.total) / self.n if self.n else 0.0


class Extreme(Accumulator):
    """MIN / MAX. Not undoable, as in ksqlDB (their table form keeps no history)."""

    def __init__(self, largest: bool) -> None:
        self.largest = largest
        self.value: Any = None

    def add(self, args: Sequence[Any]) -> None:
        v = args[0]
        if v is None:
            return
        if self.value is None or (v > self.value if self.largest else v < self.value):
            self.value = v

    def merge(self, other: Accumulator) -> None:
        self.add([other.value])  # type: ignore[attr-defined]

    def result(self) -> Any:
        return self.value


class CollectList(Accumulator):
    def __init__(self) -> None:
        self.items: list[Any] = []
        self.limit = COLLECTION_LIMIT

    def add(self, args: Sequence[Any]) -> None:
        if len(self.items) < self.limit:  # nulls are collected too (ksqlDB)
            self.items.append(args[0])

    def remove(self, args: Sequence[Any]) -> None:
        if args[0] in self.items:
            self.items.remove(args[0])

    def merge(self, other: Accumulator) -> None:
        self.items = (self.items + other.items)[:self.limit]  # type: ignore[attr-defined]

    def result(self) -> Any:
        return list(self.items)


class CollectSet(Accumulator):
    """Distinct values (null included, as ksqlDB), in first-seen order; maps compare as maps."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.seen: list[Any] = []  # canonical forms of ``items``
        self.limit = COLLECTION_LIMIT

    def add(self, args: Sequence[Any]) -> None:
        canon = _hashable(args[0])
        if canon not in self.seen and len(self.items) < self.limit:
            self.items.append(args[0])
            self.seen.append(canon)

    def remove(self, args: Sequence[Any]) -> None:
        canon = _hashable(args[0])
        if canon in self.seen:
            i = self.seen.index(canon)
            del self.items[i], self.seen[i]

    def merge(self, other: Accumulator) -> None:
        for v in other.items:  # type: ignore[attr-defined]
            self.add([v])

    def result(self) -> Any:
        return list(self.items)


class Attr(Accumulator):
    """ATTR: the value when every row of the group has the same one (null counts as a value),
    else null. Keeps a count per distinct value, so it can retract (tables)."""

    def __init__(self) -> None:
        self.counts: dict[Any, list[Any]] = {}  # canonical form -> [value, count]

    def add(self, args: Sequence[Any]) -> None:
        entry = self.counts.setdefault(_hashable(args[0]), [args[0], 0])
        entry[1] += 1

    def remove(self, args: Sequence[Any]) -> None:
        canon = _hashable(args[0])
        entry = self.counts.get(canon)
        if entry is not None:
            entry[1] -= 1
            if entry[1] <= 0:
                del self.counts[canon]

    def merge(self, other: Accumulator) -> None:
        for canon, (value, n) in other.counts.items():  # type: ignore[attr-defined]
            self.counts.setdefault(canon, [value, 0])[1] += n

    def result(self) -> Any:
        if len(self.counts) != 1:
            return None
        return next(iter(self.counts.values()))[0]


class Histogram(Accumulator):
    def __init__(self) -> None:
        self.counts: dict[Any, int] = {}

    def add(self, args: Sequence[Any]) -> None:
        v = args[0]
        if v is None:
            return
        if v in self.counts or len(self.counts) < COLLECTION_LIMIT:
            self.counts[v] = self.counts.get(v, 0) + 1

    def remove(self, args: Sequence[Any]) -> None:
        v = args[0]
        if v in self.counts:
            self.counts[v] -= 1
            if self.counts[v] <= 0:
                del self.counts[v]

    def merge(self, other: Accumulator) -> None:
        for k, n in other.counts.items():  # type: ignore[attr-defined]
            self.counts[k] = self.counts.get(k, 0) + n

    def result(self) -> Any:
        return dict(self.counts)


class TopK(Accumulator):
    """TOPK(col, k) and TOPK(col, other..., k): the k largest, descending; with other columns the
    items are structs ``{sort_col, col0, col1, ...}``. TOPKDISTINCT keeps distinct values."""

    def __init__(self, k: int, distinct: bool, struct_fields: int) -> None:
        self.k = k
        self.distinct = distinct
        self.struct_fields = struct_fields
        self.items: list[Any] = []

    def add(self, args: Sequence[Any]) -> None:
        if args[0] is None:
            return
        item = tuple(args) if self.struct_fields else args[0]
        if self.distinct and item in self.items:
            return
        self.items.append(item)
        self.items.sort(key=lambda x: x[0] if self.struct_fields else x, reverse=True)
        del self.items[self.k:]

    def merge(self, other: Accumulator) -> None:
        for item in other.items:  # type: ignore[attr-defined]
            self.add(list(item) if self.struct_fields else [item])

    def result(self) -> Any:
        if not self.struct_fields:
            return list(self.items)
        names = ["sort_col"] + [f"col{i}" for i in range(self.struct_fields)]
        return [dict(zip(names, item)) for item in self.items]


class ByOffset(Accumulator):
    """EARLIEST_BY_OFFSET / LATEST_BY_OFFSET, optionally the n earliest/latest (an array).
    Offsets are the processing order, which within a partition is the offset order."""

    def __init__(self, latest: bool, n: int | None, ignore_nulls: bool) -> None:
        self.latest = latest
        self.n = n
        self.ignore_nulls = ignore_nulls
        self.items: list[Any] = []
        self.seen = False

    def add(self, args: Sequence[Any]) -> None:
        v = args[0]
        if v is None and self.ignore_nulls:
            return
        limit = self.n or 1
        if self.latest:
            self.items.append(v)
            del self.items[:-limit]
        elif len(self.items) < limit:
            self.items.append(v)

    def merge(self, other: Accumulator) -> None:
        for v in other.items:  # type: ignore[attr-defined]
            self.add([v])

    def result(self) -> Any:
        if self.n is None:
            return self.items[-1] if self.latest and self.items else (self.items[0] if self.items else None)
        return list(self.items)


#: built-in aggregates whose state ksqlDB keeps as a STRUCT, ARRAY or MAP (their UDAF classes'
#: aggregate types: averages and deviations a STRUCT of sums, the offset ones a STRUCT of sequence
#: and value, the collections and COUNT_DISTINCT a list, HISTOGRAM a map)
COMPLEX_STATE = frozenset({"AVG", "STDDEV_SAMP", "STDDEV_SAMPLE", "CORRELATION", "COLLECT_LIST", "COLLECT_SET",
                           "HISTOGRAM", "TOPK", "TOPKDISTINCT", "EARLIEST_BY_OFFSET", "LATEST_BY_OFFSET",
                           "COUNT_DISTINCT", "ATTR"})


class StddevSamp(Accumulator):
    """STDDEV_SAMP and STDDEV_SAMPLE as ksqlDB's ``StandardDeviationSampleUdaf`` computes them:
    the Youngs-Cramer updates of a count, a sum (exact for integer inputs, as ksqlDB's BIGINT
    sum; a double for DOUBLE) and M2, in its order of operations, so the double result is
    ksqlDB's to the last bit (a sum of squares differs from it in the last digits); 0.0 below two
    values. ``root`` False gives the sample variance, what ksqlDB's STDDEV_SAMP UDAF returns
    against its documentation (docs/differences.md: we follow the documentation)."""

    def __init__(self, root: bool = True) -> None:
        self.root = root
        self.n = 0
        self.total: Any = 0
        self.m2 = 0.0

    def __setstate__(self, state: dict[str, Any]) -> None:
        """State written before the Youngs-Cramer updates held a sum of squares: its M2."""
        if "squares" in state:
            squares, n, total = state.pop("squares"), state["n"], state["total"]
            state["m2"] = max(squares - total * total / n, 0.0) if n else 0.0
        self.__dict__.update(state)

    @staticmethod
    def _value(x: Any) -> Any:
        return x if isinstance(x, int) else float(x)

    def add(self, args: Sequence[Any]) -> None:
        if args[0] is None:
            return
        x = self._value(args[0])
        if self.n > 0:
            delta = float(x * (self.n + 1) - (self.total + x))
            self.m2 += delta * delta / ((self.n + 1) * self.n)
        self.n += 1
        self.total += x

    def remove(self, args: Sequence[Any]) -> None:
        if args[0] is None:
            return
        x = self._value(args[0])
        count = self.n - 1
        if count > 0:
            delta = float(x * (self.n + 1) - (self.total + x))  # ksqlDB's undo reuses the add's delta
            self.m2 -= delta * delta / (count * (count + 1))
        self.n = count
        self.total -= x

    def merge(self, other: Accumulator) -> None:
        assert isinstance(other, StddevSamp)
        if self.n and other.n:
            inner = float(self.total) / self.n - float(other.total) / other.n
            self.m2 = self.m2 + other.m2 + self.n * other.n * inner * inner / (self.n + other.n)
        else:
            self.m2 += other.m2
        self.n += other.n
        self.total += other.total

    def result(self) -> Any:
        if self.n < 2:
            return 0.0
        var = self.m2 / (self.n - 1)
        return math.sqrt(var) if self.root else var


class Correlation(Accumulator):
    def __init__(self) -> None:
        self.n = 0
        self.sx = self.sy = self.sxx = self.syy = self.sxy = 0.0

    def _apply(self, args: Sequence[Any], sign: int) -> None:
        x, y = args[0], args[1]
        if x is None or y is None:
            return
        x, y = float(x), float(y)
        self.n += sign
        self.sx += sign * x
        self.sy += sign * y
        self.sxx += sign * x * x
        self.syy += sign * y * y
        self.sxy += sign * x * y

    def add(self, args: Sequence[Any]) -> None:
        self._apply(args, 1)

    def remove(self, args: Sequence[Any]) -> None:
        self._apply(args, -1)

    def merge(self, other: Accumulator) -> None:
        for name in ("n", "sx", "sy", "sxx", "syy", "sxy"):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def result(self) -> Any:
        if self.n < 2:
            return float("nan")
        cov = self.sxy - self.sx * self.sy / self.n
        vx = self.sxx - self.sx * self.sx / self.n
        vy = self.syy - self.sy * self.sy / self.n
        if vx <= 0 or vy <= 0:
            return float("nan")
        return cov / math.sqrt(vx * vy)


def _hashable(v: Any) -> Any:
    """A canonical, hashable form: MAP values (lists of key/value pairs from Arrow, or dicts)
    compare regardless of entry order."""
    if isinstance(v, list) and v and all(isinstance(x, tuple) and len(x) == 2 for x in v):
        return ("map", tuple(sorted(((_hashable(k), _hashable(x)) for k, x in v), key=repr)))
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, dict):
        return ("map", tuple(sorted(((_hashable(k), _hashable(x)) for k, x in v.items()), key=repr)))
    return v


# --- binding (type checks, result types) ------------------------------------------------------

def _bind_count(types: list[t.SqlType | None], params: list[Any]) -> BoundAggregate:
    star = not types
    return BoundAggregate("COUNT", types, params, t.BIGINT, lambda b: Count(star))


def _bind_sum(types: list[t.SqlType | None], params: list[Any]) -> BoundAggregate:
    ty = types[0]
    if ty is not None and not _is_numeric(ty):
        raise _reject("SUM", types)
    return BoundAggregate("SUM", types, params, ty or t.BIGINT, Sum)


def _bind_sum_list(types: list[t.SqlType | None], params: list[Any]) -> BoundAggregate:
    ty = types[0]
    if ty is not None and not (isinstance(ty, t.Array) and _is_numeric(ty.element)):
        raise _reject("SUM_LIST", types)
    element = ty.element if isinstance(ty, t.Array) else t.BIGINT
    return BoundAggregate("SUM_LIST", types, params, element, SumList)


def _bind_avg(types: list[t.SqlType | None], params: list[Any]) -> BoundAggregate:
    if types[0] is not None and not _is_numeric(types[0]):
        raise _reject("AVG", types)
    return BoundAggregate("AVG", types, params, t.DOUBLE, lambda b: Average())


def _bind_extreme(largest: bool) -> Callable[[list[t.SqlType | None], list[Any]], BoundAggregate]:
    name = "MAX" if largest else "MIN"

    def bind(types: list[t.SqlType | None], params: list[Any]) -> BoundAggregate:
        ty = types[0]
        ok = ty is None or _is_numeric(ty) or ty.kind in (t.Kind.STRING, t.Kind.BYTES, t.Kind.DATE, t.Kind.TIME,
                                                          t.Kind.TIMESTAMP)
        if not ok:
            raise _reject(name, types)
        return BoundAggregate(name, types, params, ty, lambda b: Extreme(largest), undoable=False)

    return bind


def _bind_collect(name: str, cls: type) -> Callable[[list[t.SqlType | None], list[Any]], BoundAggregate]:
    def bind(types: list[t.SqlType | None], params: list[Any]) -> BoundAggregate:
        ty = types[0]
        return BoundAggregate(name, types, params, t.Array(ty) if ty is not None else None, lambda b: cls())

    return bind


def _bind_attr(types: list[t.SqlType | None], params: list[Any]) -> BoundAggregate:
    return BoundAggregate("ATTR", types, params, types[0], lambda b: Attr())


def _bind_histogram(types: list[t.SqlType | None], params: list[Any]) -> BoundAggregate:
    if types[0] is not None and types[0].kind != t.Kind.STRING:
        raise _reject("HISTOGRAM", types)
    return BoundAggregate("HISTOGRAM", types, params, t.Map(t.STRING, t.BIGINT), lambda b: Histogram())


def _bind_count_distinct(types: list[t.SqlType | None], params: list[Any]) -> BoundAggregate:
    return BoundAggregate("COUNT_DISTINCT", types, params, t.BIGINT, lambda b: CountDistinct())


def _bind_topk(distinct: bool) -> Callable[[list[t.SqlType | None], list[Any]], BoundAggregate]:
    name = "TOPKDISTINCT" if distinct else "TOPK"

    def bind(types: list[t.SqlType | None], params: list[Any]) -> BoundAggregate:
        if len(params) != 1 or not isinstance(params[0], int) or isinstance(params[0], bool):
            raise AnalysisError(f"Function '{name.lower()}' requires its last argument, k, to be an INT literal")
        k = params[0]
        if k <= 0:
            raise AnalysisError(f"Function '{name.lower()}': k must be positive, got {k}")
        sort_t = types[0]
        if sort_t is not None and sort_t.kind in (t.Kind.ARRAY, t.Kind.MAP, t.Kind.STRUCT, t.Kind.BOOLEAN):
            raise _reject(name, types + [t.INTEGER])
        extra = len(types) - 1
        if extra:
            fields = [("sort_col", sort_t)] + [(f"col{i}", ty) for i, ty in enumerate(types[1:])]
            result: t.SqlType | None = t.Array(t.Struct(tuple(t.StructField(n, ty or t.STRING) for n, ty in fields)))
        else:
            result = t.Array(sort_t) if sort_t is not None else None
        return BoundAggregate(name, types, params, result, lambda b: TopK(k, distinct, extra), undoable=False)

    return bind


def _bind_by_offset(latest: bool) -> Callable[[list[t.SqlType | None], list[Any]], BoundAggregate]:
    name = "LATEST_BY_OFFSET" if latest else "EARLIEST_BY_OFFSET"

    def bind(types: list[t.SqlType | None], params: list[Any]) -> BoundAggregate:
        n: int | None = None
        ignore_nulls = True
        if len(params) == 1:
            if isinstance(params[0], bool):
                ignore_nulls = params[0]
            elif isinstance(params[0], int):
                n = params[0]
            else:
                raise _reject(name, types + [None])
        elif len(params) == 2:
            if not isinstance(params[0], int) or isinstance(params[0], bool) or not isinstance(params[1], bool):
                raise _reject(name, types + [None, None])
            n, ignore_nulls = params
        if n is not None and n <= 0:
            raise AnalysisError(f"For {name}, earliestN must be greater than 0" if not latest
                                else f"For {name}, latestN must be greater than 0")
        ty = types[0]
        result = (t.Array(ty) if n is not None else ty) if ty is not None else None
        return BoundAggregate(name, types, params, result, lambda b: ByOffset(latest, n, ignore_nulls),
                              undoable=False)

    return bind


def _bind_stddev(name: str, root: bool) -> Callable[[list[t.SqlType | None], list[Any]], BoundAggregate]:
    def bind(types: list[t.SqlType | None], params: list[Any]) -> BoundAggregate:
        if types[0] is not None and not _is_numeric(types[0]):
            raise _reject(name, types)
        return BoundAggregate(name, types, params, t.DOUBLE, lambda b: StddevSamp(root))

    return bind


def _bind_corr(types: list[t.SqlType | None], params: list[Any]) -> BoundAggregate:
    if any(ty is not None and not _is_numeric(ty) for ty in types):
        raise _reject("CORRELATION", types)
    return BoundAggregate("CORRELATION", types, params, t.DOUBLE, lambda b: Correlation())


_NUM = "INTEGER | BIGINT | DOUBLE | DECIMAL"
_ORDERED = "INTEGER | BIGINT | DOUBLE | DECIMAL | STRING | BYTES | DATE | TIME | TIMESTAMP"
#: DESCRIBE FUNCTION's variants ("params -> returns"; T is the argument's type)
SIGNATURES: dict[str, list[str]] = {
    "COUNT": [" -> BIGINT", "T -> BIGINT"],
    "COUNT_DISTINCT": ["T -> BIGINT"],
    "SUM": [f"{_NUM} -> the argument type"],
    "SUM_LIST": ["ARRAY<INT|BIGINT|DOUBLE|DECIMAL> -> the element type"],
    "AVG": [f"{_NUM} -> DOUBLE"],
    "MIN": [f"{_ORDERED} -> the argument type"],
    "MAX": [f"{_ORDERED} -> the argument type"],
    "COLLECT_LIST": ["T -> ARRAY<T>"],
    "COLLECT_SET": ["T -> ARRAY<T>"],
    "HISTOGRAM": ["STRING -> MAP<STRING, BIGINT>"],
    "ATTR": ["T -> T"],
    "TOPK": ["T, INTEGER -> ARRAY<T>", "T, INTEGER, U... -> ARRAY<STRUCT<SORT_COL T, COL0 U, ...>>"],
    "TOPKDISTINCT": ["T, INTEGER -> ARRAY<T>"],
    "EARLIEST_BY_OFFSET": ["T -> T", "T, BOOLEAN -> T", "T, INTEGER -> ARRAY<T>", "T, INTEGER, BOOLEAN -> ARRAY<T>"],
    "LATEST_BY_OFFSET": ["T -> T", "T, BOOLEAN -> T", "T, INTEGER -> ARRAY<T>", "T, INTEGER, BOOLEAN -> ARRAY<T>"],
    "STDDEV_SAMP": [f"{_NUM} -> DOUBLE"],
    "STDDEV_SAMPLE": [f"{_NUM} -> DOUBLE"],
    "CORRELATION": ["DOUBLE, DOUBLE -> DOUBLE"],
}


def register(registry: FunctionRegistry) -> None:
    """Register ksqlDB's built-in aggregates in ``registry``."""
    one = _fixed(1)
    for fn in [
        AggregateFunction("COUNT", _bind_count, one, 0, 1, "Counts rows (COUNT(*)) or non-null values."),
        AggregateFunction("COUNT_DISTINCT", _bind_count_distinct, one, 1, 1, "Number of distinct non-null values."),
        AggregateFunction("SUM", _bind_sum, one, 1, 1, "Sum of the non-null values."),
        AggregateFunction("SUM_LIST", _bind_sum_list, one, 1, 1, "Sum of the elements of the arrays."),
        AggregateFunction("AVG", _bind_avg, one, 1, 1, "Mean of the non-null values."),
        AggregateFunction("MIN", _bind_extreme(False), one, 1, 1, "Smallest non-null value."),
        AggregateFunction("MAX", _bind_extreme(True), one, 1, 1, "Largest non-null value."),
        AggregateFunction("COLLECT_LIST", _bind_collect("COLLECT_LIST", CollectList), one, 1, 1,
                          "Array of the values (nulls included), in arrival order (at most 1000)."),
        AggregateFunction("COLLECT_SET", _bind_collect("COLLECT_SET", CollectSet), one, 1, 1,
                          "Array of the distinct values (null included) (at most 1000)."),
        AggregateFunction("HISTOGRAM", _bind_histogram, one, 1, 1, "Map of each value to its count."),
        AggregateFunction("ATTR", _bind_attr, one, 1, 1,
                          "The value if all rows of the group have the same one (null included), else null."),
        AggregateFunction("TOPK", _bind_topk(False), lambda n: n - 1, 2, 100, "The k largest values."),
        AggregateFunction("TOPKDISTINCT", _bind_topk(True), lambda n: n - 1, 2, 2, "The k largest distinct values."),
        AggregateFunction("EARLIEST_BY_OFFSET", _bind_by_offset(False), one, 1, 3,
                          "The earliest value (or n values) by offset."),
        AggregateFunction("LATEST_BY_OFFSET", _bind_by_offset(True), one, 1, 3,
                          "The latest value (or n values) by offset."),
        AggregateFunction("STDDEV_SAMP", _bind_stddev("STDDEV_SAMP", True), one, 1, 1,
                          "Sample standard deviation (docs/differences.md)."),
        AggregateFunction("STDDEV_SAMPLE", _bind_stddev("STDDEV_SAMPLE", True), one, 1, 1,
                          "Sample standard deviation."),
        AggregateFunction("CORRELATION", _bind_corr, _fixed(2), 2, 2, "Pearson correlation of two columns."),
    ]:
        fn.signatures = SIGNATURES[fn.name]
        registry.register_aggregate(fn)
