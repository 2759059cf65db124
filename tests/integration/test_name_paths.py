"""Names are never paths (issue #52 item 4), tried as an attacker would: quoted source names and
INSERT INTO's QUERY_ID of every hostile class — parent traversal aimed at a sentinel beside the
data directory, ``.``/``..``, backslashes, NUL, names past the file-name limit, Unicode (with a
right-to-left override), look-alikes of the encoding itself, the empty name — run as CSAS, CTAS
and source tables, queried, then dropped or terminated. Walking the file system afterwards shows
nothing outside the data directory was created, changed or deleted, and inside it each query's
state is one direct child of ``checkpoints``/``tables`` that DROP removes."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import time
import uuid
from pathlib import Path

import httpx
import pytest

from streamsql.conformance.server_process import ServerProcess
from streamsql.errors import AnalysisError, CatalogError
from streamsql.runtime import paths
from streamsql.runtime.config import EngineConfig
from streamsql.runtime.engine import Engine

from tests.integration.test_engine import produce

pytestmark = pytest.mark.integration

#: the directory an attacker aims at: beside the data directory (``tmp_path/state``), so each
#: traversal below lands on it or next to it under the code before the encoding
SENTINEL = "SENTINEL"

#: per class: the names of a CSAS, a CTAS and a source table (each climbs from
#: ``state/checkpoints/<prefix>_`` or ``state/tables/<prefix>_`` to ``tmp_path``)
PAYLOADS: dict[str, tuple[str, str, str]] = {
    "parent traversal": ("x/../../../SENTINEL/csas", "x/../../../SENTINEL", "x/../../../ESCAPED"),
    "dot names": ("..", ".", "../.."),
    "backslashes": ("a\\b", "..\\..\\..\\SENTINEL", "\\"),
    "NUL": ("a\x00b", "\x00", "x/\x00/../../../SENTINEL"),
    "past the file-name limit": ("L" * 300, "é" * 300, "x/" + "../" * 3 + "S" * 260),
    "Unicode": ("é/ü", "Ω≈ç√ 🔥", "\u202e/../../../SENTINEL"),
    "encoding look-alikes": ("a~2fb", "%2e%2e%2f%2e%2e%2fx", "~~" + "0" * 32),
}


def _quoted(name: str) -> str:
    return f"`{name}`"


def _tree(root: Path, skip: Path) -> dict[str, str]:
    """Every path under ``root`` but ``skip``'s subtree: kind and, for a file, its content's hash."""
    seen: dict[str, str] = {}
    for directory, dirs, files in os.walk(root, followlinks=False):
        here = Path(directory)
        dirs[:] = [d for d in dirs if here / d != skip]
        for d in dirs:
            seen[str((here / d).relative_to(root))] = "dir"
        for f in files:
            path = here / f
            seen[str(path.relative_to(root))] = (f"link:{os.readlink(path)}" if path.is_symlink() else
                                                 hashlib.sha256(path.read_bytes()).hexdigest())
    return seen


def _plant_sentinel(tmp_path: Path) -> None:
    sentinel = tmp_path / SENTINEL
    (sentinel / "csas").mkdir(parents=True)
    (sentinel / "keep.txt").write_text("the operator's file")
    (sentinel / "csas" / "keep.txt").write_text("nested")


#: what a child of ``checkpoints``/``tables`` may be called: an encoded name (and SQLite's files)
_ENCODED = re.compile(r"[A-Za-z0-9_~-]+(\.sqlite(-wal|-shm|-journal)?)?")


def _state_is_flat(data_dir: Path) -> None:
    """Inside the data directory each name's state is one direct child of its area."""
    for area in (paths.CHECKPOINTS, paths.TABLES):
        for child in (data_dir / area).iterdir() if (data_dir / area).exists() else []:
            assert _ENCODED.fullmatch(child.name) and len(child.name) <= 255, child
            assert child.resolve().parent == (data_dir / area).resolve(), child


