"""Serialization formats against ksqlDB's behaviour.

Expected values come from ksqlDB's query-validation tests (``serdes.json``, ``json.json``,
``delimited.json``, ``kafka.json``, ``decimal.json``, ``bytes.json``, ``date.json``, ``time.json``,
``timestamp.json``, ``multi-col-keys.json``, ``none.json``, ``formats.json``) and from ksqlDB's
serde sources (``KsqlJsonDeserializer``, ``KsqlDelimitedDeserializer``/``Serializer``,
``KafkaSerdeFactory``, ``DecimalUtil``). Pure: pyarrow only, no Spark session, no broker.
"""

from __future__ import annotations

import struct
from datetime import date, datetime, timezone
from decimal import Decimal as D
from typing import Any

import pyarrow as pa
import pytest

from streamsql import types as T
from streamsql.errors import ConfigError
from streamsql.formats import FormatSpec, serde_for
from streamsql.types import Column

# --- helpers ----------------------------------------------------------------------------------


def spec(fmt: str, *columns: Column, **options: Any) -> FormatSpec:
    return FormatSpec(fmt, tuple(columns), **options)


def val(name: str, t: T.SqlType) -> Column:
    return Column(name, t)


def key(name: str, t: T.SqlType) -> Column:
    return Column(name, t, role="key")


def decode(s: FormatSpec, *records: bytes | None) -> tuple[list[tuple[Any, ...]], list[str | None]]:
    """Decoded rows (Python values) and errors; also checks every column's Arrow type."""
    result = serde_for(s).decode(list(records))
    assert [c.type for c in result.columns] == [T.to_arrow(c.type) for c in s.columns]
    assert all(len(c) == len(records) for c in result.columns)
    rows = list(zip(*(c.to_pylist() for c in result.columns))) or [()] * len(records)
    return rows, result.errors


def decode_one(s: FormatSpec, record: bytes | None) -> tuple[Any, ...]:
    rows, errors = decode(s, record)
    assert errors == [None], errors
    return rows[0]


def error_of(s: FormatSpec, record: bytes) -> str:
    rows, errors = decode(s, record)
    assert rows == [(None,) * len(s.columns)]
    assert errors[0] is not None
    return errors[0]


def encode(s: FormatSpec, *rows: tuple[Any, ...]) -> list[bytes | None]:
    """Encode rows given as Python values of each column's Arrow type."""
    arrays = [
        pa.array([r[i] for r in rows], type=T.to_arrow(c.type)) for i, c in enumerate(s.columns)
    ]
    batch = pa.RecordBatch.from_arrays(arrays, names=[c.name for c in s.columns])
    return serde_for(s).encode(batch)


def no_columns(rows: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"X": list(range(rows))}).select([])


def utc(millis: int) -> datetime:
    return datetime.fromtimestamp(millis / 1000, tz=timezone.utc)


ALL_PRIMITIVES = (
    val("B", T.BOOLEAN),
    val("I", T.INTEGER),
    val("L", T.BIGINT),
    val("D", T.DOUBLE),
    val("DEC", T.Decimal(6, 4)),
    val("S", T.STRING),
    val("BY", T.BYTES),
    val("DT", T.DATE),
    val("TM", T.TIME),
    val("TS", T.TIMESTAMP),
)


# --- registry ---------------------------------------------------------------------------------


def test_unknown_format_is_rejected_with_ksqldb_message() -> None:
    with pytest.raises(ConfigError, match="^Unknown format: FOO. Supported: "):
        serde_for(spec("FOO", val("A", T.INTEGER)))


def test_unknown_formats_are_rejected_naming_the_supported_ones() -> None:
    with pytest.raises(ConfigError, match="Unknown format: PROTOBUFF. Supported: JSON, .*PROTOBUF_NOSR"):
        serde_for(spec("PROTOBUFF", val("A", T.INTEGER)))


def test_format_name_is_case_insensitive() -> None:
    assert decode_one(spec("json", val("A", T.INTEGER)), b'{"A":1}') == (1,)


# --- JSON: reading ----------------------------------------------------------------------------


def test_json_reads_every_primitive_type() -> None:
    s = spec("JSON", *ALL_PRIMITIVES)
    record = (
        b'{"B":true,"I":10,"L":1234567890123,"D":1234.589,"DEC":12.365,"S":"hi",'
        b'"BY":"dmFyaWF0aW9ucw==","DT":10,"TM":10,"TS":1000}'
    )
    assert decode_one(s, record) == (
        True, 10, 1234567890123, 1234.589, D("12.3650"), "hi", b"variations",
        date(1970, 1, 11), 10, utc(1000),
    )


def test_json_fields_match_columns_case_insensitively_exact_name_first() -> None:
    s = spec("JSON", val("FOO", T.INTEGER), val("BAR", T.STRING))
    assert decode_one(s, b'{"foo":1,"Bar":"x"}') == (1, "x")
    assert decode_one(s, b'{"foo":1,"FOO":2}') == (2, None)
    assert decode_one(s, b'{"FOO":2,"foo":1}') == (2, None)


def test_json_quoted_mixed_case_column_matches_only_its_exact_name() -> None:
    # ksqlDB upper-cases the JSON keys, not the column name: `Name` never matches "NAME".
    s = spec("JSON", val("Name", T.STRING))
    assert decode_one(s, b'{"Name":"a"}') == ("a",)
    assert decode_one(s, b'{"NAME":"a"}') == (None,)


