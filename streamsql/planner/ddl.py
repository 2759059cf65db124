"""What a CREATE STREAM/TABLE statement, and the WITH clause of a CREATE … AS SELECT, define: a
catalog ``Source`` with its formats, columns (declared, or inferred from the Schema Registry),
registry schemas, delimiters, timestamp column and window, checked as ksqlDB checks them.

This is analysis, not execution: nothing here creates a topic or starts a query (the engine does,
once a definition is accepted). The registry is consulted (inference, registering the schema a
sink writes with), as ksqlDB does when it analyses the statement. Session properties (default
formats, the registry URL, the output topic prefix) come through the ``prop`` callable, so the
same statement analyses under the properties it was issued with.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from streamsql import types as t
from streamsql.catalog import Source
from streamsql.errors import PREPARE_FAILED, AnalysisError, ConfigError, UnsupportedSchemaError
from streamsql.formats import compression, schema_registry, serde_for
from streamsql.formats import registry as format_registry
from streamsql.formats import schema_registry_settings as registry_settings
from streamsql.formats.features import features, is_known
from streamsql.functions.registry import FunctionRegistry
from streamsql.planner.aggregation import AggregatePlan
from streamsql.planner.joins import check_join_sources
from streamsql.sql import ast
from streamsql.sql.dialect import to_ksql

if TYPE_CHECKING:
    from streamsql.planner.planner import QueryPlan

#: formats whose records carry a Schema Registry id


class SourceDefinitions:
    """Turns CREATE statements into catalog sources, reading session properties through ``prop``."""

    def __init__(self, prop: Callable[[str], str]) -> None:
        self.prop = prop

    def source(self, stmt: ast.CreateSource) -> Source:
        """The source a CREATE STREAM/TABLE declares (its topic is not looked at here)."""
        props = stmt.properties
        topic = props.get("KAFKA_TOPIC")
        if not topic:
            raise AnalysisError("Missing required property \"KAFKA_TOPIC\" which has no default value.")
        # ksqlDB's server defaults for formats a CREATE STREAM/TABLE leaves out
        key_format, value_format = self.formats(
            props, default_key=self.prop("ksql.persistence.default.format.key") or "KAFKA",
            default_value=self.prop("ksql.persistence.default.format.value") or None)
        columns = list(stmt.columns)
        for c in columns:
            if c.name in t.PSEUDO_COLUMNS or c.name in (t.WINDOWSTART, t.WINDOWEND):
                raise AnalysisError(f"'{c.name}' is a reserved column name. You cannot use it as a name for a column.")
        for side, is_key in (("KEY", True), ("VALUE", False)):
            if props.get(f"{side}_SCHEMA_ID") is None:
                continue
            fmt = key_format if is_key else value_format
            if not features(fmt).uses_registry:
                raise AnalysisError(f"{side}_FORMAT should support schema inference when {side}_SCHEMA_ID is "
                                    f"provided. Current format is {str(fmt).upper()}.")
            if any(c.is_key == is_key and c.role in ("key", "value") for c in columns):
                raise AnalysisError(f"Table elements and {side}_SCHEMA_ID cannot both exist for create statement.")
        check_delimiters(props, key_format, value_format)
        inferred: dict[bool, Any] = {}
        columns = self.infer_columns(props, columns, str(topic), key_format, value_format, inferred)
        source = Source(
            name=stmt.name, kind=stmt.kind, columns=columns, topic=str(topic),
            key_format=key_format if any(c.is_key for c in columns) else "NONE", value_format=value_format,
            key_delimiter=props.get("KEY_DELIMITER", ","), value_delimiter=props.get("VALUE_DELIMITER", ","),
            wrap_single_value=self.wrap_single_value(props, columns, value_format),
            timestamp_column=self.timestamp_column(props, columns), timestamp_format=props.get("TIMESTAMP_FORMAT"),
            is_source=stmt.is_source, statement=stmt.text,
        )
        source.key_format_options = format_options(props, "KEY", source.key_format)
        source.value_format_options = format_options(props, "VALUE", source.value_format)
        if source.is_table and "compression" in source.value_format_options:
            raise AnalysisError("VALUE_COMPRESSION is only valid for streams: a compressed batch holds many "
                                "records, a table's message holds one row")
        self.check_key_types(source)
        self.bind_schemas(source, props, inferred)
        self.validate_formats(source)
        source.window_type, source.window_size_ms = window_properties(props)
        if source.window_type and not source.key_columns:
            raise AnalysisError("Windowed sources require a key column.")
        if props.get("FORMAT") is not None or props.get("KEY_FORMAT") is not None:
            source.declared_key_format = key_format
        return source

    def formats(self, props: dict[str, Any], default_key: str | None, default_value: str | None) -> tuple[str, str]:
        fmt = props.get("FORMAT")
        key = props.get("KEY_FORMAT")
        value = props.get("VALUE_FORMAT")
        if fmt is not None and key is not None:
            raise AnalysisError("Cannot supply both 'KEY_FORMAT' and 'FORMAT' properties, as 'FORMAT' sets both key "
                                "and value formats. Either use just 'FORMAT', or use 'KEY_FORMAT' and 'VALUE_FORMAT'.")
        if fmt is not None and value is not None:
            raise AnalysisError("Cannot supply both 'VALUE_FORMAT' and 'FORMAT' properties, as 'FORMAT' sets both key "
                                "and value formats. Either use just 'FORMAT', or use 'KEY_FORMAT' and 'VALUE_FORMAT'.")
        key = str(fmt or key or default_key or "KAFKA").upper()
        value_str = fmt or value or default_value
        if value_str is None:
            raise AnalysisError("Missing required property \"VALUE_FORMAT\" which has no default value.")
        value = str(value_str).upper()
        for f in (key, value):
            if not is_known(f):
                raise AnalysisError(f"Unknown format: {f}")
        return key, value

    def wrap_single_value(self, props: dict[str, Any], columns: list[t.Column], value_format: str) -> bool:
        """WRAP_SINGLE_VALUE, else ``ksql.persistence.wrap.single.values`` for a format that can
        do both (JSON, Avro, Protobuf), as ksqlDB's SerdeFeaturesFactory."""
        wrap = props.get("WRAP_SINGLE_VALUE")
        if wrap is None:
            if features(value_format).wraps_single_value:
                return self.prop("ksql.persistence.wrap.single.values").strip().lower() != "false"
            return True
        value_cols = [c for c in columns if c.role == "value"]
        if len(value_cols) != 1:
            raise AnalysisError("'WRAP_SINGLE_VALUE' is only valid for single-field value schemas")
        if isinstance(wrap, str):
            wrap = wrap.strip().lower() == "true"
        if wrap and not features(value_format).wraps_single_value:  # KAFKA, DELIMITED: always bare
            raise ConfigError(f"Format '{str(value_format).upper()}' does not support 'WRAP_SINGLE_VALUE' set to "
                              f"'true'.")
        return bool(wrap)

    @staticmethod
    def timestamp_column(props: dict[str, Any], columns: list[t.Column]) -> str | None:
        name = props.get("TIMESTAMP")
        if name is None:
            return None
        name = str(name)
        match = next((c for c in columns if c.name == name), None) or next(
            (c for c in columns if c.name.upper() == name.upper()), None)
        if match is None:
            raise AnalysisError(f"The TIMESTAMP column set in the WITH clause does not exist in the schema: "
                                f"'{name.upper()}'")
        if match.type.kind not in (t.Kind.BIGINT, t.Kind.TIMESTAMP, t.Kind.STRING):
            raise AnalysisError(f"Timestamp column, {match.name}, should be LONG(INT64), TIMESTAMP, or a String "
                                f"with a timestamp_format specified.")
        return match.name

    def registry_url(self, fmt: str) -> str:
        url = self.prop(schema_registry.URL_PROPERTY)
        if not url:
            raise ConfigError(f"The '{fmt}' format needs a Schema Registry: set '{schema_registry.URL_PROPERTY}' "
                              f"(server config, or SET '{schema_registry.URL_PROPERTY}'='http://host:8081').")
        if url.startswith(("http://", "https://")):  # credentials and TLS, from the same properties
            registry_settings.configure(url, registry_settings.client_config(url, self.prop))
        return url

    def infer_columns(self, props: dict[str, Any], columns: list[t.Column], topic: str, key_format: str,
                       value_format: str, inferred_from: dict[bool, Any]) -> list[t.Column]:
        """ksqlDB's schema inference: a side declared without columns in a registry format takes
        them from the subject's latest schema (or the one ``KEY_/VALUE_SCHEMA_ID`` names).
        ``inferred_from`` receives the schema each inferred side came from (True: the key)."""
        out = list(columns)
        if features(value_format).uses_registry and not any(c.role == "value" for c in columns):
            url = self.registry_url(value_format)
            found = self.schema_to_infer(url, topic, False, props.get("VALUE_SCHEMA_ID"))
            if found is not None:
                unwrapped = str(props.get("WRAP_SINGLE_VALUE", "true")).lower() == "false"
                out += format_registry.columns_from_registry(value_format, found.text, role="value",
                                                             unwrapped=unwrapped,
                                                             full_name=schema_full_name(props, "VALUE"),
                                                             imports=schema_registry.imports(url, found),
                                                             keep_names=props.get("VALUE_SCHEMA_ID") is not None)
                inferred_from[False] = found
        if features(key_format).uses_registry and not any(c.is_key for c in columns):
            url = self.registry_url(key_format)
            found = self.schema_to_infer(url, topic, True, props.get("KEY_SCHEMA_ID"))
            if found is not None:
                out = format_registry.columns_from_registry(key_format, found.text, role="key", unwrapped=True,
                                                            full_name=schema_full_name(props, "KEY"),
                                                            imports=schema_registry.imports(url, found),
                                                            keep_names=props.get("KEY_SCHEMA_ID") is not None) + out
                inferred_from[True] = found
        return out

    @staticmethod
    def schema_to_infer(url: str, topic: str, is_key: bool, schema_id: Any) -> Any:
        if schema_id is not None:
            return schema_registry.by_id(url, int(schema_id))
        return schema_registry.latest(url, schema_registry.subject_for(topic, is_key))

    def bind_schemas(self, source: Source, props: dict[str, Any], inferred: dict[bool, Any] | None = None) -> None:
        """Attach the registry subjects of a registry-format source: the schemas it may read (a
        snapshot, for workers that cannot reach a ``mock://`` registry) and the id it writes
        with (the schema its columns generate, registered if new, as ksqlDB does)."""
        sides = ((True, source.key_format, source.key_columns, "KEY"),
                 (False, source.value_format, source.value_columns, "VALUE"))
        for is_key, fmt, cols, side in sides:
            schema_type = features(fmt).schema_type
            if schema_type is None or not cols:
                continue
            url = self.registry_url(fmt)
            subject = schema_registry.subject_for(source.topic, is_key)
            known = schema_registry.versions(url, subject)
            options = source.key_format_options if is_key else source.value_format_options
            unwrapped = is_key and len(cols) == 1 or (not is_key and len(cols) == 1 and not source.wrap_single_value)
            text = format_registry.registry_schema(fmt, cols, unwrapped=unwrapped, full_name=options.get("fullName"),
                                                   nullable=options.get("nullable"))
            schema_id = props.get(f"{side}_SCHEMA_ID")
            if inferred and is_key in inferred:  # columns read from this schema: write with it too
                writer_id, known[inferred[is_key].id] = inferred[is_key].id, inferred[is_key].text
            elif schema_id is not None:
                found = schema_registry.by_id(url, int(schema_id))
                if not is_key:
                    check_registry_columns(fmt, found.text, cols, unwrapped, options.get("fullName"),
                                           schema_registry.imports(url, found))
                writer_id, known[found.id] = found.id, found.text
            else:
                try:
                    writer_id = schema_registry.register(url, subject, text, schema_type)
                    known[writer_id] = text
                except ConfigError:
                    if not known:
                        raise
                    writer_id = max(known)  # the registry refused ours (compatibility): write with its latest
            imported = {}
            if features(fmt).protobuf:  # the schemas that import others travel with what they import
                imported = {i: found_imports for i in known
                            if (found_imports := schema_registry.imports(url, schema_registry.by_id(url, i)))}
            binding = schema_registry.SchemaBinding(url, subject, writer_id, known, imported)
            if is_key:
                source.key_schema = binding
            else:
                source.value_schema = binding

    @staticmethod
    def validate_formats(source: Source) -> None:
        """Fail at statement time when a format cannot hold the columns (ksqlDB does too)."""
        SourceDefinitions.check_key_types(source)
        from streamsql.catalog.source_formats import key_spec, value_spec  # the readers' and writers'

        for part, spec in (("Key", key_spec(source)), ("Value", value_spec(source))):
            try:
                serde_for(spec)
            except UnsupportedSchemaError as e:  # ksqlDB's message: the format, the columns, why
                columns = ", ".join(c.sql() for c in spec.columns)
                raise UnsupportedSchemaError(f"{part} format does not support schema.\nformat: {spec.name}\n"
                                             f"schema: Persistence{{columns=[{columns}], features=[]}}\n"
                                             f"reason: {e.message}") from None

    @staticmethod
    def check_key_types(source: Source) -> None:
        for c in source.key_columns:
            if t.holds_map(c.type):
                raise AnalysisError(
                    "Map keys, including types that contain maps, are not supported as they may lead to unexpected "
                    f"behavior due to inconsistent serialization. Key column name: `{c.name}`. Column type: {c.type}. "
                    "See https://github.com/confluentinc/ksql/issues/6621 for more.")

    def sink(self, stmt: ast.CreateAsSelect, plan: QueryPlan | AggregatePlan) -> Source:
        """The sink a CREATE … AS SELECT writes, before its columns are known: formats (the
        source's unless the WITH clause sets them), topic, partitions, delimiters, window."""
        props = stmt.properties
        src = plan.source
        default_key = src.key_format if src.key_format != "NONE" else (src.declared_key_format or "KAFKA")
        if default_key == "NONE":  # a keyless source's new key takes the server's default key format
            default_key = self.prop("ksql.persistence.default.format.key") or "KAFKA"
        key_format, value_format = self.formats(props, default_key=default_key,
                                                 default_value=src.value_format)
        check_delimiters(props, key_format, value_format)
        topic = str(props.get("KAFKA_TOPIC") or (self.prop("ksql.output.topic.name.prefix") + stmt.name))
        has_key = bool(plan.key_columns)
        if not has_key and str(props.get("KEY_FORMAT") or "NONE").upper() != "NONE" and stmt.kind == "STREAM":
            raise AnalysisError("Key format specified for stream without key columns.")
        window_type, window_size_ms = None, None
        if isinstance(plan, AggregatePlan):
            if plan.window:
                window_type, window_size_ms = plan.window.type, plan.window.size_ms
        elif src.window_type and not plan.repartitioned:  # a windowed stream keeps its windows
            window_type, window_size_ms = src.window_type, src.window_size_ms
        return Source(
            name=stmt.name, kind=stmt.kind, columns=[], topic=topic,
            key_format=key_format if has_key else "NONE", value_format=value_format,
            # ksqlDB's order: the WITH clause, the legacy ksql.sink.partitions, the source's
            partitions=int(props.get("PARTITIONS") or self.prop("ksql.sink.partitions") or src.partitions),
            # a DELIMITED sink keeps its source's delimiters unless the WITH clause sets them (ksqlDB)
            key_delimiter=props.get("KEY_DELIMITER", src.key_delimiter if key_format == src.key_format else ","),
            value_delimiter=props.get("VALUE_DELIMITER",
                                      src.value_delimiter if value_format == src.value_format else ","),
            wrap_single_value=self.wrap_single_value(props, [t.Column(c.name, t.STRING) for c in plan.value_columns],
                                                      value_format),
            statement=stmt.text,
            window_type=window_type, window_size_ms=window_size_ms,
        )




