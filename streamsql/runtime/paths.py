"""Where a name's state lives in the data directory: names are never paths.

Query ids, table-store files and connector checkpoints are named after things a client chooses
(a quoted source name may be ``"x/../../etc"``, an INSERT INTO's ``QUERY_ID`` anything). Each
such name becomes one path component by :func:`component`, an injective encoding that keeps
``[A-Za-z0-9_-]`` as it is (so ``CSAS_ORDERS_3``'s checkpoint stays where every earlier version
put it) and writes every other character as ``~`` and the hex of its UTF-8 bytes (``.`` is
``~2e``, ``/`` is ``~2f``); a component never contains a separator, NUL, or is ``.`` or ``..``.
``~`` and hex digits are plain in a URI too, so Hadoop's paths (Spark's checkpoint location)
take the component as it is. A name whose encoding would pass :data:`MAX_COMPONENT` characters
(file names end at 255 bytes) keeps a readable prefix and ends in ``~~`` and a hash of the
whole name: no uncapped encoding contains ``~~``.

Every path made from a name is joined by :func:`under`, which refuses (:class:`PathEscapeError`,
nothing created or deleted) a part that is not one safe component or a result that resolves
outside the data directory; deletions go through :func:`remove_tree` / :func:`remove_table_store`,
which check again. The layout — ``checkpoints/<query id>/``, ``tables/<store>.sqlite`` — is
named here once (:func:`checkpoint_dir`, :func:`table_store`).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
from pathlib import Path

from streamsql.errors import DataDirError

log = logging.getLogger("streamsql")

#: the data directory's areas of per-name state
CHECKPOINTS = "checkpoints"
TABLES = "tables"
#: a table store's file, and the files SQLite keeps beside it
STORE_SUFFIX = ".sqlite"
STORE_SIDE_FILES = ("-wal", "-shm", "-journal")

#: the characters a component keeps as they are: every plain query id is its own directory name
_PLAIN = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_ESCAPE = "~"
#: the characters of every component: a raw name made of them alone may be another's encoding
_ENCODED_ONLY = re.compile(r"[A-Za-z0-9_~-]+")
#: the longest component: 255 bytes per file name, less room for what is appended to a component
#: (``.sqlite-journal``)
MAX_COMPONENT = 200
#: hex digits of the SHA-256 of a capped name kept in its component
_HASH_DIGITS = 32


class PathEscapeError(DataDirError):
    """A path made from a name would lie outside the data directory (or is not one component).
    The encoding makes this impossible for any name; it is raised, and nothing is touched, if a
    caller joins an unencoded name or a link inside the data directory points out of it."""


def component(name: str) -> str:
    """``name`` as one safe path component: injective (distinct names, distinct components, on
    a case-sensitive file system), plain names unchanged, never empty, ``.``, ``..``, nor
    containing ``/``, ``\\`` or NUL, at most :data:`MAX_COMPONENT` ASCII characters."""
    if not name:
        return _ESCAPE  # no other name encodes to a lone escape
    pieces = [ch if ch in _PLAIN else _escaped(ch) for ch in name]
    encoded = "".join(pieces)
    if len(encoded) <= MAX_COMPONENT:
        return encoded
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_DIGITS]
    prefix, room = [], MAX_COMPONENT - 2 - _HASH_DIGITS
    for piece in pieces:  # whole characters: the prefix stays readable
        room -= len(piece)
        if room < 0:
            break
        prefix.append(piece)
    return f"{''.join(prefix)}{_ESCAPE}{_ESCAPE}{digest}"


def _escaped(ch: str) -> str:
    """``~`` and two lowercase hex digits per UTF-8 byte (a lone surrogate, which JSON can carry
    into a name, passes through as its three bytes)."""
    return "".join(f"{_ESCAPE}{b:02x}" for b in ch.encode("utf-8", "surrogatepass"))


def under(data_dir: Path, *parts: str) -> Path:
    """``data_dir / parts…``, each part one path component (a fixed area name or a
    :func:`component`), checked: PathEscapeError if a part is not a single component or the
    path, links resolved, lies outside ``data_dir``. Checks only; creates nothing."""
    for part in parts:
        if not _one_component(part):
            raise PathEscapeError(f"internal error: {part!r} is not a single path component inside the data "
                                  f"directory {data_dir}; nothing was created or deleted")
    path = data_dir.joinpath(*parts)
    _check_inside(data_dir, path)
    return path


def _one_component(part: str) -> bool:
    """Whether ``part`` names one entry of a directory: not empty, ``.`` or ``..``, no separator
    or NUL, a file name the file system can spell (at most 255 bytes, no lone surrogate)."""
    try:
        spelled = os.fsencode(part)
    except UnicodeEncodeError:
        return False
    return (part not in ("", ".", "..") and "/" not in part and "\0" not in part
            and (os.altsep is None or os.altsep not in part) and len(spelled) <= 255)


def _check_inside(data_dir: Path, path: Path) -> None:
    root = os.path.realpath(data_dir)
    resolved = os.path.realpath(path)
    if resolved == root or os.path.commonpath([root, resolved]) != root:
        raise PathEscapeError(f"internal error: {path} resolves to {resolved}, outside the data directory "
                              f"{data_dir}; nothing was created or deleted")


def checkpoint_dir(data_dir: Path, query_id: str) -> Path:
    """The checkpoint directory of query (or connector) ``query_id``. One an earlier streamsql
    wrote under the raw id (a name with a ``.``, a space, a non-ASCII letter) is moved to its
    encoded name the first time it is asked for, so the query resumes from it."""
    path = under(data_dir, CHECKPOINTS, component(query_id))
    _adopt_legacy(data_dir, CHECKPOINTS, query_id, "", path)
    return path


def table_store(data_dir: Path, store_name: str) -> Path:
    """The SQLite file of the table store ``store_name`` (its writer query's id, or the table's
    name); an earlier streamsql's file under the raw name is moved here, as checkpoints are."""
    path = under(data_dir, TABLES, component(store_name) + STORE_SUFFIX)
    _adopt_legacy(data_dir, TABLES, store_name, STORE_SUFFIX, path, STORE_SIDE_FILES)
    return path


