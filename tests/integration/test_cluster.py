"""streamsql on a real Spark standalone cluster (issue 14, item 5).

A master and two workers start from the installed pyspark wheel (``$SPARK_HOME/bin/spark-class``,
SPARK_HOME being the pyspark package directory). Their Python is a separate virtualenv holding the
third-party packages but not streamsql (checked: ``import streamsql`` fails there), and it is also
the Python Spark starts beside the driver (``spark.pyspark.python``): everything of ours those
processes run comes from the zips the engine ships. ``streamsql run`` then runs seed 003's SQL
(queries/cheapest_flight.sql as shipped, on its sample data) plus a windowed count with a Python
UDAF and a UDF whose helper module sits beside it, in a directory outside the repository
(``ksql.extension.dir``), once on the cluster and once in local mode: every output topic holds
the same records per key, and the final values are the ones computed here from the sample data.
"""

from __future__ import annotations

import collections
import gzip
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.workloads import seed_sql
from streamsql import samples
from streamsql.kafka.admin import KafkaAdmin

pytestmark = pytest.mark.integration

SEARCHES = 120  # flight-search messages (about 20 quotes each)

UDF_FILE = '''
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _route_helpers  # noqa: E402  (a helper module beside this file: shipped to executors with it)

from streamsql.udf import udaf, udf  # noqa: E402


@udf(name="ROUTE", returns="VARCHAR", params=["VARCHAR", "VARCHAR"])
def route(origin, destination):
    return None if origin is None or destination is None else _route_helpers.route_name(origin, destination)


@udaf(name="CABIN_MIX", returns="VARCHAR", params=["VARCHAR"])
class CabinMix:
    """How many quotes per cabin, as 'F=1;J=2;...'."""

    def initialize(self):
        return {}

    def aggregate(self, value, acc):
        if value is None:
            return acc
        acc = dict(acc)
        acc[value] = acc.get(value, 0) + 1
        return acc

    def merge(self, a, b):
        out = dict(a)
        for k, v in b.items():
            out[k] = out.get(k, 0) + v
        return out

    def map(self, acc):
        return ";".join(f"{k}={acc[k]}" for k in sorted(acc))
'''

HELPER_FILE = '''
def route_name(origin, destination):
    return origin + "->" + destination
'''

EXTRA_SQL = """
-- the cluster test's addition: a windowed count by a Python UDF (with a helper module) with a
-- Python UDAF
CREATE TABLE cluster_route_mix AS
    SELECT ROUTE(depiata, arriata) AS route, COUNT(*) AS quotes, CABIN_MIX(paxclass) AS cabins
    FROM cflight_quotes
    WINDOW TUMBLING (SIZE 1 MINUTE)
    GROUP BY ROUTE(depiata, arriata)
    EMIT CHANGES;
"""

#: output topics: the seed's own (named in its file: the test puts the run's prefix in front) and the
#: additions' (the properties file's ksql.output.topic.name.prefix goes in front)
SEED_TOPICS = ["cflight_batches", "cflight_enriched", "cflight_cheapest"]
OUTPUTS = [*SEED_TOPICS, "CLUSTER_ROUTE_MIX"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without what would hand the cluster our interpreter or a
    loopback-only driver (the test session sets some of these for local mode)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_LOCAL_IP", "STREAMSQL_SPARK_MASTER",
                        "SPARK_HOME")}
    env.update(extra)
    return env


def _node_env(**extra: str) -> dict[str, str]:
    """A cluster node's environment: nothing of this process's Python path either."""
    env = _clean_env(**extra)
    env.pop("PYTHONPATH", None)
    return env


