"""The containerised stack (docker/docker-compose.yml) without a Docker daemon: the file is valid
against the Compose Specification's schema, every image is pinned (streamsql's at the package's
version), every long-running service has a healthcheck, the Spark applications fit the worker,
the build context leaves out .venv, and every streamsql command names a subcommand, options and
files that exist, with the variables its SQL files use."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

import streamsql
from streamsql.seeds import pipelines

ROOT = Path(__file__).resolve().parents[3]
COMPOSE = ROOT / "docker" / "docker-compose.yml"
#: Spark's smallest executor heap (UnifiedMemoryManager: 1.5 x its 300 MB reserve)
SPARK_MIN_EXECUTOR_BYTES = 471_859_200


@pytest.fixture(scope="module")
def stack() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


def test_the_compose_file_follows_the_compose_specification(stack: dict[str, Any]) -> None:
    schema = json.loads((ROOT / "tests" / "data" / "compose-spec.json").read_text())
    jsonschema.Draft7Validator(schema).validate(stack)
    services = stack["services"]
    for name, service in services.items():
        for needed in service.get("depends_on") or {}:
            assert needed in services, f"{name} depends on unknown service {needed}"
    expected = {"kafka", "schema-registry", "spark-master", "spark-worker", "streamsql-server", "elasticsearch",
                "kibana", "producer-logs", "producer-flights", "pipeline-heavy-hitters", "pipeline-cheapest-flight",
                "sink-elasticsearch", "sink-s3"}
    assert expected <= set(services)


def _one_shot(name: str, stack: dict[str, Any]) -> bool:
    """A service that ends when its work is done: a sample producer, or one that others wait
    for to complete (the bucket maker)."""
    if (stack["services"][name].get("command") or [None])[0] == "produce":
        return True
    return any(isinstance(deps, dict) and deps.get(name, {}).get("condition") == "service_completed_successfully"
               for s in stack["services"].values() if (deps := s.get("depends_on")))


def test_every_long_running_service_has_a_healthcheck(stack: dict[str, Any]) -> None:
    long_running = [name for name in stack["services"] if not _one_shot(name, stack)]
    assert {"spark-worker", "kibana", "pipeline-cheapest-flight", "sink-s3"} <= set(long_running)
    missing = [name for name in long_running if not (stack["services"][name].get("healthcheck") or {}).get("test")]
    assert missing == []


def test_the_streamsql_image_tag_is_the_package_version(stack: dict[str, Any]) -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'version = { attr = "streamsql.__version__" }' in pyproject  # the wheel's version is this one
    tags = {s["image"] for s in stack["services"].values() if s.get("image", "").startswith("streamsql:")}
    assert tags == {f"streamsql:{streamsql.__version__}"}


def _dockerignored(path: str, patterns: list[str]) -> bool:
    """Whether Docker leaves ``path`` out of the build context: the last pattern matching the
    path or one of its parent directories decides (``!`` re-includes; ``*`` stays within one
    path element, ``**`` spans any number)."""
    ignored = False
    parts = path.split("/")
    for raw in patterns:
        negate = raw.startswith("!")
        glob = raw.removeprefix("!").strip("/")
        regex = "".join(".*" if tok == "**" else "[^/]*" if tok == "*" else "[^/]" if tok == "?" else re.escape(tok)
                        for tok in re.split(r"(\*\*|\*|\?)", glob) if tok)
        regex = regex.replace(".*/", "(.*/)?")
        if any(re.fullmatch(regex, "/".join(parts[:i])) for i in range(1, len(parts) + 1)):
            ignored = not negate
    return ignored


def test_the_build_context_leaves_out_the_virtualenv_and_keeps_what_the_image_copies() -> None:
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    for path in (".venv", ".venv/lib/python3.11/site-packages/pyspark/jars/spark-core.jar", ".git/objects/ab",
                 ".streamsql/catalog.log", "benchmarks/results/run.json", "streamsql/__pycache__/api.cpython-311.pyc",
                 "tests/conftest.py"):
        assert _dockerignored(path, patterns), path
    copied = re.findall(r"^COPY (?!--from)(.+) \S+$", (ROOT / "docker" / "Dockerfile").read_text(), re.MULTILINE)
    sources = [src for line in copied for src in line.split()]
    assert sources == ["pyproject.toml", "README.md", "streamsql"]
    for path in (*sources, "streamsql/api.py", "streamsql/seeds/pipelines/cheapest_flight.sql"):
        assert not _dockerignored(path, patterns), path


def _bytes(size: str) -> int:
    """A JVM memory size as Spark and the worker's --memory take it (512m, 3g)."""
    number, unit = re.fullmatch(r"(\d+)([kmgt]?)b?", size.lower()).groups()  # type: ignore[union-attr]
    return int(number) * 1024 ** " kmgt".index(unit or " ")


