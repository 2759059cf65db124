"""Value rules shared by the text formats (JSON, DELIMITED), written to match ksqlDB's Java serdes.

ksqlDB parses text with Java's own parsers (``Integer.parseInt``, ``Double.parseDouble``,
``new BigDecimal``, ``java.util.Base64``) and prints doubles with ``Double.toString``. Python's
parsers accept more (whitespace, ``_`` digit separators, ``inf``) and print differently (``1e+20``
instead of ``1.0E20``), so every rule that decides which bytes are accepted or written lives here,
spelled the Java way, instead of leaning on ``int()``/``float()``/``repr()`` directly.

Domain values (what coercers return and encoders take): INTEGER/BIGINT/TIME as ``int`` (TIME in
milliseconds since midnight), DATE as ``int`` days since the epoch, TIMESTAMP as ``int``
microseconds when decoding (what Arrow's ``timestamp[us]`` takes) and milliseconds when encoding
(what ksqlDB writes), DECIMAL as ``decimal.Decimal`` at the column's scale, BYTES as ``bytes``.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from decimal import ROUND_HALF_EVEN, Context, Decimal, InvalidOperation

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
MILLIS_PER_DAY = 86_400_000
#: Largest |millis| whose microsecond value still fits Arrow's int64 timestamp.
MAX_TIMESTAMP_MILLIS = LONG_MAX // 1000

_JAVA_INT = re.compile(r"[+-]?[0-9]+")
_JAVA_DOUBLE = re.compile(
    r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)[fFdD]?"
)
_JAVA_BIG_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
#: Wide enough that quantizing a DECIMAL(38, s) value never hits the context's precision.
_DECIMAL_CONTEXT = Context(prec=100)
_JAVA_BLANKS = "".join(map(chr, range(33)))  # what Java's String.trim() strips
_MAX_SHOWN = 40


class FieldError(Exception):
    """A value that does not convert. ``path`` grows (``[2]``, ``.F``) as the error unwinds through
    arrays, maps and structs, so the final message names the exact nested field."""

    def __init__(self, reason: str, path: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.path = path


def shown(value: object) -> str:
    """A short rendering of a bad value for an error message (long values are cut)."""
    if isinstance(value, dict):
        return "a JSON object"
    if isinstance(value, list):
        return "a JSON array"
    if value is True or value is False:
        return "true" if value else "false"
    text = json.dumps(value, ensure_ascii=False) if isinstance(value, str) else str(value)
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 3] + "..."


def cannot_convert(value: object, type_name: object) -> FieldError:
    return FieldError(f"cannot convert {shown(value)} to {type_name}")


def wrap(value: int, bits: int) -> int:
    """Two's-complement wrap, as Java's ``(int)``/``(long)`` narrowing does: ksqlDB reads a JSON
    number into INTEGER with ``JsonNode.intValue()``, which wraps instead of failing."""
    mask = (1 << bits) - 1
    value &= mask
    return value - (1 << bits) if value >> (bits - 1) else value


def parse_long(text: str, type_name: str, lo: int = LONG_MIN, hi: int = LONG_MAX) -> int:
    """``Long.parseLong``/``Integer.parseInt``: optional sign and ASCII digits, nothing else."""
    if _JAVA_INT.fullmatch(text):
        try:
            value = int(text)
        except ValueError:  # more digits than Python converts: far out of range anyway
            raise cannot_convert(text, type_name) from None
        if lo <= value <= hi:
            return value
    raise cannot_convert(text, type_name)


def parse_double(text: str) -> float:
    """``Double.parseDouble``: trims blanks; takes ``NaN``, ``Infinity``, a ``d``/``f`` suffix."""
    body = text.strip(_JAVA_BLANKS)
    if not _JAVA_DOUBLE.fullmatch(body):
        raise cannot_convert(text, "DOUBLE")
    if body[-1] in "fFdD" and not body.endswith("Infinity"):
        body = body[:-1]
    return float(body)


def parse_decimal(text: str, precision: int, scale: int) -> Decimal:
    """``new BigDecimal(text)`` followed by ksqlDB's ``DecimalUtil.ensureFit``."""
    if not _JAVA_BIG_DECIMAL.fullmatch(text):
        raise cannot_convert(text, f"DECIMAL({precision}, {scale})")
    return fit_decimal(Decimal(text), precision, scale)


