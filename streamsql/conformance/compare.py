"""Comparing a topic's records with the expected ones: key, value (JSON as data; numbers
numerically), timestamp, window and headers (as ksqlDB's ``TestExecutor``: a record expected
without headers must have none); per partition when a topic has several.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from streamsql.conformance.cases import JsonDecimal
from streamsql.conformance.records import Undecodable


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float, Decimal)) and not isinstance(x, bool)


def _literal(expected: float | Decimal) -> str:
    """An expected fractional number's text: the file's literal (:class:`JsonDecimal`), else a
    float's shortest text."""
    if isinstance(expected, Decimal):
        return str(expected)
    return expected.text if isinstance(expected, JsonDecimal) else repr(expected)


def _same_decimal(want: Decimal, actual: Decimal) -> bool:
    """``BigDecimal.equals``: the same number at the same scale (``5.40`` is not ``5.4``)."""
    return want == actual and want.as_tuple().exponent == actual.as_tuple().exponent


def _scale(d: Decimal) -> int:
    exponent = d.as_tuple().exponent
    return -exponent if isinstance(exponent, int) else 0


def decimal_matches_literal(text: str, actual: Decimal) -> bool:
    """An expected fractional literal against a DECIMAL, as ksqlDB's ``compareDecimal``
    (``BigDecimal.equals``: same number, same scale), for a literal that kept ksqlDB's text.

    A literal that is a double's shortest text (``10.0``, ``10.123451234512345``) may be ksqlDB's
    text after a trip through a double, and the corpus's all are (docs/conformance.md: none has a
    trailing zero past ``.0``, and exponents read ``8e+18``): ksqlDB's ``10.0000`` reads ``10.0``
    there. For such a literal the DECIMAL matches when it is that double and its scale at least
    the literal's: ``10.0`` matches ``10.0000`` but not ``10``."""
    if not actual.is_finite():
        return False
    try:
        want = Decimal(text)
    except InvalidOperation:
        return False
    if not want.is_finite():
        return False
    if repr(float(text)) != text:
        return _same_decimal(want, actual)  # not a double's text: ksqlDB's own literal
    exponent_form = "e" in text.lower()
    return float(actual) == float(text) and (exponent_form or _scale(actual) >= _scale(want))


def number_equal(expected: int | float | Decimal, actual: int | float | Decimal) -> bool:
    """An expected JSON number against a decoded one, as ksqlDB's ``ExpectedRecordComparator``
    (``compareNumber``/``compareDecimal``): an integer column by the expected number's integer
    part (Java's ``intValue``); a DOUBLE within 1e-6; a DECIMAL by
    :func:`decimal_matches_literal`, and against an expected integer only at scale 0 (``1`` is not
    ``1.0``)."""
    if isinstance(actual, int):
        if isinstance(expected, int):
            return expected == actual
        want = Decimal(_literal(expected))
        return want.is_finite() and int(want) == actual
    if isinstance(actual, float):
        return abs(float(expected) - actual) < 1e-6
    if isinstance(expected, int):
        return actual.is_finite() and _scale(actual) <= 0 and actual == expected
    return decimal_matches_literal(_literal(expected), actual)


def data_equal(expected: Any, actual: Any) -> bool:
    """Structural equality as ksqlDB's ``ExpectedRecordComparator``: numbers by
    :func:`number_equal`, DECIMAL text at its scale, objects of the same size field by field
    (exact name, then upper-cased name; a field absent from the actual object reads as null, as in
    ksqlDB), lists element-wise."""
    if expected is None or actual is None:
        return expected is None and actual is None
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(expected, bool) and isinstance(actual, bool) and expected == actual
    if _is_number(expected):
        return _is_number(actual) and number_equal(expected, actual)
    if isinstance(expected, str):
        if isinstance(actual, Decimal):
            # DECIMAL values written as text: ksqlDB's compareText, new BigDecimal(text).equals
            try:
                want = Decimal(expected)
            except InvalidOperation:
                return False
            return _same_decimal(want, actual)
        return isinstance(actual, str) and expected == actual
    if isinstance(expected, list):
        return (isinstance(actual, list) and len(expected) == len(actual)
                and all(data_equal(e, a) for e, a in zip(expected, actual)))
    if isinstance(expected, dict):
        if not isinstance(actual, dict) or len(expected) != len(actual):
            return False
        for k, v in expected.items():
            # as ksqlDB's Map.get: an absent field reads as null (the sizes are already equal)
            a = actual.get(k)
            if a is None:
                a = actual.get(str(k).upper())
            if not data_equal(v, a):
                return False
        return True
    return bool(expected == actual)