def test_json_missing_fields_are_null_and_extra_fields_ignored() -> None:
    s = spec("JSON", val("A", T.INTEGER), val("B", T.STRING))
    assert decode_one(s, b'{"A":1,"C":[1,2],"D":{"x":1}}') == (1, None)
    assert decode_one(s, b"{}") == (None, None)


def test_json_null_record_and_json_null_decode_to_nulls_without_error() -> None:
    rows, errors = decode(spec("JSON", val("A", T.INTEGER)), None, b"null")
    assert rows == [(None,), (None,)]
    assert errors == [None, None]


@pytest.mark.parametrize(
    ("t", "json_value", "expected"),
    [
        (T.INTEGER, b"10", 10),
        (T.INTEGER, b'"10"', 10),
        (T.INTEGER, b'"+7"', 7),
        (T.INTEGER, b"1.9", 1),  # JsonNode.intValue() truncates
        (T.INTEGER, b"-1.9", -1),
        (T.INTEGER, b"3000000000", -1294967296),  # ...and wraps, like Java's (int)
        (T.BIGINT, b"1234567890123", 1234567890123),
        (T.BIGINT, b'"-42"', -42),
        (T.BIGINT, b"2.99999999999999999999", 2),  # exact, not via a double
        (T.DOUBLE, b"1", 1.0),
        (T.DOUBLE, b'"1.5"', 1.5),
        (T.DOUBLE, b'" 2.5d "', 2.5),  # Double.parseDouble trims and takes a suffix
        (T.DOUBLE, b'"NaN"', float("nan")),
        (T.STRING, b"12", "12"),
        (T.STRING, b"1.50", "1.50"),  # the number's own digits
        (T.STRING, b"1e3", "1E+3"),  # BigDecimal.toString
        (T.STRING, b"true", "true"),
        (T.STRING, b'{"a": 1, "b": [1.0, "x"]}', '{"a":1,"b":[1.0,"x"]}'),
        (T.STRING, b'["a", 1, null, {"k": "v"}]', '[a, 1, null, {"k":"v"}]'),
        (T.Decimal(4, 2), b"10", D("10.00")),
        (T.Decimal(4, 2), b'"1.5"', D("1.50")),
        (T.Decimal(4, 2), b"-0.01", D("-0.01")),
        (T.DATE, b'"-1"', date(1969, 12, 31)),
        (T.TIME, b'"86400000"', 86400000),
        (T.TIMESTAMP, b'"1000"', utc(1000)),
        (T.TIMESTAMP, b"-2000", utc(-2000)),
    ],
)
def test_json_coerces_values_like_ksqldb(t: T.SqlType, json_value: bytes, expected: Any) -> None:
    (got,) = decode_one(spec("JSON", val("V", t), wrap_single_value=False), json_value)
    if expected != expected:  # NaN
        assert got != got
    else:
        assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize(
    ("t", "json_value", "reason"),
    [
        (T.INTEGER, b'"abc"', 'cannot convert "abc" to INTEGER'),
        (T.INTEGER, b'"1.5"', 'cannot convert "1.5" to INTEGER'),
        (T.INTEGER, b'"3000000000"', 'cannot convert "3000000000" to INTEGER'),
        (T.INTEGER, b'" 1"', 'cannot convert " 1" to INTEGER'),
        (T.INTEGER, b"true", "cannot convert true to INTEGER"),
        (T.BIGINT, b"[1]", "cannot convert a JSON array to BIGINT"),
        (T.DOUBLE, b'"abc"', 'cannot convert "abc" to DOUBLE'),
        (T.DOUBLE, b'"1_000"', 'cannot convert "1_000" to DOUBLE'),
        (T.DOUBLE, b"{}", "cannot convert a JSON object to DOUBLE"),
        (T.BOOLEAN, b'"true"', 'cannot convert "true" to BOOLEAN'),
        (T.BOOLEAN, b"1", "cannot convert 1 to BOOLEAN"),
        (T.BYTES, b"12", "cannot convert 12 to BYTES"),
        (T.BYTES, b'"a"', "Value is not a valid Base64 encoded string: a"),
        (T.BYTES, b'"ab$="', "Value is not a valid Base64 encoded string: ab$="),
        (T.Decimal(4, 2), b'"x"', 'cannot convert "x" to DECIMAL(4, 2)'),
        (
            T.Decimal(4, 2),
            b"123.4",
            "Numeric field overflow: A field with precision 4 and scale 2 must round to an "
            "absolute value less than 10^2. Got 123.4",
        ),
        (
            T.Decimal(4, 2),
            b"1.234",
            "Cannot fit decimal '1.234' into DECIMAL(4, 2) without rounding. (Requires 4,3)",
        ),
        (
            T.TIME,
            b"-5",
            "Time values must use number of milliseconds greater than 0 and less than 86400000.",
        ),
        (T.TIMESTAMP, b'"soon"', 'cannot convert "soon" to TIMESTAMP'),
        (T.Array(T.INTEGER), b'{"a":1}', "cannot convert a JSON object to ARRAY<INTEGER>"),
        (T.Map(T.STRING, T.INTEGER), b"[1]", "cannot convert a JSON array to MAP<STRING, INTEGER>"),
        (
            T.Struct((T.StructField("A", T.INTEGER),)),
            b"1",
            "cannot convert 1 to STRUCT<`A` INTEGER>",
        ),
    ],
)
def test_json_conversion_failures_name_the_field_and_reason(
    t: T.SqlType, json_value: bytes, reason: str
) -> None:
    message = error_of(spec("JSON", val("V", t)), b'{"V":' + json_value + b"}")
    assert message == f"Failed to deserialize field 'V': {reason}"


