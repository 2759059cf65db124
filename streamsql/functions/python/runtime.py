"""Run Python functions inside Spark queries: wrappers, error capture, and registration.

Execution shapes (all through Arrow, never Spark's pickled row-at-a-time path):

* UDF, default: an Arrow-optimised Python UDF (``udf(..., useArrow=True)``, built by
  :func:`streamsql.arrow_map.arrow_udf`): Spark ships Arrow
  batches to the worker and calls the function per row with plain Python values (lists, dicts,
  ``Row`` for structs, ``Decimal``, ``bytes``), so any SQL type works.
* UDF with ``vectorized=True``: a pandas UDF (Series in, Series out), one call per Arrow batch. If
  the batch call raises, the batch is retried row by row to find the failing rows.
* UDTF: an Arrow-optimised UDF returning the list of values; the planner explodes it.
* UDAF: not run by Spark: GROUP BY runs in the aggregation processor record by record, where a
  UDAF is one more accumulator (:mod:`streamsql.functions.python.aggregate`).

Errors (ksqlDB's behaviour): a function raising on a row writes a RECORD_PROCESSING_ERROR to the
processing log (function name, error, the arguments) and the row continues with NULL for that
call; a UDTF that raises produces no rows for that input; a UDAF's ``aggregate`` raising skips
that input. The query keeps running.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from streamsql import types as t
from streamsql.arrow_map import arrow_udf
from streamsql.functions.python.api import AGGREGATE, TABLE, FunctionSpec
from streamsql.kafka.processing_log import LogTarget, record_processing_error

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ErrorLog:
    """Where a worker reports a failing call: the processing-log topic (no topic: log only)."""

    target: LogTarget = LogTarget()

    def report(self, function: str, error: BaseException, args: Sequence[Any]) -> None:
        self.target.publish([processing_log_entry(function, error, args)])


def _jsonable(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):  # as ksqlDB's JSON writes them: strict JSON
        return "NaN" if math.isnan(v) else "Infinity" if v > 0 else "-Infinity"
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if hasattr(v, "asDict"):
        return _jsonable(v.asDict())
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return str(v)


def processing_log_entry(function: str, error: BaseException, args: Sequence[Any]) -> dict[str, Any]:
    """ksqlDB's processing-log record for an error while processing a row (type 1)."""
    reason = f"{type(error).__name__}: {error}"
    return record_processing_error(f"streamsql.function.{function}", f"Error in function {function}: {reason}",
                                   json.dumps(_jsonable(list(args))), reason)


# --- wrappers (these run in Spark's Python workers) -----------------------------------------------


def _row_function(name: str, fn: Callable[..., Any], errors: ErrorLog) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as e:  # noqa: BLE001 - user code: any error goes to the processing log
            errors.report(name, e, args)
            return None

    return call


def _vectorized_function(name: str, fn: Callable[..., Any], errors: ErrorLog) -> Callable[..., Any]:
    def call(*series: Any) -> Any:
        import pandas as pd

        try:
            out = fn(*series)
            if len(out) != len(series[0]):
                raise ValueError(f"returned {len(out)} values for {len(series[0])} rows")
            return pd.Series(out).reset_index(drop=True)
        except Exception:  # noqa: BLE001 - find the failing rows one by one
            values = []
            for i in range(len(series[0])):
                one = [s.iloc[i:i + 1].reset_index(drop=True) for s in series]
                try:
                    values.append(pd.Series(fn(*one)).iloc[0])
                except Exception as e:  # noqa: BLE001
                    errors.report(name, e, [s.iloc[0] for s in one])
                    values.append(None)
            return pd.Series(values, dtype=object)

    return call


def _table_function(name: str, fn: Callable[..., Any], errors: ErrorLog) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        try:
            out = fn(*args)
            return None if out is None else list(out)
        except Exception as e:  # noqa: BLE001
            errors.report(name, e, args)
            return None  # no rows for this input (ksqlDB's KudtfFlatMapper)

    return call