def text_equal(expected: Any, actual: Any) -> bool:
    """A DELIMITED side as ksqlDB's harness compares it: it reads the record as a string
    (``StringSerdeSupplier``) and compares it with ``ExpectedRecordComparator``: an expected
    string equals the same text only (``1.50`` is not ``1.5``), an expected number or object
    never equals text, null only null."""
    if expected is None or actual is None:
        return expected is None and actual is None
    if not isinstance(actual, str):
        return data_equal(expected, actual)
    return isinstance(expected, str) and expected == actual


def raw_equal(expected: Any, actual: Any) -> bool:
    """A topic no source of the case reads (its records' format unknown to the runner): equal
    text, the text parsed as JSON equal to the expected data, or comma-separated fields equal
    with numbers compared numerically."""
    if expected is None or actual is None:
        return expected is None and actual is None
    if not isinstance(actual, str):
        return data_equal(expected, actual)
    if not isinstance(expected, str):
        try:
            return data_equal(expected, json.loads(actual))
        except json.JSONDecodeError:
            return str(expected) == actual
    if expected == actual:
        return True
    ef, af = expected.split(","), actual.split(",")
    if len(ef) != len(af):
        return False
    for e, a in zip(ef, af):
        if e == a:
            continue
        try:
            if not math.isclose(float(e), float(a), rel_tol=1e-9, abs_tol=1e-6):
                return False
        except ValueError:
            return False
    return True


@dataclass
class ActualRecord:
    partition: int
    offset: int
    key: Any
    value: Any
    timestamp: int
    #: ``{"start", "end", "type"}`` as the expected records write it (``type``: ``time`` or
    #: ``session``); ``end`` absent when the sink's window size is unknown
    window: dict[str, Any] | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


@dataclass
class SideFormat:
    """How to compare one side (key or value) of a topic's records."""

    kind: str  # "json" | "text" | "typed" | "raw"
    delimiter: str = ","

    def equal(self, expected: Any, actual: Any) -> bool:
        if isinstance(actual, Undecodable):
            return False
        if self.kind == "text":
            return text_equal(expected, actual)
        if self.kind == "raw":
            return raw_equal(expected, actual)
        return data_equal(expected, actual)


