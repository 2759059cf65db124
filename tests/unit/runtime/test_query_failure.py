"""A persistent query's failure reaches the user as ksqlDB words it, never as a trace (issue #57
item 7): Spark wraps an exception raised in a Python worker (the sink's encoding, an operator)
in ``[PYTHON_EXCEPTION]`` with the worker's whole traceback and the streaming query's state."""

from __future__ import annotations

from streamsql.errors import CAUGHT_IN_PROCESS, query_failure

#: what a sink that cannot encode a record raised, as Spark reported it (elements.json's
#: "validate extra required field schema schema id in csas FAILS - AVRO", abridged)
WORKER_FAILURE = (
    "[PYTHON_EXCEPTION] An exception was thrown from the Python worker: Traceback (most recent call last):\n"
    '  File "/x/streamsql/kafka/pipe.py", line 87, in run\n'
    "    written = write_arrow((self.apply(batch) for batch in batches), dict(self.sink))\n"
    '  File "fastavro/_write.pyx", line 404, in fastavro._write.write_record\n'
    "streamsql.errors.KafkaError: Unable to serialize record. ProducerRecord(topic=[OUTPUT]) value: no value "
    "and no default for c2\n SQLSTATE: 38000\n=== Streaming Query ===\nIdentifier: CSAS_OUTPUT_1 [id = 7a8f]\n"
    "Current State: ACTIVE\n")


class _SparkFailure(Exception):
    def __init__(self, desc: str) -> None:
        super().__init__(desc)
        self.desc = desc


def test_a_record_the_worker_failed_on_is_an_exception_caught_in_process() -> None:
    message = query_failure(_SparkFailure(WORKER_FAILURE))
    assert message == (CAUGHT_IN_PROCESS + "Unable to serialize record. ProducerRecord(topic=[OUTPUT]) value: "
                       "no value and no default for c2")
    assert "Traceback" not in message and "SQLSTATE" not in message and "Streaming Query" not in message


def test_any_other_failure_keeps_sparks_message_without_its_stack() -> None:
    message = query_failure(_SparkFailure("[STREAM_FAILED] broker unreachable SQLSTATE: XXKST\n\tat org.apache.X"))
    assert message == "[STREAM_FAILED] broker unreachable"