def test_json_huge_exponents_do_not_hang() -> None:
    s = spec("JSON", val("L", T.BIGINT), val("DEC", T.Decimal(4, 2)), val("S", T.STRING))
    assert decode_one(s, b'{"L":1e999999999,"S":1e999999999}') == (0, None, "1E+999999999")
    assert "Got 1E+999999999" in error_of(s, b'{"DEC":1e999999999}')


def test_json_nested_types_and_nested_case_insensitive_fields() -> None:
    s = spec(
        "JSON",
        val("S", T.Struct((T.StructField("PERSON", T.Struct((T.StructField("NAME", T.STRING),))),
                           T.StructField("Age", T.INTEGER)))),
        val("A", T.Array(T.Array(T.INTEGER))),
        val("M", T.Map(T.STRING, T.Array(T.DATE))),
        val("TS", T.Array(T.TIMESTAMP)),
    )
    record = (
        b'{"s":{"person":{"name":"George"},"Age":"3"},"a":[[0,1],null,[2]],'
        b'"m":{"k":[1,null],"n":null},"ts":[1000,null]}'
    )
    assert decode_one(s, record) == (
        {"PERSON": {"NAME": "George"}, "Age": 3},
        [[0, 1], None, [2]],
        [("k", [date(1970, 1, 2), None]), ("n", None)],
        [utc(1000), None],
    )


def test_json_nested_error_path_points_at_the_bad_element() -> None:
    s = spec("JSON", val("L", T.Array(T.Struct((T.StructField("A", T.INTEGER),)))),
             val("M", T.Map(T.STRING, T.DOUBLE)))
    assert error_of(s, b'{"L":[{"A":1},{"a":"x"}]}') == (
        "Failed to deserialize field 'L[1].A': cannot convert \"x\" to INTEGER"
    )
    assert error_of(s, b'{"M":{"ok":1,"bad":"y"}}') == (
        "Failed to deserialize field 'M[\"bad\"]': cannot convert \"y\" to DOUBLE"
    )


def test_json_bad_record_gets_nulls_and_does_not_affect_the_others() -> None:
    s = spec("JSON", val("ID", T.INTEGER), val("AMOUNT", T.DOUBLE))
    rows, errors = decode(s, b'{"ID":1,"AMOUNT":1.5}', b'{"ID":2,"AMOUNT":"abc"}', b'{"ID":3}')
    assert rows == [(1, 1.5), (None, None), (3, None)]
    assert errors == [
        None, "Failed to deserialize field 'AMOUNT': cannot convert \"abc\" to DOUBLE", None
    ]


# Not ksqlDB's wording: the reasons after "Malformed JSON at char N:" ("Expecting ',' delimiter",
# "Expecting value", "Extra data") are Python's json module's messages passed through by
# streamsql/formats/json_format.py. ksqlDB's processing log carries Jackson's reason instead
# ("Failed to deserialize value from topic: <topic>. <Jackson message>"). These pin streamsql's
# current text only; they are not a ksqlDB specification.
@pytest.mark.parametrize(
    ("record", "message"),
    [
        (b'{"A":1', "Malformed JSON at char 6: Expecting ',' delimiter"),
        (b'{"A":01}', "Malformed JSON at char 6: Expecting ',' delimiter"),
        (b"", "Malformed JSON at char 0: Expecting value"),
        (b'{"A":1} x', "Malformed JSON at char 8: Extra data"),
        (b'{"A":NaN}', "Malformed JSON: non-standard number NaN is not allowed"),
        (b'{"A":"\xff"}', "Malformed JSON: not UTF-8 at byte 6"),
        (b"[1,2]", "Expected a JSON object for the value, got a JSON array"),
        (b'"x"', 'Expected a JSON object for the value, got "x"'),
    ],
)
def test_json_malformed_records(record: bytes, message: str) -> None:
    assert error_of(spec("JSON", val("A", T.INTEGER)), record) == message


def test_json_unpaired_surrogate_escape_is_malformed_but_pairs_are_fine() -> None:
    s = spec("JSON", val("A", T.STRING))
    assert decode_one(s, b'{"A":"\\ud83d\\ude00"}') == ("\U0001f600",)
    assert error_of(s, b'{"A":"\\ud800"}') == (
        "Malformed JSON: string with an unpaired surrogate escape"
    )


def test_json_reads_utf16_like_jackson() -> None:
    assert decode_one(spec("JSON", val("A", T.STRING)), '{"A":"é"}'.encode("utf-16")) == ("é",)


def test_json_unwrapped_single_value_is_the_bare_json() -> None:
    # json.json "... - value - anonymous - deserialize" and serdes.json "deserialize and serialize
    # unwrapped struct".
    s = spec("JSON", val("V", T.Array(T.DOUBLE)), wrap_single_value=False)
    assert decode_one(s, b"[10.1]") == ([10.1],)
    f1 = T.Struct((T.StructField("F1", T.STRING),))
    s = spec("JSON", val("FOO", f1), wrap_single_value=False)
    assert decode_one(s, b'{"F1":"bar"}') == ({"F1": "bar"},)
    assert encode(s, ({"F1": "bar"},)) == [b'{"F1":"bar"}']