def test_every_spark_application_fits_the_worker_at_once(stack: dict[str, Any]) -> None:
    """Each streamsql process that runs queries (the server, each ``run``) is a Spark application
    asking the standalone worker for spark.cores.max cores and one spark.executor.memory
    executor; an application the worker cannot fit waits without an executor, its queries
    stalled. So the sum must fit, and each must cap its cores (uncapped, one takes them all)."""
    from streamsql.surfaces.cli import build_parser

    services = stack["services"]
    worker = services["spark-worker"]["command"]
    worker_cores = int(worker[worker.index("--cores") + 1])
    worker_memory = _bytes(worker[worker.index("--memory") + 1])
    parser = build_parser()
    mounted = {v.split(":")[1]: COMPOSE.parent / v.split(":")[0] for s in services.values()
               for v in s.get("volumes") or [] if v.startswith("./")}
    cores = memory = 0
    applications = []
    for name, service in services.items():
        command = service.get("command")
        if not service.get("image", "").startswith("streamsql:") or service.get("entrypoint") \
                or command[0] not in ("run", "server"):
            continue
        args = parser.parse_args(command)
        conf = dict(line.split("=", 1) for line in mounted[args.config].read_text().splitlines()
                    if "=" in line and not line.startswith("#"))
        conf.update(dict(c.split("=", 1) for c in args.conf or []))
        assert conf.get("spark.master") == "spark://spark-master:7077", name
        assert "spark.cores.max" in conf, f"{name} does not cap its cores"
        executor = _bytes(conf.get("spark.executor.memory", "1g"))
        assert executor >= SPARK_MIN_EXECUTOR_BYTES, f"{name}: executor below Spark's minimum"
        cores += int(conf["spark.cores.max"])
        memory += executor
        applications.append(name)
    assert len(applications) >= 5, applications
    assert cores <= worker_cores, f"{applications} ask for {cores} cores, the worker has {worker_cores}"
    assert memory <= worker_memory, f"{applications} ask for {memory} bytes, the worker has {worker_memory}"


def test_images_are_pinned(stack: dict[str, Any]) -> None:
    for name, service in stack["services"].items():
        image = service.get("image")
        assert image, f"{name} has no image"
        tag = image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else ""
        assert tag and tag != "latest", f"{name}: image {image} is not pinned"


def test_streamsql_commands_exist(stack: dict[str, Any]) -> None:
    from streamsql.surfaces.cli import build_parser

    parser = build_parser()
    mounted = {v.split(":")[1]: COMPOSE.parent / v.split(":")[0] for s in stack["services"].values()
               for v in s.get("volumes") or [] if v.startswith("./")}
    checked = 0
    for name, service in stack["services"].items():
        if service.get("image", "").split(":")[0] != "streamsql" or service.get("entrypoint"):
            continue
        command = service["command"]
        args = parser.parse_args(command)  # exits (fails the test) on an unknown subcommand or option
        if getattr(args, "file", None):
            sql = ROOT / args.file
            assert sql.exists(), f"{name}: {args.file} does not exist"
            used = set(re.findall(r"\$\{(\w+)\}", sql.read_text()))
            defined = {d.split("=", 1)[0] for d in args.define}
            assert used <= defined, f"{name}: {sorted(used - defined)} not given with --define"
        if getattr(args, "config", None):
            assert args.config in mounted and mounted[args.config].exists(), f"{name}: {args.config} is not mounted"
        checked += 1
    assert checked >= 7
    for name in ("spark-master", "spark-worker"):
        assert stack["services"][name]["entrypoint"] == ["/opt/venv/bin/spark-class"]


def test_the_image_installs_the_wheel_and_the_seeds_the_services_run() -> None:
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    for needed in ("COPY streamsql", "python -m build --wheel", '/dist/*.whl)[all]"', "streamsql seeds --copy queries"):
        assert needed in dockerfile
    stack = yaml.safe_load((ROOT / "docker" / "docker-compose.yml").read_text())
    run_files = [c[1] for svc in stack["services"].values()
                 if (c := svc.get("command")) and isinstance(c, list) and c[:1] == ["run"]]
    assert run_files and all(f.startswith("queries/") and f.removeprefix("queries/").removesuffix(".sql") in pipelines()
                             for f in run_files), run_files