@pytest.mark.parametrize("payload_class", list(PAYLOADS))
def test_hostile_source_names_stay_inside_the_data_directory(engine, topic_name, tmp_path: Path,
                                                             payload_class: str) -> None:  # type: ignore[no-untyped-def]
    _plant_sentinel(tmp_path)
    before = _tree(tmp_path, engine.data_dir)
    stream_name, table_name, source_table_name = PAYLOADS[payload_class]
    src, out, counts, cst = (topic_name(p) for p in ("src", "out", "counts", "cst"))
    engine.execute(f"""
        CREATE STREAM src (k VARCHAR KEY, v INT) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=1);
        CREATE STREAM {_quoted(stream_name)} WITH (KAFKA_TOPIC='{out}') AS SELECT * FROM src;
        CREATE TABLE {_quoted(table_name)} WITH (KAFKA_TOPIC='{counts}') AS SELECT k, COUNT(*) AS n FROM src GROUP BY k;
        CREATE SOURCE TABLE {_quoted(source_table_name)} (k VARCHAR PRIMARY KEY, v INT)
            WITH (KAFKA_TOPIC='{cst}', VALUE_FORMAT='JSON', PARTITIONS=1);
    """)
    query_ids = sorted(engine.catalog.queries)
    assert len(query_ids) == 3, query_ids
    produce(engine.admin, src, [("a", '{"v":1}', 1), ("a", '{"v":2}', 2)])
    produce(engine.admin, cst, [("b", '{"v":7}', 3)])
    engine.wait_until_idle()
    # the queries run on their encoded state: the table's store answers, the source table's too
    [pull] = engine.execute(f"SELECT k, n FROM {_quoted(table_name)} WHERE k = 'a';")
    assert list(pull.rows(timeout=60)) == [["a", 2]]
    [pull] = engine.execute(f"SELECT k, v FROM {_quoted(source_table_name)};")
    assert list(pull.rows(timeout=60)) == [["b", 7]]
    assert _tree(tmp_path, engine.data_dir) == before  # nothing created beside the data directory
    for query_id in query_ids:
        checkpoint = engine.data_dir / paths.CHECKPOINTS / paths.component(query_id)
        assert (checkpoint / "offsets").is_dir(), (query_id, sorted(os.listdir(engine.data_dir / paths.CHECKPOINTS)))
    _state_is_flat(engine.data_dir)

    engine.execute(f"DROP STREAM {_quoted(stream_name)}; DROP TABLE {_quoted(table_name)}; "
                   f"DROP TABLE {_quoted(source_table_name)};")
    assert not engine.catalog.queries
    # DROP removed each query's state, and only that
    assert sorted(os.listdir(engine.data_dir / paths.CHECKPOINTS)) == []
    assert [f for f in os.listdir(engine.data_dir / paths.TABLES) if not f.startswith(".")] == []
    assert _tree(tmp_path, engine.data_dir) == before  # nor deleted nor changed


#: QUERY_IDs ksqlDB refuses (only [A-Za-z0-9_]), each aimed at the sentinel or the host
HOSTILE_QUERY_IDS = ["../../SENTINEL", "../../sentinel", "/tmp/streamsql-name-paths-evil", "..", ".", "a/b", "a\\b", "a\x00b",
                     "é", "x" * 300 + "/..", "with space", ""]


@pytest.mark.parametrize("query_id", HOSTILE_QUERY_IDS, ids=repr)
def test_insert_into_refuses_a_query_id_ksqldb_refuses(engine, topic_name, tmp_path: Path,
                                                       query_id: str) -> None:  # type: ignore[no-untyped-def]
    _plant_sentinel(tmp_path)
    src, out = topic_name("src"), topic_name("out")
    engine.execute(f"""
        CREATE STREAM src (k VARCHAR KEY, v INT) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=1);
        CREATE STREAM out (k VARCHAR KEY, v INT) WITH (KAFKA_TOPIC='{out}', VALUE_FORMAT='JSON', PARTITIONS=1);
    """)
    before = _tree(tmp_path, engine.data_dir)
    logged = len(engine.command_log.read_all())
    quoted = query_id.replace("'", "''")
    # an absolute id was the checkpoint itself, on the host (before the checks: /TMP/STREAMSQL-…)
    absolute = Path(query_id.upper()) if query_id.startswith("/") else None
    assert absolute is None or not absolute.exists()
    try:
        with pytest.raises(AnalysisError) as refused:
            engine.execute(f"INSERT INTO out WITH (QUERY_ID='{quoted}') SELECT * FROM src;")
    finally:
        if absolute is not None and absolute.exists():
            engine.execute("TERMINATE ALL;")
            shutil.rmtree(absolute, ignore_errors=True)
            with contextlib.suppress(OSError):
                absolute.parent.rmdir()  # /TMP, when the query made it
            pytest.fail(f"the query's checkpoint was {absolute}, outside the data directory")
    assert str(refused.value) == (f"Query IDs may contain only alphanumeric characters and '_'. "
                                  f"Got: '{query_id.upper()}'")
    assert not engine.catalog.queries and len(engine.command_log.read_all()) == logged  # nothing ran or was logged
    assert _tree(tmp_path, engine.data_dir) == before