def _adopt_legacy(data_dir: Path, area: str, name: str, suffix: str, path: Path,
                  side_files: tuple[str, ...] = ()) -> None:
    """Move the state an earlier version kept at ``area/<name><suffix>`` (and its side files) to
    ``path``, when that was one entry of the area and ``path`` does not exist yet. Only a name
    with a character no encoding contains (a ``.``, a space, a non-ASCII letter) is adopted:
    ``a~2eb`` may be another name's encoded state, and a name that climbed out (``x/../y``) or
    a link is never followed."""
    if path.exists() or not name or _ENCODED_ONLY.fullmatch(name):
        return
    for side in ("", *side_files):
        try:
            legacy = under(data_dir, area, name + suffix + side)
        except PathEscapeError:
            return
        if legacy.exists() and not legacy.is_symlink():
            log.info("moving %s to %s (state kept under its raw name by an earlier streamsql)", legacy, path.name)
            os.rename(legacy, path.with_name(path.name + side))


def remove_tree(data_dir: Path, path: Path) -> None:
    """Delete the directory ``path`` (a checkpoint, an area) after checking it lies inside
    ``data_dir``; a missing one is fine."""
    _check_inside(data_dir, path)
    shutil.rmtree(path, ignore_errors=True)


def remove_table_store(data_dir: Path, store_name: str) -> None:
    """Delete the table store ``store_name``'s file and SQLite's files beside it."""
    path = table_store(data_dir, store_name)
    for suffix in ("", *STORE_SIDE_FILES):
        under(data_dir, TABLES, path.name + suffix).unlink(missing_ok=True)