def fit_decimal(value: Decimal, precision: int, scale: int) -> Decimal:
    """ksqlDB's ``DecimalUtil.ensureFit``: reject values too large for the type, and values that
    would need rounding (ksqlDB never rounds on read); otherwise pad to the type's scale."""
    digits = precision - scale
    if value.copy_abs() >= 10**digits:  # copy_abs: no context, so no Overflow trap
        raise FieldError(
            f"Numeric field overflow: A field with precision {precision} and scale {scale} "
            f"must round to an absolute value less than 10^{digits}. Got {plain(value)}"
        )
    try:
        fitted = value.quantize(Decimal(1).scaleb(-scale), context=_DECIMAL_CONTEXT)
    except InvalidOperation:
        fitted = None
    if fitted is None or fitted != value:
        sign, coefficient, exponent = value.as_tuple()
        raise FieldError(
            f"Cannot fit decimal '{plain(value)}' into DECIMAL({precision}, {scale}) "
            f"without rounding. (Requires {len(coefficient)},{-int(exponent)})"
        )
    return fitted


def plain(value: Decimal) -> str:
    """``BigDecimal.toPlainString`` for error messages, except that an absurd exponent (which
    would print millions of zeros) stays in scientific notation."""
    return format(value, "f") if abs(int(value.as_tuple().exponent)) < 100 else str(value)


def long_value(value: Decimal) -> int:
    """``BigDecimal.longValue()``: truncate toward zero, keep the low 64 bits. A value with an
    exponent of 64 or more is a multiple of 2**64, so its low bits are 0; answering that directly
    keeps ``1e999999999`` from building a billion-digit integer."""
    if int(value.as_tuple().exponent) >= 64:
        return 0
    return wrap(int(value), 64)


def check_time(millis: int) -> int:
    """TIME is milliseconds since midnight; ksqlDB (``SerdeUtils.returnTimeOrThrow``) rejects
    anything outside one day."""
    if 0 <= millis <= MILLIS_PER_DAY:
        return millis
    raise FieldError(
        "Time values must use number of milliseconds greater than 0 and less than "
        f"{MILLIS_PER_DAY}."
    )


def check_date(days: int) -> int:
    if INT_MIN <= days <= INT_MAX:
        return days
    raise FieldError(f"DATE value {days} (days since epoch) is out of range")


def timestamp_micros(millis: int) -> int:
    """Epoch millis (ksqlDB's TIMESTAMP) to the microseconds Arrow/Spark hold."""
    if -MAX_TIMESTAMP_MILLIS <= millis <= MAX_TIMESTAMP_MILLIS:
        return millis * 1000
    raise FieldError(f"TIMESTAMP value {millis} (epoch millis) is out of range")


def decode_base64(text: str) -> bytes:
    """``java.util.Base64.getDecoder()``: standard alphabet, padding optional, no whitespace."""
    body = text.rstrip("=")
    invalid = FieldError(f"Value is not a valid Base64 encoded string: {shown(text)[1:-1]}")
    if not _BASE64.fullmatch(text) or len(text) - len(body) > 2 or len(body) % 4 == 1:
        raise invalid
    try:
        return base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
    except binascii.Error:
        raise invalid from None


def encode_base64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def java_double(value: float) -> str:
    """``Double.toString``: plain notation with at least one fraction digit for 1e-3 <= |v| < 1e7,
    otherwise ``d.dddE[-]n``; shortest digits that round-trip (what JDK 19+ prints)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0.0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    if 1e-3 <= abs(value) < 1e7:
        return repr(value)  # Python's repr is plain notation in exactly this range
    sign, digits, exponent = Decimal(repr(value)).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    power = int(exponent) + len(digits) - 1
    if len(text) == 1:
        # JDK 19+: where one digit would do, the two-digit decimal closest to the value is
        # printed (Double.MIN_VALUE is 4.9E-324, not 5.0E-324); the same text unless the value
        # is far from its one-digit neighbour (the smallest subnormals)
        exact = abs(Decimal(value))
        power = exact.adjusted()
        text = str(exact.scaleb(-power).quantize(Decimal("0.1"), rounding=ROUND_HALF_EVEN)).replace(".", "")
        if len(text) > 2:  # 9.96 rounded up to 10.0
            power, text = power + 1, text[:2]
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{power}"


class RecordError(Exception):
    """A whole record that does not decode; its message is what the processing log shows."""


def field_failure(column: str, error: FieldError) -> RecordError:
    return RecordError(f"Failed to deserialize field '{column}{error.path}': {error.reason}")
