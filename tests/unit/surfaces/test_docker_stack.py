"""The containerised stack (docker/docker-compose.yml) without a Docker daemon: the file is valid
against the Compose Specification's schema, every image is pinned, and every streamsql command
names a subcommand, options and files that exist, with the variables its SQL files use."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from streamsql.seeds import pipelines

ROOT = Path(__file__).resolve().parents[3]
COMPOSE = ROOT / "docker" / "docker-compose.yml"


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
    for name in ("kafka", "schema-registry", "spark-master", "streamsql-server", "elasticsearch", "minio"):
        assert "healthcheck" in services[name], name


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
