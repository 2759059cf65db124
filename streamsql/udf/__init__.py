"""Python functions for streamsql's SQL: ``from streamsql.udf import udf, udaf, udtf``.

See :mod:`streamsql.udf.api` for the decorators, README "Python functions" for a walk-through.
"""

from streamsql.udf.api import FunctionSpec, udaf, udf, udtf

__all__ = ["FunctionSpec", "udaf", "udf", "udtf"]