@pytest.fixture(scope="module")
def worker_python(tmp_path_factory) -> str:  # type: ignore[no-untyped-def]
    """A virtualenv with the third-party packages (PySpark, pyarrow, pandas, confluent-kafka, ...)
    and without streamsql: a ``.pth`` line puts the main environment's site-packages on its path;
    the editable install's import hook lives in a ``.pth`` file there, which Python does not run
    for a directory added that way."""
    import site

    root = tmp_path_factory.mktemp("worker-venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    python = root / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             check=True, capture_output=True, text=True).stdout.strip()
    Path(purelib, "streamsql_test_deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    probe = "import pyspark, pyarrow, pandas, confluent_kafka, sqlglot, fastavro, google.protobuf"
    subprocess.run([str(python), "-c", probe], check=True, cwd=root, env=_node_env(), timeout=120)
    lacks = subprocess.run([str(python), "-c", "import streamsql"], cwd=root, env=_node_env(),
                           capture_output=True, text=True, timeout=60)
    assert lacks.returncode != 0 and "No module named 'streamsql'" in lacks.stderr, lacks.stderr
    return str(python)


class Cluster:
    def __init__(self, root: Path) -> None:
        import pyspark

        self.root = root
        self.spark_home = Path(pyspark.__file__).resolve().parent
        self.port = _free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.procs: list[tuple[subprocess.Popen[bytes], Path]] = []
        self.work_dirs = [root / f"worker{i}" for i in (1, 2)]

    def _start(self, name: str, *args: str, env: dict[str, str]) -> Path:
        log = self.root / f"{name}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen([str(self.spark_home / "bin" / "spark-class"), *args], stdout=out,
                                    stderr=subprocess.STDOUT, env=env, cwd=self.root, start_new_session=True)
        self.procs.append((proc, log))
        return log

    def start(self, worker_python: str) -> None:
        env = _node_env(SPARK_HOME=str(self.spark_home))
        started = time.monotonic()
        master_log = self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                 "--port", str(self.port), "--webui-port", str(_free_port()), env=env)
        # the workers' executors start Python from PATH's python3 unless told otherwise: put the
        # worker environment first there as well (the driver names it with spark.pyspark.python)
        worker_env = dict(env, PATH=f"{Path(worker_python).parent}{os.pathsep}{env.get('PATH', '')}")
        for i, work in enumerate(self.work_dirs, start=1):
            work.mkdir()
            self._start(f"worker{i}", "org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1",
                        "--cores", "1", "--memory", "1g", "--webui-port", str(_free_port()),
                        "--work-dir", str(work), env=worker_env)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if master_log.read_text(errors="replace").count("Registering worker") >= 2:
                print(f"standalone master and 2 workers up in {time.monotonic() - started:.1f} s")
                return
            dead = [log for proc, log in self.procs if proc.poll() is not None]
            assert not dead, f"a cluster process exited: {self.logs()}"
            time.sleep(0.5)
        raise AssertionError(f"workers did not register within 180 s: {self.logs()}")

    def logs(self) -> str:
        return "\n".join(f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}" for _, log in self.procs)

    def stop(self) -> None:
        for proc, _ in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc, _ in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, worker_python) -> Iterator[Cluster]:  # type: ignore[no-untyped-def]
    c = Cluster(tmp_path_factory.mktemp("spark-cluster"))
    try:
        c.start(worker_python)
        yield c
    finally:
        c.stop()


