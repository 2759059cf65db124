"""Settings of the shared session that name JVM classes: a class renamed by a Spark upgrade
would otherwise fail every query at its start."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration


def test_the_checkpoint_file_manager_class_is_spark_s_and_in_force(spark) -> None:  # type: ignore[no-untyped-def]
    name = spark.conf.get("spark.sql.streaming.checkpointFileManagerClass")
    assert name.endswith("FileSystemBasedCheckpointFileManager")
    assert spark._jvm.java.lang.Class.forName(name).getName() == name


def _pid(_: object) -> int:
    import os

    return os.getpid()


def test_a_local_session_s_python_processes_are_forked_by_the_zygote(spark) -> None:  # type: ignore[no-untyped-def]
    import psutil

    from streamsql.runtime import zygote

    zygote_pid = zygote.running_pid()
    assert zygote_pid is not None
    assert spark.conf.get("spark.pyspark.python").endswith("/python")
    for pid in spark.sparkContext.parallelize(range(4), 2).map(_pid).collect():
        worker = psutil.Process(pid)
        assert zygote_pid in [p.pid for p in worker.parents()], worker.parents()
        # the command line is the one Spark asked for (a task worker's parent: the worker daemon)
        assert "-m streamsql.runtime.worker_daemon" in " ".join(worker.parent().cmdline())


def test_the_java_names_pyspark_reads_on_every_call_are_resolved_once(spark) -> None:  # type: ignore[no-untyped-def]
    import py4j.clientserver

    from streamsql.runtime.spark import PINNED_JAVA_NAMES

    jvm = spark._jvm
    sent: list[str] = []
    client = jvm._gateway_client
    original = client.send_command
    client.send_command = lambda command, *a, **k: (sent.append(command), original(command, *a, **k))[1]
    try:
        for name in PINNED_JAVA_NAMES:
            node = jvm
            for part in name.split("."):
                node = getattr(node, part)
            if "." in name:
                assert getattr(jvm, name) is node  # PySpark's own spelling of some of them
        # what every classic session's thread does on activation still works through them
        jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
    finally:
        client.send_command = original
    assert isinstance(client, py4j.clientserver.JavaClient)
    lookups = [c.split("\n")[:3] for c in sent if c.startswith("r\nu\n")]
    assert lookups == [], lookups


def test_checkpoint_files_get_their_permissions_from_our_local_file_system(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import os

    from streamsql.runtime import local_fs

    # the setup built the class (it needs the JDK's javac, which the machines have)
    assert local_fs.jar_path().is_file()
    assert spark.sparkContext.getConf().get("spark.hadoop.fs.file.impl") == local_fs.CLASS_NAME
    jvm = spark._jvm
    path = jvm.org.apache.hadoop.fs.Path(str(tmp_path / "offsets" / "0"))
    fs = path.getFileSystem(spark._jsc.hadoopConfiguration())
    assert fs.getClass().getName() == local_fs.CLASS_NAME
    out = fs.create(path, True)  # the directory, the file and its checksum file: each chmod-ed
    out.write(bytearray(b"v1"))
    out.close()
    fs.setPermission(path, jvm.org.apache.hadoop.fs.permission.FsPermission("640"))
    assert os.stat(tmp_path / "offsets" / "0").st_mode & 0o777 == 0o640
    assert (tmp_path / "offsets" / ".0.crc").is_file()  # still Hadoop's checksummed file system
    missing = jvm.org.apache.hadoop.fs.Path(str(tmp_path / "nope"))
    with pytest.raises(Exception, match="FileNotFoundException"):
        fs.setPermission(missing, jvm.org.apache.hadoop.fs.permission.FsPermission("640"))


def test_a_local_session_s_jvm_has_a_small_young_generation_and_a_serial_collector(spark) -> None:  # type: ignore[no-untyped-def]
    """A default young generation (a third of the heap) is all touched between collections: a
    local JVM keeps it at 32 MB, and collects with the serial collector, whose old generation
    starts small and stays near what is live (runtime/spark.py, docs/performance.md)."""
    jvm = spark.sparkContext._jvm
    pools = {p.getName(): p for p in jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans()}
    young = [p.getUsage().getMax() for name, p in pools.items() if "Eden" in name or "Survivor" in name]
    assert pools.keys() >= {"Eden Space", "Tenured Gen"}, sorted(pools)  # the serial collector
    assert 0 < sum(young) <= 32 * 2**20
    arguments = set(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert {"-Xmn32m", "-Xms96m", "-XX:MinHeapFreeRatio=10", "-XX:MaxHeapFreeRatio=30"} <= arguments


def _malloc_env(_: object) -> tuple[tuple[str, str | None], ...]:
    import os

    from streamsql.runtime.spark import LOCAL_PROCESS_ENV

    return tuple((name, os.environ.get(name)) for name in sorted(LOCAL_PROCESS_ENV))


def test_a_local_session_s_processes_run_with_glibc_s_memory_settings(spark) -> None:  # type: ignore[no-untyped-def]
    """glibc reads MALLOC_ARENA_MAX when a process starts: the JVM and the zygote (whose forks are
    the Python workers, sharing its allocator's setting) must have been started with it."""
    import psutil

    from streamsql.runtime import zygote
    from streamsql.runtime.spark import LOCAL_PROCESS_ENV

    assert LOCAL_PROCESS_ENV == {"MALLOC_ARENA_MAX": "2"}
    jvm = psutil.Process(spark._jvm.java.lang.ProcessHandle.current().pid())
    zygote_pid = zygote.running_pid()
    assert zygote_pid is not None
    for process in (jvm, psutil.Process(zygote_pid)):
        environ = process.environ()
        assert {name: environ.get(name) for name in LOCAL_PROCESS_ENV} == LOCAL_PROCESS_ENV
    expected = tuple(sorted(LOCAL_PROCESS_ENV.items()))
    assert set(spark.sparkContext.parallelize(range(2), 2).map(_malloc_env).collect()) == {expected}
