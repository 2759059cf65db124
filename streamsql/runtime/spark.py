"""One SparkSession per process, configured the way streamsql's queries need it.

Settings and why:
  * ``spark.sql.caseSensitive=true``: ksqlDB's back-quoted identifiers are case-sensitive; the
    parser upper-cases unquoted names, so plain SQL still behaves case-insensitively.
  * ``spark.sql.shuffle.partitions`` small (2× cores): the default 200 is 4–5× slower here and the
    value is frozen into each query's checkpoint.
  * session time zone UTC: ksqlDB's timestamps are UTC unless a function says otherwise.
  * the RocksDB state store with changelog checkpointing, on every master: stateful operators run
    in the executors and keep their state there; ``transformWithState`` (Python state) needs
    RocksDB; changelog checkpointing writes only each batch's changes. Both are frozen into a
    query's checkpoint when it first starts (a checkpoint written before keeps its provider).
  * local masters only: the JVM compiles with C1 alone (``-XX:TieredStopAtLevel=1``) and collects
    with the serial collector (:data:`LOCAL_JVM_OPTIONS`). On a laptop the JVM shares a few cores
    with the Python workers and the broker; C2's compiler threads and G1's concurrent work took
    half of its CPU seconds in a 500k-record W3 run, and without them the run was 1.3× faster
    end to end and in its steady batches too (docs/performance.md). The young generation is
    32 MB (``-Xmn32m``): a collector's default sizes it at a third of the heap and touches all
    of it between collections, so a 1 GB driver held ~730 MB resident for a stateless query
    that keeps little alive (with 64 MB, ~480 MB at the same records/s: W1, docs/performance.md).
    The old generation starts at 64 MB (``-Xms96m``, not 1/64 of the machine's memory) and the
    serial collector keeps it within 10-30% of what is live (``-XX:Min/MaxHeapFreeRatio``): the
    parallel collector filled its ~320 MB initial old generation with promoted garbage before
    its first full collection, for ~75-90 MB live, and its marking structures took ~40 MB more
    (seed 003's pipeline, docs/performance.md). A cluster's driver keeps the JVM's defaults;
    ``spark.driver.extraJavaOptions`` set by the user replaces ours.
  * py4j's callback server (which the JVM calls for ``foreachBatch`` and listeners) waits for
    connections with ``select()``, which fails on a descriptor numbered 1,024 or more. A server
    holding hundreds of client connections when its first push query starts gets such a number,
    and then no callback ever runs (the abuse drill's 200 push clients, docs/reliability.md):
    :func:`_unlimited_select` gives py4j a ``select`` over the platform's selector (epoll).
  * local masters only: Spark's Python worker daemon is :mod:`streamsql.runtime.worker_daemon`,
    PySpark's daemon with pandas, pyarrow, confluent-kafka and our Kafka source and sink imported
    before it forks, so a new worker does not import them inside a query's first micro-batch.
  * ``spark.python.unix.domain.socket.enabled``: the JVM and its Python workers talk over Unix
    domain sockets. Over loopback TCP a micro-batch's Kafka write task waited ~40-50 ms for its
    first rows from the read task feeding it (the source's ``read()`` itself took 1 ms), every
    batch; over Unix sockets the wait is gone: a one-record batch's ``addBatch`` went from
    155-170 ms to 117-132 ms, its produce-to-output time from 223-239 ms to 180-196 ms
    (docs/performance.md). Workers always run on their executor's host, so this holds on a
    cluster too.
  * the driver JVM maps a class-data sharing archive of Spark's classes when the installation has
    one (:mod:`streamsql.runtime.class_archive`, built by ``scripts/setup.sh``): session start
    ~8 s → ~4 s on 2 cores. A user's ``spark.driver.extraJavaOptions`` replaces this too.
  * local masters only: the JVM and every Python process Spark starts run with glibc's
    ``MALLOC_ARENA_MAX=2`` (:data:`LOCAL_PROCESS_ENV`, unless the environment sets it). glibc gives
    each thread that allocates its own arena, up to 8 per core, and an arena keeps the pages it
    once used; Spark's threads, librdkafka's and Arrow's each held some. Seed 003's pipeline over
    20,000 batches (W4, ``streamsql-cold``): peak PSS of the JVM 640 → 546 MB, of the Python
    workers 758 → 667 MB (docs/performance.md). Fixed trim and mmap thresholds as well
    (``MALLOC_TRIM_THRESHOLD_``/``MALLOC_MMAP_THRESHOLD_``) made the workers give freed memory back
    at every task, and with :mod:`streamsql.runtime.worker_daemon`'s release after growth, W1
    spent 15-30% more CPU per record: not kept.
  * the Python workers' ``pyspark.zip`` is byte-compiled once (:mod:`streamsql.runtime.worker_zip`):
    every Python process Spark starts would otherwise compile PySpark from source (0.6 CPU-s each).

Local masters (``local``, ``local[N]``, ``local[*]``, ``local[N,F]``) and cluster masters
(``spark://…``, ``local-cluster[…]``, ``yarn``, ``k8s://…``) differ:
  * local: the driver binds to loopback (``SPARK_LOCAL_IP``, ``spark.driver.host``), and Python
    workers run this interpreter with this process's ``sys.path`` (else they start another Python
    that lacks our packages and fail to connect back, research/spark.md §5.1);
  * cluster: none of that is forced. Executors run the cluster's Python — ``spark.pyspark.python``
    (``--conf`` or the properties file) or ``PYSPARK_PYTHON`` as the user sets them, else Spark's
    default ``python3`` — and streamsql ships its own code (the ``streamsql`` package as a zip,
    built once per process) and the Python function directories (:func:`ship_directory`) with
    ``SparkContext.addPyFile``, so a node needs Spark and the third-party packages only. The
    Python processes Spark starts beside the driver (with the same interpreter path) get the zip
    and the directories through the driver JVM's ``PYTHONPATH`` (:func:`_driver_python_path`).

Spark settings pass through: ``--conf key=value`` and the ``spark.*`` keys of the properties file
(:func:`streamsql.runtime.config.resolve_config`) reach :func:`configure`, and then every session
this process creates; an explicit ``conf`` argument of :func:`get_spark` wins over both, and both
win over the defaults above.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import re
import selectors
import shutil
import signal
import sys
import tempfile
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import py4j.java_gateway  # type: ignore[import-untyped]
from pyspark import SparkContext
from pyspark.sql import SparkSession

from streamsql.runtime import class_archive, local_fs, zygote


class _NumpyConverterWithoutTestingImports:
    """PySpark's py4j input converter of a NumPy array or scalar, without its imports.

    PySpark's own (``pyspark.sql.types.NumpyArrayConverter``, ``NumpyScalarConverter``) asks
    ``pyspark.testing.utils`` whether NumPy is installed, and that module imports pandas, pyarrow
    and NumPy to find out: the driver's first call into the JVM loaded pandas (~34 MB of PSS in
    every driver, seed 003's included) though no streamsql driver passes a NumPy value to the JVM.
    An object is a NumPy array or scalar only if NumPy is imported already, so this one looks in
    ``sys.modules`` and converts as PySpark's does."""

    def __init__(self, inner: Any, array: bool) -> None:
        self.inner = inner
        self.array = array

    def can_convert(self, obj: Any) -> bool:
        np = sys.modules.get("numpy")
        if np is None:
            return False
        if self.array:
            return isinstance(obj, np.ndarray) and obj.ndim == 1
        return isinstance(obj, np.generic)

    def convert(self, obj: Any, gateway_client: Any) -> Any:
        return self.inner.convert(obj, gateway_client)


