"""The corpus's statements, and mutations of them, through the parser, the source definitions and
the planner never raise anything but a StreamsqlError (issue #57 item 7): a Python exception from
planning would reach the user as a crash. Each statement is mutated by replacing a name with
another of the statement's names or with a literal of another type (a deterministic seed), so
column references, function arguments and types go wrong in ways the public cases do not show.
Planning only: no Spark, no Kafka (Spark's own analysis is reached by the integration tests)."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator

from streamsql.catalog import Catalog
from streamsql.conformance import cases as case_files
from streamsql.errors import StreamsqlError
from streamsql.functions.catalog import builtin_registry
from streamsql.planner.ddl import SourceDefinitions
from streamsql.planner.planner import Planner
from streamsql.sql import ast, parse
from tests.support.corpus import corpus_dir

REPLACEMENTS = ["1", "'x'", "NULL", "1.5", "ARRAY[1]", "MAP('a':=1)", "STRUCT(A:=1)", "ROWTIME", "WINDOWSTART"]
MUTATIONS_PER_STATEMENT = 1
#: every STRIDE-th case of the corpus (deterministic), to keep the test to seconds
STRIDE = 3


def _variants(text: str, rng: random.Random) -> Iterator[str]:
    yield text
    names = re.findall(r"\b[A-Z][A-Z0-9_]*\b", text)
    for _ in range(MUTATIONS_PER_STATEMENT if names else 0):
        old, new = rng.choice(names), rng.choice(names + REPLACEMENTS)
        yield re.sub(rf"\b{old}\b", new, text, count=1)


def test_planning_the_corpus_and_its_mutations_never_crashes() -> None:
    rng = random.Random(57)
    definitions = SourceDefinitions(lambda _name: "")
    functions = builtin_registry()
    crashes: list[str] = []
    planned = 0
    cases = [c for path in case_files.collect_files([corpus_dir() / "qtt"]) for c in case_files.load_file(path)]
    for case in cases[::STRIDE]:
        catalog = Catalog()
        for text in case.statements:
            for variant in _variants(text, rng):
                try:
                    for stmt in parse(variant):
                        if isinstance(stmt, ast.CreateSource) and variant is text:
                            source = definitions.source(stmt)
                            catalog.sources[source.name] = source
                        elif isinstance(stmt, (ast.CreateAsSelect, ast.InsertInto)):
                            Planner(catalog, functions).plan_query(stmt.query, persistent=True,
                                                        sink_name=getattr(stmt, "name", None))
                            planned += 1
                except StreamsqlError:
                    pass
                except Exception as e:  # noqa: BLE001 - what this test looks for
                    crashes.append(f"{case.id}: {variant[:200]!r}: {type(e).__name__}: {e}")
    assert planned > 300  # the corpus's queries reach the planner, not only the parser's errors
    assert not crashes, "\n".join(crashes[:20])
