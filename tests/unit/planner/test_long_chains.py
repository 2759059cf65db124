"""Planning 1,500-term operator chains (issue #52): no Python frame per term, text Spark can
parse (a fold over an array for a long chain of one type), and a clear error for a long chain
whose operand types differ. No Spark here: tests/integration/test_long_expressions.py runs one."""

from __future__ import annotations

import json

import pytest

from streamsql import types as t
from streamsql.catalog import Catalog, Source
from streamsql.errors import AnalysisError
from streamsql.functions.catalog import builtin_registry
from streamsql.planner.planner import Planner, source_scope
from streamsql.planner.pushdown import exact_filter, source_filter
from streamsql.sql import parse, parse_expression
from tests.support.recursion import default_recursion_limit

TERMS = 1500




@pytest.fixture
def catalog() -> Catalog:
    c = Catalog()
    c.add(Source("PAY", "STREAM", [
        t.Column("ID", t.STRING, "key"), t.Column("N", t.INTEGER), t.Column("BIG", t.BIGINT),
        t.Column("AMOUNT", t.DOUBLE), t.Column("NAME", t.STRING),
    ], topic="pay", key_format="KAFKA", value_format="JSON"))
    return c


def plan(catalog: Catalog, sql: str):  # type: ignore[no-untyped-def]
    with default_recursion_limit():
        [statement] = parse(sql)
        return Planner(catalog, builtin_registry()).plan_query(statement.query, persistent=True, sink_name="O")


def chain(operator: str, term: str, count: int = TERMS) -> str:
    return f" {operator} ".join([term] * count)


def test_a_long_sum_is_a_left_fold_over_an_array(catalog: Catalog) -> None:
    p = plan(catalog, f"CREATE STREAM o AS SELECT id, {chain('+', 'amount')} AS s FROM pay "
                      f"WHERE {chain('+', 'n')} > 0;")
    assert p.where == ("coalesce((aggregate(array(" + ", ".join(["`N`"] * (TERMS - 1)) + "), `N`, "
                       "(__chain_acc, __chain_term) -> (__chain_acc + __chain_term)) > 0), FALSE)")
    [_, total] = p.columns
    assert total.sql.startswith("aggregate(array(`AMOUNT`, ") and total.type == t.DOUBLE


@pytest.mark.parametrize("operator", ["AND", "OR"])
def test_long_conjunctions_and_disjunctions_fold_too(catalog: Catalog, operator: str) -> None:
    p = plan(catalog, f"CREATE STREAM o AS SELECT id, n FROM pay WHERE {chain(operator, 'n = 1')};")
    assert p.where is not None
    assert p.where.startswith("aggregate(array(coalesce((`N` = 1), FALSE), ")
    assert p.where.endswith(f"(__chain_acc, __chain_term) -> (__chain_acc {operator} __chain_term))")


def test_short_chains_keep_their_text(catalog: Catalog) -> None:
    p = plan(catalog, "CREATE STREAM o AS SELECT id, n + n + n AS s FROM pay WHERE n = 1 AND n = 2 AND n = 3;")
    assert p.columns[1].sql == "((`N` + `N`) + `N`)"
    assert p.where == ("((coalesce((`N` = 1), FALSE) AND coalesce((`N` = 2), FALSE)) AND "
                       "coalesce((`N` = 3), FALSE))")


def test_a_long_chain_of_mixed_types_is_refused_clearly(catalog: Catalog) -> None:
    mixed = " + ".join(["n", "big"] * (TERMS // 2))
    with pytest.raises(AnalysisError, match="Expression is too long to run: a chain of 1500 operands whose types"):
        plan(catalog, f"CREATE STREAM o AS SELECT id, {mixed} AS s FROM pay;")


def test_a_chain_type_error_is_still_named(catalog: Catalog) -> None:
    with pytest.raises(AnalysisError, match="Logical operator AND requires BOOLEAN operands"):
        plan(catalog, f"CREATE STREAM o AS SELECT id, n FROM pay WHERE {chain('AND', 'n = 1')} AND n;")


def test_a_long_aggregate_sum_plans(catalog: Catalog) -> None:
    p = plan(catalog, f"CREATE TABLE o AS SELECT id, {chain('+', 'SUM(n)')} AS s FROM pay GROUP BY id "
                      f"HAVING {chain('+', 'COUNT(*)')} > 0;")
    assert p is not None


def test_pushdown_flattens_a_long_conjunction_without_recursing(catalog: Catalog) -> None:
    source = catalog.get("PAY")
    where = parse_expression(chain("AND", "n = 1", 3) + " AND (" + chain("OR", "n = 2") + ")")
    with default_recursion_limit():
        pushed = source_filter(where, source_scope(source, "PAY"), source.columns)
        exact = exact_filter(parse_expression(chain("AND", "n = 1")), source_scope(source, "PAY"), source.columns)
    assert pushed is not None and exact is not None
    tree = json.loads(pushed)
    assert tree["op"] == "and" and len(tree["args"]) == 4 and len(tree["args"][3]["args"]) == TERMS
    assert len(json.loads(exact)["args"]) == TERMS
