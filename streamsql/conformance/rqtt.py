"""ksqlDB's REST query-validation tests (RQTT), run through a real ``streamsql server`` over HTTP.

A file under ``rest-query-validation-tests`` holds cases of statements, input records and the
expected REST ``responses`` (``{"admin": {...}}`` per ``/ksql`` entity, ``{"query": [header, rows,
final message]}`` per query, compared field by field where given), or an ``expectedError``
(status and message). As ksqlDB's ``RestTestExecutor`` does, each case sends its leading
non-query statements in one ``/ksql`` request, produces the inputs, checks the ``outputs`` topics,
then sends each query to ``/query``; pull queries are retried until they match (materialized
state arrives asynchronously) or time out. Between cases the server is reset with
``/ksql/terminate`` (every query stopped, every source and its topic dropped).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from streamsql.conformance.cases import QttCase, load_json, substitute
from streamsql.conformance.compare import data_equal
from streamsql.conformance.expectations import message_matches
from streamsql.conformance.records import encode_with, window_suffix
from streamsql.conformance.results import FAILED, INFRASTRUCTURE, CaseResult, judged
from streamsql.conformance.topics import register_topic_schemas, topics_to_create
from streamsql.sql import parse_type, split_statements

if TYPE_CHECKING:
    from streamsql.catalog import Source

QUERY_START = re.compile(r"^\s*(SELECT|PRINT)\b", re.IGNORECASE)
DEFAULT_CASE_TIMEOUT_S = 60.0


@dataclass
class RqttCase:
    id: str
    file: str
    name: str
    statements: list[str]
    inputs: list[dict[str, Any]] = field(default_factory=list)
    outputs: list[dict[str, Any]] = field(default_factory=list)
    responses: list[dict[str, Any]] | None = None
    expected_error: dict[str, Any] | None = None
    properties: dict[str, Any] = field(default_factory=dict)
    topics: list[dict[str, Any]] = field(default_factory=list)
    wait_for_push_query: bool = False


def is_rqtt_path(path: Path) -> bool:
    """RQTT files live in a ``rqtt`` or ``rest-query-validation-tests`` directory."""
    return any(part in ("rqtt", "rest-query-validation-tests") for part in path.resolve().parts)


def load_rqtt_file(path: Path) -> list[RqttCase]:
    data = load_json(path)
    out: list[RqttCase] = []
    for test in data.get("tests", []):
        variants = [(str(test.get("name")), test)]
        if test.get("format"):
            variants = [(f"{n} - {f}", substitute(t, "{FORMAT}", str(f))) for n, t in variants for f in test["format"]]
        for name, node in variants:
            if node.get("enabled") is False:
                continue
            cond = node.get("inputConditions") or {}
            out.append(RqttCase(
                id=f"{path.stem}/{name}", file=path.name, name=name, statements=[str(s) for s in node["statements"]],
                inputs=list(node.get("inputs") or []), outputs=list(node.get("outputs") or []),
                responses=node.get("responses"), expected_error=node.get("expectedError"),
                properties={str(k): v for k, v in (node.get("properties") or {}).items()},
                topics=list(node.get("topics") or []), wait_for_push_query=bool(cond.get("waitForActivePushQuery"))))
    return out


class _Failure(Exception):
    pass


def partial_match(expected: Any, actual: Any) -> bool:
    """RQTT's comparison: only the fields the expectation gives are compared; values structurally."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        return all(k in actual and partial_match(v, actual[k]) for k, v in expected.items())
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(partial_match(e, a) for e, a in zip(expected, actual))
    return data_equal(expected, actual)


def _short(obj: Any, limit: int = 300) -> str:
    text = json.dumps(obj, default=repr) if not isinstance(obj, str) else obj
    return text if len(text) <= limit else text[:limit] + "…"


