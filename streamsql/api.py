"""streamsql from Python (a notebook, a script, a test): ``streamsql.connect()``.

    import streamsql

    with streamsql.connect() as ss:                  # embedded broker + local Spark
        ss.sql("CREATE STREAM s (id INT KEY, v INT) WITH (KAFKA_TOPIC='s', PARTITIONS=1, VALUE_FORMAT='JSON');")
        ss.sql("INSERT INTO s (id, v) VALUES (1, 10);")
        df = ss.query("SELECT * FROM s;")             # a pull query: a pandas DataFrame
        for row in ss.stream("SELECT * FROM s EMIT CHANGES LIMIT 1;"):  # a push query: dicts
            print(row)

The session is the engine the shell and ``streamsql run`` use (the same statements, results and
errors), on the Kafka cluster and data directory it is given — or, by default, on an embedded
broker and a temporary data directory that :meth:`Session.close` removes. Statement errors raise
:class:`streamsql.errors.StreamsqlError` naming the statement.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamsql.errors import AnalysisError
from streamsql.runtime import results as r

if TYPE_CHECKING:
    import pandas as pd

    from streamsql.kafka.broker import EmbeddedBroker
    from streamsql.runtime.engine import Engine


class Session:
    """An engine and what it was started with (see :func:`connect`)."""

    def __init__(self, engine: Engine, broker: EmbeddedBroker | None, scratch: Path | None) -> None:
        self.engine = engine
        self._broker = broker
        self._scratch = scratch
        #: what engine.start() said (restored statements, Python functions loaded)
        self.notices: list[str] = []

    @property
    def bootstrap_servers(self) -> str:
        return self.engine.bootstrap_servers

    def sql(self, text: str) -> list[r.Result]:
        """Execute one or more statements, in order; the result of each (a push or pull query's
        result is its open :class:`~streamsql.runtime.results.RowStream`)."""
        return self.engine.execute(text)

    def query(self, text: str, timeout: float | None = 60.0) -> pd.DataFrame:
        """One query's rows as a DataFrame: a pull query's, or a push query's until its LIMIT
        (``timeout``: stop waiting for more rows after that many idle seconds)."""
        import pandas as pd

        stream = self._row_stream(text)
        try:
            rows = list(stream.rows(timeout=timeout))
        finally:
            stream.close()
        return pd.DataFrame(rows, columns=[name for name, _ in stream.columns])

    def stream(self, text: str, timeout: float | None = None) -> Iterator[dict[str, Any]]:
        """A push query's rows as dicts, as they arrive; closing the iterator (or leaving a
        ``for`` loop) stops the query."""
        stream = self._row_stream(text)
        names = [name for name, _ in stream.columns]
        try:
            for row in stream.rows(timeout=timeout):
                yield dict(zip(names, row))
        finally:
            stream.close()

    def run_file(self, path: str | Path, until_idle: bool = True) -> None:
        """Run a ``.sql`` file's statements (``streamsql run``); with ``until_idle``, return once
        its queries have processed what their topics hold."""
        self.sql(Path(path).read_text(encoding="utf-8"))
        if until_idle:
            self.wait_until_idle()

    def wait_until_idle(self) -> None:
        """Return once every persistent query has processed what its inputs hold."""
        self.engine.wait_until_idle()

    def produce(self, topic: str, records: list[tuple[bytes | str | None, bytes | str | None]]) -> None:
        """Write (key, value) records to ``topic`` (text is UTF-8 encoded)."""
        admin = self.engine.admin
        for key, value in records:
            admin.produce(topic, key.encode() if isinstance(key, str) else key,
                          value.encode() if isinstance(value, str) else value, flush=False)
        admin.flush()

    def topology(self, fmt: str = "text", query_id: str | None = None) -> str:
        """The running pipeline drawn as ``text``, ``json``, ``dot`` or ``mermaid``."""
        from streamsql.runtime.topology import render

        return render(self.engine.topology(query_id), fmt)

    def _row_stream(self, text: str) -> r.RowStream:
        results = self.sql(text)
        streams = [x for x in results if isinstance(x, r.RowStream)]
        if len(results) != 1 or not streams:
            for s in streams:
                s.close()
            raise AnalysisError(f"expected one SELECT statement, got {len(results)} statement(s): {text.strip()[:200]}")
        return streams[0]

    def close(self) -> None:
        """Stop the queries; stop the embedded broker and remove the temporary data directory
        if :func:`connect` made them."""
        try:
            self.engine.close()
        finally:
            if self._broker is not None:
                self._broker.stop()
                self._broker = None
            if self._scratch is not None:
                shutil.rmtree(self._scratch, ignore_errors=True)
                self._scratch = None

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def connect(bootstrap_servers: str | None = None, data_dir: str | Path | None = None,
            spark_master: str | None = None, properties: dict[str, str] | None = None,
            spark: Any = None) -> Session:
    """A started engine. ``bootstrap_servers``: a Kafka cluster (default: an embedded broker,
    stopped on close); ``data_dir``: where the catalog and checkpoints persist (default: a
    temporary directory, removed on close); ``spark_master`` (default local[2]) or an existing
    ``spark`` session; ``properties``: ksqlDB properties (``auto.offset.reset``,
    ``ksql.schema.registry.url``, …) for every statement."""
    from streamsql.runtime.config import EngineConfig
    from streamsql.runtime.engine import Engine

    broker = None
    if not bootstrap_servers:
        from streamsql.kafka.broker import EmbeddedBroker

        broker = EmbeddedBroker().start()
        bootstrap_servers = broker.bootstrap_servers
    scratch = Path(tempfile.mkdtemp(prefix="streamsql-")) if data_dir is None else None
    try:
        directory = Path(data_dir) if data_dir is not None else scratch
        assert directory is not None
        config = EngineConfig(bootstrap_servers, directory, spark_master, dict(properties or {}))
        config.ephemeral_kafka = broker is not None
        session = Session(Engine(config, spark=spark), broker, scratch)
        session.notices = session.engine.start()
        return session
    except BaseException:
        if broker is not None:
            broker.stop()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
        raise
