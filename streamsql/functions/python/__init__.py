"""Python functions: the ``@udf``/``@udaf``/``@udtf`` API (public as :mod:`streamsql.udf`), the
loader of function files, their registration in the function catalog and their Spark runtime."""