def _numpy_converters_without_testing_imports() -> None:
    """Swap PySpark's NumPy converters in py4j's list (the one every gateway reads) for
    :class:`_NumpyConverterWithoutTestingImports`."""
    import py4j.protocol  # type: ignore[import-untyped]
    from pyspark.sql import types

    converters = py4j.protocol.INPUT_CONVERTER
    for i, converter in enumerate(converters):
        if type(converter) is types.NumpyArrayConverter:
            converters[i] = _NumpyConverterWithoutTestingImports(converter, array=True)
        elif type(converter) is types.NumpyScalarConverter:
            converters[i] = _NumpyConverterWithoutTestingImports(converter, array=False)


_numpy_converters_without_testing_imports()


class _SelectorSelect:
    """The part of the ``select`` module py4j's callback server uses, over :mod:`selectors`
    (no limit on descriptor numbers)."""

    error = OSError

    @staticmethod
    def select(rlist: list[Any], wlist: list[Any], xlist: list[Any],
               timeout: float | None = None) -> tuple[list[Any], list[Any], list[Any]]:
        with selectors.DefaultSelector() as selector:
            events: dict[Any, int] = {}
            for f in rlist:
                events[f] = events.get(f, 0) | selectors.EVENT_READ
            for f in wlist:
                events[f] = events.get(f, 0) | selectors.EVENT_WRITE
            for f, mask in events.items():
                selector.register(f, mask)
            ready = selector.select(timeout) if events else []
        return ([key.fileobj for key, mask in ready if mask & selectors.EVENT_READ],
                [key.fileobj for key, mask in ready if mask & selectors.EVENT_WRITE], [])


