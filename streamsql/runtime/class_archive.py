"""A class-data sharing (CDS) archive of Spark's classes for the driver JVM.

A SparkSession's JVM loads and verifies ~20,000 classes from Spark's jars before and during its
first queries; measured on 2 cores, session start took ~8 s, and ~4 s of it was class loading.
Java 17 can write the classes a run loaded into an archive when the JVM exits
(``-XX:ArchiveClassesAtExit``) and map that archive into later JVMs
(``-XX:SharedArchiveFile``), already parsed and verified: session start ~8 s → ~4 s, a first
query's ``execute`` 1.7 → 1.0 s (docs/performance.md). Every command that starts Spark gains:
the shell, ``run``, ``server``, ``test`` and the test suite.

The archive is built once per installation by ``python -m streamsql.setup.class_archive``
(``scripts/setup.sh`` runs it; ``streamsql/setup/class_archive.py``, a setup step outside the
engine's imports, since it runs the engine). This module only finds it and maps it.

Using it is safe whatever happens later: the JVM checks that the archive was written by the same
JVM build with the same class path (jar paths, sizes and times) and otherwise runs without it,
silently (its CDS log is switched off). A missing archive only means the old start-up time. It
lives in the Python environment (``sys.prefix``), beside the PySpark jars it describes, and
``STREAMSQL_CLASS_ARCHIVE`` names another path (an empty value turns it off).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from streamsql.runtime import local_fs

#: the JVM's own messages about the archive (a mismatch, classes it skips) would go to stdout
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def archive_path() -> Path | None:
    """Where this installation's archive lives (None: turned off)."""
    configured = os.environ.get("STREAMSQL_CLASS_ARCHIVE")
    if configured is not None:
        return Path(configured) if configured else None
    # the archive is valid for one class path only: one with our local file system's jar on it
    # (runtime/local_fs.py) is another archive than one without
    jar = local_fs.jar_path()
    return Path(sys.prefix) / "share" / "streamsql" / f"spark-classes-{jar.stem if jar.is_file() else 'plain'}.jsa"


def jvm_options() -> str:
    """The driver JVM's options to map the archive, or "" when there is none."""
    path = archive_path()
    if path is None or not path.is_file():
        return ""
    return f"-XX:SharedArchiveFile={path} {QUIET}"
