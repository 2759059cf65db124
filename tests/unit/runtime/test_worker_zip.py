"""The byte-compiled worker archive (streamsql/runtime/worker_zip.py): modules import from it
with the stored bytecode, the result is the same code, and a second call leaves it alone."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from streamsql.runtime import worker_zip


def _spark_home(tmp_path: Path) -> Path:
    lib = tmp_path / "python" / "lib"
    lib.mkdir(parents=True)
    with zipfile.ZipFile(lib / "pyspark.zip", "w") as zf:
        zf.writestr("fakespark/__init__.py", "VALUE = 41\n")
        zf.writestr("fakespark/sub.py", "from fakespark import VALUE\n\ndef answer():\n    return VALUE + 1\n")
        zf.writestr("fakespark/data.txt", "not code\n")
        zf.writestr("fakespark/broken.py", "def (:\n")  # compiles on no Python: left as source
    return tmp_path


def _import_via_zip(archive: Path) -> str:
    code = ("import fakespark.sub as s, fakespark; "
            "print(s.answer(), type(s.__spec__.loader).__name__, s.__file__.endswith('.pyc'))")
    return subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": str(archive)},
                          capture_output=True, text=True, check=True).stdout.strip()


def test_archive_gets_bytecode_and_imports_from_it(tmp_path: Path) -> None:
    home = _spark_home(tmp_path)
    archive = home / "python" / "lib" / "pyspark.zip"
    assert _import_via_zip(archive) == "42 zipimporter False"  # compiled from source on import
    assert worker_zip.ensure_compiled(home) == [archive]
    assert worker_zip.is_compiled(archive)
    names = set(zipfile.ZipFile(archive).namelist())
    assert {"fakespark/__init__.pyc", "fakespark/sub.pyc", "fakespark/data.txt", "fakespark/sub.py"} <= names
    assert "fakespark/broken.pyc" not in names
    assert _import_via_zip(archive) == "42 zipimporter True"  # same code, from the stored bytecode
    before = archive.stat().st_mtime_ns
    assert worker_zip.ensure_compiled(home) == []  # already done: untouched
    assert archive.stat().st_mtime_ns == before


def test_missing_spark_home_is_not_an_error(tmp_path: Path) -> None:
    assert worker_zip.ensure_compiled(tmp_path / "nowhere") == []