def check_delimiters(props: dict[str, Any], key_format: str, value_format: str) -> None:
    """KEY_/VALUE_DELIMITER: one character, or TAB or SPACE, and only for a DELIMITED part
    (ksqlDB's property validation, then its format's supported configs)."""
    for side, fmt in (("KEY", key_format), ("VALUE", value_format)):
        value = props.get(f"{side}_DELIMITER")
        if value is None:
            continue
        text = str(value)
        reason = None
        if not text.strip():
            reason = ("Delimiter cannot be empty, if you meant to have a tab or space for delimiter, please use "
                      "the special values 'TAB' or 'SPACE'")
        elif len(text) != 1 and text.upper() not in ("TAB", "SPACE"):
            reason = f"Invalid delimiter value: '{text}'. Delimiter must be a single character or TAB,SPACE"
        if reason is not None:
            raise ConfigError(f"{PREPARE_FAILED}Configuration {side}_DELIMITER is invalid: {reason}\n"
                              f"Example valid value: ';'")
        if not features(fmt).delimited:
            raise ConfigError(f"{str(fmt).upper()} does not support the following configs: [delimiter]")


def check_header_type(column: t.Column) -> None:
    """A HEADER('k') column is BYTES and a HEADERS column ARRAY<STRUCT<KEY STRING, VALUE BYTES>>:
    the types Kafka's headers have (ksqlDB's messages)."""
    from streamsql.kafka.decoding import header_type

    if column.role not in ("headers", "header"):
        return
    expected = header_type(column.role)
    if str(column.type) != str(expected):  # field names as written: `key` is not KEY
        what = f"HEADER('{column.header_key}')" if column.role == "header" else "HEADERS"
        raise AnalysisError(f"Invalid type for {what} column: expected {expected}, got {column.type}")


