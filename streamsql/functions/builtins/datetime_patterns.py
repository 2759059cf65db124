"""Which datetime patterns Spark accepts, decided in Python.

Spark builds a ``DateTimeFormatter`` for a pattern lazily, when the first row is formatted or
parsed, and an invalid pattern then fails the whole task: a push query restarts in a loop, a pull
query answers 500. ksqlDB instead fails the one call (``KsqlFunctionException``), writes the
record to the processing log and yields null. So the date functions check their pattern first
(:func:`pattern_error`) — at planning for a literal, per record for a column — and only hand
Spark patterns it accepts.

The rules are Spark's (``DateTimeFormatterHelper.convertIncompatiblePattern`` and the letters its
formatters refuse) on top of JDK 17's ``DateTimeFormatterBuilder.appendPattern``; the
integration test ``test_datetime_pattern_rules_match_spark`` holds them against the real Spark
over generated patterns. The module imports nothing heavy: Spark's Python workers load it.
"""

from __future__ import annotations

import re
from functools import lru_cache

#: the Spark function (a Python UDF, ``udf/runtime.py``) that checks a pattern per record
PATTERN_CHECK = "streamsql_datetime_pattern"

#: letters Spark refuses in any pattern: week-based fields, 'u' (day number of week), and the
#: letters its formatters do not support
_REFUSED = set("YWwecuAnNpB")
#: letters Spark refuses when parsing (text fields whose parsed value it cannot trust)
_REFUSED_PARSING = set("EFQq")
#: letter -> the counts JDK 17 accepts (None: any count up to 19)
_COUNTS: dict[str, range | tuple[int, ...] | None] = {
    "G": range(1, 5), "M": range(1, 5), "L": range(1, 5), "Q": range(1, 5), "q": range(1, 5), "E": range(1, 5),
    "y": range(1, 7), "D": range(1, 4), "d": (1, 2), "h": (1, 2), "H": (1, 2), "k": (1, 2), "K": (1, 2),
    "m": (1, 2), "s": (1, 2), "S": range(1, 10), "F": (1,), "a": (1,), "g": None,
    "z": range(1, 5), "V": (2,), "v": (1, 4), "O": (1, 4), "X": range(1, 6), "x": range(1, 6), "Z": range(1, 6),
}
_FRACTION_SPLIT = re.compile(r"^([^S]*)(S*)(.*)$")


def _check_letters(part: str, parsing: bool) -> str | None:
    """An unquoted stretch of a pattern: the first letter run Spark or Java refuses."""
    i = 0
    while i < len(part):
        ch = part[i]
        if not ("a" <= ch <= "z" or "A" <= ch <= "Z"):
            if ch in "{}#":
                return f"Pattern includes reserved character: '{ch}'"
            i += 1
            continue
        run = len(part[i:]) - len(part[i:].lstrip(ch))
        if ch in _REFUSED or (parsing and ch in _REFUSED_PARSING):
            return f"Illegal pattern character: {ch}"
        if ch not in _COUNTS:
            return f"Unknown pattern letter: {ch}"
        counts = _COUNTS[ch]
        if (counts is None and run > 19) or (counts is not None and run not in counts):
            return f"Wrong number of pattern letters: {ch * run}"
        i += run
    return None


def _check_brackets(part: str, depth: int) -> tuple[int, str | None]:
    for ch in part:
        if ch == "[":
            depth += 1
        elif ch == "]":
            if depth == 0:
                return depth, "Pattern invalid as it contains ] without previous ["
            depth -= 1
    return depth, None


def _check_quoted(pattern: str, parsing: bool) -> str | None:
    """Java's own reading of a pattern: quoted literals closed, letters and brackets checked."""
    i, depth, unquoted = 0, 0, ""
    while i < len(pattern):
        ch = pattern[i]
        if ch != "'":
            unquoted += ch
            i += 1
            continue
        error = _check_letters(unquoted, parsing)
        depth, bracket_error = _check_brackets(unquoted, depth)
        if error or bracket_error:
            return error or bracket_error
        unquoted = ""
        j = i + 1
        while j < len(pattern):
            if pattern[j] == "'":
                if j + 1 < len(pattern) and pattern[j + 1] == "'":
                    j += 2
                    continue
                break
            j += 1
        if j >= len(pattern):
            return "Pattern ends with an incomplete string literal"
        i = j + 1
    error = _check_letters(unquoted, parsing)
    return error or _check_brackets(unquoted, depth)[1]