def _unlimited_select() -> None:
    """Give py4j's callback server a ``select`` that works for any descriptor (see the module
    docstring); its ``xlist`` is never used by py4j."""
    py4j.java_gateway.select = _SelectorSelect


_unlimited_select()
_lock = threading.Lock()
#: keeps Spark's own logging to errors (the default prints WARN lines users cannot act on)
_LOG4J = Path(__file__).with_name("log4j2.properties")
#: JVM flags of a local session (see the module docstring): C1 only, the serial collector, a
#: 32 MB young generation, an old generation that starts at 64 MB and stays near what is live
LOCAL_JVM_OPTIONS = ("-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xmn32m -Xms96m "
                     "-XX:MinHeapFreeRatio=10 -XX:MaxHeapFreeRatio=30")
#: the Python worker daemon of a local session: PySpark's, with our tasks' modules preloaded
WORKER_DAEMON = "streamsql.runtime.worker_daemon"
#: the environment of a local session's processes (see the module docstring), set before the JVM
#: and the zygote start so both and everything they start inherit it; a value already set wins
LOCAL_PROCESS_ENV = {"MALLOC_ARENA_MAX": "2"}
_registered: set[int] = set()
DEFAULT_MASTER = "local[2]"
#: the state store every query uses (see the module docstring)
STATE_STORE_SETTINGS = {
    "spark.sql.streaming.stateStore.providerClass":
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
}
#: checkpoints through Hadoop's FileSystem API, not its FileContext API (Spark's default): without
#: Hadoop's native library, FileContext's rename on the local file system forks ``readlink`` from
#: the JVM for every file a micro-batch commits (offsets, commits, state), ~60-120 ms a batch on 2
#: cores (docs/performance.md). The data directory, and so every checkpoint, is a local (or
#: mounted) path, where FileSystem's rename is the same atomic rename(2) FileContext's is.
CHECKPOINT_SETTINGS = {
    "spark.sql.streaming.checkpointFileManagerClass":
        "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager",
}
_LOCAL_MASTER = re.compile(r"local(\[[^\]]*\])?\Z")
#: settings given by the command line and the properties file (:func:`configure`)
_configured: dict[str, str] = {}
#: directories of Python functions to ship to executors (path -> the zip shipped for it, once shipped)
_ship_dirs: dict[Path, str | None] = {}
_ship_state: dict[str, object] = {"tmp": None, "package_zip": None, "session": None}


def is_local_master(master: str) -> bool:
    """True for the masters whose executors run inside the driver's JVM on this machine."""
    return bool(_LOCAL_MASTER.match(master.strip()))


def resolve_master(master: str | None) -> str:
    return master or _configured.get("spark.master") or os.environ.get("STREAMSQL_SPARK_MASTER") or DEFAULT_MASTER


