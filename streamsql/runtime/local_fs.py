"""Hadoop's local file system for the driver JVM, without a ``chmod`` process per file.

Spark writes every checkpoint (offsets, commits, state-store files and their ``.crc`` siblings,
the directories holding them) through Hadoop's ``LocalFileSystem``, which sets each new file's and
directory's permission. Without Hadoop's native library (PySpark ships none) that is a ``chmod``
process forked from the JVM, on the micro-batch's own thread: measured on the QTT corpus, 2,234
processes in 60 s, a dozen or more per micro-batch of every query. Our ``NioLocalFileSystem``
(``java/NioLocalFileSystem.java``) is Hadoop's class with one method changed: the permission is
set through ``java.nio`` in the JVM. Same files, same permissions, same checksums; RocksDB's state
store, which requires a ``LocalFileSystem``, gets one.

The class is compiled once per installation by ``python -m streamsql.runtime.local_fs`` (run by
``scripts/setup.sh`` and before the class archive is built, whose class path must include it)
into a jar named by a hash of the source, beside the class archive in ``sys.prefix``. A session
uses it when that jar exists; without a JDK's ``javac`` none is built and sessions run Hadoop's
own class, as before. Local mode only: on a cluster the executors' class path is the cluster's.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

log = logging.getLogger(__name__)

CLASS_NAME = "streamsql.hadoop.NioLocalFileSystem"
SOURCE = Path(__file__).resolve().parent / "java" / "NioLocalFileSystem.java"


def jar_path() -> Path:
    """Where the compiled class lives: named by the source's hash, so an edited source is a new
    jar (and an old jar is never used for it)."""
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    return Path(sys.prefix) / "share" / "streamsql" / f"local-fs-{digest}.jar"


def spark_settings(extra_class_path: str | None = None) -> dict[str, str]:
    """The local session's settings that put the class in force (none when it was not built):
    the jar first on the driver's class path (before ``extra_class_path``, the user's), and
    Hadoop's ``file:`` scheme mapped to it."""
    jar = jar_path()
    if not jar.is_file():
        return {}
    return {
        "spark.driver.extraClassPath": os.pathsep.join(p for p in (str(jar), extra_class_path) if p),
        "spark.hadoop.fs.file.impl": CLASS_NAME,
    }


def _javac() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "javac").is_file():
        return str(Path(home) / "bin" / "javac")
    return shutil.which("javac")


def _hadoop_api_jar() -> Path | None:
    import pyspark

    jars = sorted((Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar"))
    return jars[-1] if jars else None


def build(target: Path | None = None) -> Path | None:
    """Compile the class into ``target`` (default :func:`jar_path`); returns the jar, or None when
    it cannot be built here (no ``javac``, no Hadoop jar, a compile error: logged)."""
    target = target or jar_path()
    javac, api = _javac(), _hadoop_api_jar()
    if javac is None or api is None:
        log.info("no %s: sessions use Hadoop's own local file system", "javac" if javac is None else "Hadoop API jar")
        return None
    with tempfile.TemporaryDirectory(prefix="streamsql-local-fs-") as tmp:
        classes = Path(tmp) / "classes"
        result = subprocess.run([javac, "--release", "17", "-nowarn", "-cp", str(api), "-d", str(classes), str(SOURCE)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
        if result.returncode != 0:
            log.warning("the local file system class did not compile: %s", result.stdout.decode(errors="replace"))
            return None
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\n\r\n")
            for f in sorted(classes.rglob("*.class")):
                jar.write(f, f.relative_to(classes).as_posix())
        partial.replace(target)
    log.info("local file system class built: %s", target)
    return target


def ensure_built() -> Path | None:
    """The jar, built first if missing (a no-op once built)."""
    jar = jar_path()
    return jar if jar.is_file() else build(jar)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streamsql.runtime.local_fs",
                                     description="Compile the driver JVM's local file system class.")
    parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        ensure_built()
    except (OSError, subprocess.SubprocessError) as e:  # not an error of the setup: Hadoop's class is used
        log.warning("the local file system class could not be built: %s", e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
