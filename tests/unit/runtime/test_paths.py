"""Names are never paths (runtime/paths.py, issue #52 item 4), without a broker: for any Unicode
name — and any INSERT INTO QUERY_ID — the encoding gives one safe component, distinct names give
distinct components, plain ids keep their directory, and the checked join and removals refuse
whatever would leave the data directory."""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamsql.errors import AnalysisError, CatalogError
from streamsql.runtime import paths
from streamsql.runtime.executors.persistent import check_query_id

#: any code point, lone surrogates included (JSON can carry one into a name)
ANY_CHAR = st.characters(codec=None, exclude_categories=())
#: names an attacker would build: separators, dots, NUL, backslashes, the escape itself, Unicode
HOSTILE_CHAR = st.one_of(st.sampled_from(["/", ".", "..", "\0", "\\", "~", "~~", "%", ":", "\u202e", "é", "🔥"]),
                         ANY_CHAR)
NAMES = st.one_of(st.text(ANY_CHAR, max_size=400),
                  st.lists(HOSTILE_CHAR, max_size=120).map("".join),
                  st.sampled_from(["", ".", "..", "/", "../..", "/etc/passwd", "\0", "a" * 300, "é" * 300]))
_COMPONENT = re.compile(r"[A-Za-z0-9_~-]+")


def _decode(encoded: str) -> str:
    """The inverse of an uncapped component: the encoding is reversible, hence injective."""
    if encoded == "~":
        return ""
    out, i = bytearray(), 0
    while i < len(encoded):
        if encoded[i] == "~":
            out.append(int(encoded[i + 1:i + 3], 16))
            i += 3
        else:
            out += encoded[i].encode()
            i += 1
    return out.decode("utf-8", "surrogatepass")


def _inside(root: Path, path: Path) -> bool:
    real_root, real = os.path.realpath(root), os.path.realpath(path)
    return real != real_root and os.path.commonpath([real_root, real]) == real_root


@given(NAMES)
def test_every_name_is_one_safe_component_that_resolves_inside(name: str) -> None:
    encoded = paths.component(name)
    assert _COMPONENT.fullmatch(encoded) and encoded not in (".", "..")
    assert 1 <= len(encoded) <= paths.MAX_COMPONENT
    data_dir = Path("/srv/streamsql/data")
    for path in (paths.under(data_dir, paths.CHECKPOINTS, encoded),
                 paths.under(data_dir, paths.TABLES, encoded + paths.STORE_SUFFIX + "-journal")):
        assert path.parent == data_dir / path.parent.name and _inside(data_dir, path)
        assert len(path.name.encode()) <= 255


@given(NAMES)
def test_the_encoding_is_reversible_below_the_cap_and_hashed_above_it(name: str) -> None:
    encoded = paths.component(name)
    if "~~" in encoded:  # capped: a readable prefix and the whole name's hash; no uncapped one has "~~"
        prefix, digest = encoded.split("~~")
        assert digest == hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        assert name.startswith(_decode(prefix)) and len(prefix) >= paths.MAX_COMPONENT - 34 - 12
    else:
        assert _decode(encoded) == name


@given(st.lists(NAMES, unique=True, min_size=2, max_size=30))
def test_distinct_names_give_distinct_components(names: list[str]) -> None:
    assert len({paths.component(n) for n in names}) == len(names)


@given(st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=200))
def test_a_plain_id_keeps_its_directory(name: str) -> None:
    """Checkpoints written before the encoding (``CSAS_ORDERS_3``) are found where they are."""
    assert paths.component(name) == name


def test_the_classes_an_attacker_tries() -> None:
    assert paths.component("CSAS_ORDERS_3") == "CSAS_ORDERS_3"
    assert paths.component("..") == "~2e~2e" and paths.component(".") == "~2e"
    assert paths.component("x/../../escape") == "x~2f~2e~2e~2f~2e~2e~2fescape"
    assert paths.component("a\\b") == "a~5cb" and paths.component("a\0b") == "a~00b"
    assert paths.component("") == "~" and paths.component("~") == "~7e"
    assert paths.component("é") == "~c3~a9" and paths.component("\ud800") == "~ed~a0~80"
    assert paths.component("a") != paths.component("A")  # a quoted name is case-sensitive
    long_a, long_b = "a" * 300, "a" * 299 + "b"
    assert len(paths.component(long_a)) <= paths.MAX_COMPONENT
    assert paths.component(long_a) != paths.component(long_b)  # same prefix, distinct hash
    assert paths.component(long_a).startswith("a" * 100)  # readable
    unicode_long = paths.component("é" * 300)
    assert unicode_long.split("~~")[0].endswith("~a9")  # the prefix never ends inside an escape


