"""A catalog source's key and value formats as the formats package describes them
(:class:`~streamsql.formats.FormatSpec`): what its readers decode and its writers encode, what
INSERT VALUES and the conformance runner encode with, and what a CREATE statement is checked
against (``planner/ddl.py``).
"""

from __future__ import annotations

from streamsql.catalog.catalog import Source
from streamsql.formats import FormatSpec

_DELIMITER_NAMES = {"SPACE": " ", "TAB": "\t"}


def delimiter(value: str | None) -> str:
    if value is None:
        return ","
    return _DELIMITER_NAMES.get(value.upper(), value)


def key_spec(source: Source) -> FormatSpec:
    fmt = source.key_format if source.key_columns else "NONE"
    options = dict(source.key_format_options)
    options.update(source.key_schema.to_options() if source.key_schema is not None else {})
    return FormatSpec(fmt, tuple(source.key_columns), delimiter(source.key_delimiter), options=options)


def value_spec(source: Source) -> FormatSpec:
    options = dict(source.value_format_options)
    options.update(source.value_schema.to_options() if source.value_schema is not None else {})
    return FormatSpec(source.value_format, tuple(source.value_columns), delimiter(source.value_delimiter),
                      source.wrap_single_value, options=options)
