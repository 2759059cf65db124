"""Many calls on a ``transformWithState`` MapState in few round trips.

Each MapState call of PySpark's API is a request to the JVM's state server over a local socket,
answered before the next is sent: per call one protobuf message each way, two context switches,
and on a loaded machine a wait for the JVM thread to be scheduled. The stateful steps touch their
state per key per micro-batch (tens of thousands of keys per bucket and batch), so those round
trips were what the table-changes step and the stream-table join spent most of their time on.

:class:`MapCalls` sends a run of requests (reads, or writes) and then reads their answers, in
chunks of at most :data:`CHUNK_BYTES` of requests: a chunk always fits in the socket's buffer, so
sending never waits for the JVM, and the JVM, which answers in order, never waits for Python to
read while Python is still sending. The messages are PySpark's own (the same bytes its
``getValue``/``updateValue``/``removeKey`` send); only their interleaving differs. Where the
PySpark in use does not expose its state client as expected, the calls go one by one through the
public API.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import Any

#: requests sent before their answers are read (well under a Unix socket's default buffer)
CHUNK_BYTES = 32 * 1024
_HEADER = struct.Struct("!ii")  # message version (0), length: PySpark's framing
_LENGTH = struct.Struct("!i")
#: the state server's status for containsKey on a missing key
_MISSING = 2


class MapCalls:
    """Batched ``getValue``, ``containsKey`` and ``updateValue``/``removeKey`` on one MapState."""

    def __init__(self, state: Any) -> None:
        self.state = state
        client = getattr(state, "_mapStateClient", None)
        api = getattr(client, "_stateful_processor_api_client", None)
        self._client = client
        self._api = api
        name = getattr(state, "_stateName", None)
        self._name: str = name if isinstance(name, str) else ""
        self._pipelined = (api is not None and isinstance(name, str) and hasattr(api, "sockfile")
                           and hasattr(api, "_serialize_to_bytes") and hasattr(client, "user_key_schema"))

    def get_many(self, keys: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...] | None]:
        """``getValue`` of each key (None for a missing one), in order."""
        if not self._pipelined:
            return [self.state.getValue(k) for k in keys]
        from pyspark.sql.streaming.proto import StateMessage_pb2 as m

        def request(key: tuple[Any, ...]) -> Any:
            return m.MapStateCall(stateName=self._name, getValue=m.GetValue(userKey=self._key(key)))

        answers = self._exchange([request(k) for k in keys], "getting a map state value")
        api = self._api
        assert api is not None
        return [api._deserialize_from_bytes(value) if value else None for _status, value in answers]

    def contains_many(self, keys: Sequence[tuple[Any, ...]]) -> list[bool]:
        """``containsKey`` of each key, in order."""
        if not self._pipelined:
            return [bool(self.state.containsKey(k)) for k in keys]
        from pyspark.sql.streaming.proto import StateMessage_pb2 as m

        requests = [m.MapStateCall(stateName=self._name, containsKey=m.ContainsKey(userKey=self._key(k)))
                    for k in keys]
        return [status == 0 for status, _value in self._exchange(requests, "checking a map state key",
                                                                 allowed=(0, _MISSING))]

    def write_many(self, entries: Iterable[tuple[tuple[Any, ...], tuple[Any, ...] | None]]) -> None:
        """``updateValue(key, value)``, or ``removeKey(key)`` where the value is None (a no-op for a
        missing key), in order."""
        if not self._pipelined:
            for key, value in entries:
                if value is None:
                    self.state.removeKey(key)
                else:
                    self.state.updateValue(key, value)
            return
        from pyspark.sql.streaming.proto import StateMessage_pb2 as m

        api, client = self._api, self._client
        assert api is not None and client is not None
        requests = []
        for key, value in entries:
            if value is None:
                requests.append(m.MapStateCall(stateName=self._name, removeKey=m.RemoveKey(userKey=self._key(key))))
            else:
                requests.append(m.MapStateCall(stateName=self._name, updateValue=m.UpdateValue(
                    userKey=self._key(key), value=api._serialize_to_bytes(client.value_schema, value))))
        self._exchange(requests, "writing map state")

    def _key(self, key: tuple[Any, ...]) -> bytes:
        assert self._api is not None and self._client is not None
        return bytes(self._api._serialize_to_bytes(self._client.user_key_schema, key))

    def _exchange(self, calls: list[Any], what: str, allowed: tuple[int, ...] = (0,)) -> list[tuple[int, bytes]]:
        """Send the calls in chunks, each followed by reading its answers: (status, value) per call."""
        from pyspark.errors import PySparkRuntimeError
        from pyspark.sql.streaming.proto import StateMessage_pb2 as m

        assert self._api is not None
        sock = self._api.sockfile
        answers: list[tuple[int, bytes]] = []
        start = 0
        while start < len(calls):
            pending = 0
            size = 0
            while start + pending < len(calls) and (pending == 0 or size < CHUNK_BYTES):
                message = m.StateRequest(stateVariableRequest=m.StateVariableRequest(
                    mapStateCall=calls[start + pending])).SerializeToString()
                sock.write(_HEADER.pack(0, len(message)))
                sock.write(message)
                size += len(message) + _HEADER.size
                pending += 1
            sock.flush()
            for _ in range(pending):
                head = sock.read(_LENGTH.size)
                if len(head) < _LENGTH.size:
                    raise EOFError("the state server closed the connection")
                response = m.StateResponse()
                response.ParseFromString(sock.read(_LENGTH.unpack(head)[0]))
                if response.statusCode not in allowed:
                    raise PySparkRuntimeError(f"Error {what}: {response.errorMessage}")
                answers.append((response.statusCode, response.value))
            start += pending
        return answers