def _check_fraction_pattern(pattern: str, parsing: bool) -> str | None:
    """Spark's parser for patterns with 'S' (``createBuilderWithVarLengthSecondFraction``): split
    at quotes (odd parts are literals), each even part read as runs around its 'S' runs."""
    parts = pattern.split("'")
    while len(parts) > 1 and parts[-1] == "":  # Java's split drops trailing empty strings
        parts.pop()
    depth = 0
    for index, part in enumerate(parts):
        if index % 2:
            continue
        rest = part
        while rest:
            m = _FRACTION_SPLIT.match(rest)
            if m is None or m.end() != len(rest):
                return "Unrecognized datetime pattern"
            prefix, fraction, rest = m.group(1), m.group(2), m.group(3)
            error = _check_letters(prefix, parsing)
            depth, bracket_error = _check_brackets(prefix, depth)
            if error or bracket_error:
                return error or bracket_error
            if len(fraction) > 9:
                return f"Wrong number of pattern letters: {fraction}"
    return None


@lru_cache(maxsize=1024)
def pattern_error(pattern: str, parsing: bool) -> str | None:
    """Why Spark refuses ``pattern`` (None: it accepts it). ``parsing``: for parsing text
    (to_timestamp, to_date) rather than formatting."""
    unquoted = pattern.split("'")[::2]  # Spark's own checks look at the parts outside quotes
    for part in unquoted:
        for ch in part:
            if ch in _REFUSED or (parsing and ch in _REFUSED_PARSING):
                return f"Illegal pattern character: {ch}"
        if "y" * 7 in part:
            return "Too many pattern letters: y"
    if parsing and "S" in pattern:
        return _check_fraction_pattern(pattern, parsing)
    return _check_quoted(pattern, parsing)


# --- time zones ---------------------------------------------------------------------------------

#: the Spark function (a Python UDF, ``udf/runtime.py``) that checks a time zone per record
ZONE_CHECK = "streamsql_time_zone"

#: Java's ``ZoneId.SHORT_IDS``, which Spark's ``DateTimeUtils.getZoneId`` accepts beside region ids
_SHORT_IDS = frozenset({"ACT", "AET", "AGT", "ART", "AST", "BET", "BST", "CAT", "CNT", "CST", "CTT", "EAT", "ECT",
                        "IET", "IST", "JST", "MIT", "NET", "NST", "PLT", "PNT", "PRT", "PST", "SST", "VST",
                        "EST", "MST", "HST"})
#: ``ZoneOffset.of``'s forms: ±h, ±hh, ±hh:mm, ±hhmm, ±hh:mm:ss, ±hhmmss
_OFFSET = re.compile(r"[+-](\d{1,2})(?::?(\d{2})(?::?(\d{2}))?)?")


def _offset_error(text: str) -> bool:
    """Whether ``text`` is not an offset ``ZoneOffset.of`` reads (hours ≤ 18, within ±18:00)."""
    m = _OFFSET.fullmatch(text)
    if m is None or (len(m.group(1)) == 1 and m.group(2) is not None):
        return True
    hours, minutes, seconds = (int(g or 0) for g in m.groups())
    return hours > 18 or minutes > 59 or seconds > 59 or (hours == 18 and (minutes > 0 or seconds > 0))


@lru_cache(maxsize=1)
def _regions() -> frozenset[str]:
    from zoneinfo import available_timezones

    return frozenset(available_timezones())


@lru_cache(maxsize=1024)
def zone_error(zone: str) -> str | None:
    """Why Spark would refuse ``zone`` as a time zone (its ``getZoneId``: ``ZoneId.of`` with the
    short ids, after padding a one-digit hour), or None when it accepts it. A refused zone fails
    Spark's whole task; ksqlDB fails the one call (``ZoneId.of`` throws) and logs the record."""
    text = re.sub(r"^(.*[+-])(\d):", r"\g<1>0\2:", zone, count=1)
    text = re.sub(r"([+-]\d\d):(\d)$", r"\1:0\2", text, count=1)
    if text == "Z" or text in _SHORT_IDS or text in ("UTC", "GMT", "UT"):
        return None
    if text.startswith(("+", "-")):
        return None if not _offset_error(text) else f"Invalid ID for ZoneOffset, invalid format: {zone}"
    for prefix in ("UTC", "GMT", "UT"):
        if text.startswith(prefix) and text[len(prefix):len(prefix) + 1] in ("+", "-"):
            return None if not _offset_error(text[len(prefix):]) else f"Invalid ID for offset-based ZoneId: {zone}"
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9~/._+-]+", text):
        return f"Invalid ID for region-based ZoneId, invalid format: {zone}"
    return None if text in _regions() else f"Unknown time-zone ID: {zone}"