def configure(conf: dict[str, str]) -> None:
    """Spark settings from the command line and the properties file, for the session this
    process creates (a session already running keeps its settings)."""
    _configured.update(conf)


def session_settings(master: str, conf: dict[str, str] | None = None) -> dict[str, str]:
    """Every setting the session for ``master`` gets: our defaults, then :func:`configure`'s,
    then ``conf``. Pure (no environment changes), so it can be checked without a JVM."""
    settings = {
        "spark.sql.caseSensitive": "true",
        "spark.sql.shuffle.partitions": str(2 * (os.cpu_count() or 2)),
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={_LOG4J} {class_archive.jvm_options()}".strip(),
        "spark.sql.streaming.stopTimeout": "30s",
        "spark.sql.ansi.enabled": "false",
        # ksqlDB's MAP(...) keeps the last value of a duplicated key; Spark would fail the query
        "spark.sql.mapKeyDedupPolicy": "LAST_WIN",
        # ENCODE/FROM_BYTES: unmappable characters become '?'/U+FFFD as in Java, not a query failure
        "spark.sql.legacy.codingErrorAction": "true",
        "spark.python.worker.reuse": "true",
        # the JVM talks to its Python workers over Unix domain sockets, not loopback TCP
        "spark.python.unix.domain.socket.enabled": "true",
        "spark.sql.streaming.noDataMicroBatches.enabled": "true",
        **CHECKPOINT_SETTINGS,
        **STATE_STORE_SETTINGS,
    }
    user = {**_configured, **(conf or {})}
    user.pop("spark.master", None)
    if is_local_master(master):
        settings.update({
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.driver.host": "127.0.0.1",
            "spark.pyspark.python": user.get("spark.pyspark.python") or os.environ.get("PYSPARK_PYTHON")
            or sys.executable,
            "spark.executorEnv.PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
            "spark.driver.extraJavaOptions": f"{settings['spark.driver.extraJavaOptions']} {LOCAL_JVM_OPTIONS}",
            "spark.python.daemon.module": WORKER_DAEMON,
        })
        # checkpoints written without a chmod process per file (runtime/local_fs.py)
        local_fs_settings = local_fs.spark_settings(user.get("spark.driver.extraClassPath"))
        if local_fs_settings:
            settings.update(local_fs_settings)
            user.pop("spark.driver.extraClassPath", None)  # it is in ours, after the jar
    else:
        python = user.get("spark.pyspark.python") or os.environ.get("PYSPARK_PYTHON")
        if python:
            settings["spark.pyspark.python"] = python
    settings.update(user)
    return settings


def get_spark(master: str | None = None, conf: dict[str, str] | None = None) -> SparkSession:
    """Return the process's SparkSession, creating it on first use, with our data sources registered."""
    master = resolve_master(master)
    settings = session_settings(master, conf)
    local = is_local_master(master)
    with _lock:
        if SparkSession.getActiveSession() is None:
            from streamsql.runtime.worker_zip import ensure_compiled

            ensure_compiled()
            if local:
                for name, value in LOCAL_PROCESS_ENV.items():
                    os.environ.setdefault(name, value)
            if local and settings.get("spark.pyspark.python") == sys.executable and zygote.enabled():
                # every Python process Spark starts is forked from one pre-imported process
                settings["spark.pyspark.python"] = zygote.ensure_started() or sys.executable
            # PySpark takes the Python its workers run from this variable (SparkContext.pythonExec),
            # for the executors and for the Python processes Spark starts beside the driver
            if "spark.pyspark.python" in settings:
                os.environ["PYSPARK_PYTHON"] = settings["spark.pyspark.python"]
            if local:
                os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = SparkSession.builder.appName("streamsql").master(master)
        for k, v in settings.items():
            builder = builder.config(k, v)
        with _command_keeps_its_interrupt_handler():
            if local or SparkContext._active_spark_context is not None:  # the JVM runs already
                spark = builder.getOrCreate()
            else:
                with _driver_python_path():
                    spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel(os.environ.get("STREAMSQL_SPARK_LOG_LEVEL", "ERROR"))
        if id(spark) not in _registered:
            master = spark.sparkContext.master
            assert master is not None  # set on every started context (the stubs allow None)
            if not is_local_master(master):
                _ship_code(spark)
            from streamsql.kafka.datasource import KafkaDataSource, warm_up

            spark.dataSource.register(KafkaDataSource)
            pin_java_names(spark)
            warm_up(spark)
            _registered.add(id(spark))
        return spark


