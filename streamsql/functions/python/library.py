"""The engine's entry points for Python functions: load them into the catalog, install them in Spark.

Loading is process-wide (the function catalog is), and cached on the files' paths and
modification times: engines that start in the same process (tests, the conformance runner) do
not re-import unchanged files, and Spark registration only repeats when something changed.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamsql.functions.catalog import registry
from streamsql.functions.python import loader, registration, runtime
from streamsql.functions.python.api import FunctionSpec
from streamsql.kafka.processing_log import LogTarget

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

_lock = threading.Lock()
_state: dict[str, Any] = {"key": None, "specs": {}, "problems": [], "generation": 0, "directories": ()}


def _files_key(directories: list[Path]) -> tuple:
    files = loader.function_files([d for d in directories if d.is_dir()])
    return tuple(str(d) for d in directories) + tuple((str(f), f.stat().st_mtime_ns) for f in files)


def load(extension_dir: str | None) -> list[str]:
    """Load the seed functions (``streamsql/seeds/functions``) and ``extension_dir`` into the function catalog. Returns
    one problem line per file or function that could not be loaded (the others are loaded)."""
    directories = loader.directories_for(extension_dir)
    with _lock:
        missing = [d for d in directories if not d.is_dir()]
        problems = [f"{loader.EXTENSION_DIR_PROPERTY}: '{d}' is not a directory" for d in missing]
        directories = [d for d in directories if d.is_dir()]
        key = _files_key(directories)
        if key == _state["key"]:
            return problems + list(_state["problems"])
        specs: list[FunctionSpec] = []
        loaded: dict[Path, None] = {}
        for path in loader.function_files(directories):
            try:
                specs += loader.load_file(path)
            except loader.UdfLoadError as e:
                problems.append(str(e))
            else:
                loaded[path.parent.resolve()] = None
        problems += registration.register(registry(), specs)
        registered = registration.python_function_names()
        by_name: dict[str, list[FunctionSpec]] = {}
        for s in specs:
            if s.name in registered:
                by_name.setdefault(s.name, []).append(s)
        _state.update(key=key, specs=by_name, problems=problems, generation=_state["generation"] + 1,
                      directories=tuple(loaded))
        for p in problems:
            log.error("Python functions: %s", p)
        return list(problems)


def code_directories() -> tuple[Path, ...]:
    """The directories of the function files loaded: a cluster's executors need them importable
    (the helper modules a file imports; the functions travel by value), so the engine ships
    them (``runtime/spark.ship_directory``)."""
    with _lock:
        return tuple(_state["directories"])


def install(spark: SparkSession, bootstrap: str | None, processing_log_topic: str | None) -> None:
    """Make the loaded functions, and the built-in functions that run in Python (the date
    functions' pattern check), callable in ``spark``'s SQL, reporting errors to the given
    processing-log topic."""
    with _lock:
        specs, generation = _state["specs"], _state["generation"]
    runtime.install(spark, specs, generation, runtime.ErrorLog(LogTarget(bootstrap, processing_log_topic)))
