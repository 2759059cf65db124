"""Reading ksqlDB's QTT files into cases: JSON with comments, templated cases (``{FORMAT}``,
``{CONFIG}``) expanded one case per value, and ksql-test-runner's trio of files.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: seconds a case may run before it fails as timed out (``streamsql test --timeout``)
DEFAULT_TIMEOUT_S = 120.0


def strip_json_comments(text: str) -> str:
    """Remove ``//`` and ``/* */`` comments outside strings (Jackson's ALLOW_COMMENTS)."""
    out: list[str] = []
    i, n = 0, len(text)
    in_str = False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_str = False
            i += 1
            continue
        if c == '"':
            in_str = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


class JsonDecimal(float):
    """A JSON number written with a fraction or an exponent, as a QTT file gives it: a float that
    keeps its literal (``text``). ksqlDB's harness reads expected records with exact BigDecimals
    (``TestJsonMapper``: USE_BIG_DECIMAL_FOR_FLOATS, exact decimal nodes), so ``1.10`` expects a
    DECIMAL of scale 2; used as a float everywhere else (inputs, timestamps)."""

    __slots__ = ("text",)
    text: str

    def __new__(cls, text: str) -> JsonDecimal:
        number = float.__new__(cls, text)
        number.text = text
        return number

    def __reduce__(self) -> tuple[type, tuple[str]]:  # copies (copy_case) keep the literal
        return (JsonDecimal, (self.text,))


def load_json(path: Path) -> Any:
    """A QTT (or ksql-test-runner) JSON file, its fractional numbers as :class:`JsonDecimal`."""
    return json.loads(strip_json_comments(path.read_text(encoding="utf-8")), parse_float=JsonDecimal)


@dataclass
class QttCase:
    """One runnable test: a QTT test node after ``format``/``config`` expansion."""

    id: str
    file: str  # file name, e.g. "project-filter.json"
    name: str
    statements: list[str]
    inputs: list[dict[str, Any]] = field(default_factory=list)
    outputs: list[dict[str, Any]] = field(default_factory=list)
    expected_exception: dict[str, Any] | None = None
    properties: dict[str, Any] = field(default_factory=dict)
    topics: list[dict[str, Any]] = field(default_factory=list)
    post: dict[str, Any] | None = None
    skip_reason: str | None = None


def substitute(node: Any, token: str, value: str) -> Any:
    if isinstance(node, str):
        return node.replace(token, value)
    if isinstance(node, list):
        return [substitute(x, token, value) for x in node]
    if isinstance(node, dict):
        return {k: substitute(v, token, value) for k, v in node.items()}
    return node


def expand_test(test: dict[str, Any], stem: str, file: str) -> list[QttCase]:
    """The cases of one test node: one per ``format`` × ``config`` value."""
    name = str(test.get("name", "<unnamed>"))
    variants: list[tuple[str, dict[str, Any]]] = [(name, test)]
    formats = test.get("format")
    if formats:
        variants = [(f"{n} - {f}", substitute(t, "{FORMAT}", str(f))) for n, t in variants for f in formats]
    configs = test.get("config")
    if configs:
        variants = [(f"{n} - {c}", substitute(t, "{CONFIG}", str(c))) for n, t in variants for c in configs]
    cases = []
    for case_name, node in variants:
        skip = None
        if node.get("enabled") is False:
            skip = "disabled in the corpus (enabled: false)"
        cases.append(QttCase(
            id=f"{stem}/{case_name}", file=file, name=case_name,
            statements=[str(s) for s in node.get("statements", [])],
            inputs=list(node.get("inputs") or []), outputs=list(node.get("outputs") or []),
            expected_exception=node.get("expectedException"),
            properties={str(k): v for k, v in (node.get("properties") or {}).items()},
            topics=list(node.get("topics") or []), post=node.get("post"), skip_reason=skip,
        ))
    return cases


def load_file(path: Path) -> list[QttCase]:
    data = load_json(path)
    tests = data.get("tests", []) if isinstance(data, dict) else []
    out: list[QttCase] = []
    for test in tests:
        out.extend(expand_test(test, path.stem, path.name))
    return out


def collect_files(paths: Sequence[Path]) -> list[Path]:
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files.extend(sorted(p.glob("*.json")))
        elif p.exists():
            files.append(p)
        else:
            raise FileNotFoundError(f"no such file or directory: {p}")
    return files


def load_test_runner_case(sql: Path, input_file: Path | None, output_file: Path) -> QttCase:
    """ksql-test-runner's trio (statements.sql, input.json ``{"inputs": [...]}``, output.json
    ``{"outputs": [...]}``) as one case."""
    text = sql.read_text(encoding="utf-8")
    inputs = load_json(input_file).get("inputs", []) if input_file else []
    outputs = load_json(output_file).get("outputs", [])
    return QttCase(id=f"{sql.stem}/{sql.name}", file=sql.name, name=sql.name, statements=[text],
                   inputs=list(inputs), outputs=list(outputs))


def copy_case(case: QttCase, **changes: Any) -> QttCase:
    c = copy.deepcopy(case)
    for k, v in changes.items():
        setattr(c, k, v)
    return c