def test_json_single_key_is_unwrapped_and_multiple_keys_are_an_object() -> None:
    # json.json "STRING - key" / "DECIMAL - key", multi-col-keys.json "select * from stream".
    assert decode_one(spec("JSON", key("K", T.STRING)), b'"Hey"') == ("Hey",)
    dec_key = spec("JSON", key("K", T.Decimal(6, 4)))
    assert decode_one(dec_key, b"12.365") == (D("12.3650"),)
    assert encode(dec_key, (D("12.3650"),), (None,)) == [b"12.3650", None]
    keys = spec("JSON", key("K", T.INTEGER), key("K2", T.INTEGER))
    assert decode_one(keys, b'{"K":null,"K2":2}') == (None, 2)
    assert encode(keys, (1, 2), (None, 2)) == [b'{"K":1,"K2":2}', b'{"K":null,"K2":2}']


def test_json_map_with_non_string_keys_is_rejected() -> None:
    with pytest.raises(ConfigError, match="^JSON only supports MAP types with STRING keys$"):
        serde_for(spec("JSON", val("M", T.Array(T.Map(T.INTEGER, T.DOUBLE)))))


# --- JSON: writing ----------------------------------------------------------------------------


def test_json_writes_compact_object_in_column_order_with_nulls_kept() -> None:
    s = spec("JSON", *ALL_PRIMITIVES)
    row = (True, 10, 1234567890123, 0.0, D("10.0000"), "x", b"variations",
           date(1970, 1, 11), 10, utc(1000))
    assert encode(s, row, (None,) * 10) == [
        b'{"B":true,"I":10,"L":1234567890123,"D":0.0,"DEC":10.0000,"S":"x",'
        b'"BY":"dmFyaWF0aW9ucw==","DT":10,"TM":10,"TS":1000}',
        b'{"B":null,"I":null,"L":null,"D":null,"DEC":null,"S":null,"BY":null,"DT":null,'
        b'"TM":null,"TS":null}',
    ]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.5, b"1.5"),
        (100.0, b"100.0"),
        (-0.0, b"-0.0"),
        (1234567.0, b"1234567.0"),
        (12345678.0, b"1.2345678E7"),
        (1e20, b"1.0E20"),
        (0.001, b"0.001"),
        (0.0001, b"1.0E-4"),
        (22026.465794806718, b"22026.465794806718"),
        (float("nan"), b'"NaN"'),
        (float("-inf"), b'"-Infinity"'),
    ],
)
def test_json_writes_doubles_as_java_does(value: float, text: bytes) -> None:
    assert encode(spec("JSON", val("D", T.DOUBLE), wrap_single_value=False), (value,)) == [text]


def test_json_writes_decimals_at_their_scale_as_bigdecimal_tostring() -> None:
    s = spec("JSON", val("DEC", T.Decimal(33, 16)), wrap_single_value=False)
    assert encode(s, (D("-12345.12"),), (D(0),)) == [b"-12345.1200000000000000", b"0E-16"]


def test_json_writes_strings_with_minimal_escaping() -> None:
    s = spec("JSON", val("S", T.STRING), wrap_single_value=False)
    assert encode(s, ('é "q" \\ \n\x01/',)) == ['"é \\"q\\" \\\\ \\n\\u0001/"'.encode()]


def test_json_writes_nested_types() -> None:
    t = T.Struct((T.StructField("F0", T.INTEGER), T.StructField("ts", T.Array(T.TIMESTAMP)),
                  T.StructField("M", T.Map(T.STRING, T.DATE))))
    s = spec("JSON", val("FOO", t), val("A", T.Array(T.BIGINT)))
    row = ({"F0": None, "ts": [utc(5), None], "M": [("a", date(1970, 1, 3))]}, [12, 34, None])
    assert encode(s, row) == [b'{"FOO":{"F0":null,"ts":[5,null],"M":{"a":2}},"A":[12,34,null]}']


def test_json_unwrapped_null_writes_no_record_but_wrapped_null_writes_an_object() -> None:
    # json.json "serialize anonymous primitive - value" vs "serialize nested primitive - value".
    unwrapped = spec("JSON", val("FOO", T.BOOLEAN), wrap_single_value=False)
    assert encode(unwrapped, (True,), (None,)) == [b"true", None]
    assert encode(spec("JSON", val("FOO", T.BOOLEAN)), (True,), (None,)) == [
        b'{"FOO":true}', b'{"FOO":null}',
    ]


def test_json_round_trips_every_type() -> None:
    nested = T.Struct((T.StructField("X", T.Map(T.STRING, T.Array(T.Decimal(5, 1)))),))
    s = spec("JSON", *ALL_PRIMITIVES, val("N", nested))
    row = (False, -5, -(2**63), 1e-300, D("-1.2345"), "☃", b"\x00\xff", date(2024, 2, 29),
           86399999, utc(1_700_000_000_123), {"X": [("k", [D("1.5"), None])]})
    encoded = encode(s, row)
    assert decode_one(s, encoded[0]) == row


# --- DELIMITED --------------------------------------------------------------------------------


