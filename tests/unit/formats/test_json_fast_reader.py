"""The JSON format's fast reader (orjson) against its exact reader (the standard library's
parser): for every record, the same row or the same processing-log reason. The exact reader is
the specification (its own tests: test_formats.py); these records are the edges where the two
parsers differ — numbers orjson reads as doubles, byte order marks, surrogate escapes, UTF-16,
malformed text, strings where numbers are wanted, keys in other cases."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from streamsql import types as T
from streamsql.formats import FormatSpec, serde_for
from streamsql.formats import json_format
from streamsql.types import Column

COLUMNS = (Column("B", T.BOOLEAN), Column("I", T.INTEGER), Column("L", T.BIGINT),
           Column("D", T.DOUBLE), Column("S", T.STRING))
SPEC = FormatSpec("JSON", COLUMNS)

EDGES: list[bytes] = [
    b'{"B":true,"I":1,"L":2,"D":1.5,"S":"x"}',
    b'{"b":false,"i":-2147483648,"l":9223372036854775807,"d":-0.0,"s":""}',
    b'{"I":2147483648,"L":9223372036854775808,"D":123456789012345678901234,"S":1.50}',
    b'{"I":-2147483649,"L":-9223372036854775809,"D":-9223372036854775809,"S":true}',
    b'{"I":1.9,"L":-2.5e3,"D":"1.5","S":{"a":[1,2.50]}}',
    b'{"I":"12","L":"0x10","D":"NaN","S":[1,null,"a"]}',
    b'{"D":123456789012345678901234}', b'{"D":-9223372036854775809}', b'{"D":1e400}', b'{"D":1e-400}', b'{"D":18446744073709551615}', b'{"D":9007199254740993}',
    b'{"D":NaN}', b'{"S":"\\ud800"}', b'{"S":"\\ud83d\\ude00"}', b'{"S":"a\x01b"}',
    b'\xef\xbb\xbf{"S":"bom"}', '{"S":"utf16"}'.encode("utf-16"), '{"S":"utf16le"}'.encode("utf-16-le"),
    b'{"S":"\xff"}', b'{"S":"x"} extra', b'{"S":"x"', b"", b"null", b"[1,2]", b'"text"', b"42",
    b'{"s":"lower","S":"exact"}', b'{"S":"exact","s":"lower"}', b'{"s":"one","s":"two"}',
    b'{"b":1,"B":null}', b'{"B":"true","I":true,"L":false,"D":true}', b'{"B":null,"I":null}',
    b'{"D":1E2,"L":1E2,"I":-0}', b'{"L":12345678901234567890123}', b'{"D":0.1e1,"L":-0.0}',
]


def _random_records(count: int, seed: int) -> list[bytes]:
    r = random.Random(seed)
    pieces = ["1", "-7", "0.5", "1e3", "-1.25e-3", "2147483647", "2147483648", "9223372036854775807",
              "9223372036854775808", "1e19", "123456789012345678901234567890", '"s"', '"12"', '"1.5"',
              "true", "false", "null", "[]", "{}", '"\\u00e9"', "3.141592653589793238462643383279"]
    names = ["B", "I", "L", "D", "S", "b", "i", "l", "d", "s", "X"]
    out = []
    for _ in range(count):
        fields = [f'"{r.choice(names)}":{r.choice(pieces)}' for _ in range(r.randint(0, 6))]
        out.append(("{" + ",".join(fields) + "}").encode())
    return out


def _exact_serde(monkeypatch: pytest.MonkeyPatch) -> Any:
    with monkeypatch.context() as m:
        m.setattr(json_format, "_fast_loads", None)
        serde = serde_for(SPEC)
    assert serde._fast is None
    return serde


def _rows(serde: Any, records: list[bytes]) -> tuple[list[tuple[Any, ...]], list[str | None]]:
    result = serde.decode(records)
    return list(zip(*(c.to_pylist() for c in result.columns))), result.errors


def test_the_fast_reader_is_used_for_plain_columns() -> None:
    assert serde_for(SPEC)._fast is not None
    nested = FormatSpec("JSON", (Column("A", T.Array(T.INTEGER)),))
    decimal = FormatSpec("JSON", (Column("A", T.Decimal(4, 2)),))
    assert serde_for(nested)._fast is None and serde_for(decimal)._fast is None


@pytest.mark.parametrize("records", [EDGES, _random_records(5000, seed=7)], ids=["edges", "random"])
def test_fast_and_exact_readers_agree_on_rows_and_reasons(monkeypatch: pytest.MonkeyPatch,
                                                          records: list[bytes]) -> None:
    exact_rows, exact_errors = _rows(_exact_serde(monkeypatch), records)
    fast_rows, fast_errors = _rows(serde_for(SPEC), records)
    for record, e_row, f_row, e_err, f_err in zip(records, exact_rows, fast_rows, exact_errors, fast_errors):
        assert (f_row, f_err) == (e_row, e_err), record
    assert any(e is None for e in exact_errors) and any(e is not None for e in exact_errors)


def test_plain_records_do_not_reach_the_exact_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    serde = serde_for(SPEC)
    exact_calls: list[bytes] = []
    original = serde._decode_exact
    monkeypatch.setattr(serde, "_decode_exact", lambda raw: exact_calls.append(raw) or original(raw))
    plain = [json.dumps({"b": True, "i": n, "l": n * 10**12, "d": n / 7, "s": str(n)}).encode()
             for n in range(100)]
    odd = b'{"D":"1.5"}'
    rows, errors = _rows(serde, [*plain, odd])
    assert exact_calls == [odd]
    assert errors == [None] * 101
    assert rows[3] == (True, 3, 3 * 10**12, 3 / 7, "3") and rows[100] == (None, None, None, 1.5, None)


def test_unwrapped_single_value_takes_the_same_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = FormatSpec("JSON", (Column("V", T.DOUBLE),), wrap_single_value=False)
    with monkeypatch.context() as m:
        m.setattr(json_format, "_fast_loads", None)
        exact = serde_for(spec)
    records = [b"1.5", b"123456789012345678901234", b'"2.5"', b"null", b"{}", b"true", b"7"]
    assert _rows(serde_for(spec), records) == _rows(exact, records)


def test_records_sent_to_the_exact_reader_leave_nothing_behind() -> None:
    """A topic whose every record falls back (numbers sent as strings) must not grow a worker's
    memory: each fallback is a fresh signal, not one shared exception whose traceback (and the
    frames it holds) grows with every raise."""
    import tracemalloc

    serde = serde_for(FormatSpec("JSON", (Column("D", T.DOUBLE),)))
    records = [b'{"D":"1.5"}'] * 5000
    serde.decode(records)
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        serde.decode(records)
        serde.decode(records)
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    grown = sum(d.size_diff for d in after.compare_to(before, "filename"))
    assert grown < 200_000, grown


# --- whole batches through Arrow's JSON reader ---------------------------------------------------


def _batch_rows(serde: Any, records: list[bytes | None]) -> tuple[list[tuple[Any, ...]], list[str | None]] | None:
    result = serde._decode_batch(records)
    if result is None:
        return None
    return list(zip(*(c.to_pylist() for c in result.columns))), result.errors


def _exact_rows(serde: Any, records: list[bytes | None]) -> tuple[list[tuple[Any, ...]], list[str | None]]:
    result = json_format.decode_records(records, serde._decode_exact, serde._null_row, serde._types)
    return list(zip(*(c.to_pylist() for c in result.columns))), result.errors


def _batchable_records(count: int, seed: int) -> list[bytes]:
    """Objects whose keys are distinct, mostly in one spelling per batch, with values of every
    JSON type, including those the columns convert (strings for numbers, fractions for integers)."""
    r = random.Random(seed)
    values = {
        "B": ["true", "false", "null", "1", '"true"'],
        "I": ["0", "-0", "7", "-2147483648", "2147483647", "2147483648", "1.0", '"5"', "null", "1e2"],
        "L": ["9223372036854775807", "-9223372036854775808", "9223372036854775808", "12", "-0.0", "null"],
        "D": ["0.1", "-0", "-0.0", "1e308", "1e-320", "123456789012345678901234", "9007199254740993",
              "2.5E-3", '"1.5"', "null", "7", "3.141592653589793238462643383279"],
        "S": ['"s"', '""', '"\\u00e9\\n\\"q\\""', '"\\ud83d\\ude00"', "5", "null", "{}", '"\u00e9"'],
        "X": ["1", '"x"', "[1,{\"a\":null}]", "{\"B\":1}", "null"],
    }
    out = []
    for _ in range(count):
        names = r.sample(sorted(values), r.randint(0, 6))
        spelled = [n.lower() if r.random() < 0.5 else n for n in names]
        out.append(("{" + ",".join(f'"{s}":{r.choice(values[n])}' for n, s in zip(names, spelled)) + "}")
                   .encode())
    return out


def test_arrow_batches_agree_with_the_exact_reader() -> None:
    """Wherever the batch reader answers, its rows equal the exact reader's, with no error; over
    single edge records and random batches of every value type and key spelling."""
    serde = serde_for(SPEC)
    r = random.Random(11)
    records = _batchable_records(6000, seed=3)
    batches: list[list[bytes | None]] = [[e] for e in EDGES]
    i = 0
    while i < len(records):
        n = r.choice([1, 1, 2, 3, 5, 8])
        batches.append([None if r.random() < 0.05 else rec for rec in records[i:i + n]])
        i += n
    answered = 0
    for batch in batches:
        got = _batch_rows(serde, batch)
        if got is not None:
            answered += 1
            assert got == _exact_rows(serde, batch), batch
            assert got[1] == [None] * len(batch)
    assert answered > len(batches) // 10, (answered, len(batches))


def test_plain_batches_are_read_by_arrow_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    serde = serde_for(SPEC)
    per_record: list[bytes] = []
    monkeypatch.setattr(serde, "_decode_record", lambda raw: per_record.append(raw) or ())
    lower = [json.dumps({"b": n % 2 == 0, "i": n, "l": n * 10**12, "d": n / 7, "s": str(n), "extra": [n]})
             .encode() for n in range(100)]
    rows, errors = _rows(serde, [*lower, None])
    assert per_record == []
    assert errors == [None] * 101
    assert rows[3] == (False, 3, 3 * 10**12, 3 / 7, "3") and rows[100] == (None,) * 5


@pytest.mark.parametrize("odd", [
    b'{"d":-0}',                    # the integer -0 is 0.0 for the exact reader, -0.0 for Arrow
    b'{"d":NaN}', b'{"d":-Infinity}',  # Arrow reads them, Jackson (and the exact reader) refuse
    b'{"D":1.5}',                   # the exact name beside the layout's lower-case key
    b'{"S":"x"}',                   # another spelling of a column than the first record's
    b'null',                        # Arrow's reader crashes the process on a bare null line
    b'{"d":1}{"d":2}', b'', b' {"d":1}', b'{"d":1}\n', b'{"d":\r1}',
    b'{"d":1,"d":2}', b'{"s":"\xff"}', b'{"d":"1.5"}', b'{"i":1.5}', b'{"s":5}',
])
def test_batches_arrow_could_read_differently_go_record_by_record(odd: bytes) -> None:
    serde = serde_for(SPEC)
    plain = b'{"b":true,"i":1,"l":2,"d":0.5,"s":"x"}'
    assert serde._decode_batch([plain, plain]) is not None
    assert serde._decode_batch([plain, odd]) is None
    assert _rows(serde, [plain, odd]) == _exact_rows(serde, [plain, odd])


@pytest.mark.parametrize("odd", [b'', b' {"d":1}', b'{"d":1} ', b'{"d":1}\n', b'\n{"d":1}', b'{"d":\n1}',
                                 b'{"d":1}\n{"d":2}', b'[1]', b'{"s":"N"}{"s":"aN"}'])
def test_a_record_that_is_not_one_object_on_one_line_sends_its_batch_record_by_record(odd: bytes) -> None:
    """The line screening (every record one line starting with ``{`` and ending with ``}``)
    holds wherever the odd record stands: first, between others, last."""
    serde = serde_for(SPEC)
    plain = b'{"b":true,"i":1,"l":2,"d":0.5,"s":"x"}'
    for records in ([odd, plain, plain], [plain, odd, plain], [plain, plain, odd]):
        assert serde._decode_batch(records) is None, records
        assert _rows(serde, records) == _exact_rows(serde, records)


# --- STRUCT columns (Nexmark's events): the fast reader, record by record ------------------------

_INNER = T.Struct((T.StructField("B", T.BOOLEAN),))
_OUTER = T.Struct((T.StructField("ID", T.BIGINT), T.StructField("NAME", T.STRING), T.StructField("D", T.DOUBLE),
                   T.StructField("IN", _INNER)))
STRUCT_SPEC = FormatSpec("JSON", (Column("E", T.INTEGER), Column("P", _OUTER)))

STRUCT_EDGES: list[bytes] = [
    b'{"e":0,"p":{"id":1,"name":"a","d":0.5,"in":{"b":true}}}',
    b'{"E":1,"P":{"ID":2,"NAME":"b","D":-0.0,"IN":null}}',
    b'{"e":2,"p":null}', b'{"e":3}', b'{"e":4,"p":{}}', b'{"e":5,"p":{"extra":[1,2],"id":3}}',
    b'{"e":6,"p":{"id":"12","name":5,"d":"1.5","in":{"b":"true"}}}',  # strings and numbers the exact reader converts
    b'{"e":7,"p":{"id":1.9,"d":123456789012345678901234,"name":{"x":1}}}',
    b'{"e":8,"p":{"id":9223372036854775808}}', b'{"e":9,"p":{"ID":1,"id":2,"Id":3}}',
    b'{"e":10,"p":{"id":2,"ID":1}}', b'{"e":11,"p":{"id":1,"id":2}}', b'{"e":12,"p":"text"}',
    b'{"e":13,"p":[1,2]}', b'{"e":14,"p":7}', b'{"e":15,"p":{"in":[true]}}', b'{"e":16,"p":{"in":{"B":1}}}',
    b'{"e":17,"p":{"name":"\\ud800"}}', b'{"e":18,"p":{"d":NaN}}', b'{"e":19,"p":{"id":1}', b"null",
]


def _random_struct_records(count: int, seed: int) -> list[bytes]:
    r = random.Random(seed)
    scalars = ["1", "-7", "0.5", "1e3", "9223372036854775808", '"s"', '"12"', "true", "null", "[]", "{}"]
    field_names = ["ID", "id", "Id", "NAME", "name", "D", "d", "IN", "in", "X"]

    def struct(depth: int) -> str:
        fields = []
        for _ in range(r.randint(0, 5)):
            name = r.choice(field_names)
            value = struct(depth + 1) if name.upper() == "IN" and depth == 0 and r.random() < 0.7 else (
                '{"b":' + r.choice(["true", "false", "1", "null"]) + "}" if name.upper() == "IN"
                else r.choice(scalars))
            fields.append(f'"{name}":{value}')
        return "{" + ",".join(fields) + "}"

    out = []
    for i in range(count):
        p = struct(0) if r.random() < 0.8 else r.choice(["null", "1", '"x"', "[]"])
        out.append(f'{{"{r.choice(["e", "E"])}":{i % 3},"{r.choice(["p", "P"])}":{p}}}'.encode())
    return out


def _exact_struct_serde(monkeypatch: pytest.MonkeyPatch) -> Any:
    with monkeypatch.context() as m:
        m.setattr(json_format, "_fast_loads", None)
        serde = serde_for(STRUCT_SPEC)
    assert serde._fast is None
    return serde


def test_struct_columns_of_plain_fields_take_the_fast_reader_but_not_arrows_batches() -> None:
    serde = serde_for(STRUCT_SPEC)
    assert serde._fast is not None and not serde._batchable
    with_array = FormatSpec("JSON", (Column("P", T.Struct((T.StructField("A", T.Array(T.INTEGER)),))),))
    assert serde_for(with_array)._fast is None


@pytest.mark.parametrize("records", [STRUCT_EDGES, _random_struct_records(5000, seed=5)], ids=["edges", "random"])
def test_fast_and_exact_readers_agree_on_struct_rows_and_reasons(monkeypatch: pytest.MonkeyPatch,
                                                                 records: list[bytes]) -> None:
    exact_rows, exact_errors = _rows(_exact_struct_serde(monkeypatch), records)
    fast_rows, fast_errors = _rows(serde_for(STRUCT_SPEC), records)
    assert any(e is not None for e in exact_errors) and any(e is None for e in exact_errors)
    for record, e_row, f_row, e_err, f_err in zip(records, exact_rows, fast_rows, exact_errors, fast_errors):
        assert (f_row, f_err) == (e_row, e_err), record


def test_plain_struct_records_do_not_reach_the_exact_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    serde = serde_for(STRUCT_SPEC)
    exact_calls: list[bytes] = []
    original = serde._decode_exact
    monkeypatch.setattr(serde, "_decode_exact", lambda raw: exact_calls.append(raw) or original(raw))
    plain = [json.dumps({"e": n, "p": None if n % 3 == 0 else {"id": n, "name": str(n), "d": n / 7,
                                                                  "in": {"b": n % 2 == 0}}}).encode()
             for n in range(100)]
    odd = b'{"e":1,"p":{"id":"5"}}'
    rows, errors = _rows(serde, [*plain, odd])
    assert exact_calls == [odd]
    assert errors == [None] * 101
    assert rows[0] == (0, None)
    assert rows[4] == (4, {"ID": 4, "NAME": "4", "D": 4 / 7, "IN": {"B": True}})
    assert rows[100] == (1, {"ID": 5, "NAME": None, "D": None, "IN": None})
