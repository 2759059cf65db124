"""The declared types of a Python function's parameters, the argument types each accepts (with
ksqlDB's numeric widening), and the Spark name of each overload: shared by the scalar and table
functions' registration and the aggregates."""

from __future__ import annotations

from streamsql import types as t
from streamsql.functions.python.loader import parse_sql_type

K = t.Kind
#: ksqlDB's implicit widening of numeric arguments when matching a UDF parameter
_WIDENS_TO: dict[K, set[K]] = {
    K.INTEGER: {K.INTEGER, K.BIGINT, K.DECIMAL, K.DOUBLE},
    K.BIGINT: {K.BIGINT, K.DECIMAL, K.DOUBLE},
    K.DECIMAL: {K.DECIMAL, K.DOUBLE},
}


def spark_name(spec_name: str, overload: int, namespace: str) -> str:
    """The Spark function one overload is registered as. ``namespace`` names the set of files it
    was loaded from (:class:`~streamsql.functions.python.library.PythonFunctions`): engines that
    share a SparkSession but load different files never call each other's function."""
    return f"streamsql_py_{namespace}_{spec_name.lower()}_{overload}"


def declared(text: str) -> t.SqlType | None:
    return parse_sql_type(text)


def accepts(param: t.SqlType | None, arg: t.SqlType | None) -> bool:
    if param is None or arg is None:
        return True
    if param == arg:
        return True
    if param.kind in (K.ARRAY, K.MAP, K.STRUCT, K.DECIMAL) and param.kind == arg.kind:
        return True  # element types are converted by the cast
    return param.kind in _WIDENS_TO.get(arg.kind, {arg.kind})
