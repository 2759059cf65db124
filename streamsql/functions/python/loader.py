"""Find, import and check Python function files, then register them in the function catalog.

Where functions come from (ksqlDB loads UDF jars from ``ksql.extension.dir``; we load ``.py``
files): the seed functions shipped in the package (``streamsql/seeds/functions``, ``udfs/`` in a
checkout) and the directory named by the ``ksql.extension.dir`` property, if set. Files starting with ``_`` are skipped.

Every declared function is checked before anything is registered: its name, its SQL types (they
must parse), its Python shape (the number of parameters matches ``params``; a UDAF class has
initialize/aggregate/merge/map). A problem raises :class:`UdfLoadError` naming the file and the
Python function, and nothing from that file is registered.

On a Spark cluster the functions reach the executors by value (cloudpickle); the directory of
every loaded file must be shipped too, so helper modules a function file imports (say
``_helpers.py`` beside it, on ``sys.path`` by the file's own doing) are importable there as well:
loading says which directories (``functions/python/library.code_directories``), the engine ships them
(:func:`streamsql.runtime.spark.ship_directory`). Nothing here calls Spark.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from streamsql import types as t
from streamsql.errors import StreamsqlError
from streamsql.functions.python import api
from streamsql.functions.python.api import AGGREGATE, FunctionSpec
from streamsql.seeds import FUNCTIONS_DIR

#: the seed functions shipped inside the package
SEED_FUNCTIONS_DIR = FUNCTIONS_DIR
EXTENSION_DIR_PROPERTY = "ksql.extension.dir"
_NAME = re.compile(r"[A-Z_][A-Z0-9_]*\Z")
_UDAF_METHODS = ("initialize", "aggregate", "merge", "map")


class UdfLoadError(StreamsqlError):
    """A Python function file that cannot be loaded; the message names the file and function."""


def parse_sql_type(text: str) -> t.SqlType | None:
    """A declared type; ``ANY`` (parameters only) is None."""
    if text.strip().upper() == "ANY":
        return None
    from streamsql.sql import parse_type  # the SQL parser, loaded when a file declares a type

    return parse_type(text)


def load_file(path: Path) -> list[FunctionSpec]:
    """Import ``path`` and return the functions it declares, all checked."""
    api.drain()  # forget anything recorded outside a load
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:8]
    module_name = f"streamsql_udfs_{re.sub(r'[^0-9a-zA-Z_]', '_', path.stem)}_{digest}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise UdfLoadError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 - any import error is the file's problem, reported as such
        sys.modules.pop(module_name, None)
        api.drain()
        raise UdfLoadError(f"{path}: cannot import: {type(e).__name__}: {e}") from None
    _pickle_by_value(module)
    specs = api.drain()
    for s in specs:
        s.source_file = str(path)
        check(s)
    return specs


def _pickle_by_value(module: object) -> None:
    """Spark ships functions to its Python workers with cloudpickle; a module loaded from a path
    is not importable there, so its functions must travel by value."""
    from pyspark import cloudpickle

    try:
        cloudpickle.register_pickle_by_value(module)
    except (ValueError, TypeError):  # already registered (reload)
        pass


def check(spec: FunctionSpec) -> None:
    """Reject a bad declaration, naming the file and the Python function."""
    where = f"{spec.source_file}: function {spec.python_name} ({spec.name})"
    if not _NAME.match(spec.name):
        raise UdfLoadError(f"{where}: invalid function name '{spec.name}' (letters, digits and _ only)")
    for label, text in [("returns", spec.returns)] + [(f"parameter {i + 1}", p) for i, p in enumerate(spec.params)] \
            + [(f"literal {i + 1}", p) for i, p in enumerate(spec.literals)]:
        if not isinstance(text, str):
            raise UdfLoadError(f"{where}: {label} type must be SQL type text such as 'VARCHAR', got {text!r}")
        if label == "returns" and text.strip().upper() == "ANY":
            raise UdfLoadError(f"{where}: the return type must be a SQL type, not ANY")
        try:
            parse_sql_type(text)
        except StreamsqlError as e:
            raise UdfLoadError(f"{where}: bad {label} type '{text}': {e}") from None
    if spec.kind == AGGREGATE:
        _check_udaf(spec, where)
    else:
        _check_arity(spec.impl, len(spec.params), where, "parameters")


def _check_arity(fn: object, expected: int, where: str, what: str, skip_self: bool = False) -> None:
    if not callable(fn):
        raise UdfLoadError(f"{where}: not callable")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # builtins without a signature: trust the declaration
    params = list(sig.parameters.values())
    if skip_self and params and params[0].name == "self":
        params = params[1:]
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    if not (len(required) <= expected <= len(positional)):
        raise UdfLoadError(f"{where}: declares {expected} {what} but the Python function takes "
                           f"{len(positional)} ({', '.join(p.name for p in positional)})")


def _check_udaf(spec: FunctionSpec, where: str) -> None:
    if not inspect.isclass(spec.impl):
        raise UdfLoadError(f"{where}: @udaf must decorate a class with {', '.join(_UDAF_METHODS)}")
    missing = [m for m in _UDAF_METHODS if not callable(getattr(spec.impl, m, None))]
    if missing:
        raise UdfLoadError(f"{where}: UDAF class lacks method(s) {', '.join(missing)}")
    if len(spec.params) < 1:
        raise UdfLoadError(f"{where}: a UDAF needs at least one parameter (the aggregated column)")
    _check_arity(spec.impl.__init__, len(spec.literals), where, "literal argument(s) for the constructor",
                 skip_self=True)
    impl: Any = spec.impl  # the user's class, checked above to have the methods
    _check_arity(impl.aggregate, 2, where, "arguments for aggregate(value, acc)", skip_self=True)
    _check_arity(impl.merge, 2, where, "arguments for merge(a, b)", skip_self=True)


def function_files(directories: Iterable[Path]) -> list[Path]:
    files: list[Path] = []
    for d in directories:
        if not d.is_dir():
            raise UdfLoadError(f"{EXTENSION_DIR_PROPERTY}: '{d}' is not a directory")
        files += sorted(p for p in d.glob("*.py") if not p.name.startswith("_"))
    return files


def load_directories(directories: Iterable[Path]) -> list[FunctionSpec]:
    """Load and check every file; raises on the first bad one (all-or-nothing per call)."""
    specs: list[FunctionSpec] = []
    for path in function_files(directories):
        specs += load_file(path)
    return specs


def directories_for(extension_dir: str | None) -> list[Path]:
    dirs = [SEED_FUNCTIONS_DIR] if SEED_FUNCTIONS_DIR.is_dir() else []
    if extension_dir:
        extra = Path(extension_dir).expanduser()
        if extra.resolve() != SEED_FUNCTIONS_DIR:
            dirs.append(extra)
    return dirs
