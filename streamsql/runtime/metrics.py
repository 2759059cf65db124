"""Prometheus metrics of an engine's queries: ``GET /metrics`` on the server and
``streamsql run --metrics-port N``.

Two sources. Spark reports every micro-batch of every query to a ``StreamingQueryListener`` in
the driver (``runtime/progress.ProgressTotals``): the totals over the query's life — batches, input rows,
output rows where the sink counts them, late rows Spark's aggregation dropped — are summed
there, since a query's own ``recentProgress`` keeps only its last 100 batches. The rest is read
from the engine when Prometheus scrapes (:class:`EngineCollector`): whether each query runs,
its last batch's duration and rate, its state store's size, its consumer lag
(``runtime/progress.py``), the records dropped as late by streamsql's aggregation operator, and
the records in the processing log topic (undecodable records and failing functions of every
query of the service; ksqlDB's ``ksql_processing_log``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from streamsql.errors import ConfigError, StreamsqlError
from streamsql.runtime.progress import QueryTotals, count_from_start, listener_of

if TYPE_CHECKING:

    from streamsql.runtime.engine import Engine


class EngineCollector(Collector):
    """The engine's series, read when Prometheus scrapes."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def describe(self) -> Iterator[Metric]:
        """Nothing: registering must not read the engine (the server registers it before the
        engine starts), and the series' names are not known before a scrape."""
        return iter(())

    def collect(self) -> Iterator[Metric]:
        engine = self.engine
        up = GaugeMetricFamily("streamsql_query_up", "1 while the query runs, 0 if it stopped or failed",
                               labels=["query"])
        batches = CounterMetricFamily("streamsql_query_batches", "Micro-batches completed", labels=["query"])
        rows_in = CounterMetricFamily("streamsql_query_input_rows", "Records read from the query's inputs",
                                      labels=["query"])
        rows_out = CounterMetricFamily("streamsql_query_output_rows",
                                       "Rows written by the query's sink (where Spark's sink counts them)",
                                       labels=["query"])
        rate = GaugeMetricFamily("streamsql_query_processed_rows_per_second",
                                 "Input rows per second of the last micro-batch", labels=["query"])
        duration = GaugeMetricFamily("streamsql_query_batch_duration_seconds", "Duration of the last micro-batch",
                                     labels=["query"])
        late = CounterMetricFamily("streamsql_query_late_records_dropped",
                                   "Records dropped as late (past the window's grace)", labels=["query"])
        state_rows = GaugeMetricFamily("streamsql_query_state_rows", "Rows in the query's state store",
                                       labels=["query"])
        state_bytes = GaugeMetricFamily("streamsql_query_state_memory_bytes", "Memory of the query's state store",
                                        labels=["query"])
        lag = GaugeMetricFamily("streamsql_query_consumer_lag",
                                "Records of an input partition the query has not committed yet",
                                labels=["query", "topic", "partition"])
        listener = listener_of(engine)
        for qid, running in list(engine.queries.items()):
            handle = running.handle
            up.add_metric([qid], 1.0 if handle.isActive else 0.0)
            totals = listener.snapshot(qid) if listener is not None else QueryTotals()
            batches.add_metric([qid], totals.batches)
            rows_in.add_metric([qid], totals.input_rows)
            if totals.output_rows >= 0:
                rows_out.add_metric([qid], totals.output_rows)
            dropped = engine.queries.dropped.get(qid)
            late.add_metric([qid], float(dropped.value) if dropped is not None else totals.dropped_by_watermark)
            progress = handle.lastProgress
            if not progress:
                continue
            rate.add_metric([qid], float(progress.get("processedRowsPerSecond") or 0.0))
            duration.add_metric([qid], float((progress.get("durationMs") or {}).get("triggerExecution") or 0) / 1000)
            operators = progress.get("stateOperators") or []
            if operators:
                state_rows.add_metric([qid], sum(int(op.get("numRowsTotal") or 0) for op in operators))
                state_bytes.add_metric([qid], sum(int(op.get("memoryUsedBytes") or 0) for op in operators))
            plan = engine.queries.plans.get(qid)
            for row in (engine.inspection.query_lag(plan, progress) or []) if plan is not None else []:
                lag.add_metric([qid, row.topic, str(row.partition)], row.lag)
        yield from (up, batches, rows_in, rows_out, rate, duration, late, state_rows, state_bytes, lag)
        logged = CounterMetricFamily("streamsql_processing_log_records",
                                     "Records in the processing log topic: undecodable input records and "
                                     "failing functions of every query of the service", labels=["topic"])
        try:
            total = sum(end for _start, end in engine.inspection.topic_offsets(engine.processing_log_topic).values())
            logged.add_metric([engine.processing_log_topic], total)
        except StreamsqlError:
            pass
        yield logged


def registry_for(engine: Engine) -> CollectorRegistry:
    """A registry holding the engine's series (its progress summed from Spark's start on)."""
    count_from_start(engine)
    registry = CollectorRegistry(auto_describe=True)
    registry.register(EngineCollector(engine))
    return registry


class ServerMetrics:
    """``streamsql server``'s ``/metrics``: the engine's series and the requests the server
    answered, each counted from the server's start (made with the app, before any request)."""

    def __init__(self, engine: Engine) -> None:
        from prometheus_client import Counter

        self.registry = registry_for(engine)
        self.requests = Counter("streamsql_server_requests", "Requests the REST server answered since it started, "
                                "by endpoint and HTTP status", ["endpoint", "status"], registry=self.registry)

    def watch_push_queries(self, count: Callable[[], int]) -> None:
        """Report the push queries open now (what ``ksql.max.push.queries`` bounds)."""
        from prometheus_client import Gauge

        Gauge("streamsql_server_push_queries", "Push queries open now (each client's, shared ones included)",
              registry=self.registry).set_function(count)

    def count_request(self, endpoint: str, status: int) -> None:
        self.requests.labels(endpoint, str(status)).inc()


def serve(engine: Engine, port: int, host: str = "0.0.0.0") -> Any:
    """``streamsql run --metrics-port N``: the registry over HTTP in a daemon thread."""
    from prometheus_client import start_http_server

    try:
        server, _thread = start_http_server(port, addr=host, registry=registry_for(engine))
    except OSError as e:
        raise ConfigError(f"--metrics-port {port}: cannot listen on {host}:{port} ({e.strerror or e})") from None
    return server
