"""An engine's Python functions: loaded into that engine's function registry, installed in Spark.

Each engine owns one :class:`PythonFunctions` over its own registry, so two engines in one
process (tests, the conformance runner, an embedded engine beside a server) with different
``ksql.extension.dir`` never see each other's functions, in planning or in Spark: each set of
files registers its Spark functions under its own namespace (a digest of the files' paths and
modification times).

Importing the files is cached process-wide on those same paths and modification times: engines
that load unchanged files do not import them again, and the Spark functions of a namespace are
registered once per SparkSession.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from streamsql.functions.python import loader, registration, runtime
from streamsql.functions.python.api import AGGREGATE, FunctionSpec
from streamsql.functions.registry import FunctionRegistry
from streamsql.kafka.processing_log import LogTarget

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Imported:
    """The functions one set of files declares (every file imported once per modification)."""

    specs: tuple[FunctionSpec, ...]
    problems: tuple[str, ...]
    #: the directories of the files imported (a cluster's executors need them importable)
    directories: tuple[Path, ...]


#: imports by files key; a few, for engines with different directories in one process
_imports: dict[tuple[str, ...], _Imported] = {}
_IMPORTS_KEPT = 8
#: imports run one at a time (the @udf decorators record into one list, ``api.drain``)
_import_lock = threading.Lock()


def _files_key(directories: list[Path]) -> tuple[str, ...]:
    files = loader.function_files(directories)
    return tuple(str(d) for d in directories) + tuple(f"{f}@{f.stat().st_mtime_ns}" for f in files)


def _import(directories: list[Path]) -> tuple[tuple[str, ...], _Imported]:
    with _import_lock:
        key = _files_key(directories)
        imported = _imports.get(key)
        if imported is None:
            specs: list[FunctionSpec] = []
            problems: list[str] = []
            loaded: dict[Path, None] = {}
            for path in loader.function_files(directories):
                try:
                    specs += loader.load_file(path)
                except loader.UdfLoadError as e:
                    problems.append(str(e))
                else:
                    loaded[path.parent.resolve()] = None
            imported = _Imported(tuple(specs), tuple(problems), tuple(loaded))
            while len(_imports) >= _IMPORTS_KEPT:
                _imports.pop(next(iter(_imports)))
            _imports[key] = imported
        return key, imported


class PythonFunctions:
    """The Python functions of one engine: loaded into ``registry`` (the engine's), their
    directories to ship, their Spark functions to install."""

    def __init__(self, registry: FunctionRegistry) -> None:
        self.registry = registry
        self._lock = threading.Lock()
        self._key: tuple[str, ...] | None = None
        self._problems: list[str] = []
        self._names: set[str] = set()
        self._specs: dict[str, list[FunctionSpec]] = {}
        self._namespace = ""
        self._directories: tuple[Path, ...] = ()

    def load(self, extension_dir: str | None) -> list[str]:
        """Load the seed functions (``streamsql/seeds/functions``) and ``extension_dir`` into the
        registry, replacing what a previous load put there. Returns one problem line per file or
        function that could not be loaded (the others are loaded)."""
        directories = loader.directories_for(extension_dir)
        problems = [f"{loader.EXTENSION_DIR_PROPERTY}: '{d}' is not a directory" for d in directories
                    if not d.is_dir()]
        key, imported = _import([d for d in directories if d.is_dir()])
        with self._lock:
            if key != self._key:
                namespace = hashlib.sha1(repr(key).encode()).hexdigest()[:10]
                found, names = registration.register(self.registry, imported.specs, self._names, namespace)
                by_name: dict[str, list[FunctionSpec]] = {}
                for s in imported.specs:
                    if s.name in names:
                        by_name.setdefault(s.name, []).append(s)
                self._key, self._names, self._specs, self._namespace = key, names, by_name, namespace
                self._problems = list(imported.problems) + found
                self._directories = imported.directories
                for p in self._problems:
                    log.error("Python functions: %s", p)
            return problems + self._problems

    def code_directories(self) -> tuple[Path, ...]:
        """The directories of the function files loaded: a cluster's executors need them importable
        (the helper modules a file imports; the functions travel by value), so the engine ships
        them (``runtime/spark.ship_directory``)."""
        with self._lock:
            return self._directories

    def names(self) -> set[str]:
        """The names of the Python functions loaded."""
        with self._lock:
            return set(self._names)

    def aggregates(self, names: Sequence[str]) -> dict[str, list[FunctionSpec]]:
        """The overloads of those of ``names`` that are this engine's Python UDAFs: a query
        carries them to Spark's workers (``physical/aggregate.AggregateOperator``)."""
        with self._lock:
            return {n: list(self._specs[n]) for n in names
                    if n in self._specs and self._specs[n][0].kind == AGGREGATE}

    def install(self, spark: SparkSession, bootstrap: str | None, processing_log_topic: str | None) -> None:
        """Make the loaded functions callable in ``spark``'s SQL (see :func:`install`)."""
        with self._lock:
            specs, namespace = self._specs, self._namespace
        runtime.install(spark, specs, namespace, runtime.ErrorLog(LogTarget(bootstrap, processing_log_topic)))


def install(spark: SparkSession, functions: PythonFunctions | None, bootstrap: str | None,
            processing_log_topic: str | None) -> None:
    """Make the built-in functions that run in Python (the date functions' pattern and zone
    checks) and ``functions`` (an engine's Python functions, if any) callable in ``spark``'s
    SQL, reporting errors to the given processing-log topic."""
    if functions is not None:
        functions.install(spark, bootstrap, processing_log_topic)
    else:
        runtime.install(spark, {}, "", runtime.ErrorLog(LogTarget(bootstrap, processing_log_topic)))
