"""PySpark's Arrow Python functions, built without pandas in the driver.

PySpark builds ``mapInArrow``'s function through ``pandas_udf`` and an Arrow-optimised Python
UDF through ``udf(..., useArrow=True)``; both check pandas's version first, which imports pandas
(and NumPy) into the driver: ~34 MB of PSS in the process that only hands the functions to the
JVM and never runs them (seed 003's driver: its GZIP/GUNZIP UDFs, every micro-batch's sink
write). The functions run in the Python workers exactly as before; only the driver's
construction of them differs.

:func:`map_in_arrow` and :func:`arrow_udf` build what PySpark's calls build (the same
``UserDefinedFunction``, eval type and JVM plan), without the version checks. They are the one
place streamsql turns a function into a ``mapInArrow`` step or an Arrow-optimised UDF; a pandas
UDF (a user's ``vectorized=True`` function) goes through ``pandas_udf`` and needs pandas anyway.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame
    from pyspark.sql.types import DataType, StructType

#: A ``mapInArrow`` function: the partition's Arrow batches in, the step's batches out.
ArrowMapFunction = Callable[[Iterator["pa.RecordBatch"]], Iterator["pa.RecordBatch"]]


def map_in_arrow(df: DataFrame, func: ArrowMapFunction | Callable[..., Any],
                 schema: StructType | str) -> DataFrame:
    """``df.mapInArrow(func, schema)``, the driver importing neither pandas nor pyarrow."""
    from pyspark.sql import DataFrame
    from pyspark.sql.udf import UserDefinedFunction
    from pyspark.util import PythonEvalType

    udf = UserDefinedFunction(func, returnType=schema, evalType=PythonEvalType.SQL_MAP_ARROW_ITER_UDF)
    column = udf(*[df[name] for name in df.columns])
    # barrier=False, no resource profile: what ``mapInArrow(func, schema)`` passes
    jdf = df._jdf.mapInArrow(column._jc, False, None)
    return DataFrame(jdf, df.sparkSession)


def arrow_udf(func: Callable[..., Any], return_type: DataType) -> Any:
    """``pyspark.sql.functions.udf(func, return_type, useArrow=True)``, without importing pandas."""
    from pyspark.sql.udf import UserDefinedFunction
    from pyspark.util import PythonEvalType

    return UserDefinedFunction(func, returnType=return_type,
                               evalType=PythonEvalType.SQL_ARROW_BATCHED_UDF)._wrapped()