#: Java names PySpark resolves on nearly every DataFrame call and query start. py4j resolves a name
#: afresh each time it is read off its JVM view: a simple one (``PythonUtils``) is tried under
#: ``java.lang`` and under each of PySpark's wildcard imports in turn, a dotted one segment by
#: segment (``org``, ``org.apache``, ...) or whole (``getattr(jvm, "org.apache....")``), and every
#: miss is a class lookup that walks all ~250 jars of the class path. On the QTT corpus that was
#: ~20 lookups a case and 8% of the JVM's CPU.
PINNED_JAVA_NAMES = (
    "PythonUtils", "PythonRDD", "SerDeUtil", "SimplePythonFunction", "PythonSQLUtils", "functions",
    "org.apache.spark.sql.SparkSession",
    "org.apache.spark.sql.classic.SparkSession",
    "org.apache.spark.sql.classic.SparkSession$",
    "org.apache.spark.sql.functions",
    "org.apache.spark.sql.execution.python.UserDefinedPythonFunction",
    "org.apache.spark.sql.catalyst.trees.PySparkCurrentOrigin",
)


def pin_java_names(spark: SparkSession) -> None:
    """Resolve :data:`PINNED_JAVA_NAMES` once and keep each package and class on the py4j object
    it was read from, as a plain attribute: later reads never reach the JVM. (py4j's objects for
    packages and classes hold only a name and the gateway; sharing them across threads is what
    PySpark does with its own.)"""
    jvm = spark._jvm
    if jvm is None:  # not a classic session (Spark Connect)
        return
    for name in PINNED_JAVA_NAMES:
        node: Any = jvm
        for part in name.split("."):
            child = node.__dict__.get(part)
            if child is None:
                try:
                    child = getattr(node, part)
                except Exception:  # noqa: BLE001 - a name another Spark version lacks stays unpinned
                    break
                node.__dict__[part] = child
            node = child
        else:
            if "." in name:  # PySpark reads some as one attribute: getattr(jvm, "org.apache....")
                jvm.__dict__[name] = node


# --- shipping code to executors ----------------------------------------------------------------

def _tmp_dir() -> Path:
    if _ship_state["tmp"] is None:
        path = Path(tempfile.mkdtemp(prefix="streamsql-ship-"))
        atexit.register(shutil.rmtree, path, True)
        _ship_state["tmp"] = path
    return _ship_state["tmp"]  # type: ignore[return-value]


