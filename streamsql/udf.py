"""Python functions for streamsql's SQL: ``from streamsql.udf import udf, udaf, udtf``.

See :mod:`streamsql.functions.python.api` for the decorators, README "Python functions" for a walk-through.
"""

from streamsql.functions.python.api import FunctionSpec, udaf, udf, udtf

__all__ = ["FunctionSpec", "udaf", "udf", "udtf"]