@pytest.mark.parametrize(("up", "healthy"), [((1.0, 1.0), True), ((1.0, 0.0), False), ((), True)])
def test_the_pipeline_healthcheck_reads_streamsql_query_up(stack: dict[str, Any], up: tuple[float, ...],
                                                           healthy: bool) -> None:
    """The pipelines' healthcheck, run by a shell as Docker runs it, against a Prometheus endpoint
    written by prometheus_client as ``streamsql run --metrics-port`` serves it: unhealthy while
    a query is down (a connector-only file has no query: healthy while the endpoint answers)."""
    import shutil
    import subprocess

    from prometheus_client import CollectorRegistry, start_http_server
    from prometheus_client.core import GaugeMetricFamily

    class Queries:
        def collect(self):  # type: ignore[no-untyped-def]
            family = GaugeMetricFamily("streamsql_query_up", "1 while the query runs", labels=["query"])
            for i, value in enumerate(up):
                family.add_metric([f"CTAS_Q_{i}"], value)
            yield family

    registry = CollectorRegistry()
    registry.register(Queries())  # type: ignore[arg-type]
    server, _thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    try:
        test = stack["services"]["pipeline-cheapest-flight"]["healthcheck"]["test"]
        assert test[0] == "CMD-SHELL" and shutil.which("curl")
        script = test[1].replace("$$", "$").replace("localhost:9400", f"127.0.0.1:{server.server_port}")
        assert (subprocess.run(["sh", "-c", script], timeout=30).returncode == 0) is healthy
    finally:
        server.shutdown()
    assert all(stack["services"][name]["healthcheck"] == stack["services"]["pipeline-cheapest-flight"]["healthcheck"]
               for name in ("pipeline-heavy-hitters", "sink-elasticsearch", "sink-s3"))


def test_search_setup_provisions_the_index_template_and_a_kibana_data_view_before_the_sink(
        stack: dict[str, Any]) -> None:
    """Offline, as far as it goes (Kibana itself is not run here): the template maps the
    documents' ``time`` as a date for the index the seed's sink writes (named after its topic);
    the data view covers the same indices with ``time`` as its time field; the setup service posts
    both files, mounted, and the sink waits for it (the template must exist before the index)."""
    search = COMPOSE.parent / "search"
    template = json.loads((search / "word-counts-template.json").read_text())
    view = json.loads((search / "word-counts-data-view.json").read_text())
    sink_sql = (ROOT / "queries" / "heavy_hitters_elasticsearch.sql").read_text()
    index = re.search(r"'topics'\s*=\s*'(\w+)'", sink_sql).group(1).lower()  # type: ignore[union-attr]
    assert any(re.fullmatch(p.replace("*", ".*"), index) for p in template["index_patterns"])
    assert template["template"]["mappings"]["properties"]["time"]["type"] == "date"
    assert view["data_view"]["title"] in template["index_patterns"] and view["override"] is True
    assert view["data_view"]["timeFieldName"] == "time"
    # the body Kibana 8's POST /api/data_views/data_view accepts: these keys only, a title, string ids
    assert set(view) <= {"data_view", "override"}
    assert set(view["data_view"]) <= {"title", "name", "id", "timeFieldName", "allowNoIndex", "fieldAttrs",
                                      "fieldFormats", "fields", "namespaces", "runtimeFieldMap",
                                      "sourceFilters", "type", "typeMeta", "version"}
    assert all(isinstance(view["data_view"][k], str) and view["data_view"][k] for k in ("title", "name", "id"))
    assert stack["services"]["kibana"]["image"].split(":")[1].startswith("8.")  # the data views API is 8.x's
    setup = stack["services"]["search-setup"]
    assert setup["volumes"] == ["./search:/setup:ro"]
    command = setup["command"][0]
    for needed in ("PUT http://elasticsearch:9200/_index_template/", "@/setup/word-counts-template.json",
                   "POST http://kibana:5601/api/data_views/data_view", "kbn-xsrf",
                   "@/setup/word-counts-data-view.json"):
        assert needed in command
    assert stack["services"]["sink-elasticsearch"]["depends_on"]["search-setup"] == {
        "condition": "service_completed_successfully"}