@pytest.mark.parametrize("part", ["", ".", "..", "a/b", "/etc", "a\0b", "x" * 256, "é" * 128])
def test_the_checked_join_refuses_anything_but_one_component(tmp_path: Path, part: str) -> None:
    with pytest.raises(paths.PathEscapeError, match="nothing was created or deleted"):
        paths.under(tmp_path / "data", paths.CHECKPOINTS, part)
    assert not (tmp_path / "data").exists()


def test_a_link_out_of_the_data_directory_is_refused_and_not_followed(tmp_path: Path) -> None:
    data_dir, outside = tmp_path / "data", tmp_path / "outside"
    (data_dir / paths.CHECKPOINTS).mkdir(parents=True)
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    (data_dir / paths.CHECKPOINTS / "CSAS_X_1").symlink_to(outside)
    with pytest.raises(paths.PathEscapeError, match="outside the data directory"):
        paths.checkpoint_dir(data_dir, "CSAS_X_1")
    with pytest.raises(paths.PathEscapeError):
        paths.remove_tree(data_dir, data_dir / paths.CHECKPOINTS / "CSAS_X_1")
    with pytest.raises(paths.PathEscapeError):
        paths.remove_tree(data_dir, data_dir / paths.CHECKPOINTS / ".." / ".." / "outside")
    with pytest.raises(paths.PathEscapeError):
        paths.remove_tree(data_dir, data_dir)  # the data directory itself is no name's state
    assert (outside / "keep.txt").read_text() == "mine"


@settings(max_examples=60, deadline=None)
@given(st.lists(NAMES, unique=True, max_size=8))
def test_creating_and_removing_every_names_state_touches_only_its_own(names: list[str]) -> None:
    """On a real file system: each name's checkpoint and store are created, then removed, and
    nothing else under the root (beside the data directory: a sentinel) appears or goes."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        data_dir = root / "data"
        (root / "SENTINEL").mkdir()
        (root / "SENTINEL" / "keep.txt").write_text("mine")
        for name in names:
            checkpoint = paths.checkpoint_dir(data_dir, name)
            (checkpoint / "offsets").mkdir(parents=True)
            store = paths.table_store(data_dir, name)
            store.parent.mkdir(parents=True, exist_ok=True)
            store.write_bytes(b"rows")
            store.with_name(store.name + "-wal").write_bytes(b"wal")
        assert sorted(os.listdir(root)) == ["SENTINEL", "data"][:2 if names else 1]
        if names:
            assert len(os.listdir(data_dir / paths.CHECKPOINTS)) == len(names)
            assert len(os.listdir(data_dir / paths.TABLES)) == 2 * len(names)
        for name in names:
            paths.remove_tree(data_dir, paths.checkpoint_dir(data_dir, name))
            paths.remove_table_store(data_dir, name)
        for area in (paths.CHECKPOINTS, paths.TABLES):
            assert not (data_dir / area).exists() or os.listdir(data_dir / area) == []
        assert os.listdir(root / "SENTINEL") == ["keep.txt"]


def test_state_an_earlier_version_kept_under_a_raw_name_is_adopted(tmp_path: Path) -> None:
    """A query over ``"orders.v2"`` had its checkpoint at ``checkpoints/CSAS_orders.v2_4``: it is
    moved to the encoded name when first asked for, so the query resumes; a raw name that
    climbed out, or a link, is never adopted."""
    legacy = tmp_path / paths.CHECKPOINTS / "CSAS_orders.v2_4"
    (legacy / "commits").mkdir(parents=True)
    (tmp_path / paths.TABLES).mkdir()
    for suffix in ("", "-wal"):
        (tmp_path / paths.TABLES / f"CTAS_é_5.sqlite{suffix}").write_text(suffix or "db")
    checkpoint = paths.checkpoint_dir(tmp_path, "CSAS_orders.v2_4")
    assert checkpoint.name == "CSAS_orders~2ev2_4" and (checkpoint / "commits").is_dir() and not legacy.exists()
    store = paths.table_store(tmp_path, "CTAS_é_5")
    assert store.name == "CTAS_~c3~a9_5.sqlite" and store.read_text() == "db"
    assert store.with_name(store.name + "-wal").read_text() == "-wal"
    assert sorted(os.listdir(tmp_path / paths.TABLES)) == ["CTAS_~c3~a9_5.sqlite", "CTAS_~c3~a9_5.sqlite-wal"]
    # a traversal is not a legacy name: what it points at stays where it is
    (tmp_path / paths.CHECKPOINTS / "CSAS_x").mkdir()
    (tmp_path / paths.CHECKPOINTS / "other").mkdir()
    paths.checkpoint_dir(tmp_path, "CSAS_x/../other")
    assert (tmp_path / paths.CHECKPOINTS / "other").is_dir()
    (tmp_path / "outside").mkdir()
    (tmp_path / paths.CHECKPOINTS / "CSAS_l.k_6").symlink_to(tmp_path / "outside")
    assert paths.checkpoint_dir(tmp_path, "CSAS_l.k_6").name == "CSAS_l~2ek_6"
    assert (tmp_path / paths.CHECKPOINTS / "CSAS_l.k_6").is_symlink() and (tmp_path / "outside").is_dir()
    # a raw name made of the encoding's own characters may be another name's encoded state:
    # the empty name's checkpoint is "~", which the name "~" must not take (found by hypothesis)
    (paths.checkpoint_dir(tmp_path, "") / "commits").mkdir(parents=True)
    assert paths.checkpoint_dir(tmp_path, "~").name == "~7e"
    assert (tmp_path / paths.CHECKPOINTS / "~" / "commits").is_dir()


@given(st.one_of(st.text(ANY_CHAR, max_size=60), st.lists(HOSTILE_CHAR, max_size=30).map("".join)))
def test_a_query_id_is_refused_or_is_its_own_directory(requested: str) -> None:
    """INSERT INTO's QUERY_ID as ksqlDB checks it: whatever passes is ``[A-Za-z0-9_]+`` (so its
    checkpoint is the plain id), the rest is refused with ksqlDB's message."""
    query_id = requested.upper()
    try:
        check_query_id(query_id, {}, new=True)
    except AnalysisError as e:
        assert str(e) in (f"Query IDs may contain only alphanumeric characters and '_'. Got: '{query_id}'",
                          f"Query IDs must not start with a reserved query ID prefix (INSERTQUERY_, CTAS_, "
                          f"CSAS_, CST_). Got '{query_id}'.")
    else:
        assert re.fullmatch(r"[A-Za-z0-9_]+", query_id) and paths.component(query_id) == query_id