def test_delimited_reads_and_writes_the_qtt_select_case() -> None:
    # delimited.json "select delimited value_format".
    s = spec("DELIMITED", val("ID", T.BIGINT), val("NAME", T.STRING), val("VALUE", T.INTEGER))
    assert decode_one(s, b"0,zero,0") == (0, "zero", 0)
    assert encode(s, (0, "zero", 0), (100, "100", 500)) == [b"0,zero,0", b"100,100,500"]


@pytest.mark.parametrize("delimiter", ["|", "$", " ", "\t"])
def test_delimited_uses_the_configured_delimiter(delimiter: str) -> None:
    s = spec("DELIMITED", val("ID", T.BIGINT), val("NAME", T.STRING), val("VALUE", T.INTEGER),
             delimiter=delimiter)
    text = delimiter.join(["0", "zero", "0"]).encode()
    assert decode_one(s, text) == (0, "zero", 0)
    assert encode(s, (0, "zero", 0)) == [text]


def test_delimited_reads_every_primitive_type() -> None:
    s = spec("DELIMITED", *ALL_PRIMITIVES)
    assert decode_one(s, b"true,10,1511897796092,10.0,10.10,hi,ew==,10,100,100\r\n") == (
        True, 10, 1511897796092, 10.0, D("10.1000"), "hi", b"{", date(1970, 1, 11), 100, utc(100),
    )


def test_delimited_empty_fields_are_null_for_every_type_including_strings() -> None:
    s = spec("DELIMITED", *ALL_PRIMITIVES)
    assert decode_one(s, b",,,,,,,,,") == (None,) * 10


def test_delimited_quoted_fields_and_keys() -> None:
    # delimited.json "INT - key", "BOOLEAN - key", "multi-column key".
    assert decode_one(spec("DELIMITED", key("K", T.INTEGER)), b'"22"') == (22,)
    assert decode_one(spec("DELIMITED", key("K", T.BOOLEAN)), b'"true"') == (True,)
    keys = spec("DELIMITED", key("K1", T.STRING), key("K2", T.STRING))
    assert decode_one(keys, b"foo,bar") == ("foo", "bar")
    assert decode_one(keys, b'"foo","bar"') == ("foo", "bar")
    assert decode_one(keys, b'"a,""b""",c') == ('a,"b"', "c")
    semi = spec("DELIMITED", key("K1", T.STRING), key("K2", T.STRING), delimiter=";")
    assert decode_one(semi, b"foo,bar;baz") == ("foo,bar", "baz")


def test_delimited_reads_only_the_first_record_and_skips_blank_lines() -> None:
    s = spec("DELIMITED", val("A", T.STRING), val("B", T.INTEGER))
    assert decode_one(s, b'\r\n"x\ny",1\r\nz,2') == ("x\ny", 1)


def test_delimited_boolean_follows_java_parse_boolean() -> None:
    s = spec("DELIMITED", val("B", T.BOOLEAN))
    rows, _ = decode(s, b"TRUE", b"false", b"yes")
    assert rows == [(True,), (False,), (False,)]


def test_delimited_decimals_keep_and_pad_their_scale() -> None:
    # decimal.json "DELIMITED should not trim trailing zeros", delimited.json "DECIMAL - key" and
    # "read written decimals" (the quoted output is commons-csv quoting a first field that does not
    # start with a letter or digit).
    s = spec("DELIMITED", key("K", T.Decimal(6, 4)))
    assert decode_one(s, b'"12.0"') == (D("12.0000"),)
    assert encode(s, (D("12.0000"),), (None,)) == [b"12.0000", None]
    v = spec("DELIMITED", val("V", T.Decimal(33, 16)))
    records = [b"12345678987654321.2345678987654321", b".12", b"-12345.12", b'"-12345.12"', b"0"]
    rows, errors = decode(v, *records)
    assert errors == [None] * 5
    assert encode(v, *rows) == [
        b"12345678987654321.2345678987654321",
        b"0.1200000000000000",
        b'"-12345.1200000000000000"',
        b'"-12345.1200000000000000"',
        b"0.0000000000000000",
    ]


def test_delimited_dates_times_timestamps_are_integers() -> None:
    # date.json / time.json / timestamp.json "DELIMITED in/out".
    s = spec("DELIMITED", val("DATE", T.DATE))
    rows, _ = decode(s, b"10", b"-10")
    assert rows == [(date(1970, 1, 11),), (date(1969, 12, 22),)]
    assert encode(s, *rows) == [b"10", b'"-10"']
    t = spec("DELIMITED", val("TIME", T.TIME), val("TS", T.TIMESTAMP))
    assert decode_one(t, b"10,10") == (10, utc(10))
    assert encode(t, (10, utc(10))) == [b"10,10"]


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        ("plain", "plain"),
        ("a,b", '"a,b"'),
        ('say "hi"', '"say ""hi"""'),
        ("two\nlines", '"two\nlines"'),
        (" lead", '" lead"'),
        ("trail ", '"trail "'),
        ("#tag", '"#tag"'),
        ("-neg", "-neg"),  # non-alphanumeric start quotes only the first field
        ("", ""),  # empty: quoted only when first, written as a bare empty field otherwise
    ],
)
def test_delimited_quotes_exactly_as_commons_csv(text: str, quoted: str) -> None:
    s = spec("DELIMITED", val("ID", T.INTEGER), val("S", T.STRING))
    assert encode(s, (1, text)) == [f"1,{quoted}".encode()]