def test_insert_into_query_id_rules_as_ksqldb(engine, topic_name) -> None:  # type: ignore[no-untyped-def]
    """A reserved prefix is refused; a valid id is upper-cased and taken once (ksqlDB's
    EngineExecutor: "Query ID '…' already exists.")."""
    src, out = topic_name("src"), topic_name("out")
    engine.execute(f"""
        CREATE STREAM src (k VARCHAR KEY, v INT) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=1);
        CREATE STREAM out (k VARCHAR KEY, v INT) WITH (KAFKA_TOPIC='{out}', VALUE_FORMAT='JSON', PARTITIONS=1);
    """)
    with pytest.raises(AnalysisError, match=r"^Query IDs must not start with a reserved query ID prefix "
                                            r"\(INSERTQUERY_, CTAS_, CSAS_, CST_\)\. Got 'CSAS_OUT_9'\.$"):
        engine.execute("INSERT INTO out WITH (QUERY_ID='csas_out_9') SELECT * FROM src;")
    [created] = engine.execute("INSERT INTO out WITH (QUERY_ID='my_copy') SELECT * FROM src;")
    assert created.query_id == "MY_COPY"
    with pytest.raises(CatalogError, match=r"^Query ID 'MY_COPY' already exists\.$"):
        engine.execute("INSERT INTO out WITH (QUERY_ID='My_Copy') SELECT * FROM src WHERE v > 1;")
    assert list(engine.catalog.queries) == ["MY_COPY"]