def window_properties(props: dict[str, Any]) -> tuple[str | None, int | None]:
    """``WINDOW_TYPE`` / ``WINDOW_SIZE`` of a source over a windowed topic, checked as ksqlDB does:
    its parser builds these properties (CreateSourceProperties, in AstBuilder), so each failure is
    worded and thrown as the parser's ("Failed to prepare statement: ...", ParseFailedException)."""
    from streamsql.sql.parser import _UNIT_MS

    kind = props.get("WINDOW_TYPE")
    size = props.get("WINDOW_SIZE")
    if kind is None:
        if size is not None:
            raise AnalysisError(f"{PREPARE_FAILED}'WINDOW_SIZE' should only be set for windowed sources (WINDOW_TYPE).")
        return None, None
    kind = str(kind).upper()
    if kind not in ("TUMBLING", "HOPPING", "SESSION"):
        raise AnalysisError(f"{PREPARE_FAILED}Invalid value {kind} for property WINDOW_TYPE: String must be one of: "
                            f"SESSION, HOPPING, TUMBLING")
    if kind == "SESSION":
        if size is not None:
            raise AnalysisError(f"{PREPARE_FAILED}'WINDOW_SIZE' should not be set for SESSION windows.")
        return kind, None
    if size is None:
        raise AnalysisError(f"{PREPARE_FAILED}{kind} windows require 'WINDOW_SIZE' to be provided in the WITH clause. "
                            f"For example: 'WINDOW_SIZE'='10 SECONDS'")
    parts = str(size).split()
    unit = parts[1].upper() if len(parts) == 2 else ""
    if len(parts) != 2 or not parts[0].isdigit() or unit not in _UNIT_MS:
        raise AnalysisError(f"{PREPARE_FAILED}Configuration WINDOW_SIZE is invalid: Invalid duration: '{size}'. "
                            f"Unknown time unit: '{unit}'")
    return kind, int(parts[0]) * _UNIT_MS[unit]