def test_delimited_first_field_quoting() -> None:
    s = spec("DELIMITED", val("S", T.STRING), val("ID", T.INTEGER))
    assert encode(s, ("", 1), ("-x", 1), ("é", 1), ("ok", None)) == [
        b'"",1', b'"-x",1', '"é",1'.encode(), b"ok,",
    ]


def test_delimited_writes_doubles_booleans_and_bytes_like_ksqldb() -> None:
    s = spec("DELIMITED", val("ID", T.INTEGER), val("D", T.DOUBLE), val("B", T.BOOLEAN),
             val("BY", T.BYTES))
    assert encode(s, (1, 10.0, True, b"{"), (2, 1e20, False, None)) == [
        b"1,10.0,true,ew==", b"2,1.0E20,false,",
    ]


def test_delimited_null_single_key_writes_no_key_but_null_single_value_writes_empty_text() -> None:
    assert encode(spec("DELIMITED", key("K", T.INTEGER)), (None,)) == [None]
    assert encode(spec("DELIMITED", val("V", T.INTEGER)), (None,)) == [b""]


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (b"1,2", "Column count mismatch on deserialization: expected 3 columns, got 2"),
        (b"1,2,3,4", "Column count mismatch on deserialization: expected 3 columns, got 4"),
        (b"", "No fields in record"),
        (b"\r\n", "No fields in record"),
        # the reason is Python's csv module's wording (csv.Error), pinned as streamsql's text; ksqlDB
        # reads DELIMITED with Apache Commons CSV and reports that library's reason instead
        (b'"1"x,2,3', "Malformed delimited record: ',' expected after '\"'"),
        (b"x,2,3", "Failed to deserialize field 'I': cannot convert \"x\" to INTEGER"),
        (b"1,2x,3", "Failed to deserialize field 'D': cannot convert \"2x\" to DECIMAL(2, 0)"),
        (
            b"1,2.5,3",
            "Failed to deserialize field 'D': Cannot fit decimal '2.5' into DECIMAL(2, 0) without "
            "rounding. (Requires 2,1)",
        ),
        (b"1,2,abc", "Failed to deserialize field 'TM': cannot convert \"abc\" to TIME"),
        (
            b"1,2,3000000000",
            "Failed to deserialize field 'TM': Time values must use number of milliseconds "
            "greater than 0 and less than 86400000.",
        ),
    ],
)
def test_delimited_bad_records(record: bytes, message: str) -> None:
    s = spec("DELIMITED", val("I", T.INTEGER), val("D", T.Decimal(2, 0)), val("TM", T.TIME))
    assert error_of(s, record) == message


def test_delimited_rejects_bad_base64() -> None:
    assert error_of(spec("DELIMITED", val("B", T.BYTES)), b"a") == (
        "Failed to deserialize field 'B': Value is not a valid Base64 encoded string: a"
    )


@pytest.mark.parametrize(
    ("t", "name"),
    [(T.Array(T.INTEGER), "ARRAY"), (T.Map(T.STRING, T.INTEGER), "MAP"),
     (T.Struct((T.StructField("F1", T.DOUBLE),)), "STRUCT")],
)
def test_delimited_rejects_nested_types(t: T.SqlType, name: str) -> None:
    with pytest.raises(ConfigError) as e:
        serde_for(spec("DELIMITED", key("K", t)))
    assert str(e.value) == f"The 'DELIMITED' format does not support type '{name}', column: `K`"


def test_delimited_rejects_multi_character_delimiter() -> None:
    with pytest.raises(ConfigError, match="Invalid delimiter value: '<~>'"):
        serde_for(spec("DELIMITED", val("A", T.INTEGER), delimiter="<~>"))


def test_delimited_round_trips_every_type() -> None:
    s = spec("DELIMITED", *ALL_PRIMITIVES, delimiter="|")
    row = (True, -5, -(2**63), 1e-300, D("-1.2345"), 'a|"b"\n', b"\x00\xff", date(1900, 1, 1),
           0, utc(-1))
    assert decode_one(s, encode(s, row)[0]) == row


# --- KAFKA ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("t", "value", "raw"),
    [
        (T.INTEGER, 2, b"\x00\x00\x00\x02"),
        (T.INTEGER, -1, b"\xff\xff\xff\xff"),
        (T.BIGINT, 2, b"\x00\x00\x00\x00\x00\x00\x00\x02"),
        (T.DOUBLE, 2.2, struct.pack(">d", 2.2)),
        (T.STRING, "hello ☃", "hello ☃".encode()),
        (T.STRING, "", b""),  # key-schemas.json "table explicit KAFKA STRING KEY"
        (T.BYTES, b"variations", b"variations"),  # bytes.json "KAFKA in/out"
    ],
)
def test_kafka_primitives(t: T.SqlType, value: Any, raw: bytes) -> None:
    for column in (key("K", t), val("V", t)):
        s = spec("KAFKA", column)
        assert decode_one(s, raw) == (value,)
        assert encode(s, (value,), (None,)) == [raw, None]


