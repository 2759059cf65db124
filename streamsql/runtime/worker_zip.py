"""Byte-compile the ``pyspark.zip`` that Spark puts first on every Python worker's path.

Spark starts its Python processes (the daemon that forks task workers, each streaming query's
source runner, the data-source planning and writing workers) with
``$SPARK_HOME/python/lib/pyspark.zip`` and the py4j zip at the head of ``PYTHONPATH``. The pip wheel
ships those archives with sources only, and ``zipimport`` cannot cache bytecode, so every such
process compiles PySpark from source on import: measured here 0.6 CPU-s more per process start
(0.9 s vs 0.3 s for ``import pyspark.sql.worker.plan_data_source_read``). A streaming query starts at
least one such process (its source runner), so this cost is paid per query start; the conformance
runner starts thousands of queries and the benchmarks' profiles put a quarter of W1's worker time
there.

``zipimport`` does use a ``.pyc`` stored next to the ``.py`` inside the archive. We rewrite each
archive once with *unchecked hash-based* pycs (PEP 552: valid without comparing against the
source, which is in the same immutable archive) compiled by this interpreter — the one Spark's
workers run (``PYSPARK_PYTHON`` is pinned to it). A worker of another Python version sees a
foreign magic number and falls back to the source, so the archive stays correct for any
interpreter. The rewrite is atomic (new file, then rename) and skipped when the archive already
holds bytecode for this interpreter or is not writable.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import tempfile
import warnings
import zipfile
from importlib import _bootstrap_external
from pathlib import Path

log = logging.getLogger(__name__)

#: written into the archive so a later check knows which interpreter's bytecode it holds
_MARKER = "streamsql-bytecode.txt"


def worker_zips(spark_home: Path) -> list[Path]:
    """The archives Spark prepends to its Python workers' path."""
    lib = spark_home / "python" / "lib"
    return sorted(lib.glob("pyspark.zip")) + sorted(lib.glob("py4j-*-src.zip"))


def _tag() -> str:
    return importlib.util.MAGIC_NUMBER.hex()


def is_compiled(archive: Path) -> bool:
    try:
        with zipfile.ZipFile(archive) as zf:
            return zf.read(_MARKER).decode().strip() == _tag()
    except (KeyError, OSError, zipfile.BadZipFile):
        return False


def compile_archive(archive: Path) -> bool:
    """Rewrite ``archive`` with a bytecode file beside every module. True when rewritten."""
    if is_compiled(archive):
        return False
    if not os.access(archive.parent, os.W_OK):
        log.info("cannot byte-compile %s (not writable); Spark's Python workers will compile it on import", archive)
        return False
    import fcntl

    # one writer at a time: two first runs after an install must not both replace the archive
    # (a worker of the first could be reading it through offsets the second's rewrite moves)
    with open(archive.parent / ".streamsql-bytecode.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if is_compiled(archive):
            return False
        _rewrite(archive)
        return True


def _rewrite(archive: Path) -> None:
    fd, tmp = tempfile.mkstemp(prefix=archive.name + ".", suffix=".tmp", dir=archive.parent)
    os.close(fd)
    try:
        with zipfile.ZipFile(archive) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
            names = set(src.namelist())
            for info in src.infolist():
                if info.filename.endswith(".pyc") or info.filename == _MARKER:
                    continue  # replaced below
                data = src.read(info)
                dst.writestr(info, data)
                if not info.filename.endswith(".py"):
                    continue
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")  # e.g. SyntaxWarnings in PySpark's own tests
                        code = compile(data, str(archive / info.filename), "exec", dont_inherit=True)
                except SyntaxError:  # a file this Python cannot compile: leave it to the source path
                    continue
                # private helper, absent from typeshed's stub of importlib._bootstrap_external
                pyc = _bootstrap_external._code_to_hash_pyc(  # type: ignore[attr-defined]
                    code, importlib.util.source_hash(data), False)
                pyc_name = info.filename[:-3] + ".pyc"
                if pyc_name not in names:
                    dst.writestr(zipfile.ZipInfo(pyc_name, date_time=info.date_time), bytes(pyc))
            dst.writestr(zipfile.ZipInfo(_MARKER, date_time=(1980, 1, 1, 0, 0, 0)), _tag() + "\n")
        os.chmod(tmp, archive.stat().st_mode & 0o777)
        os.replace(tmp, archive)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def ensure_compiled(spark_home: Path | None = None) -> list[Path]:
    """Byte-compile the worker archives of ``spark_home`` (default: the installed PySpark's);
    returns the archives rewritten. Never raises: this is a speed-up, not a requirement."""
    if spark_home is None:
        try:
            from pyspark.find_spark_home import _find_spark_home

            spark_home = Path(_find_spark_home())
        except Exception:  # noqa: BLE001
            return []
    done = []
    for archive in worker_zips(spark_home):
        try:
            if compile_archive(archive):
                done.append(archive)
        except Exception as e:  # noqa: BLE001 - leave the archive as it was
            log.warning("could not byte-compile %s: %s", archive, e)
    return done


if __name__ == "__main__":  # scripts/setup.sh runs this once after installing
    for path in ensure_compiled():
        print(f"byte-compiled {path}")