class RqttRunner:
    """One server process for the whole run; cases one after another."""

    def __init__(self, bootstrap: str, timeout_s: float = DEFAULT_CASE_TIMEOUT_S) -> None:
        import httpx

        from streamsql.conformance.server_process import ServerProcess
        from streamsql.kafka.admin import KafkaAdmin

        self.bootstrap = bootstrap
        self.timeout_s = timeout_s
        from streamsql.conformance.registry_server import RegistryServer
        from streamsql.formats import schema_registry

        self.work = Path(tempfile.mkdtemp(prefix="streamsql-rqtt-"))
        # a registry over HTTP both the server process and this harness see (AVRO/PROTOBUF cases)
        self.registry = RegistryServer().start()
        self.server = ServerProcess(bootstrap, self.work / "data", service_id=f"rqtt{uuid.uuid4().hex[:6]}_",
                                    properties={schema_registry.URL_PROPERTY: self.registry.url})
        self.server.start()
        self.http = httpx.Client(base_url=self.server.url, timeout=httpx.Timeout(timeout_s, connect=10))
        self.admin = KafkaAdmin(bootstrap)

    def close(self) -> None:
        self.http.close()
        self.admin.close()
        self.server.stop()
        self.registry.stop()
        shutil.rmtree(self.work, ignore_errors=True)

    # --- one case ------------------------------------------------------------------------------

    def run_case(self, case: RqttCase) -> CaseResult:
        """Run one case, once: a failure of the machine's is reported as such
        (:func:`~streamsql.conformance.results.judged`), never run again."""
        return judged(self._run_once(case))

    def _run_once(self, case: RqttCase) -> CaseResult:
        started = time.monotonic()
        try:
            self._reset(case)
            self._execute(case)
            status, reason = "passed", ""
        except _Failure as f:
            status, reason = "failed", str(f)
        except Exception as e:  # noqa: BLE001 - one case's crash never stops the run
            status, reason = "failed", f"crash: {type(e).__name__}: {str(e)[:300]}"
        return CaseResult(case.id, case.file, status, reason, time.monotonic() - started)

    def _reset(self, case: RqttCase) -> None:
        from streamsql.kafka.admin import KafkaAdmin

        # a fresh client per case: a producer's metadata would still know the deleted topics
        self.admin.close()
        self.admin = KafkaAdmin(self.bootstrap)
        resp = self.http.post("/ksql/terminate", json={"deleteTopicList": [".*"]})
        if resp.status_code != 200:
            raise _Failure(f"could not reset the server: {resp.text[:300]}")
        topics = self.admin.topics()
        names = {str(r.get("topic")) for r in case.inputs + case.outputs} | {str(t.get("name")) for t in case.topics}
        for stmt in case.statements:
            names |= {m.group(1) for m in re.finditer(r"KAFKA_TOPIC\s*=\s*'([^']*)'", stmt, re.IGNORECASE)}
        for name in names & set(topics):
            try:
                self.admin.delete_topic(name)
            except Exception:  # noqa: BLE001 - best effort: a leftover topic shows up as a failure
                pass
        qtt_like = QttCase(case.id, case.file, case.name, case.statements, case.inputs, case.outputs,
                           topics=case.topics)
        for name, partitions in topics_to_create(qtt_like).items():
            self.admin.create_topic(name, partitions)
        self.registry.reset()  # each case registers its own schemas, often with the same ids
        register_topic_schemas(qtt_like, "", self.registry.url, self.registry.register)

    def _properties(self, case: RqttCase) -> dict[str, str]:
        # as the QTT runner: the expected responses hold every aggregate update (a push query
        # over a table with LIMIT 2 expects counts 1 and 2 of two records), i.e. ksqlDB's record
        # cache off, not its default of one update per key per commit
        props = {"auto.offset.reset": "earliest", "ksql.streams.cache.max.bytes.buffering": "0"}
        props.update({k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in case.properties.items()})
        return props

    def _execute(self, case: RqttCase) -> None:
        statements = [s.strip() + ";" for text in case.statements for s in split_statements(text)]
        first_query = next((i for i, s in enumerate(statements) if QUERY_START.match(s)), len(statements))
        admin, queries = statements[:first_query], statements[first_query:]
        props = self._properties(case)
        actual: list[dict[str, Any]] = []
        if admin:
            resp = self.http.post("/ksql", json={"ksql": "\n".join(admin), "streamsProperties": props})
            if resp.status_code != 200:
                self._expect_error(case, resp.status_code, resp.json())
                return
            actual += [{"admin": e} for e in resp.json()]
        if case.wait_for_push_query and queries:
            actual.append(self._push_with_inputs(case, queries[0], props))
            queries = queries[1:]
        else:
            self._produce(case)
            self._check_outputs(case)
        expected_queries = (case.responses or [])[len(actual):]
        for i, q in enumerate(queries):
            expected = expected_queries[i] if i < len(expected_queries) else None
            got = self._query(q, props, expected)
            if "error" in got:
                self._expect_error(case, got["status"], got["error"])
                return
            actual.append(got)
        if case.expected_error is not None:
            raise _Failure(f"expected error {_short(case.expected_error)} but every statement succeeded")
        self._compare_responses(case, actual)

    def _expect_error(self, case: RqttCase, status: int, body: Any) -> None:
        want = case.expected_error
        if want is None:
            message = body.get('message') if isinstance(body, dict) else body
            raise _Failure(f"statement rejected ({status}): {_short(message)}")
        if want.get("status") is not None and int(want["status"]) != status:
            raise _Failure(f"expected HTTP {want['status']}, got {status}: {_short(body)}")
        message = body.get("message", "") if isinstance(body, dict) else str(body)
        if not message_matches(want.get("message"), message):
            raise _Failure(f"expected error message containing {json.dumps(want.get('message'))}, got "
                           f"{json.dumps(message[:400])}")

    def _compare_responses(self, case: RqttCase, actual: list[dict[str, Any]]) -> None:
        expected = case.responses
        if expected is None:
            return
        if len(expected) != len(actual):
            raise _Failure(f"expected {len(expected)} responses, got {len(actual)}: {_short(actual)}")
        for i, (e, a) in enumerate(zip(expected, actual)):
            if "admin" in e:
                if "admin" not in a or not partial_match(e["admin"], a["admin"]):
                    raise _Failure(f"response {i + 1}: expected {_short(e)}, got {_short(a)}")
            elif "query" in e:
                problem = query_mismatch(e["query"], a.get("query"))
                if problem:
                    raise _Failure(f"response {i + 1}: {problem}")

    # --- inputs and outputs --------------------------------------------------------------------

    def _specs(self, case: RqttCase, declared_only: bool = False) -> dict[str, tuple[Any, Any]]:
        """topic -> (key spec, value spec) of the sources the case's statements declare.
        ``declared_only``: leave out a source declared without columns (its columns come from
        the registry: only the server knows them, :meth:`_sink_specs` asks it)."""
        from streamsql.catalog import Source, source_formats
        from streamsql.sql import ast, parse

        specs: dict[str, tuple[Any, Any]] = {}
        for text in case.statements:
            try:
                stmts = parse(text)
            except Exception:  # noqa: BLE001 - the server reports bad statements; inputs fall back to raw
                continue
            for stmt in stmts:
                if not isinstance(stmt, ast.CreateSource) or (declared_only and not stmt.columns):
                    continue
                props = {k.upper(): v for k, v in stmt.properties.items()}
                fmt = props.get("FORMAT")
                topic = str(props.get("KAFKA_TOPIC", ""))
                source = Source(stmt.name, stmt.kind, list(stmt.columns), topic,
                                str(fmt or props.get("KEY_FORMAT") or "KAFKA").upper(),
                                str(fmt or props.get("VALUE_FORMAT") or "JSON").upper(),
                                key_delimiter=str(props.get("KEY_DELIMITER", ",")),
                                value_delimiter=str(props.get("VALUE_DELIMITER", ",")),
                                wrap_single_value=str(props.get("WRAP_SINGLE_VALUE", "true")).lower() != "false")
                self._bind(source)
                specs.setdefault(topic, (source_formats.key_spec(source), source_formats.value_spec(source)))
        return specs

    def _sink_specs(self, topics: set[str]) -> dict[str, tuple[Any, Any]]:
        """topic -> (key spec, value spec) of the sources the server made on ``topics`` (the
        sinks of CREATE … AS SELECT, which the statements do not declare, and the sources whose
        columns the server inferred from the registry), read back as a client would: SHOW
        STREAMS/TABLES for their topics and formats, DESCRIBE for columns."""
        from streamsql import entities
        from streamsql import types as t
        from streamsql.catalog import Source, source_formats

        if not topics:
            return {}
        resp = self.http.post("/ksql", json={"ksql": "SHOW STREAMS; SHOW TABLES;"})
        if resp.status_code != 200:
            return {}
        listed = [(kind, s) for entity, kind in zip(resp.json(), ("STREAM", "TABLE"))
                  for s in entity.get(kind.lower() + "s", [])]
        specs: dict[str, tuple[Any, Any]] = {}
        for kind, summary in listed:
            topic = str(summary.get("topic"))
            if topic not in topics or topic in specs:
                continue
            described = self.http.post("/ksql", json={"ksql": f"DESCRIBE `{summary['name']}`;"})
            if described.status_code != 200:
                continue
            d = described.json()[0].get("sourceDescription", {})
            columns = [t.Column(f["name"], parse_type(entities.schema_to_sql(f.get("schema"))),
                                "key" if f.get("type") == "KEY" else "value") for f in d.get("fields", [])]
            window = d.get("windowType") or None
            source = Source(str(summary["name"]), kind, columns, topic, str(d.get("keyFormat") or "KAFKA").upper(),
                            str(d.get("valueFormat") or "JSON").upper(), window_type=window)
            self._bind(source)
            specs[topic] = (source_formats.key_spec(source), source_formats.value_spec(source))
        return specs

    def _bind(self, source: Source) -> None:
        """Registry formats: write with the schema the server registered for the source (the
        subject's latest), read any id from the registry."""
        from streamsql.formats import schema_registry
        from streamsql.formats.features import features

        for is_key, fmt in ((True, source.key_format), (False, source.value_format)):
            if not features(fmt).uses_registry:
                continue
            subject = schema_registry.subject_for(source.topic, is_key)
            latest = schema_registry.latest(self.registry.url, subject)
            binding = schema_registry.SchemaBinding(self.registry.url, subject, latest.id if latest else None,
                                                    {latest.id: latest.text} if latest else {})
            if is_key:
                source.key_schema = binding
            else:
                source.value_schema = binding

    def _produce(self, case: RqttCase) -> None:
        from streamsql.conformance.records import raw_encode

        specs = self._specs(case)
        for rec in case.inputs:
            topic = str(rec["topic"])
            key_spec, value_spec = specs.get(topic, (None, None))
            key = encode_with(key_spec, rec.get("key")) if key_spec is not None else raw_encode(rec.get("key"))
            if key is not None and rec.get("window"):
                key += window_suffix(rec["window"])
            value = (encode_with(value_spec, rec.get("value")) if value_spec is not None
                     else raw_encode(rec.get("value")))
            headers = [(h["KEY"], __import__("base64").b64decode(h["VALUE"]) if h.get("VALUE") else None)
                       for h in rec.get("headers") or []]
            self.admin.produce(topic, key, value, int(rec.get("timestamp", 0)), headers or None, flush=False)
        self.admin.flush()

    def _check_outputs(self, case: RqttCase) -> None:
        from streamsql.conformance.records import decode_with

        if not case.outputs:
            return
        specs = self._specs(case, declared_only=True)
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for rec in case.outputs:
            by_topic.setdefault(str(rec["topic"]), []).append(rec)
        specs.update(self._sink_specs(set(by_topic) - set(specs)))
        for topic, expected in by_topic.items():
            deadline = time.monotonic() + self.timeout_s / 2
            while True:
                records = self.admin.read_all(topic) if topic in self.admin.topics() else []
                if len(records) >= len(expected) or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            key_spec, value_spec = specs.get(topic, (None, None))
            if len(records) != len(expected):
                raise _Failure(f"topic {topic}: expected {len(expected)} records, got {len(records)}")
            for i, (e, a) in enumerate(zip(expected, records)):
                key = decode_with(key_spec, a.key)
                value = decode_with(value_spec, a.value)
                if not data_equal(e.get("key"), key) or not data_equal(e.get("value"), value):
                    raise _Failure(f"topic {topic} record {i}: expected key={_short(e.get('key'))} "
                                   f"value={_short(e.get('value'))}, got key={_short(key)} value={_short(value)}")
                if "timestamp" in e and int(e["timestamp"]) != a.timestamp:
                    raise _Failure(f"topic {topic} record {i}: expected timestamp {e['timestamp']}, got {a.timestamp}")

    # --- queries -------------------------------------------------------------------------------

    def _query(self, text: str, props: dict[str, str], expected: dict[str, Any] | None) -> dict[str, Any]:
        """Run one query over ``/query``. A pull query is repeated until it gives the expected
        answer (the tables it reads fill asynchronously); a push query is read until its LIMIT or
        until it has produced as many elements as expected."""
        want = (expected or {}).get("query") if expected else None
        is_push = re.search(r"\bEMIT\s+(CHANGES|FINAL)\b", text, re.IGNORECASE) is not None
        deadline = time.monotonic() + self.timeout_s
        while True:
            got = self._read_query(text, props, len(want) if (want and is_push) else None)
            if "error" in got or is_push or want is None or not query_mismatch(want, got["query"]):
                return got
            if time.monotonic() > deadline:
                return got
            time.sleep(0.5)

    def _read_query(self, text: str, props: dict[str, str], elements: int | None) -> dict[str, Any]:
        body = {"ksql": text, "streamsProperties": props}
        with self.http.stream("POST", "/query", json=body) as resp:
            if resp.status_code != 200:
                resp.read()
                return {"error": resp.json(), "status": resp.status_code}
            if elements is None:
                resp.read()
                return {"query": json.loads(resp.text)}
            return {"query": self._read_push(resp, elements)}

    def _read_push(self, resp: Any, elements: int) -> list[dict[str, Any]]:
        """Elements of a streamed ``/query`` array, until it closes or ``elements`` have come (then
        the query is closed, as a client disconnect would)."""
        out: list[dict[str, Any]] = []
        buffer = ""
        deadline = time.monotonic() + self.timeout_s
        query_id = None
        for chunk in resp.iter_text():
            buffer += chunk
            while "\n" in buffer:
                line, buffer = buffer.split("\n", 1)
                item = line.strip().lstrip("[").rstrip(",").rstrip("]")
                if item:
                    out.append(json.loads(item))
                    query_id = query_id or out[0].get("header", {}).get("queryId")
            if len(out) >= elements or time.monotonic() > deadline:
                break
        tail = buffer.strip().lstrip("[").rstrip("]").rstrip(",")
        if tail and len(out) < elements:
            out.append(json.loads(tail))
        if query_id and len(out) >= elements and "finalMessage" not in out[-1]:
            self.http.post("/close-query", json={"queryId": query_id})
        return out

    def _push_with_inputs(self, case: RqttCase, text: str, props: dict[str, str]) -> dict[str, Any]:
        """``waitForActivePushQuery``: start the push query, then produce the inputs."""
        want = (case.responses or [{}])[-1].get("query") or []
        box: dict[str, Any] = {}

        def read() -> None:
            box["result"] = self._read_query(text, props, max(len(want), 1))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        time.sleep(3)  # the push query's Spark query starts reading from the end of the topic
        self._produce(case)
        reader.join(self.timeout_s)
        return box.get("result", {"query": []})