@pytest.mark.parametrize(
    ("t", "raw", "reason"),
    [
        (T.INTEGER, b"\x00\x01", "expected 4 bytes for a KAFKA INTEGER, got 2"),
        (T.INTEGER, b"", "expected 4 bytes for a KAFKA INTEGER, got 0"),
        (T.BIGINT, b"\x00\x00\x00\x01", "expected 8 bytes for a KAFKA BIGINT, got 4"),
        (T.DOUBLE, b"\x00" * 9, "expected 8 bytes for a KAFKA DOUBLE, got 9"),
    ],
)
def test_kafka_wrong_size_is_an_error(t: T.SqlType, raw: bytes, reason: str) -> None:
    s = spec("KAFKA", key("ID", t))
    rows, errors = decode(s, raw, None)
    assert rows == [(None,), (None,)]
    assert errors == [f"Failed to deserialize field 'ID': {reason}", None]


@pytest.mark.parametrize(
    ("t", "name"),
    [(T.BOOLEAN, "BOOLEAN"), (T.Decimal(21, 19), "DECIMAL"), (T.DATE, "DATE"), (T.TIME, "TIME"),
     (T.TIMESTAMP, "TIMESTAMP"), (T.Array(T.INTEGER), "ARRAY"), (T.Map(T.STRING, T.INTEGER), "MAP"),
     (T.Struct((T.StructField("F1", T.DOUBLE),)), "STRUCT")],
)
def test_kafka_rejects_unsupported_types_with_ksqldb_message(t: T.SqlType, name: str) -> None:
    with pytest.raises(ConfigError) as e:
        serde_for(spec("KAFKA", key("K", t)))
    assert str(e.value) == f"The 'KAFKA' format does not support type '{name}'"


def test_kafka_rejects_more_than_one_column() -> None:
    with pytest.raises(ConfigError) as e:
        serde_for(spec("KAFKA", val("A", T.INTEGER), val("B", T.STRING)))
    assert str(e.value) == (
        "The 'KAFKA' format only supports a single field. Got: [`A` INTEGER, `B` STRING]"
    )


def test_kafka_without_columns_reads_and_writes_nothing() -> None:
    rows, errors = decode(spec("KAFKA"), b"ignored", None)
    assert errors == [None, None]
    assert serde_for(spec("KAFKA")).encode(no_columns(2)) == [None, None]


# --- NONE -------------------------------------------------------------------------------------


def test_none_format_reads_no_columns_and_writes_no_bytes() -> None:
    serde = serde_for(spec("NONE"))
    result = serde.decode([b"data that should be ignored", None])
    assert result.columns == [] and result.errors == [None, None]
    assert serde.encode(no_columns(3)) == [None, None, None]


def test_none_format_with_columns_is_rejected_with_ksqldb_message() -> None:
    with pytest.raises(ConfigError) as e:
        serde_for(spec("NONE", key("K", T.STRING)))
    assert str(e.value) == (
        "The 'NONE' format can only be used when no columns are defined. Got: [`K` STRING KEY]"
    )


# --- Arrow shape ------------------------------------------------------------------------------


def test_empty_batches_have_typed_columns() -> None:
    for fmt, columns in [("JSON", ALL_PRIMITIVES), ("DELIMITED", ALL_PRIMITIVES),
                         ("KAFKA", (key("K", T.BIGINT),))]:
        rows, errors = decode(spec(fmt, *columns))
        assert rows == [] and errors == []


# --- VALUE_COMPRESSION='GZIP' (formats/compression.py) ---------------------------------------------

def test_gzip_batches_split_into_one_record_per_line_and_bad_messages_are_named() -> None:
    import gzip

    from streamsql.formats.compression import split_batches

    records, origin, failed = split_batches(
        [gzip.compress(b"a,1\nb,2\n\n"), None, b"plain", gzip.compress(b"\xff\xfe"), gzip.compress(b"c,3")])
    assert records == [b"a,1", b"b,2", None, b"c,3"]
    assert origin == [0, 0, 1, 4]
    assert set(failed) == {2, 3}
    assert "cannot decompress the GZIP value (5 bytes)" in failed[2]


def test_gzip_wrapped_serde_writes_gzip_and_reads_it_back() -> None:
    import gzip

    spec = FormatSpec("DELIMITED", (Column("A", T.STRING), Column("N", T.INTEGER)), options={"compression": "GZIP"})
    serde = serde_for(spec)
    batch = pa.RecordBatch.from_pydict({"A": ["x", "y"], "N": [1, None]})
    encoded = serde.encode(batch)
    assert [gzip.decompress(e) for e in encoded] == [b"x,1", b"y,"]
    result = serde.decode(encoded + [b"junk"])
    assert result.columns[0].to_pylist()[:2] == ["x", "y"] and result.columns[1].to_pylist()[:2] == [1, None]
    assert result.errors[:2] == [None, None] and "GZIP" in (result.errors[2] or "")


@pytest.mark.parametrize("codec, fmt, side, message", [
    ("ZSTD", "DELIMITED", "VALUE", "String must be one of: GZIP"),
    ("gzip", "AVRO", "VALUE", "line-oriented value formats"),
    ("GZIP", "JSON", "KEY", "only values may be compressed"),
])
def test_compression_option_is_checked_at_statement_time(codec: str, fmt: str, side: str, message: str) -> None:
    from streamsql.formats.compression import check_compression

    with pytest.raises(ConfigError, match=message):
        check_compression(codec, fmt, side)