def test_a_hostile_query_id_logged_by_an_earlier_version_runs_and_terminates_inside(
        bootstrap, spark, topic_name, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """An earlier streamsql accepted any QUERY_ID, so a command log may hold one aimed at the
    sentinel: replayed, its query runs on an encoded checkpoint, and TERMINATE deletes only that
    (before the encoding, the checkpoint *was* the sentinel, and TERMINATE removed it)."""
    _plant_sentinel(tmp_path)
    data_dir = tmp_path / "state"
    src, out = topic_name("src"), topic_name("out")
    statements = [
        f"CREATE STREAM src (k VARCHAR KEY, v INT) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=1);",
        f"CREATE STREAM out (k VARCHAR KEY, v INT) WITH (KAFKA_TOPIC='{out}', VALUE_FORMAT='JSON', PARTITIONS=1);",
        "INSERT INTO out WITH (QUERY_ID='../../SENTINEL') SELECT * FROM src;",
    ]
    data_dir.mkdir()
    engine = Engine(EngineConfig(bootstrap, data_dir), spark=spark)
    engine.admin.create_topic(src, 1, 1)
    engine.admin.create_topic(out, 1, 1)
    (data_dir / "commands.jsonl").write_text("".join(
        json.dumps({"seq": seq, "statement": text, "properties": {"auto.offset.reset": "earliest"}, "query_id": None})
        + "\n" for seq, text in enumerate(statements)), encoding="utf-8")
    before = _tree(tmp_path, data_dir)
    engine.start()
    try:
        assert list(engine.catalog.queries) == ["../../SENTINEL"]
        produce(engine.admin, src, [("a", '{"v":1}', 1)])
        engine.wait_until_idle()
        checkpoint = data_dir / paths.CHECKPOINTS / "~2e~2e~2f~2e~2e~2fSENTINEL"
        assert (checkpoint / "commits").is_dir()
        assert _tree(tmp_path, data_dir) == before
        engine.execute("TERMINATE `../../SENTINEL`;")
        assert not checkpoint.exists() and not engine.catalog.queries
        assert _tree(tmp_path, data_dir) == before
    finally:
        engine.close()


def _ksql(client: httpx.Client, text: str) -> httpx.Response:
    return client.post("/ksql", json={"ksql": text, "streamsProperties": {"auto.offset.reset": "earliest"}})


def _pull(client: httpx.Client, text: str, want: list[list[object]], deadline_s: float = 120) -> None:
    """Poll a pull query until it answers ``want`` (the query writes asynchronously)."""
    deadline, rows = time.monotonic() + deadline_s, None
    while time.monotonic() < deadline:
        resp = client.post("/query", json={"ksql": text, "streamsProperties": {}})
        assert resp.status_code == 200, resp.text
        rows = [r["row"]["columns"] for r in json.loads(resp.text) if "row" in r]
        if rows == want:
            return
        time.sleep(0.5)
    raise AssertionError(f"{text} answered {rows}, not {want}")


def test_hostile_names_over_rest_survive_a_restart_and_nothing_escapes(bootstrap, topic_name,
                                                                       tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A client of the real server creates queries over hostile names and asks for a hostile
    QUERY_ID (refused, 400); after a restart of the server the catalog is whole, the queries
    resume on their encoded state, and DROP removes it: outside the data directory, nothing
    was created, changed or deleted."""
    _plant_sentinel(tmp_path)
    data_dir = tmp_path / "jail" / "data"  # the server's log and properties go beside it, in jail/
    service_id = f"paths{uuid.uuid4().hex[:8]}_"

    def outside() -> dict[str, str]:
        return {k: v for k, v in _tree(tmp_path, data_dir).items() if not k.startswith("jail")}

    before = outside()
    src, out, counts = topic_name("src"), topic_name("out"), topic_name("counts")
    climb = "x/" + "../" * 4 + "SENTINEL/csas"  # from data/checkpoints/CSAS_ to tmp_path
    table = "../../..\x00é"
    server = ServerProcess(bootstrap, data_dir, service_id=service_id).start()
    try:
        with httpx.Client(base_url=server.url, timeout=600) as client:
            created = _ksql(client, f"""
                CREATE STREAM src (k VARCHAR KEY, v INT) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=1);
                CREATE STREAM `{climb}` WITH (KAFKA_TOPIC='{out}') AS SELECT * FROM src;
                CREATE TABLE `{table}` WITH (KAFKA_TOPIC='{counts}') AS SELECT k, COUNT(*) AS n FROM src GROUP BY k;
                INSERT INTO src (k, v) VALUES ('a', 1); INSERT INTO src (k, v) VALUES ('a', 2);""")
            assert created.status_code == 200, created.text
            refused = _ksql(client, "INSERT INTO `" + climb + "` WITH (QUERY_ID='../../../../SENTINEL') "
                                    "SELECT * FROM src;")
            assert refused.status_code == 400, refused.text
            assert refused.json()["message"] == ("Query IDs may contain only alphanumeric characters and '_'. "
                                                 "Got: '../../../../SENTINEL'")
            _pull(client, f"SELECT k, n FROM `{table}` WHERE k = 'a';", [["a", 2]])
            queries = {q["id"] for q in _ksql(client, "SHOW QUERIES;").json()[0]["queries"]}
        state = sorted(os.listdir(data_dir / paths.CHECKPOINTS))
        assert state == sorted(paths.component(q) for q in queries) and len(queries) == 2
        assert outside() == before
    finally:
        server.stop()

    restarted = ServerProcess(bootstrap, data_dir, service_id=service_id).start()
    try:
        with httpx.Client(base_url=restarted.url, timeout=600) as client:
            streams = {s["name"] for s in _ksql(client, "SHOW STREAMS;").json()[0]["streams"]}
            tables = {t["name"] for t in _ksql(client, "SHOW TABLES;").json()[0]["tables"]}
            assert {"SRC", climb} <= streams and table in tables
            assert {q["id"] for q in _ksql(client, "SHOW QUERIES;").json()[0]["queries"]} == queries
            _pull(client, f"SELECT k, n FROM `{table}` WHERE k = 'a';", [["a", 2]])
            assert sorted(os.listdir(data_dir / paths.CHECKPOINTS)) == state  # resumed on the same state
            dropped = _ksql(client, f"DROP STREAM `{climb}`; DROP TABLE `{table}`;")
            assert dropped.status_code == 200, dropped.text
        assert os.listdir(data_dir / paths.CHECKPOINTS) == []
        assert [f for f in os.listdir(data_dir / paths.TABLES) if not f.startswith(".")] == []
        assert outside() == before
    finally:
        restarted.stop()


def test_a_checkpoint_an_earlier_version_kept_under_the_raw_name_is_resumed(
        bootstrap, spark, topic_name, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Before the encoding, ``"orders.v2"``'s query kept ``checkpoints/CSAS_orders.v2_1``: a
    restarted engine moves it to the encoded name and resumes from it (nothing read twice)."""
    from tests.integration.test_engine import read

    data_dir = tmp_path / "state"
    src, out = topic_name("src"), topic_name("out")
    first = Engine(EngineConfig(bootstrap, data_dir), spark=spark)
    first.start()
    try:
        first.execute(f"""
            SET 'auto.offset.reset'='earliest';
            CREATE STREAM src (k VARCHAR KEY, v INT) WITH (KAFKA_TOPIC='{src}', VALUE_FORMAT='JSON', PARTITIONS=1);
            CREATE STREAM `orders.v2` WITH (KAFKA_TOPIC='{out}') AS SELECT * FROM src;""")
        [query_id] = first.catalog.queries
        produce(first.admin, src, [("a", '{"v":1}', 1), ("b", '{"v":2}', 2)])
        first.wait_until_idle()
        assert len(read(first.admin, out)) == 2
    finally:
        first.close()
    encoded = data_dir / paths.CHECKPOINTS / paths.component(query_id)
    legacy = data_dir / paths.CHECKPOINTS / query_id
    assert query_id == "CSAS_orders.v2_1" and encoded.name == "CSAS_orders~2ev2_1"
    encoded.rename(legacy)  # as an earlier version left it
    again = Engine(EngineConfig(bootstrap, data_dir), spark=spark)
    again.start()
    try:
        produce(again.admin, src, [("c", '{"v":3}', 3)])
        again.wait_until_idle()
        assert sorted(k for k, _, _ in read(again.admin, out)) == ["a", "b", "c"]  # resumed: a and b once
        assert (encoded / "commits").is_dir() and not legacy.exists()
    finally:
        again.close()