def zip_tree(root: Path, target: Path, prefix: str = "") -> Path:
    """Write the files under ``root`` (minus bytecode caches) into the zip ``target``, each under
    ``prefix`` + its path relative to ``root``, in a fixed order. Returns ``target``."""
    files = sorted(p for p in root.rglob("*")
                   if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo"))
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for p in files:
            zf.write(p, prefix + p.relative_to(root).as_posix())
    return target


def package_zip() -> Path:
    """The ``streamsql`` package as a zip importable from ``sys.path`` (built once per process)."""
    if _ship_state["package_zip"] is None:
        root = Path(__file__).resolve().parent.parent  # the streamsql package
        _ship_state["package_zip"] = zip_tree(root, _tmp_dir() / "streamsql.zip", prefix="streamsql/")
    return _ship_state["package_zip"]  # type: ignore[return-value]


def _add_py_file(spark: SparkSession, path: Path) -> None:
    """``addPyFile`` for executors (and the Python workers Spark starts beside the driver), without
    the entry PySpark also puts at the head of this process's own ``sys.path``: the driver keeps
    importing the installed code, and a function file's name cannot shadow a module here."""
    before = list(sys.path)
    spark.sparkContext.addPyFile(str(path))
    sys.path[:] = [p for p in sys.path if p in before]


@contextlib.contextmanager
def _command_keeps_its_interrupt_handler() -> Iterator[None]:
    """A command that handles Ctrl-C itself keeps its handler when the SparkContext starts.
    PySpark installs its own SIGINT handler there (cancel every job, then raise
    ``KeyboardInterrupt`` wherever the main thread is), which turned ``streamsql run``'s clean
    stop on Ctrl-C into a traceback. Python's default handler (a notebook, a script) is replaced
    as PySpark intends."""
    on_main_thread = threading.current_thread() is threading.main_thread()
    before = signal.getsignal(signal.SIGINT) if on_main_thread else None
    try:
        yield
    finally:
        if on_main_thread and callable(before) and before is not signal.default_int_handler:
            signal.signal(signal.SIGINT, before)


@contextlib.contextmanager
def _driver_python_path() -> Iterator[None]:
    """While the driver's JVM starts, ``PYTHONPATH`` names our package zip and the function
    directories: the JVM passes its own ``PYTHONPATH`` to the Python processes it starts beside
    the driver, and some of those never read ``addPyFile``'s includes (Spark 4.1's
    transformWithState driver runner does not; its streaming source runner looks for them in
    another directory), yet unpickle our code. Executors are not affected (their environment
    comes from the worker and ``spark.executorEnv.*``)."""
    saved = os.environ.get("PYTHONPATH")
    paths = [str(package_zip())] + [str(d) for d in _ship_dirs] + ([saved] if saved else [])
    os.environ["PYTHONPATH"] = os.pathsep.join(paths)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def _ship_code(spark: SparkSession) -> None:
    _ship_state["session"] = spark
    _add_py_file(spark, package_zip())
    for directory in list(_ship_dirs):
        _ship_dirs[directory] = None
        _ship_directory_now(spark, directory)


def _ship_directory_now(spark: SparkSession, directory: Path) -> None:
    files = sorted(p for p in directory.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    digest = hashlib.sha1()
    for p in files:
        digest.update(p.relative_to(directory).as_posix().encode() + b"\0" + p.read_bytes())
    name = f"streamsql-functions-{re.sub(r'[^0-9A-Za-z_]', '_', directory.name)}-{digest.hexdigest()[:12]}.zip"
    if _ship_dirs.get(directory) == name:
        return
    target = _tmp_dir() / name
    if not target.exists():
        zip_tree(directory, target)
    _add_py_file(spark, target)
    _ship_dirs[directory] = name


def ship_directory(directory: Path) -> None:
    """Make the modules of a Python function directory importable on a cluster's executors by
    their file names (helper modules a function file imports; the functions themselves travel by
    value). Local masters need nothing: their workers share this machine's files. Shipped now if
    a cluster session runs, else when one starts; again under a new name when the files change."""
    directory = directory.resolve()
    with _lock:
        _ship_dirs.setdefault(directory, None)
        session = _ship_state["session"]  # the cluster session we shipped our package to
        if not isinstance(session, SparkSession) or session.sparkContext._jsc is None:  # none, or stopped
            return
        _ship_directory_now(session, directory)


def activate(spark: SparkSession) -> None:
    """Make ``spark`` the active session of the calling thread's JVM thread. Spark looks Python
    data sources up in the *active* session; a Python thread maps to a fresh JVM thread
    (pinned-thread mode), and a JVM thread can be left with a stream's cloned session active
    (``foreachBatch`` callbacks), where streamsql's data sources are not registered. Every
    thread that starts queries or reads sources calls this first."""
    jvm = spark._jvm
    if jvm is None:  # not a classic session (Spark Connect): nothing to pin
        return
    jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)


def stop_spark() -> None:
    """Stop the process's SparkSession, if one was started (before an embedded broker stops, so
    Spark's Kafka clients do not outlive it)."""
    session = SparkSession.getActiveSession()
    if session is not None:
        for q in session.streams.active:
            try:
                q.stop()
            except Exception:  # stopping is best effort at shutdown
                pass
        session.stop()