def query_mismatch(expected: list[dict[str, Any]], actual: list[dict[str, Any]] | None) -> str | None:
    """Why a ``/query`` response differs from the expectation (None when it matches). Rows of a
    pull query may come in any order (ksqlDB scans partitions in parallel too)."""
    if actual is None:
        return "expected a query response, got none"
    if len(expected) != len(actual):
        return f"expected {len(expected)} elements {_short(expected)}, got {len(actual)}: {_short(actual)}"
    for i, (e, a) in enumerate(zip(expected, actual)):
        if "header" in e:
            if "header" not in a:
                return f"element {i}: expected a header, got {_short(a)}"
            want_schema = e["header"].get("schema")
            if want_schema is not None and want_schema != a["header"].get("schema"):
                return f"header schema: expected {want_schema!r}, got {a['header'].get('schema')!r}"
        elif "row" not in e and not partial_match(e, a):
            return f"element {i}: expected {_short(e)}, got {_short(a)}"
    rows_e = [e["row"] for e in expected if "row" in e]
    rows_a = [a["row"] for a in actual if "row" in a]
    if len(rows_e) != len(rows_a):
        return f"expected {len(rows_e)} rows, got {len(rows_a)}: {_short(actual)}"
    if all(partial_match(e, a) for e, a in zip(rows_e, rows_a)):
        return None
    left = list(rows_a)
    for e in rows_e:
        hit = next((i for i, a in enumerate(left) if partial_match(e, a)), None)
        if hit is None:
            return f"row {_short(e)} not in {_short(rows_a)}"
        left.pop(hit)
    return None


