"""What the shell talks to: the embedded engine in this process, or a ksqlDB-compatible server.

Both answer the same two questions: run this input (yielding one typed result per statement, as
each finishes, so a push query streams before the next statement runs) and what names exist
(for completion). Rendering never needs to know which one answered.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Protocol

from streamsql.errors import StreamsqlError
from streamsql.runtime import results as r
from streamsql.runtime.vocabulary import Vocabulary, engine_vocabulary


class Backend(Protocol):
    #: one line for the banner: what the shell is connected to
    description: str

    def execute(self, text: str) -> Iterator[r.Result]:
        """Run every statement of ``text`` in order, yielding each result; raise
        :class:`StreamsqlError` at the first failing one."""
        ...

    def vocabulary(self) -> Vocabulary:
        ...

    def close(self) -> None:
        ...


class EmbeddedBackend:
    """An :class:`~streamsql.runtime.engine.Engine` in this process (the ``streamsql run`` setup)."""

    def __init__(self, engine: object, description: str) -> None:
        from streamsql.runtime.engine import Engine

        assert isinstance(engine, Engine)
        self.engine = engine
        self.description = description

    def execute(self, text: str) -> Iterator[r.Result]:
        from streamsql.sql import parse

        statements = parse(text, variables=self.engine.session.variables, custom_types=self.engine.catalog.types)
        for stmt in statements:
            yield self.engine.execute_statement(stmt)

    def vocabulary(self) -> Vocabulary:
        return engine_vocabulary(self.engine)

    def close(self) -> None:
        self.engine.close()


class RemoteBackend:
    """A ksqlDB-compatible server over its REST API. As the ksql CLI does, the shell keeps SET
    properties and DEFINE variables itself, substitutes variables before sending, and sends the
    properties with every request; SELECT and PRINT go to ``/query-stream``, the rest to ``/ksql``."""

    def __init__(self, url: str, user: str | None = None, password: str | None = None) -> None:
        from streamsql.client import KsqlClient

        self.client = KsqlClient(url, user=user, password=password)
        info = self.client.info()
        version = info.get("version", "?")
        status = info.get("serverStatus", "?")
        self.description = f"server v{version} at {self.client.url} (status: {status})"
        self.properties: dict[str, str] = {}
        self.variables: dict[str, str] = {}
        self._vocabulary: Vocabulary | None = None
        self._static: tuple[list[str], list[str]] | None = None

    def execute(self, text: str) -> Iterator[r.Result]:
        from streamsql.sql import split_statements, substitute_variables

        for raw in split_statements(text):
            statement = substitute_variables(raw, self.variables)
            local = self._session_statement(statement)
            if local is not None:
                yield local
                continue
            if _first_word(statement) in ("SELECT", "PRINT"):
                yield self.client.query_stream(statement, self.properties)
            else:
                yield from self.client.ksql(statement + ";", self.properties)
        self._vocabulary = None

    def _session_statement(self, statement: str) -> r.Result | None:
        """SET/UNSET/DEFINE/UNDEFINE, which the shell applies itself."""
        if _first_word(statement) not in ("SET", "UNSET", "DEFINE", "UNDEFINE"):
            return None
        from streamsql.sql import ast, parse

        stmt = parse(statement)[0]
        if isinstance(stmt, ast.SetProperty):
            from streamsql.kafka.settings import HIDDEN, is_secret

            self.properties[stmt.name] = stmt.value
            shown = HIDDEN if is_secret(stmt.name) else stmt.value
            return r.CommandStatus(hide_secrets(statement), f"Successfully changed local property '{stmt.name}' to "
                                                            f"'{shown}'. Use the UNSET command to revert your change.")
        if isinstance(stmt, ast.UnsetProperty):
            if self.properties.pop(stmt.name, None) is None:
                return r.Warning_(statement, f"Property '{stmt.name}' was not set locally")
            return r.CommandStatus(statement, f"Successfully unset local property '{stmt.name}'.")
        if isinstance(stmt, ast.DefineVariable):
            self.variables[stmt.name] = stmt.value
            return r.CommandStatus(statement, f"Defined variable {stmt.name}")
        if isinstance(stmt, ast.UndefineVariable):
            if self.variables.pop(stmt.name, None) is None:
                return r.Warning_(statement, f"Cannot undefine variable '{stmt.name}' which was never defined")
            return r.CommandStatus(statement, f"Undefined variable {stmt.name}")
        return None

    def vocabulary(self) -> Vocabulary:
        """Fetched after each input (names the server knows change only when statements run)."""
        if self._vocabulary is None:
            vocab = self._server_vocabulary() or self._listed_vocabulary()
            vocab.variables = sorted(self.variables)
            vocab.properties = sorted(set(vocab.properties) | set(self.properties))
            self._vocabulary = vocab
        return self._vocabulary

    def _server_vocabulary(self) -> Vocabulary | None:
        """streamsql's ``GET /vocabulary`` (what the web console completes from); None from a
        server without it (ksqlDB's)."""
        from streamsql.runtime.vocabulary import from_json

        try:
            return from_json(self.client.vocabulary())
        except StreamsqlError:
            return None

    def _listed_vocabulary(self) -> Vocabulary:
        """The names ksqlDB's own statements list (SHOW, DESCRIBE), for a server without ``/vocabulary``."""
        vocab = Vocabulary()
        try:
            for what in ("STREAMS", "TABLES"):
                for result in self.client.ksql(f"SHOW {what};"):
                    if isinstance(result, r.SourceList):
                        vocab.sources.update({s.name: s.kind for s in result.sources})
                        vocab.topics += [s.topic for s in result.sources]
            for name in vocab.sources:
                for result in self.client.ksql(f"DESCRIBE `{name}`;"):
                    if isinstance(result, r.SourceDescription):
                        vocab.columns[name] = [f.name for f in result.fields]
            for result in self.client.ksql("SHOW QUERIES;"):
                if isinstance(result, r.QueryList):
                    vocab.queries = [q.id for q in result.queries]
            if self._static is None:
                functions = [f.name for res in self.client.ksql("SHOW FUNCTIONS;")
                             if isinstance(res, r.FunctionList) for f in res.functions]
                props = [n for res in self.client.ksql("SHOW PROPERTIES;")
                         if isinstance(res, r.Properties) for n in res.properties]
                self._static = (functions, props)
        except StreamsqlError:
            pass  # completion is best effort: offer what could be fetched
        vocab.functions, vocab.properties = self._static or ([], [])
        return vocab

    def close(self) -> None:
        pass


#: ``'name' = 'value'`` (SET, a connector's WITH clause) and the engine's "property 'name' to 'value'"
_QUOTED_SETTING = re.compile(r"""(?P<head>(?P<q>['"`])(?P<name>(?:(?!(?P=q)).)+)(?P=q)\s*(?:=|\s+to)\s*)"""
                             r"""'(?P<value>(?:''|[^'])*)'""", re.IGNORECASE)


def hide_secrets(text: str) -> str:
    """``text`` with the value of every quoted setting whose name looks secret (``*password*``,
    ``*secret*``, ``sasl.jaas.config``, ``basic.auth.user.info``, ``*.key``: ``kafka.settings.is_secret``)
    shown as ``[hidden]``: what the shell echoes, prints and keeps in its history file."""
    from streamsql.kafka.settings import HIDDEN, is_secret

    if "'" not in text:
        return text
    return _QUOTED_SETTING.sub(lambda m: f"{m['head']}'{HIDDEN}'" if is_secret(m["name"]) else m[0], text)


def _first_word(statement: str) -> str:
    from streamsql.sql.dialect import tokenize

    try:
        tokens = tokenize(statement)
    except Exception:  # the server will report what is wrong with it
        return ""
    return tokens[0].text.upper() if tokens else ""
