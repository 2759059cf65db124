"""ksqlDB's REST error envelope.

Every 4xx/5xx the server sends is a JSON object with a polymorphic ``@type``: ``generic_error``
(``error_code``, ``message``) or ``statement_error`` (adds ``statementText`` and ``entities``, the
results of the statements of the same request that already ran). ``error_code`` is the HTTP status
times 100 plus a detail digit, as ksqlDB's ``Errors`` defines them, so clients that switch on the
code behave the same against streamsql.
"""

from __future__ import annotations

import threading
from typing import Any

from streamsql.errors import own_message

BAD_REQUEST = 40000
BAD_STATEMENT = 40001
QUERY_ENDPOINT = 40002
HTTP2_ONLY = 40004
UNAUTHORIZED = 40100
NOT_FOUND = 40400
METHOD_NOT_ALLOWED = 40500
NOT_ACCEPTABLE = 40600
PAYLOAD_TOO_LARGE = 41300
ASSERTION_FAILED = 41700
UNSUPPORTED_MEDIA = 41500
SERVER_ERROR = 50000
COMMAND_QUEUE_CATCHUP_TIMEOUT = 50301
SERVER_NOT_READY = 50302

#: what a client sees for an unexpected failure; the details go to the server log only
SANITIZED_SERVER_ERROR = ("The server encountered an internal error when processing the query. "
                          "Please consult the server logs for more information.")


class ServerError(Exception):
    """An error answered with the envelope. ``status`` defaults to ``error_code // 100``."""

    def __init__(self, error_code: int, message: str, statement_text: str | None = None,
                 entities: list[dict[str, Any]] | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message
        self.statement_text = statement_text
        self.entities = entities
        self.status = status or error_code // 100

    def envelope(self) -> dict[str, Any]:
        if self.statement_text is not None:
            return {"@type": "statement_error", "error_code": self.error_code, "message": self.message,
                    "statementText": self.statement_text, "entities": list(self.entities or [])}
        return {"@type": "generic_error", "error_code": self.error_code, "message": self.message}


def statement_error(message: str, statement_text: str, entities: list[dict[str, Any]] | None = None) -> ServerError:
    return ServerError(BAD_STATEMENT, message, statement_text or "", entities)


def bad_request(message: str) -> ServerError:
    return ServerError(BAD_REQUEST, message)


class UnexpectedErrors:
    """How many requests failed for a reason the server did not foresee: a 500 (the sanitized
    50000 message), a statement whose execution raised something other than a statement error
    (answered 400, but still a server bug), a push query that died mid-stream, an insert that
    raised. Exposed as ``streamsql_unexpected_errors_total`` on ``/metrics`` so a fuzzer or an
    operator can see failures the client-facing status hides; it should stay 0."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0

    def record(self) -> None:
        with self._lock:
            self._count += 1

    @property
    def count(self) -> int:
        with self._lock:
            return self._count

    def exposition(self) -> bytes:
        """The counter in Prometheus' text format (appended to ``/metrics``)."""
        return (b"# HELP streamsql_unexpected_errors_total Requests that failed for an unexpected reason "
                b"(server bugs: see the server log)\n# TYPE streamsql_unexpected_errors_total counter\n"
                b"streamsql_unexpected_errors_total %d\n" % self.count)


#: the process's count (one server per process)
UNEXPECTED_ERRORS = UnexpectedErrors()


def client_message(text: str) -> str:
    """A query error as a client may see it: the exception's own message, never a Python or JVM
    trace (Spark wraps Python tracebacks from foreachBatch into its messages)."""
    return own_message(text) or SANITIZED_SERVER_ERROR
