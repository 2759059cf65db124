"""What a piece of code leaves to Python's cycle collector.

A librdkafka client (confluent_kafka's Producer, Consumer, AdminClient) must never be part of
a reference cycle: the collector would destroy it in whatever thread it next runs in, and in
one of librdkafka's own threads that aborts or crashes the process (the segfault of session
33's CI run; confluent-kafka-python #1761, #2129).
"""

from __future__ import annotations

import gc
from collections.abc import Callable


def kafka_clients_left_to_the_cycle_collector(run: Callable[[], object]) -> list[str]:
    """The confluent_kafka objects that only the cycle collector frees once ``run`` returned
    and its result is dropped."""
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what a collection finds is kept in gc.garbage, not freed
    try:
        run()
        gc.collect()
        return sorted(type(o).__qualname__ for o in gc.garbage if type(o).__module__.startswith("confluent_kafka"))
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if enabled:
            gc.enable()