def test_query_id_rules_in_ksqldbs_order() -> None:
    check_query_id("MY_QUERY", {}, new=True)
    with pytest.raises(AnalysisError, match=r"reserved query ID prefix .* Got 'CSAS_../X'\.$"):
        check_query_id("CSAS_../X", {}, new=True)  # the prefix is checked first, as ksqlDB does
    with pytest.raises(AnalysisError, match=r"only alphanumeric characters and '_'\. Got: '\.\./\.\./EVIL'$"):
        check_query_id("../../EVIL", {}, new=True)
    with pytest.raises(CatalogError, match=r"^Query ID 'MY_QUERY' already exists\.$"):
        check_query_id("MY_QUERY", {"MY_QUERY": object()}, new=True)  # type: ignore[dict-item]
    check_query_id("../../EVIL", {}, new=False)  # a replayed one was accepted by an earlier version


def test_connectors_differing_in_punctuation_have_their_own_query_and_checkpoint(tmp_path: Path) -> None:
    """``a.b``, ``a_b`` and ``a-b`` were one query id (``CONNECTOR_a_b``): one checkpoint shared
    by three connectors. Each is now its own; a plain name's id is what it always was."""
    from streamsql.runtime.executors.connectors import query_id

    names = ["a.b", "a_b", "a-b", "a b", "a/b", "A_B"]
    ids = [query_id(n) for n in names]
    assert len(set(ids)) == len(names) and query_id("ES_SINK") == "CONNECTOR_ES_SINK"
    dirs = {paths.checkpoint_dir(tmp_path, i) for i in ids}
    assert len(dirs) == len(names) and all(d.parent == tmp_path / paths.CHECKPOINTS for d in dirs)


def test_a_connector_resumes_from_the_checkpoint_its_former_id_kept(tmp_path: Path) -> None:
    from streamsql.runtime.executors.connectors import adopt_former_checkpoint, query_id

    former = paths.checkpoint_dir(tmp_path, "CONNECTOR_my_sink")
    (former / "offsets").mkdir(parents=True)
    # another connector owns the former id as its own: its checkpoint is never taken
    adopt_former_checkpoint(tmp_path, "my.sink", ["my.sink", "my_sink"])
    assert (former / "offsets").is_dir()
    adopt_former_checkpoint(tmp_path, "my.sink", ["my.sink"])
    assert not former.exists()
    assert (paths.checkpoint_dir(tmp_path, query_id("my.sink")) / "offsets").is_dir()
