"""The properties that shape how a new query is built — its record cache, its aggregation's state
buckets and operator — with their defaults and the checks of their values.

``Engine`` reads them under the running session (``Engine.record_cache`` and beside it); ``SET``
checks a value here before accepting it, so a bad one is refused with the property's name.
"""

from __future__ import annotations

from streamsql.errors import ConfigError

#: ksqlDB's default ``ksql.streams.cache.max.bytes.buffering`` (10 MB)
RECORD_CACHE_DEFAULT = "10485760"
CACHE_PROPERTY = "ksql.streams.cache.max.bytes.buffering"
BUCKETS_PROPERTY = "streamsql.aggregation.buckets"
#: ``auto`` (default: Spark's own aggregation where it is exact, else the Python operator) or
#: ``python`` (always the Python operator: to compare the two, or to keep a query on it)
OPERATOR_PROPERTY = "streamsql.aggregation.operator"
OPERATOR_CHOICES = ("auto", "python")


def cache_bytes(value: str) -> int:
    """The record cache's size, or a configuration error naming the property and the value."""
    try:
        size = int(value)
    except ValueError:
        size = -1
    if size < 0:
        raise ConfigError(f"Invalid value {value} for configuration {CACHE_PROPERTY}: "
                          f"Not a number of type LONG at least 0")
    return size


def operator_choice(value: str) -> str | None:
    """``streamsql.aggregation.operator`` as ``physical_plan``'s ``operator`` (None: the planner
    chooses), or a configuration error naming the property and the value."""
    choice = value.strip().lower() or "auto"
    if choice not in OPERATOR_CHOICES:
        raise ConfigError(f"Invalid value {value} for configuration {OPERATOR_PROPERTY}: "
                          f"String must be one of: {', '.join(OPERATOR_CHOICES)}")
    return None if choice == "auto" else choice


def bucket_count(value: str) -> int:
    """An aggregation's bucket count, or a configuration error naming the property and the value."""
    try:
        buckets = int(value)
    except ValueError:
        buckets = 0
    if buckets < 1:
        raise ConfigError(f"Invalid value {value} for configuration {BUCKETS_PROPERTY}: "
                          f"a positive number of buckets is expected")
    return buckets
