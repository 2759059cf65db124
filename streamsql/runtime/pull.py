"""Pull queries: which rows of a table's store a ``WHERE`` needs (so the store reads by index).

ksqlDB serves ``SELECT ... FROM table WHERE key = x`` / ``key IN (...)`` / a range on the key /
a WINDOWSTART range from its state store. :func:`lookup_for` reads the top-level ``AND``
conjuncts of the WHERE and turns those it recognises into a :class:`Lookup`; the rest (and the
recognised ones too) are then evaluated on the rows read, so the lookup only needs to select a
superset. A literal whose type does not match the key's (``'5'`` for an INT key) is not used.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from streamsql import types as t
from streamsql.catalog import Source
from streamsql.runtime.materialized import Lookup

_FLIP = {exp.GT: exp.LT, exp.GTE: exp.LTE, exp.LT: exp.GT, exp.LTE: exp.GTE, exp.EQ: exp.EQ}


def _conjuncts(node: exp.Expression) -> list[exp.Expression]:
    if isinstance(node, exp.Paren):
        return _conjuncts(node.this)
    if isinstance(node, exp.And):
        return _conjuncts(node.left) + _conjuncts(node.right)
    return [node]


def _literal(node: exp.Expression, kind: t.Kind) -> tuple[bool, Any]:
    neg = False
    if isinstance(node, exp.Neg):
        neg, node = True, node.this
    if not isinstance(node, exp.Literal):
        return False, None
    if node.is_string:
        if kind == t.Kind.STRING and not neg:
            return True, node.this
        return False, None
    if kind not in (t.Kind.INTEGER, t.Kind.BIGINT, t.Kind.DOUBLE):
        return False, None
    text = node.this
    try:
        value: Any = int(text)
    except ValueError:
        value = float(text)
    return True, -value if neg else value


def lookup_for(where: exp.Expression | None, table: Source) -> Lookup:
    lookup = Lookup()
    if where is None:
        return lookup
    keys = table.key_columns
    key = keys[0] if len(keys) == 1 else None
    for c in _conjuncts(where):
        if isinstance(c, exp.In) and isinstance(c.this, exp.Column) and key is not None \
                and c.this.name.upper() == key.name.upper() and not c.args.get("query"):
            values = [_literal(v, key.type.kind) for v in c.expressions]
            if values and all(ok for ok, _ in values):
                _set_keys(lookup, [[v] for _, v in values])
            continue
        if type(c) not in _FLIP:
            continue
        left, right, op = c.left, c.right, type(c)
        if not isinstance(left, exp.Column):
            left, right, op = right, left, _FLIP[op]
        if not isinstance(left, exp.Column):
            continue
        name = left.name.upper()
        if name == t.WINDOWSTART:
            ok, value = _literal(right, t.Kind.BIGINT)
            if ok:
                _bound(lookup, "wstart", op, int(value))
        elif key is not None and name == key.name.upper():
            ok, value = _literal(right, key.type.kind)
            if not ok:
                continue
            if op is exp.EQ:
                _set_keys(lookup, [[value]])
            else:
                _bound(lookup, "key", op, value)
    return lookup


def _set_keys(lookup: Lookup, keys: list[list[Any]]) -> None:
    if lookup.keys is None:
        lookup.keys = keys
    else:  # two key conditions ANDed: the rows satisfying both
        lookup.keys = [k for k in lookup.keys if k in keys]


def _bound(lookup: Lookup, prefix: str, op: type, value: Any) -> None:
    if op is exp.EQ:
        setattr(lookup, f"{prefix}_low", (value, True))
        setattr(lookup, f"{prefix}_high", (value, True))
    elif op in (exp.GT, exp.GTE):
        setattr(lookup, f"{prefix}_low", (value, op is exp.GTE))
    else:
        setattr(lookup, f"{prefix}_high", (value, op is exp.LTE))
