"""The driver JVM maps the installation's class archive when there is one, and only then."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamsql.runtime import class_archive
from streamsql.runtime import spark as sp


def test_an_existing_archive_is_mapped_quietly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    archive = tmp_path / "spark-classes.jsa"
    archive.write_bytes(b"x")
    monkeypatch.setenv("STREAMSQL_CLASS_ARCHIVE", str(archive))
    options = class_archive.jvm_options().split()
    assert f"-XX:SharedArchiveFile={archive}" in options
    # a mismatched archive (another JVM, other jars) is then skipped without a word on stdout
    assert "-Xlog:cds=off" in options and "-Xlog:cds+dynamic=off" in options
    for master in ("local[2]", "spark://h:7077"):
        assert f"-XX:SharedArchiveFile={archive}" in sp.session_settings(master)["spark.driver.extraJavaOptions"]


def test_no_archive_no_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a missing file must not be named: the JVM would then turn off its own base archive too
    monkeypatch.setenv("STREAMSQL_CLASS_ARCHIVE", str(tmp_path / "missing.jsa"))
    assert class_archive.jvm_options() == ""
    assert "SharedArchiveFile" not in sp.session_settings("local[2]")["spark.driver.extraJavaOptions"]
    monkeypatch.setenv("STREAMSQL_CLASS_ARCHIVE", "")  # turned off
    assert class_archive.archive_path() is None and class_archive.jvm_options() == ""


def test_the_default_archive_lives_in_the_python_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STREAMSQL_CLASS_ARCHIVE", raising=False)
    path = class_archive.archive_path()
    assert path is not None and path.name.startswith("spark-classes-") and path.suffix == ".jsa"
    assert path.is_relative_to(Path(__import__("sys").prefix))


def test_the_archive_is_named_by_the_class_path_it_was_made_for(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The JVM ignores an archive dumped with another class path: with and without our local file
    system's jar are two archives, so neither setup leaves the other a useless one."""
    from streamsql.runtime import local_fs

    monkeypatch.delenv("STREAMSQL_CLASS_ARCHIVE", raising=False)
    jar = tmp_path / "local-fs-abc.jar"
    monkeypatch.setattr(local_fs, "jar_path", lambda: jar)
    without = class_archive.archive_path()
    assert "extraClassPath" not in " ".join(local_fs.spark_settings())
    jar.write_bytes(b"PK")
    with_jar = class_archive.archive_path()
    assert without is not None and with_jar is not None
    assert (without.name, with_jar.name) == ("spark-classes-plain.jsa", "spark-classes-local-fs-abc.jsa")
    settings = local_fs.spark_settings("/user/extra.jar")
    assert settings["spark.driver.extraClassPath"] == f"{jar}:/user/extra.jar"  # ours first, the user's kept
    assert settings["spark.hadoop.fs.file.impl"] == local_fs.CLASS_NAME