def check_registry_columns(fmt: str, text: str, columns: list[t.Column], unwrapped: bool,
                            full_name: str | None, imports: dict[str, str] | None = None) -> None:
    """A query writing its values with a given ``VALUE_SCHEMA_ID``: its columns must be the
    schema's first columns, in order and of the same types (the schema may have more: optional
    ones or ones with defaults are filled in), as ksqlDB checks. Names compare in any case
    (Protobuf inference upper-cases them)."""
    registered = format_registry.columns_from_registry(fmt, text, role="value", unwrapped=unwrapped,
                                                       full_name=full_name, imports=imports)
    def same(a: t.Column, b: t.Column) -> bool:
        return (a.name.upper(), str(a.type).upper()) == (b.name.upper(), str(b.type).upper())

    changed = [c for i, c in enumerate(columns) if i >= len(registered) or not same(registered[i], c)]
    if changed:
        raise AnalysisError(f"The following value columns are changed, missing or reordered: "
                            f"[{', '.join(plain_sql(c) for c in changed)}]. Schema from schema registry is "
                            f"[{', '.join(plain_sql(c) for c in registered)}]")


def plain_sql(column: t.Column) -> str:
    return f"`{column.name}` {column.type}"


def schema_full_name(props: dict[str, Any], side: str) -> str | None:
    """``{side}_SCHEMA_FULL_NAME`` (or the older ``{side}_AVRO_SCHEMA_FULL_NAME``)."""
    name = props.get(f"{side}_SCHEMA_FULL_NAME", props.get(f"{side}_AVRO_SCHEMA_FULL_NAME"))
    return None if name is None else str(name)