def _show(v: Any) -> str:
    """A value as JSON text, numbers as they were written: an expected literal as the file has it
    (``1.10``), a decimal as its text (``10.0000``, not a quoted string), so both sides of a
    difference read alike."""
    if isinstance(v, Undecodable):
        return repr(v)
    if isinstance(v, JsonDecimal):
        return v.text
    if isinstance(v, Decimal):
        return str(v)
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))}: {_show(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(_show(x) for x in v) + "]"
    return json.dumps(v, default=str)


def _window_shown(window: dict[str, Any]) -> dict[str, Any]:
    """A window as the failure text shows it, the same fields in the same order on both sides
    (an expected ``"type": "SESSION"`` shown as ``session``, as the actual one)."""
    shown: dict[str, Any] = {k: window[k] for k in ("start", "end") if k in window}
    if window.get("type") is not None:
        shown["type"] = str(window["type"]).lower()
    return shown


def describe_record(key: Any, value: Any, ts: Any, window: Any = None,
                    headers: list[tuple[str, bytes | None]] | None = None) -> str:
    w = f" window={_show(_window_shown(window) if isinstance(window, dict) else window)}" if window else ""
    h = (" and headers=[" + ", ".join(f"{{KEY={k},VALUE={'' if v is None else base64.b64encode(v).decode()}}}"
                                      for k, v in headers) + "]") if headers else ""
    return f"<{_show(key)}, {_show(value)}> with timestamp={ts}{w}{h}"


def _expected_headers(exp: dict[str, Any]) -> list[tuple[str, bytes | None]]:
    out: list[tuple[str, bytes | None]] = []
    for h in exp.get("headers") or []:
        if isinstance(h, dict):
            try:
                value = None if h.get("VALUE") is None else base64.b64decode(str(h["VALUE"]))
            except (binascii.Error, ValueError):
                value = str(h["VALUE"]).encode()
            out.append((str(h.get("KEY")), value))
    return out


def headers_equal(expected: Any, actual: list[tuple[str, bytes | None]]) -> bool:
    """A record's headers against the expected ``[{"KEY": name, "VALUE": base64}, …]`` in order;
    no expected headers means none (ksqlDB's ``TestExecutor`` defaults them to an empty list)."""
    want = expected or []
    if not isinstance(want, list) or len(want) != len(actual):
        return False
    for header, (name, value) in zip(want, actual):
        if not isinstance(header, dict) or header.get("KEY") != name:
            return False
        encoded = header.get("VALUE")
        try:
            wanted = None if encoded is None else base64.b64decode(str(encoded), validate=True)
        except (binascii.Error, ValueError):
            return False
        if wanted != (None if value is None else bytes(value)):
            return False
    return True


def record_matches(exp: dict[str, Any], act: ActualRecord, key_fmt: SideFormat, value_fmt: SideFormat,
                   default_ts: int | None) -> bool:
    if not key_fmt.equal(exp.get("key"), act.key):
        return False
    if not headers_equal(exp.get("headers"), act.headers):
        return False
    if not value_fmt.equal(exp.get("value"), act.value):
        return False
    ts = exp["timestamp"] if "timestamp" in exp else default_ts
    if ts is not None and int(ts) != act.timestamp:
        return False
    return window_matches(exp.get("window"), act.window)


def window_matches(expected: Any, actual: dict[str, Any] | None) -> bool:
    """An expected window against the record's, as ksqlDB's ``TestExecutor`` compares
    ``WindowData``: start, end and type, every one the expected window gives, whether or not the
    actual record carries it (a time window's end comes from the sink's window size, qtt.py)."""
    if not expected:
        return True
    if actual is None or int(expected.get("start", 0)) != actual.get("start"):
        return False
    if "end" in expected and (actual.get("end") is None or int(expected["end"]) != actual["end"]):
        return False
    return "type" not in expected or str(expected["type"]).lower() == actual.get("type")


def compare_topic(topic: str, expected: list[dict[str, Any]], actual: list[ActualRecord], key_fmt: SideFormat,
                  value_fmt: SideFormat, default_ts: int | None) -> str | None:
    """None when ``actual`` matches ``expected`` (see :func:`_compare_topic`). When the only
    differences are records expected at timestamp 0 written with another timestamp, the reason
    says so (the engine's sink cannot write timestamp 0: docs/conformance.md)."""
    problem = _compare_topic(topic, expected, actual, key_fmt, value_fmt, default_ts)
    if problem is None:
        return None
    zeroless = [{**e, "timestamp": None} if int(e.get("timestamp", default_ts) or 0) == 0 else e for e in expected]
    lenient = _compare_topic(topic, zeroless, actual, key_fmt, value_fmt, default_ts)
    if lenient is None:
        return ("only timestamps differ: records expected at timestamp 0 were written with the wall-clock time; "
                + problem)
    return lenient


def _compare_topic(topic: str, expected: list[dict[str, Any]], actual: list[ActualRecord], key_fmt: SideFormat,
                   value_fmt: SideFormat, default_ts: int | None) -> str | None:
    """None when ``actual`` matches ``expected`` in order (per partition when the records span
    several partitions), else ksqlDB-style text naming the first difference."""
    partitions = sorted({a.partition for a in actual})
    if len(partitions) <= 1:
        for i, (e, a) in enumerate(zip(expected, actual)):
            if not record_matches(e, a, key_fmt, value_fmt, default_ts):
                note = ""
                wanted = describe_record(e.get('key'), e.get('value'), e.get('timestamp', default_ts), e.get('window'),
                                         _expected_headers(e))
                # numbered from 1, as ksql-test-runner's messages
                return (f"Topic '{topic}', message {i + 1}: Expected {wanted}"
                        f" but was {describe_record(a.key, a.value, a.timestamp, a.window, a.headers)}{note}")
        if len(expected) != len(actual):
            extra = ""
            if len(actual) > len(expected):
                a = actual[len(expected)]
                extra = f"; first extra record: {describe_record(a.key, a.value, a.timestamp, a.window)}"
            else:
                e = expected[len(actual)]
                missing = describe_record(e.get('key'), e.get('value'), e.get('timestamp', default_ts), e.get('window'))
                extra = f"; first missing record: {missing}"
            return f"Topic '{topic}': expected {len(expected)} records but got {len(actual)}{extra}"
        return None
    # several partitions: each partition's records must appear in expected order
    queues = {p: [a for a in actual if a.partition == p] for p in partitions}
    heads = {p: 0 for p in partitions}
    for i, e in enumerate(expected):
        hit = None
        for p in partitions:
            if heads[p] < len(queues[p]) and record_matches(e, queues[p][heads[p]], key_fmt, value_fmt, default_ts):
                hit = p
                break
        if hit is None:
            nexts = [describe_record(queues[p][heads[p]].key, queues[p][heads[p]].value, queues[p][heads[p]].timestamp)
                     for p in partitions if heads[p] < len(queues[p])]
            return (f"Topic '{topic}' ({len(partitions)} partitions), message {i + 1}: Expected "
                    f"{describe_record(e.get('key'), e.get('value'), e.get('timestamp', default_ts), e.get('window'))}"
                    f" but the next records of the partitions were: {'; '.join(nexts) or 'none'}")
        heads[hit] += 1
    if len(expected) != len(actual):
        return f"Topic '{topic}': expected {len(expected)} records but got {len(actual)}"
    return None