def run_rqtt_files(files: Iterable[Path], bootstrap: str | None, out: TextIO, filters: list[str] | None = None,
                   verbose: bool = False, timeout_s: float = DEFAULT_CASE_TIMEOUT_S) -> list[CaseResult]:
    """Run RQTT files (a line per file, as the QTT runner prints); starts an embedded broker when
    no bootstrap servers are given."""
    from streamsql.conformance.results import file_line

    broker = None
    if not bootstrap:
        from streamsql.kafka.broker import EmbeddedBroker

        broker = EmbeddedBroker().start()
        bootstrap = broker.bootstrap_servers
    results: list[CaseResult] = []
    runner = None
    try:
        runner = RqttRunner(bootstrap, timeout_s)
        for path in files:
            cases = [c for c in load_rqtt_file(path) if not filters or any(f in c.id for f in filters)]
            file_results = []
            for case in cases:
                res = runner.run_case(case)
                file_results.append(res)
                if verbose and res.status in (FAILED, INFRASTRUCTURE):
                    print(f"  FAILED {res.id}: {res.reason}", file=out, flush=True)
            results += file_results
            if file_results:
                print(file_line(path.name, file_results), file=out, flush=True)
    finally:
        if runner is not None:
            runner.close()
        if broker is not None:
            broker.stop()
    return results


def run_rqtt_command(args: Any, out: TextIO) -> int:
    """``streamsql test <rqtt files or directory>``: exit 1 if any case failed."""
    import sys

    from streamsql.conformance.cases import collect_files
    from streamsql.conformance.results import summarize, summary_line, write_report

    try:
        files = collect_files([Path(p) for p in args.paths])
    except FileNotFoundError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 2
    started = time.monotonic()
    timeout = args.timeout if getattr(args, "timeout", None) else DEFAULT_CASE_TIMEOUT_S
    results = run_rqtt_files(files, args.bootstrap_servers, out, args.filter, args.verbose, min(timeout, 120.0))
    if args.json_report:
        write_report(Path(args.json_report), results, time.monotonic() - started)
    print(f"total time {time.monotonic() - started:.1f}s", file=out)
    print(summary_line(results), file=out, flush=True)
    return 1 if summarize(results).not_passed else 0