def format_options(props: dict[str, Any], side: str, fmt: str) -> dict[str, str]:
    """The WITH-clause options a side's serde needs: the schema's full name
    (``{side}_SCHEMA_FULL_NAME``, or ``{side}_AVRO_SCHEMA_FULL_NAME``) and Protobuf's null
    representation (``{side}_PROTOBUF_NULLABLE_REPRESENTATION``), and our ``VALUE_COMPRESSION``
    (gzipped batches of lines, ``formats/compression.py``)."""
    out: dict[str, str] = {}
    name = schema_full_name(props, side)
    if name is not None:
        out["fullName"] = name
    nullable = props.get(f"{side}_PROTOBUF_NULLABLE_REPRESENTATION")
    if nullable is not None:
        if not features(fmt).protobuf:
            raise AnalysisError(f"{side}_PROTOBUF_NULLABLE_REPRESENTATION is only valid for the PROTOBUF formats")
        if str(nullable).upper() not in ("OPTIONAL", "WRAPPER"):
            raise AnalysisError(f"Invalid value {nullable} for property {side}_PROTOBUF_NULLABLE_REPRESENTATION: "
                                f"String must be one of: OPTIONAL, WRAPPER")
        out["nullable"] = str(nullable).upper()
    codec = props.get(f"{side}_COMPRESSION")
    if codec is not None:
        out["compression"] = compression.check_compression(str(codec), fmt, side)
    return out