def _run(args: list[str], cwd: Path, env: dict[str, str], timeout: float = 400) -> subprocess.CompletedProcess[str]:
    """``streamsql run``; one that outlasts ``timeout`` fails the test with the end of its output
    (its progress lines say which query was behind), before pytest's own timeout."""
    try:
        return subprocess.run([sys.executable, "-m", "streamsql", "run", "--progress", *args], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        raise AssertionError(f"streamsql run still running after {timeout:.0f} s:\n{out[-6000:]}") from None


def _expected(count: int) -> tuple[dict[str, tuple[float, int]], dict[str, tuple[int, str]], int]:
    """From the sample generator itself and the transform's rule (samples.enrich_flight_batch;
    one partition, so a batch's offset is its position): per search batch uuid (cheapest price,
    quotes); per route (quotes, cabin mix); the number of quotes."""
    cheapest: dict[str, tuple[float, int]] = {}
    routes: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    quotes = 0
    for offset, (_key, value, ts) in enumerate(samples.flight_batches(count)):
        for line in samples.enrich_flight_batch(value, 0, offset, ts):
            origin, destination, _date, price, cabin, _uuid, batch, _ts = line.split(",")
            best, n = cheapest.get(batch, (float("inf"), 0))
            cheapest[batch] = (min(best, float(price)), n + 1)
            routes[f"{origin}->{destination}"][cabin] += 1
            quotes += 1
    mix = {r: (sum(c.values()), ";".join(f"{k}={c[k]}" for k in sorted(c))) for r, c in routes.items()}
    return cheapest, mix, quotes


def _per_key(admin: KafkaAdmin, topic: str) -> dict[bytes | None, list[bytes | None]]:
    """Each key's values in offset order (the order that defines a table's history)."""
    out: dict[bytes | None, list[bytes | None]] = collections.defaultdict(list)
    for rec in admin.read_all(topic):
        out[rec.key].append(rec.value)
    return dict(out)


@pytest.mark.drill  # 2-3 minutes with the cluster's start: `python -m benchmarks.drills -k cluster`
@pytest.mark.timeout(900)  # a chain of three queries, twice, on a cold cluster: minutes on a loaded machine
def test_cheapest_quote_and_python_udaf_on_a_standalone_cluster_equal_local_mode(  # type: ignore[no-untyped-def]
        bootstrap, topic_name, tmp_path, cluster, worker_python):
    source = topic_name("flights")
    assert samples.produce(bootstrap, "flights", source, SEARCHES, partitions=1) == SEARCHES
    sql = seed_sql("cheapest_flight.sql", "the cluster test",
                   [(r"KAFKA_TOPIC\s*=\s*'cflight_searches'", f"KAFKA_TOPIC = '{source}'")])
    functions = tmp_path / "python-functions"  # outside the repository
    functions.mkdir()
    (functions / "cluster_functions.py").write_text(UDF_FILE)
    (functions / "_route_helpers.py").write_text(HELPER_FILE)

    prefixes = {"local": f"{source}_local_", "cluster": f"{source}_cluster_"}
    results = {}
    for mode, master in [("cluster", cluster.url), ("local", "local[2]")]:
        script = tmp_path / f"cheapest_flight_{mode}.sql"
        text = sql + EXTRA_SQL
        for topic in SEED_TOPICS:
            text = text.replace(f"'{topic}'", f"'{prefixes[mode]}{topic}'")
        script.write_text(text)
        props = tmp_path / f"{mode}.properties"
        props.write_text(f"ksql.extension.dir={functions}\nksql.output.topic.name.prefix={prefixes[mode]}\n")
        args = [str(script), "--until-idle", "--spark-master", master, "--bootstrap-servers", bootstrap,
                "--config", str(props), "--data-dir", str(tmp_path / f"data-{mode}")]
        if mode == "cluster":
            # the workers' Python (also the one Spark starts beside the driver: it has no streamsql
            # either) and a setting through --conf; the driver binds to the machine's address
            args += ["--conf", f"spark.pyspark.python={worker_python}", "--conf", "spark.executor.memory=512m"]
        started = time.monotonic()
        proc = _run(args, cwd=tmp_path, env=_clean_env())
        results[mode] = time.monotonic() - started
        assert proc.returncode == 0, f"{mode} run failed:\n{proc.stdout}\n{proc.stderr[-6000:]}\n" + (
            cluster.logs() if mode == "cluster" else "")

    # the work ran on both executors, which fetched the shipped code: our package and the
    # function directory (a zip of its files, helper module included)
    for work in cluster.work_dirs:
        shipped = {p.name for p in work.glob("app-*/*/*.zip")}
        assert "streamsql.zip" in shipped, f"{work}: {sorted(p.name for p in work.rglob('*'))[:50]}"
        assert any(n.startswith("streamsql-functions-python_functions-") for n in shipped), shipped

    admin = KafkaAdmin(bootstrap)
    # no statement names a sink topic: each is the prefix plus the upper-cased name
    outputs = {mode: {t: _per_key(admin, prefixes[mode] + t) for t in OUTPUTS} for mode in prefixes}
    for t in OUTPUTS:
        assert outputs["cluster"][t], f"{t}: no output on the cluster"
        assert outputs["cluster"][t] == outputs["local"][t], f"{t} differs between the cluster and local mode"

    cheapest, mix, quotes = _expected(SEARCHES)
    final = {k.decode(): v.decode().split(",") for k, vs in outputs["cluster"]["cflight_cheapest"].items()
             for v in vs[-1:]}
    assert {b: (float(p), int(n)) for b, (value_b, p, n) in final.items() if value_b == b} == cheapest
    enriched = [line for vs in outputs["cluster"]["cflight_enriched"].values() for v in vs
                for line in gzip.decompress(v).decode().split("\n")]
    assert len(enriched) == quotes and len({line.split(",")[5] for line in enriched}) == quotes  # a uuid each
    route_mix = {}
    for key, values in outputs["cluster"]["CLUSTER_ROUTE_MIX"].items():
        route = key[:len("LHR->IST")].decode()  # windowed key: the route, then the window
        count, cabins = values[-1].decode().split(",")
        route_mix[route] = (int(count), cabins)
    assert route_mix == mix
    print(f"cluster run {results['cluster']:.1f} s, local run {results['local']:.1f} s")

