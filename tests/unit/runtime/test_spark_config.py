"""Spark settings: ``--conf`` flags and ``spark.*`` keys of the properties file, what a local and a
cluster master get, and the zip of our package that executors import (no JVM started here)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from streamsql.errors import ConfigError
from streamsql.runtime import spark as sp
from streamsql.runtime.config import parse_spark_conf, resolve_config
from streamsql.surfaces.cli import build_parser

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


@pytest.fixture(autouse=True)
def _no_configured_settings(monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setattr(sp, "_configured", {})
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    monkeypatch.delenv("STREAMSQL_SPARK_MASTER", raising=False)


def test_properties_file_spark_keys_go_to_spark_and_flags_override_them(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.delenv("STREAMSQL_BOOTSTRAP_SERVERS", raising=False)
    props = tmp_path / "streamsql.properties"
    props.write_text("bootstrap.servers=k:9092\nspark.master=spark://m:7077\nspark.executor.memory=2g\n"
                     "spark.sql.shuffle.partitions=8\nauto.offset.reset=earliest\n")
    config = resolve_config(config_file=str(props),
                            spark_conf=["spark.executor.memory=4g", "spark.executor.cores = 2"])
    assert config.spark_master == "spark://m:7077"
    assert config.spark_conf == {"spark.executor.memory": "4g", "spark.sql.shuffle.partitions": "8",
                                 "spark.executor.cores": "2"}
    assert config.properties == {"auto.offset.reset": "earliest"}  # ksqlDB properties only
    assert config.bootstrap_servers == "k:9092"


def test_spark_master_flag_wins_over_conf_and_file(tmp_path):  # type: ignore[no-untyped-def]
    props = tmp_path / "p.properties"
    props.write_text("spark.master=spark://file:7077\n")
    assert resolve_config(config_file=str(props), spark_conf=["spark.master=spark://conf:7077"]).spark_master \
        == "spark://conf:7077"
    flagged = resolve_config(config_file=str(props), spark_master="local[1]",
                             spark_conf=["spark.master=spark://conf:7077"])
    assert flagged.spark_master == "local[1]"
    assert "spark.master" not in flagged.spark_conf


def test_conf_flag_values_may_contain_equals_and_later_flags_win():  # type: ignore[no-untyped-def]
    assert parse_spark_conf(["spark.executor.extraJavaOptions=-Da=b -Dc=d", "spark.x=1", "spark.x=2"]) == {
        "spark.executor.extraJavaOptions": "-Da=b -Dc=d", "spark.x": "2"}
    assert parse_spark_conf(["spark.empty="]) == {"spark.empty": ""}


@pytest.mark.parametrize("pair, message", [
    ("spark.executor.memory", "--conf expects key=value"),
    ("=2g", "--conf expects key=value"),
    ("auto.offset.reset=earliest", "only Spark settings (spark.*)"),
])
def test_bad_conf_flags_are_refused_with_a_message(pair, message):  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_spark_conf([pair])


def test_conf_flag_is_repeatable_on_every_command_that_takes_a_master():  # type: ignore[no-untyped-def]
    parser = build_parser()
    for command in (["run", "f.sql"], ["demo"], ["produce", "flights", "--topic", "t"], ["shell"], ["server"]):
        args = parser.parse_args(command + ["--spark-master", "spark://h:7077", "--conf", "spark.a=1",
                                            "--conf", "spark.b=2"])
        assert args.conf == ["spark.a=1", "spark.b=2"], command
        assert args.spark_master == "spark://h:7077"
    assert build_parser().parse_args(["run", "f.sql"]).conf == []


def test_the_cli_hands_spark_settings_to_the_session_it_will_create(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    from streamsql.surfaces.command_config import command_config as _config

    monkeypatch.chdir(tmp_path)  # no ./streamsql.properties
    args = build_parser().parse_args(["run", "f.sql", "--conf", "spark.executor.memory=3g"])
    assert _config(args).spark_conf == {"spark.executor.memory": "3g"}
    assert sp.session_settings("spark://h:7077")["spark.executor.memory"] == "3g"


@pytest.mark.parametrize("master, local", [
    ("local", True), ("local[2]", True), ("local[*]", True), ("local[2,4]", True), (" local[1] ", True),
    ("local-cluster[2,1,1024]", False), ("spark://h:7077", False), ("yarn", False), ("k8s://https://h", False),
])
def test_local_and_cluster_masters(master, local):  # type: ignore[no-untyped-def]
    assert sp.is_local_master(master) is local


def test_local_master_keeps_loopback_and_this_interpreter():  # type: ignore[no-untyped-def]
    s = sp.session_settings("local[2]")
    assert s["spark.driver.bindAddress"] == s["spark.driver.host"] == "127.0.0.1"
    assert s["spark.pyspark.python"] == sys.executable
    assert s["spark.executorEnv.PYTHONPATH"].split(os.pathsep) == [p for p in sys.path if p]


@pytest.mark.parametrize("master", ["local[2]", "spark://h:7077"])
def test_python_workers_talk_over_unix_domain_sockets(master):  # type: ignore[no-untyped-def]
    assert sp.session_settings(master)["spark.python.unix.domain.socket.enabled"] == "true"


def test_local_master_forks_workers_from_the_preloading_daemon():  # type: ignore[no-untyped-def]
    assert sp.session_settings("local[2]")["spark.python.daemon.module"] == "streamsql.runtime.worker_daemon"
    # the user can go back to PySpark's own daemon
    assert sp.session_settings("local[2]", {"spark.python.daemon.module": "pyspark.daemon"})[
        "spark.python.daemon.module"] == "pyspark.daemon"


@pytest.mark.parametrize("master", ["spark://10.0.0.5:7077", "local-cluster[2,1,1024]"])
def test_cluster_master_forces_no_address_no_interpreter_no_path(master):  # type: ignore[no-untyped-def]
    s = sp.session_settings(master)
    for key in ("spark.driver.bindAddress", "spark.driver.host", "spark.pyspark.python",
                "spark.executorEnv.PYTHONPATH", "spark.python.daemon.module"):
        assert key not in s, key


def test_cluster_python_comes_from_the_user(monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/env/bin/python")
    assert sp.session_settings("spark://h:7077")["spark.pyspark.python"] == "/opt/env/bin/python"
    sp.configure({"spark.pyspark.python": "/srv/py/bin/python3", "spark.driver.host": "10.0.0.2"})
    s = sp.session_settings("spark://h:7077")
    assert s["spark.pyspark.python"] == "/srv/py/bin/python3"
    assert s["spark.driver.host"] == "10.0.0.2"
    # an explicit conf argument wins over configure()'s
    assert sp.session_settings("spark://h:7077", {"spark.driver.host": "h2"})["spark.driver.host"] == "h2"


def test_rocksdb_state_store_with_changelog_checkpointing_for_every_master():  # type: ignore[no-untyped-def]
    for master in ("local[2]", "spark://h:7077", "local-cluster[2,1,1024]"):
        s = sp.session_settings(master)
        assert s["spark.sql.streaming.stateStore.providerClass"] == ROCKSDB
        assert s["spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"] == "true"


def test_user_settings_override_ours():  # type: ignore[no-untyped-def]
    sp.configure({"spark.sql.shuffle.partitions": "64", "spark.ui.enabled": "true"})
    s = sp.session_settings("local[2]")
    assert (s["spark.sql.shuffle.partitions"], s["spark.ui.enabled"]) == ("64", "true")


def test_master_resolution_order(monkeypatch):  # type: ignore[no-untyped-def]
    assert sp.resolve_master(None) == "local[2]"
    monkeypatch.setenv("STREAMSQL_SPARK_MASTER", "local[1]")
    assert sp.resolve_master(None) == "local[1]"
    assert sp.resolve_master("spark://h:7077") == "spark://h:7077"


def test_package_zip_is_importable_without_the_installed_package(tmp_path):  # type: ignore[no-untyped-def]
    """What an executor gets: the package's files (no bytecode caches) under streamsql/, importable
    from the zip by a Python that has not got streamsql installed (-S: no site-packages)."""
    import streamsql

    target = sp.zip_tree(Path(streamsql.__file__).resolve().parent, tmp_path / "streamsql.zip", prefix="streamsql/")
    names = zipfile.ZipFile(target).namelist()
    assert "streamsql/__init__.py" in names and "streamsql/kafka/datasource.py" in names
    assert "streamsql/runtime/log4j2.properties" in names  # package data travels too
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import streamsql.errors as e; "
            "print(e.__file__)")
    out = subprocess.run([sys.executable, "-S", "-c", code, str(target)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60, env={"PATH": os.environ.get("PATH", "")})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(target / "streamsql" / "errors.py")


def test_function_directories_wait_for_a_cluster_session(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """A function directory to ship is recorded; nothing is shipped without a cluster session
    (local masters share this machine's files)."""
    monkeypatch.setattr(sp, "_ship_dirs", {})
    sp.ship_directory(tmp_path)
    assert sp._ship_dirs == {tmp_path.resolve(): None}


def test_local_jvm_compiles_with_c1_only_and_collects_with_serial_gc():  # type: ignore[no-untyped-def]
    """Measured on 2 cores (docs/performance.md): C2's compiler threads and G1 took half of the
    JVM's CPU in a 500k-record W3 run; a local session's JVM starts with C1 only and the
    serial collector, a 32 MB young generation, its heap starting at 96 MB and kept near what
    is live (seed 003's memory). A cluster's driver keeps the JVM's defaults."""
    options = sp.session_settings("local[2]")["spark.driver.extraJavaOptions"].split()
    assert "-XX:TieredStopAtLevel=1" in options and "-XX:+UseSerialGC" in options
    assert {"-Xmn32m", "-Xms96m", "-XX:MinHeapFreeRatio=10", "-XX:MaxHeapFreeRatio=30"} <= set(options)
    assert any(o.startswith("-Dlog4j2.configurationFile=") for o in options)
    cluster = sp.session_settings("spark://h:7077")["spark.driver.extraJavaOptions"].split()
    assert "-XX:TieredStopAtLevel=1" not in cluster and "-XX:+UseSerialGC" not in cluster


def test_checkpoints_through_the_file_system_api_for_every_master():  # type: ignore[no-untyped-def]
    """FileContext's rename forks ``readlink`` from the JVM per committed file without Hadoop's
    native library; the data directory is a local path, where FileSystem's rename is atomic."""
    for master in ("local[2]", "spark://h:7077", "local-cluster[2,1,1024]"):
        assert sp.session_settings(master)["spark.sql.streaming.checkpointFileManagerClass"].endswith(
            ".FileSystemBasedCheckpointFileManager")
    fc = "org.apache.spark.sql.execution.streaming.checkpointing.FileContextBasedCheckpointFileManager"
    assert sp.session_settings("local[2]", {"spark.sql.streaming.checkpointFileManagerClass": fc})[
        "spark.sql.streaming.checkpointFileManagerClass"] == fc