def check_table_is_grouped(stmt: ast.CreateAsSelect, functions: FunctionRegistry) -> None:
    """CREATE TABLE AS SELECT with aggregates needs a GROUP BY (ksqlDB's message lists the calls,
    COUNT(*) as it rewrites it: COUNT(ROWTIME))."""
    if stmt.kind != "TABLE" or stmt.query.group_by:
        return
    per_item = [[call for call in item.expression.find_all(exp.Anonymous) if functions.is_aggregate(str(call.this))]
                for item in stmt.query.select if item.expression is not None]
    calls = [call for item_calls in per_item for call in item_calls]
    if calls and all(per_item):  # a bare column is reported first (the planner's non-aggregate message)
        shown = [to_ksql(call).upper().replace("(*)", "(ROWTIME)") for call in calls]
        raise AnalysisError(f"CREATE TABLE AS SELECT statement does not support aggregate function "
                            f"[{', '.join(shown)}] without a GROUP BY clause.")


def check_no_windowed_table(catalog: Any, query: ast.Query) -> None:
    """A persistent query (CREATE ... AS SELECT, INSERT INTO ... SELECT) reads no windowed table,
    in its FROM or any JOIN (ksqlDB's ``PushQueryValidator``, over all of the query's sources),
    checked after the analyzer's checks of the joined sources, as in ksqlDB."""
    sources = [catalog.find(name) for name in [query.source.name, *(clause.right.name for clause in query.joins)]]
    if any(source is None for source in sources):
        return  # the planner names the missing source
    check_join_sources(catalog, query)
    if any(source.window_type and source.is_table for source in sources):
        raise AnalysisError("KSQL does not support persistent queries on windowed tables.")


def check_timestamp_projected(stmt: ast.CreateAsSelect) -> None:
    """A sink's TIMESTAMP column must be one of the query's columns; ksqlDB checks it when it
    analyses the statement, before the projection's key rules, so its message comes first. Only
    a projection of named columns is checked here (``*``, unnamed expressions and a join's
    qualified columns get their names from the planner; ``SourceDefinitions.timestamp_column`` checks them
    after planning)."""
    name = stmt.properties.get("TIMESTAMP")
    if name is None:
        return
    names = set()
    for item in stmt.query.select:
        if item.alias is not None:
            names.add(item.alias.upper())
        elif (not item.star and isinstance(item.expression, exp.Column)
              and not isinstance(item.expression.this, exp.Star)
              and not (stmt.query.joins and item.expression.table)):  # a join names A.X as A_X when both have X
            names.add(item.expression.name.upper())
        else:
            return
    if str(name).upper() not in names:  # ksqlDB names the column as it resolves it: upper case
        raise AnalysisError(f"The TIMESTAMP column set in the WITH clause does not exist in the schema: "
                            f"'{str(name).upper()}'")