def spark_udf(spec: FunctionSpec, errors: ErrorLog) -> Any:
    """The Spark UDF object that runs ``spec``."""
    from pyspark.sql.functions import pandas_udf

    from streamsql.functions.python.loader import parse_sql_type

    result = parse_sql_type(spec.returns)
    assert result is not None
    if spec.kind == TABLE:
        return arrow_udf(_table_function(spec.name, spec.impl, errors), t.to_spark(t.Array(result)))
    if spec.vectorized:
        import warnings

        from pyspark.sql.functions import PandasUDFType

        with warnings.catch_warnings():  # the explicit type: the wrapper's *args carry no type hints
            warnings.simplefilter("ignore")
            # the stubs want a specific DataType subclass per overload; to_spark returns the base class
            return pandas_udf(_vectorized_function(spec.name, spec.impl, errors),  # type: ignore[call-overload]
                              t.to_spark(result), PandasUDFType.SCALAR)
    return arrow_udf(_row_function(spec.name, spec.impl, errors), t.to_spark(result))


def datetime_pattern_check(errors: ErrorLog) -> Callable[..., str | None]:
    """The per-record check of a date function's pattern (``functions/builtins/datetime.py``):
    the pattern when Spark accepts it; otherwise the record goes to the processing log, naming
    the function and the problem (ksqlDB's ``KsqlFunctionException``), and the call yields NULL."""
    from streamsql.functions.builtins.datetime_patterns import pattern_error

    def check(function: str, pattern: str | None, parsing: bool, args: Sequence[Any] | None) -> str | None:
        if pattern is None:
            return None
        problem = pattern_error(pattern, bool(parsing))
        if problem is None:
            return pattern
        verb = "parse" if parsing else "format"
        errors.report(function, ValueError(f"Failed to {verb} with pattern '{pattern}': {problem}"), list(args or []))
        return None

    return check


def time_zone_check(errors: ErrorLog) -> Callable[..., str | None]:
    """The per-record check of a date function's time zone (``functions/builtins/datetime.py``):
    the zone when Spark accepts it; otherwise the record goes to the processing log naming the
    function and the zone (ksqlDB's ``ZoneId.of`` failure) and the call yields NULL."""
    from streamsql.functions.builtins.datetime_patterns import zone_error

    def check(function: str, zone: str | None, args: Sequence[Any] | None) -> str | None:
        if zone is None:
            return None
        problem = zone_error(zone)
        if problem is None:
            return zone
        errors.report(function, ValueError(problem), list(args or []))
        return None

    return check


# --- registration -------------------------------------------------------------------------------

#: per SparkSession (by id): the processing log its built-in checks report to, and the
#: namespaces of Python functions registered in it with theirs
_checks: dict[int, ErrorLog] = {}
_installed: dict[tuple[int, str], ErrorLog] = {}
_install_lock = threading.Lock()


def install(spark: SparkSession, specs_by_name: dict[str, list[FunctionSpec]], namespace: str,
            errors: ErrorLog) -> None:
    """Register the built-in functions that run in Python (the date functions' pattern and zone
    checks), and every overload in ``specs_by_name`` under its :func:`spark_name` in
    ``namespace``, with ``spark`` (once per namespace and processing-log target)."""
    from streamsql.functions.python.signatures import spark_name

    with _install_lock:
        if _checks.get(id(spark)) != errors:
            from pyspark.sql.types import StringType

            from streamsql.functions.builtins.datetime_patterns import PATTERN_CHECK, ZONE_CHECK

            spark.udf.register(PATTERN_CHECK, arrow_udf(datetime_pattern_check(errors), StringType()))
            spark.udf.register(ZONE_CHECK, arrow_udf(time_zone_check(errors), StringType()))
            _checks[id(spark)] = errors
        if not specs_by_name or _installed.get((id(spark), namespace)) == errors:
            return
        for name, specs in specs_by_name.items():
            for i, spec in enumerate(specs):
                if spec.kind != AGGREGATE:  # UDAFs run in the aggregation processor, not in Spark
                    spark.udf.register(spark_name(name, i, namespace), spark_udf(spec, errors))
        _installed[(id(spark), namespace)] = errors
