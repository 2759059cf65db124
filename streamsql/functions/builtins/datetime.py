"""Date and time functions (category DATE / TIME).

Representations (see streamsql.types): TIMESTAMP is Spark's TIMESTAMP (UTC session zone), DATE is
Spark's DATE, TIME is an INT of milliseconds since midnight; the deprecated functions use BIGINT
epoch milliseconds (STRINGTOTIMESTAMP/TIMESTAMPTOSTRING) and INT epoch days
(STRINGTODATE/DATETOSTRING). Format patterns are Java DateTimeFormatter patterns, which Spark's
datetime patterns follow for the common letters.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC
from typing import TYPE_CHECKING

from sqlglot import exp

from streamsql import types as t
from streamsql.errors import AnalysisError
from streamsql.functions.builtins.base import add, add_raw, any_sig, c, lit, literal_text, sig
from streamsql.functions.builtins.datetime_patterns import PATTERN_CHECK, ZONE_CHECK, pattern_error, zone_error
from streamsql.functions.compiled import Compiled
from streamsql.functions.registry import FunctionRegistry, rejected_types

if TYPE_CHECKING:
    from streamsql.planner.expressions import ExpressionCompiler

CAT = "DATE / TIME"
DAY_MS = 86_400_000
_UNITS = {"MILLISECOND": 1, "SECOND": 1000, "MINUTE": 60_000, "HOUR": 3_600_000, "DAY": DAY_MS}


def checked(function: str, cs: Sequence[Compiled], parsing: bool, prefix: str = "") -> list[Compiled]:
    """The call's arguments with its pattern (the second) made safe for Spark, which fails the
    whole task on a pattern it refuses. A literal Spark accepts stays as it is; any other
    pattern goes through the per-record check (:data:`PATTERN_CHECK`, ``udf/runtime.py``), which
    passes it on or, where Spark would refuse it, writes the record to the processing log and
    yields NULL, so the function yields NULL and the query goes on, as ksqlDB's do.
    ``prefix``: text the function puts before the pattern (PARSE_TIME's date)."""
    pattern = cs[1]
    text = literal_text(pattern)
    if text is not None and pattern_error(prefix + text, parsing) is None:
        return list(cs)
    full = f"concat({lit(prefix)}, {pattern.sql})" if prefix else pattern.sql
    values = ", ".join(f"CAST({x.sql} AS STRING)" for x in cs)
    check = f"{PATTERN_CHECK}({lit(function)}, {full}, {'true' if parsing else 'false'}, array({values}))"
    if prefix:  # the function adds the prefix itself: hand it what follows
        check = f"substring({check}, {len(prefix) + 1})"
    return [cs[0], c(check, t.STRING), *cs[2:]]


def zones_checked(function: str, cs: Sequence[Compiled], *zones: int) -> list[Compiled]:
    """The call's arguments with its time zones (at the indexes ``zones``, where given) made safe
    for Spark, which fails the whole task on a zone it does not know: a literal it accepts stays
    as it is; any other zone goes through the per-record check (:data:`ZONE_CHECK`,
    ``udf/runtime.py``), which passes it on or writes the record to the processing log and
    yields NULL (the function then yields NULL), as ksqlDB's functions do."""
    out = list(cs)
    values = ", ".join(f"CAST({x.sql} AS STRING)" for x in cs)
    for i in zones:
        if i >= len(cs):
            continue
        text = literal_text(cs[i])
        if text is not None and zone_error(text) is None:
            continue
        out[i] = c(f"{ZONE_CHECK}({lit(function)}, {cs[i].sql}, array({values}))", t.STRING)
    return out


def zoned(function: str, cs: Sequence[Compiled], parsing: bool) -> list[Compiled]:
    """A timestamp function's arguments: its pattern (the second) and its optional time zone
    (the third) checked."""
    return zones_checked(function, checked(function, cs, parsing=parsing), 2)


def _in_zone(ts: str, tz: Compiled | None) -> str:
    return ts if tz is None else f"from_utc_timestamp({ts}, {tz.sql})"


def _zone_names(zone: str) -> dict[int, str] | None:
    """Offset (seconds) -> short name of a time zone, from its winter and summer offsets."""
    from datetime import datetime as dt
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        info = ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        return None
    names: dict[int, str] = {}
    for month in (1, 7):
        local = dt(dt.now().year, month, 1, tzinfo=UTC).astimezone(info)
        offset = local.utcoffset()
        name = local.tzname()
        if offset is not None and name and name[0] not in "+-":
            names[int(offset.total_seconds())] = name
    return names


def _split_zone_letters(pattern: str) -> list[tuple[bool, str]]:
    """A Java datetime pattern as (is_zone_name, text) pieces: runs of unquoted 'z' apart."""
    pieces: list[tuple[bool, str]] = []
    current, quoted, i = "", False, 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "'":
            quoted = not quoted
            current += ch
        elif ch == "z" and not quoted:
            run = len(pattern[i:]) - len(pattern[i:].lstrip("z"))
            if current:
                pieces.append((False, current))
            pieces.append((True, "z" * run))
            current = ""
            i += run
            continue
        else:
            current += ch
        i += 1
    if current:
        pieces.append((False, current))
    return pieces


def format_in_zone(ts: str, pattern: Compiled, tz: Compiled | None) -> str:
    """date_format in a time zone. Spark prints zone names ('z') of its session zone only, so for
    a literal zone the name is chosen by the instant's offset there (PST/PDT) and spliced in."""
    shifted = _in_zone(ts, tz)
    text, zone = literal_text(pattern), literal_text(tz) if tz is not None else None
    names = _zone_names(zone) if zone is not None else None
    if text is None or not names or "z" not in text:
        return f"date_format({shifted}, {pattern.sql})"
    offset = f"CAST(unix_seconds({shifted}) - unix_seconds({ts}) AS BIGINT)"
    name = "(CASE " + " ".join(f"WHEN {offset} = {o} THEN {lit(n)}" for o, n in names.items()) + \
        f" ELSE date_format({ts}, 'XXX') END)"
    parts = [name if is_zone else f"date_format({shifted}, {lit(piece)})"
             for is_zone, piece in _split_zone_letters(text)]
    return f"(CASE WHEN {ts} IS NULL THEN NULL ELSE concat({', '.join(parts)}) END)"


def _from_zone(ts: str, tz: Compiled | None) -> str:
    return ts if tz is None else f"to_utc_timestamp({ts}, {tz.sql})"


def _unit(node: exp.Expr, name: str) -> str:
    text = node.name.upper() if isinstance(node, (exp.Column, exp.Identifier, exp.Var)) else node.sql().upper()
    unit = text[:-1] if text.endswith("S") else text
    if unit not in _UNITS:
        raise AnalysisError(f"Function '{name.lower()}': unknown time unit '{text}'. "
                            "Expected one of MILLISECONDS, SECONDS, MINUTES, HOURS, DAYS.")
    return unit


def _format_timestamp(cs: list[Compiled]) -> Compiled:
    return c(format_in_zone(cs[0].sql, cs[1], cs[2] if len(cs) > 2 else None), t.STRING)


def _parse_timestamp(cs: list[Compiled]) -> Compiled:
    return c(_from_zone(f"to_timestamp({cs[0].sql}, {cs[1].sql})", cs[2] if len(cs) > 2 else None), t.TIMESTAMP)


#: the epoch milliseconds a Spark TIMESTAMP can hold (microseconds in a 64-bit long)
_MAX_TIMESTAMP_MILLIS = 9_223_372_036_854_775


def millis_timestamp(sql: str) -> str:
    """Spark SQL: the TIMESTAMP of epoch milliseconds, null where Spark's TIMESTAMP cannot hold
    them (beyond about ±292,000 years). Spark's ``timestamp_millis`` fails the whole query there
    (a DATETIME_OVERFLOW, at planning when the value is a literal); Java's Instant, which ksqlDB
    formats, reaches further (docs/differences.md)."""
    return (f"timestamp_millis(CASE WHEN ({sql}) BETWEEN -{_MAX_TIMESTAMP_MILLIS} AND {_MAX_TIMESTAMP_MILLIS} "
            f"THEN ({sql}) END)")


def _timestamp_to_string(cs: list[Compiled]) -> Compiled:
    return c(format_in_zone(millis_timestamp(cs[0].sql), cs[1], cs[2] if len(cs) > 2 else None), t.STRING)


def _string_to_timestamp(cs: list[Compiled]) -> Compiled:
    return c(f"unix_millis({_from_zone(f'to_timestamp({cs[0].sql}, {cs[1].sql})', cs[2] if len(cs) > 2 else None)})",
             t.BIGINT)


def _convert_tz(cs: list[Compiled]) -> Compiled:
    return c(f"from_utc_timestamp(to_utc_timestamp({cs[0].sql}, {cs[1].sql}), {cs[2].sql})", t.TIMESTAMP)


def _format_date(cs: list[Compiled]) -> Compiled:
    return c(f"date_format({cs[0].sql}, {cs[1].sql})", t.STRING)


def _parse_date(cs: list[Compiled]) -> Compiled:
    # ksqlDB parses with commons-lang's FastDateFormat, which reads the pattern from the start of
    # the text and ignores what follows ('2003-12-24-01-01' with 'yyyy-MM-dd' is 2003-12-24):
    # a text that does not parse whole is tried again cut to the pattern's length
    return c(f"coalesce(to_date({cs[0].sql}, {cs[1].sql}), "
             f"to_date(substring({cs[0].sql}, 1, length({cs[1].sql})), {cs[1].sql}))", t.DATE)


def _date_to_string(cs: list[Compiled]) -> Compiled:
    return c(f"date_format(date_from_unix_date({cs[0].sql}), {cs[1].sql})", t.STRING)


def _string_to_date(cs: list[Compiled]) -> Compiled:
    return c(f"unix_date(to_date({cs[0].sql}, {cs[1].sql}))", t.INTEGER)


def _format_time(cs: list[Compiled]) -> Compiled:
    return c(f"date_format(timestamp_millis(CAST({cs[0].sql} AS BIGINT)), {cs[1].sql})", t.STRING)


def _parse_time(cs: list[Compiled]) -> Compiled:
    return c(f"CAST(unix_millis(to_timestamp(concat('1970-01-01 ', {cs[0].sql}), "
             f"concat('yyyy-MM-dd ', {cs[1].sql}))) AS INT)", t.TIME)


def register(reg: FunctionRegistry) -> None:
    ts3 = any_sig(sig("ts", "str"), sig("ts", "str", "str"))
    add(reg, "FORMAT_TIMESTAMP",
        lambda cs: _format_timestamp(zoned("FORMAT_TIMESTAMP", cs, parsing=False)),
        lo=2, hi=3, category=CAT, description="Formats a TIMESTAMP with a pattern, optionally in a time zone.",
        accepts=ts3)
    add(reg, "PARSE_TIMESTAMP", lambda cs: _parse_timestamp(zoned("PARSE_TIMESTAMP", cs, parsing=True)),
        lo=2, hi=3, category=CAT, description="Parses text into a TIMESTAMP with a pattern, optionally in a zone.",
        accepts=any_sig(sig("str", "str"), sig("str", "str", "str")))
    add(reg, "TIMESTAMPTOSTRING",
        lambda cs: _timestamp_to_string(zoned("TIMESTAMPTOSTRING", cs, parsing=False)),
        lo=2, hi=3, category=CAT, description="Formats epoch milliseconds with a pattern (deprecated).",
        accepts=any_sig(sig("long", "str"), sig("long", "str", "str")))
    add(reg, "STRINGTOTIMESTAMP",
        lambda cs: _string_to_timestamp(zoned("STRINGTOTIMESTAMP", cs, parsing=True)),
        lo=2, hi=3, category=CAT, description="Parses text into epoch milliseconds (deprecated).",
        accepts=any_sig(sig("str", "str"), sig("str", "str", "str")))
    add(reg, "FORMAT_DATE", lambda cs: _format_date(checked("FORMAT_DATE", cs, parsing=False)), lo=2, hi=2,
        category=CAT, description="Formats a DATE with a pattern.", accepts=sig("date", "str"))
    add(reg, "PARSE_DATE", lambda cs: _parse_date(checked("PARSE_DATE", cs, parsing=True)), lo=2, hi=2,
        category=CAT, description="Parses text into a DATE with a pattern.", accepts=sig("str", "str"))
    add(reg, "DATETOSTRING",
        lambda cs: _date_to_string(checked("DATETOSTRING", cs, parsing=False)),
        lo=2, hi=2, category=CAT, description="Formats epoch days with a pattern (deprecated).",
        accepts=sig("int", "str"))
    add(reg, "STRINGTODATE", lambda cs: _string_to_date(checked("STRINGTODATE", cs, parsing=True)), lo=2, hi=2,
        category=CAT, description="Parses text into epoch days (deprecated).", accepts=sig("str", "str"))
    add(reg, "FORMAT_TIME",
        lambda cs: _format_time(checked("FORMAT_TIME", cs, parsing=False)),
        lo=2, hi=2, category=CAT, description="Formats a TIME with a pattern.", accepts=sig("time", "str"))
    add(reg, "PARSE_TIME",
        lambda cs: _parse_time(checked("PARSE_TIME", cs, parsing=True, prefix="yyyy-MM-dd ")),
        lo=2, hi=2, category=CAT, description="Parses text into a TIME with a pattern.", accepts=sig("str", "str"))
    add(reg, "UNIX_TIMESTAMP",
        lambda cs: c(f"unix_millis({cs[0].sql if cs else 'current_timestamp()'})", t.BIGINT), lo=0, hi=1,
        category=CAT, description="Epoch milliseconds of a TIMESTAMP, or of now.", accepts=any_sig(sig(), sig("ts")))
    add(reg, "UNIX_DATE", lambda cs: c(f"unix_date({cs[0].sql if cs else 'current_date()'})", t.INTEGER), lo=0, hi=1,
        category=CAT, description="Epoch days of a DATE, or of today.", accepts=any_sig(sig(), sig("date")))
    add(reg, "FROM_UNIXTIME", lambda cs: c(millis_timestamp(cs[0].sql), t.TIMESTAMP), lo=1, hi=1,
        category=CAT, description="The TIMESTAMP of epoch milliseconds.", accepts=sig("long"))
    add(reg, "FROM_DAYS", lambda cs: c(f"date_from_unix_date({cs[0].sql})", t.DATE), lo=1, hi=1, category=CAT,
        description="The DATE of epoch days.", accepts=sig("long"))
    add(reg, "CONVERT_TZ",
        lambda cs: _convert_tz(zones_checked("CONVERT_TZ", cs, 1, 2)),
        lo=3, hi=3, category=CAT, description="Converts a TIMESTAMP from one time zone to another.",
        accepts=sig("ts", "str", "str"))

    def shifter(name: str, target: str, sign: int):
        def compile_nodes(args: Sequence[exp.Expr], compiler: ExpressionCompiler) -> Compiled:
            try:
                unit = _unit(args[0], name)
            except AnalysisError as unknown_unit:
                # not a unit: when the first argument is a value (a column), ksqlDB rejects the
                # call by its argument types, e.g. DATEADD(date, 5, date)
                try:
                    types = [compiler.compile(a).type for a in args]
                except AnalysisError:
                    raise unknown_unit from None
                raise rejected_types(name, types) from None
            n = compiler.compile(args[1])
            v = compiler.compile(args[2])
            amount = n.sql if sign > 0 else f"(-({n.sql}))"
            if target == "TIMESTAMP":
                return c(f"timestampadd({unit}, {amount}, {v.sql})", t.TIMESTAMP)
            if target == "DATE":
                if unit != "DAY" and _UNITS[unit] < DAY_MS:
                    return c(f"date_add({v.sql}, CAST(({amount}) * {_UNITS[unit]} DIV {DAY_MS} AS INT))", t.DATE)
                return c(f"date_add({v.sql}, CAST({amount} AS INT))", t.DATE)
            return c(f"CAST(pmod(CAST({v.sql} AS BIGINT) + CAST({amount} AS BIGINT) * {_UNITS[unit]}, {DAY_MS})"
                     " AS INT)", t.TIME)

        return compile_nodes

    for name, target, sign in (("TIMESTAMPADD", "TIMESTAMP", 1), ("TIMESTAMPSUB", "TIMESTAMP", -1),
                               ("DATEADD", "DATE", 1), ("DATESUB", "DATE", -1),
                               ("TIMEADD", "TIME", 1), ("TIMESUB", "TIME", -1)):
        verb = "Adds" if sign > 0 else "Subtracts"
        add_raw(reg, name, shifter(name, target, sign), lo=3, hi=3, category=CAT,
                description=f"{verb} an interval (unit, amount) to a {target}.")