def test_a_multi_column_key_of_nulls_is_null_when_passed_through_and_an_object_when_computed() -> None:
    """ksqlDB writes a source's null key through as null, but a PARTITION BY key whose columns are
    all null as an object of nulls (partition-by 'multiple columns' cases)."""
    from streamsql.kafka.options import SinkOptions
    from streamsql.kafka.sink import RecordEncoder

    key = FormatSpec("JSON", (Column("ID", T.INTEGER, "key"), Column("AGE", T.INTEGER, "key")))
    value = FormatSpec("JSON", (Column("NAME", T.STRING),))
    batch = pa.RecordBatch.from_pydict({"ID": pa.array([10, None], pa.int32()), "AGE": pa.array([30, None], pa.int32()),
                                        "NAME": ["bob", "ann"]})
    passed = RecordEncoder(SinkOptions("b:9092", "t", key.to_json(), value.to_json()))
    computed = RecordEncoder(SinkOptions("b:9092", "t", key.to_json(), value.to_json(), computed_key=True))
    assert passed.encode(batch)[0] == [b'{"ID":10,"AGE":30}', None]
    assert computed.encode(batch)[0] == [b'{"ID":10,"AGE":30}', b'{"ID":null,"AGE":null}']


def test_inferred_names_upper_cased_unless_the_schema_was_named_by_id() -> None:
    """ksqlDB: UPPERCASE_FIELD_NAME for a subject's latest schema, ORIGINAL_FIELD_NAME for a
    schema given by KEY_/VALUE_SCHEMA_ID, at every level, in every registry format."""
    import json as _json

    from streamsql.formats.registry import columns_from_registry

    avro = _json.dumps({"type": "record", "name": "R", "fields": [
        {"name": "aB", "type": {"type": "array", "items": {"type": "record", "name": "S", "fields": [
            {"name": "cD", "type": "int"}]}}}]})
    json_sr = _json.dumps({"type": "object", "properties": {
        "aB": {"type": "object", "properties": {"cD": {"type": "integer", "connect.type": "int32"}}}}})
    proto = 'syntax = "proto3"; message R { S aB = 1; } message S { int32 cD = 1; }'
    for fmt, text, kept, upper in (
            ("AVRO", avro, ("aB", "ARRAY<STRUCT<`cD` INTEGER>>"), ("AB", "ARRAY<STRUCT<`CD` INTEGER>>")),
            ("JSON_SR", json_sr, ("aB", "STRUCT<`cD` INTEGER>"), ("AB", "STRUCT<`CD` INTEGER>")),
            ("PROTOBUF", proto, ("aB", "STRUCT<`cD` INTEGER>"), ("AB", "STRUCT<`CD` INTEGER>"))):
        for keep, want in ((True, kept), (False, upper)):
            [col] = columns_from_registry(fmt, text, role="value", unwrapped=False, keep_names=keep)
            assert (col.name, str(col.type)) == want, (fmt, keep)


@pytest.mark.parametrize("strings", [
    ["plain", "é ü 中 😀", "", None, "\x7f", "/"],  # nothing to escape: rendered by Arrow
    ["plain", 'q"', "b\\s", "n\n", "\x01", None],  # escapes: the column is rendered value by value
])
def test_json_wrapped_rows_render_as_ksqldb_writes_them_whichever_path_renders_a_column(strings: list[Any]) -> None:
    """Integer, boolean and clean string columns are rendered by Arrow, the rest by Python; both
    give the text ksqlDB's Jackson writes (ints as digits, strings escaped as JSON, non-ASCII kept,
    decimals as BigDecimal.toString: plain, or scientific below an adjusted exponent of -6)."""
    from json.encoder import encode_basestring

    s = spec("JSON", val("I", T.INTEGER), val("B", T.BIGINT), val("S", T.STRING), val("T", T.BOOLEAN),
             val("D", T.DOUBLE), val("N", T.Decimal(22, 16)))
    decimals = [D("0E-16"), D("-12345.1200000000000000"), None, D("1E-16"), D("0.5000000000000000"), D("7.0000000000000000")]
    ints = [1, -2, None, 2**31 - 1, 0, 5]
    bigs = [2**63 - 1, -2**63, None, 0, 1, 7]
    bools = [True, False, None, True, False, True]
    doubles = [1.0, 1e10, None, 0.5, -0.0, 2.0]
    rows = list(zip(ints, bigs, strings, bools, doubles, decimals))

    def text(v: Any, render: Any) -> str:
        return "null" if v is None else render(v)

    doubles_text = ["1.0", "1.0E10", "null", "0.5", "-0.0", "2.0"]
    expected = [("{" + f'"I":{text(i, str)},"B":{text(b, str)},"S":{text(st, encode_basestring)},'
                 f'"T":{text(t, lambda x: "true" if x else "false")},"D":{d},"N":{text(n, str)}' + "}").encode()
                for (i, b, st, t, _, n), d in zip(rows, doubles_text)]
    assert encode(s, *rows) == expected


def test_doubles_read_as_javas_double_to_string() -> None:
    # JDK 19+ Double.toString: two digits where one would do (literals.json, "DOUBLE literal
    # min/max", DELIMITED: Double.MIN_VALUE is 4.9E-324)
    from streamsql.formats.coerce import java_double

    assert [java_double(v) for v in (5e-324, -5e-324, 1e-323, 1e-5, 1.7976931348623157e308, 0.001)] == [
        "4.9E-324", "-4.9E-324", "9.9E-324", "1.0E-5", "1.7976931348623157E308", "0.001"]
