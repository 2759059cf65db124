"""The function catalog: ksqlDB's built-in scalar, aggregate and table functions, their
signatures and casts, and Python functions (the ``@udf``/``@udaf``/``@udtf`` API, the loader of
function files, their Spark runtime). The planner compiles calls through one
:class:`~streamsql.functions.registry.FunctionRegistry`."""
