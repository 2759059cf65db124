"""ksqlDB's lexical rules and expression grammar as a sqlglot dialect.

The tokenizer and the expression parser are sqlglot's, tuned to ksqlDB: back-quoted and
double-quoted identifiers, ``''`` escapes, ``->`` struct dereference, ``=>`` lambdas, every
function call as ``exp.Anonymous`` (the function catalog, not sqlglot, decides what a name means),
and ksqlDB's type grammar. :func:`finish_expression` then brings a parsed tree into the shape the
planner relies on (see the conventions in :mod:`streamsql.sql.ast`). Statement structure lives in
:mod:`streamsql.sql.parser`, which drives this parser over the token stream.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ClassVar

import sqlglot.errors
from sqlglot import exp, generator, parser, tokens
from sqlglot.dialects.dialect import Dialect, NormalizationStrategy
from sqlglot.tokens import Token, TokenType

from streamsql import types as t

#: ksqlDB's unquoted identifier characters (IDENTIFIER and DIGIT_IDENTIFIER; numbers excluded).
WORD_RE = re.compile(r"[A-Za-z0-9_@]+")

#: Largest integer literal ksqlDB accepts (BIGINT); ``-9223372036854775808`` is allowed too.
_MAX_BIGINT = 2**63 - 1

_PRIMITIVE_TO_DTYPE: dict[t.Kind, exp.DType] = {
    t.Kind.BOOLEAN: exp.DType.BOOLEAN,
    t.Kind.INTEGER: exp.DType.INT,
    t.Kind.BIGINT: exp.DType.BIGINT,
    t.Kind.DOUBLE: exp.DType.DOUBLE,
    t.Kind.STRING: exp.DType.VARCHAR,
    t.Kind.BYTES: exp.DType.VARBINARY,
    t.Kind.DATE: exp.DType.DATE,
    t.Kind.TIME: exp.DType.TIME,
    t.Kind.TIMESTAMP: exp.DType.TIMESTAMP,
}
_DTYPE_TO_PRIMITIVE: dict[exp.DType, t.Primitive] = {
    **{dtype: t.Primitive(kind) for kind, dtype in _PRIMITIVE_TO_DTYPE.items()},
    exp.DType.TEXT: t.STRING,
    exp.DType.BINARY: t.BYTES,
}

#: Expression node types the planner understands; anything else sqlglot can build is rejected.
ALLOWED_NODES: tuple[type[exp.Expr], ...] = (
    exp.Column, exp.Identifier, exp.Star, exp.Dot, exp.Bracket, exp.Anonymous, exp.Cast,
    exp.DataType, exp.DataTypeParam, exp.ColumnDef, exp.Case, exp.If, exp.Like, exp.Escape,
    exp.In, exp.Between, exp.Is, exp.Not, exp.And, exp.Or, exp.Neg, exp.Add, exp.Sub, exp.Mul,
    exp.Div, exp.Mod, exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ,
    exp.NullSafeNEQ, exp.DPipe, exp.Lambda, exp.Literal, exp.Boolean, exp.Null, exp.Array,
    exp.PropertyEQ,
)  # fmt: skip


#: How deeply one statement's expressions (and types, and EXPLAIN of EXPLAIN) may nest: each
#: parenthesis, function call, CASE, subscript, NOT or sign opens a level. sqlglot parses by
#: recursive descent, about 20 Python frames a level, so without a limit a few dozen levels hit
#: Python's recursion limit (1,000 frames by default) in the parser, or later in the planner.
#: 32 levels use at most ~700 frames and leave room for the caller's stack; ksqlDB's own
#: query-validation tests nest at most 7 levels deep. Chains of binary operators (``a + b + c``,
#: ``x AND y AND z``) are parsed in a loop and are no depth at all.
MAX_NESTING_DEPTH = 32


class NestingTooDeep(Exception):
    """A statement nested deeper than its parser's limit, at ``token``.

    Deliberately not a sqlglot ParseError: sqlglot's backtracking (``_try_parse``) swallows those
    and tries another alternative, which would only nest as deep again."""

    def __init__(self, limit: int, token: Token | None) -> None:
        self.reason = (f"Statement nesting is too deep: more than {limit} levels of nested expressions "
                       f"(parentheses, function calls, CASE, NOT, ...; the limit is {limit})")
        super().__init__(self.reason)
        self.token = token


class KsqlSyntaxError(sqlglot.errors.ParseError):
    """A syntax error at ``token`` (None: at the end of the statement).

    Subclasses sqlglot's error so that sqlglot's own backtracking (``_try_parse``) still works;
    :mod:`streamsql.sql.parser` turns it into :class:`streamsql.errors.ParseError` with the
    token's line and column in the whole script.
    """

    def __init__(self, reason: str, token: Token | None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.token = token


def syntax_error_near(token: Token | None) -> KsqlSyntaxError:
    """ksqlDB's generic message: ``Syntax error at or near 'X'``."""
    return KsqlSyntaxError(f"Syntax error at or near '{token_text(token)}'", token)


def token_text(token: Token | None) -> str:
    """How a token appears in messages: ``<EOF>`` past the end, like ANTLR."""
    return token.text if token else "<EOF>"


def _struct_deref(self: KsqlParser, this: exp.Expr, field: exp.Expr | None) -> exp.Expr:
    """``a->b`` is ``Dot(a, Identifier(B))``; ``a->*`` keeps a Star for the select list."""
    if isinstance(field, exp.Column) and not field.table and isinstance(field.this, exp.Identifier):
        return exp.Dot(this=this, expression=field.this)
    if isinstance(field, exp.Star):
        return exp.Dot(this=this, expression=field)
    raise syntax_error_near(self._prev)


def _lambda(self: KsqlParser, params: list[exp.Expr]) -> exp.Lambda:
    """``x => body``. Unlike sqlglot's default, references to ``x`` in the body stay
    ``exp.Column`` nodes: the planner resolves them against the lambda's scope."""
    body = self._parse_disjunction()
    if body is None:
        raise syntax_error_near(self._curr)
    return exp.Lambda(this=body, expressions=params)


class KsqlTokenizer(tokens.Tokenizer):
    IDENTIFIERS = ["`", '"']  # the first one is also how generated SQL quotes
    QUOTES = ["'"]
    STRING_ESCAPES = ["'"]
    COMMENTS = ["--", ("/*", "*/")]
    VAR_SINGLE_TOKENS = {"@"}
    # SHOW, EXPLAIN, ... are statements parsed token by token, not opaque commands.
    COMMANDS: ClassVar[set[TokenType]] = set()
    NESTED_COMMENTS = False


class KsqlParser(parser.Parser):
    """Expressions and types under ksqlDB's rules. ``custom_types`` (from ``CREATE TYPE``)
    resolves type names that are not built in."""

    FUNCTIONS: ClassVar[dict[str, Callable[..., Any]]] = {}
    FUNCTION_PARSERS = {"CAST": lambda self: self._parse_ksql_cast()}
    NO_PAREN_FUNCTIONS: ClassVar[dict[TokenType, type[exp.Expr]]] = {}
    NO_PAREN_FUNCTION_PARSERS = {"CASE": parser.Parser.NO_PAREN_FUNCTION_PARSERS["CASE"]}
    UNARY_PARSERS = {
        key: value
        for key, value in parser.Parser.UNARY_PARSERS.items()
        if key in (TokenType.PLUS, TokenType.DASH, TokenType.NOT)
    }
    COLUMN_OPERATORS = {TokenType.DOT: None, TokenType.ARROW: _struct_deref}
    LAMBDAS = {TokenType.FARROW: _lambda}

    custom_types: Mapping[str, t.SqlType] = {}
    #: see :data:`MAX_NESTING_DEPTH`; a parser may be given a lower one
    max_nesting_depth: int = MAX_NESTING_DEPTH
    _nesting_depth: int = 0

    @contextmanager
    def nested(self) -> Iterator[None]:
        """One level deeper for what is parsed inside; :class:`NestingTooDeep` past the limit.
        Every recursive rule passes through here, so the parser's stack stays bounded."""
        if self._nesting_depth >= self.max_nesting_depth:
            raise NestingTooDeep(self.max_nesting_depth, self._curr or self._prev or None)
        self._nesting_depth += 1
        try:
            yield
        finally:
            self._nesting_depth -= 1

    def _parse_unary(self) -> exp.Expr | None:
        """Every nested expression (a parenthesis, a function argument, a CASE branch, the
        operand of NOT or of a sign) is parsed through here: one nesting level each."""
        with self.nested():
            return super()._parse_unary()

    def _parse_in(self, this: exp.Expr | None, alias: bool = False) -> exp.In:
        """``x IN (y IN (...))`` nests without passing :meth:`_parse_unary`: a level too."""
        with self.nested():
            return super()._parse_in(this, alias)

    def _parse_select(self, *args: Any, **kwargs: Any) -> exp.Expr | None:
        """A subquery (which ksqlDB does not have; :func:`finish_expression` rejects it) can
        nest through FROM without passing :meth:`_parse_unary`: a level too."""
        with self.nested():
            return super()._parse_select(*args, **kwargs)

    def raise_error(self, message: str, token: Token | None = None) -> None:
        """Every sqlglot-detected problem becomes a ksqlDB-style syntax error at its token."""
        raise syntax_error_near(token or self._curr or None)

    def _parse_function_args(self, alias: bool = False) -> list[exp.Expr]:
        """Arguments (lambdas included). Stricter than sqlglot: no ``f(x AS y)`` aliases and no
        empty arguments such as ``f(a,, b)``."""
        args: list[exp.Expr] = []
        if self._curr.token_type == TokenType.R_PAREN:
            return args
        while True:
            arg = self._parse_lambda(alias=False)
            if arg is None:
                raise syntax_error_near(self._curr or None)
            args.append(arg)
            if not self._match(TokenType.COMMA):
                return args

    def _parse_type(
        self, parse_interval: bool = True, fallback_to_identifier: bool = False
    ) -> exp.Expr | None:
        """A primary expression. sqlglot would try ``<type> <literal>`` constructors here (and
        so misread columns named DATE or MAP); ksqlDB only has ``DECIMAL '1.23'``."""
        if self._curr.text.upper() == "DECIMAL" and self._next.token_type == TokenType.STRING:
            self._advance(2)
            return self._decimal_literal(self._prev)
        if fallback_to_identifier:
            return self._parse_id_var()
        return self._parse_atom() or self._parse_column()

    def _decimal_literal(self, token: Token) -> exp.Cast:
        """``DECIMAL '12.30'`` → ``CAST('12.30' AS DECIMAL(4, 2))``: precision and scale come
        from the digits as written, as ksqlDB's type constructor does."""
        match = re.fullmatch(r"\s*[+-]?(\d*)(?:\.(\d*))?\s*", token.text)
        if not match or not (match.group(1) or match.group(2)):
            raise KsqlSyntaxError(f"Invalid DECIMAL literal: '{token.text}'", token)
        whole, fraction = match.group(1).lstrip("0"), match.group(2) or ""
        decimal = t.Decimal(max(len(whole) + len(fraction), 1), len(fraction))
        return exp.Cast(this=exp.Literal.string(token.text), to=to_datatype(decimal))

    def _parse_ksql_cast(self) -> exp.Cast:
        """``CAST(expr AS type)``; the closing parenthesis is matched by the caller."""
        this = self._parse_disjunction()
        if this is None or not self._match(TokenType.ALIAS):
            raise syntax_error_near(self._curr or None)
        cast = exp.Cast(this=this, to=to_datatype(self.parse_sql_type()))
        if self._curr.token_type != TokenType.R_PAREN:
            raise KsqlSyntaxError(f"missing ')' at '{token_text(self._curr or None)}'", self._curr or None)
        return cast

    # --- types -----------------------------------------------------------------------------

    def parse_sql_type(self) -> t.SqlType:
        """ksqlDB's ``type`` rule: primitives and aliases, ``DECIMAL(p, s)``, ``ARRAY<t>``,
        ``MAP<k, v>``, ``STRUCT<name t, ...>`` and custom type names."""
        with self.nested():
            return self._parse_sql_type()

    def _parse_sql_type(self) -> t.SqlType:
        token = self._curr
        if not token or not self._is_word(token) or token.token_type == TokenType.NULL:
            raise syntax_error_near(token or None)
        self._advance()
        name = token.text.upper() if token.token_type != TokenType.IDENTIFIER else token.text
        if token.token_type != TokenType.IDENTIFIER:
            if name == "DECIMAL":
                return self._parse_decimal_params()
            if name == "ARRAY" and self._curr.token_type == TokenType.LT:
                return t.Array(self._angle_types(1)[0])
            if name == "MAP" and self._curr.token_type == TokenType.LT:
                return t.Map(*self._angle_types(2))
            if name == "STRUCT" and self._curr.token_type in (TokenType.LT, TokenType.NEQ):
                return self._parse_struct_fields()
            if name in t.PRIMITIVE_ALIASES:
                self._skip_type_parameters()
                return t.Primitive(t.PRIMITIVE_ALIASES[name])
        if name in self.custom_types:
            self._skip_type_parameters()
            return self.custom_types[name]
        raise KsqlSyntaxError(f"Unknown type: {token.text}", token)

    def _skip_type_parameters(self) -> None:
        """ksqlDB's grammar lets a named type take parameters, ``VARCHAR(10)``, ``STRING('x')``
        (``baseType ('(' typeParameter (',' typeParameter)* ')')?``, a parameter being an integer
        or ``STRING``) and its type parser then ignores them; so do we."""
        if self._curr.token_type != TokenType.L_PAREN:
            return
        self._advance()
        while True:
            token = self._curr or None
            if token is None or not (token.token_type == TokenType.NUMBER and token.text.isdigit()
                                     or token.text.upper() == "STRING" and token.token_type != TokenType.IDENTIFIER):
                raise KsqlSyntaxError(f"mismatched input '{token_text(token)}' expecting {{'STRING', INTEGER_VALUE}}",
                                      token)
            self._advance()
            if self._match(TokenType.R_PAREN):
                return
            if not self._match(TokenType.COMMA):
                token = self._curr or None
                raise KsqlSyntaxError(f"mismatched input '{token_text(token)}' expecting {{',', ')'}}", token)

    def _parse_decimal_params(self) -> t.Decimal:
        open_paren = self._expect_type(TokenType.L_PAREN, "'('")
        precision = self._expect_int()
        self._expect_type(TokenType.COMMA, "','")
        scale = self._expect_int()
        self._expect_type(TokenType.R_PAREN, "')'")
        if not 1 <= precision <= 38 or scale > precision:
            # Spark's DECIMAL holds at most 38 digits (docs/differences.md)
            raise KsqlSyntaxError(f"DECIMAL({precision}, {scale}) is not supported: the precision must be between 1 "
                                  "and 38 and the scale at most the precision", open_paren)
        return t.Decimal(precision, scale)

    def _angle_types(self, count: int) -> list[t.SqlType]:
        self._expect_type(TokenType.LT, "'<'")
        items = [self.parse_sql_type()]
        while len(items) < count:
            self._expect_type(TokenType.COMMA, "','")
            items.append(self.parse_sql_type())
        self._expect_closing_angle()
        return items

    def _parse_struct_fields(self) -> t.Struct:
        if self._match(TokenType.NEQ):  # ``STRUCT<>`` lexes as one ``<>`` token
            return t.Struct(())
        self._expect_type(TokenType.LT, "'<'")
        fields: list[t.StructField] = []
        if self._curr.token_type != TokenType.GT:
            while True:
                name = self.expect_identifier()
                fields.append(t.StructField(name, self.parse_sql_type()))
                if not self._match(TokenType.COMMA):
                    break
        self._expect_closing_angle()
        return t.Struct(tuple(fields))

    def _expect_closing_angle(self) -> None:
        """Consume one ``>``; a ``>=`` or ``>>``-like token is not produced by this tokenizer,
        so nested ``ARRAY<ARRAY<INT>>`` arrives as two GT tokens."""
        self._expect_type(TokenType.GT, "'>'")

    # --- token helpers shared with the statement parser ---------------------------------------

    def _is_word(self, token: Token) -> bool:
        """An identifier: quoted, or a bare word (keywords included; context decides)."""
        if token.token_type == TokenType.IDENTIFIER:
            return True
        source_text = self.sql[token.start : token.end + 1]
        return token.token_type != TokenType.NUMBER and bool(WORD_RE.fullmatch(source_text))

    def expect_identifier(self) -> str:
        """A normalized identifier: unquoted upper-cased, quoted kept as written."""
        token = self._curr
        if not token or not self._is_word(token):
            raise syntax_error_near(token or None)
        self._advance()
        return token.text if token.token_type == TokenType.IDENTIFIER else token.text.upper()

    def _expect_type(self, token_type: TokenType, expected: str) -> Token:
        if self._curr.token_type != token_type:
            token = self._curr or None
            raise KsqlSyntaxError(f"mismatched input '{token_text(token)}' expecting {expected}", token)
        self._advance()
        return self._prev

    def _expect_int(self) -> int:
        token = self._expect_type(TokenType.NUMBER, "INTEGER_VALUE")
        if not token.text.isdigit():
            raise KsqlSyntaxError(f"mismatched input '{token.text}' expecting INTEGER_VALUE", token)
        return int(token.text)


class KsqlGenerator(generator.Generator):
    """Renders trees back in ksqlDB's notation (``->``, ``=>``, ``ARRAY[...]``, ksqlDB type
    names). Use :func:`to_ksql`, which also restores the parentheses the parser drops."""

    def dot_sql(self, expression: exp.Dot) -> str:
        return f"{self.sql(expression, 'this')}->{self.sql(expression, 'expression')}"

    def lambda_sql(self, expression: exp.Lambda, arrow_sep: str = "=>", wrap: bool = True) -> str:
        return super().lambda_sql(expression, arrow_sep="=>", wrap=wrap)

    def array_sql(self, expression: exp.Array) -> str:
        return f"ARRAY[{self.expressions(expression, flat=True)}]"

    def datatype_sql(self, expression: exp.DataType) -> str:
        try:
            return str(datatype_to_sql_type(expression))
        except ValueError:
            return super().datatype_sql(expression)


class KsqlDialect(Dialect):
    """ksqlDB's SQL: identifiers upper-cased unless quoted. Subscripts stay as written (ksqlDB
    indexes arrays from 1), so no INDEX_OFFSET translation happens."""

    NORMALIZATION_STRATEGY = NormalizationStrategy.UPPERCASE
    IDENTIFIERS_CAN_START_WITH_DIGIT = True  # ksqlDB's DIGIT_IDENTIFIER, e.g. ``AS 1R``
    Tokenizer = KsqlTokenizer
    Parser = KsqlParser
    Generator = KsqlGenerator


#: The dialect instance everything here shares (sqlglot dialects are stateless settings).
KSQL = KsqlDialect()


def tokenize(text: str) -> list[Token]:
    """ksqlDB tokens of ``text``; raises sqlglot's TokenError on unreadable input."""
    return KSQL.tokenize(text)


# --- type conversion ---------------------------------------------------------------------------


def to_datatype(sql_type: t.SqlType) -> exp.DataType:
    """The sqlglot DataType for a ksqlDB type (what ``CAST(x AS t)`` carries)."""
    if isinstance(sql_type, t.Primitive):
        return exp.DataType(this=_PRIMITIVE_TO_DTYPE[sql_type.kind])
    if isinstance(sql_type, t.Decimal):
        params = [exp.DataTypeParam(this=exp.Literal.number(n)) for n in (sql_type.precision, sql_type.scale)]
        return exp.DataType(this=exp.DType.DECIMAL, expressions=params)
    if isinstance(sql_type, t.Array):
        return exp.DataType(this=exp.DType.ARRAY, expressions=[to_datatype(sql_type.element)], nested=True)
    if isinstance(sql_type, t.Map):
        kv = [to_datatype(sql_type.key), to_datatype(sql_type.value)]
        return exp.DataType(this=exp.DType.MAP, expressions=kv, nested=True)
    fields = [
        exp.ColumnDef(this=exp.to_identifier(f.name, quoted=True), kind=to_datatype(f.type))
        for f in sql_type.fields
    ]
    return exp.DataType(this=exp.DType.STRUCT, expressions=fields, nested=True)


def datatype_to_sql_type(datatype: exp.DataType) -> t.SqlType:
    """Inverse of :func:`to_datatype`; raises ValueError for types ksqlDB does not have."""
    dtype = datatype.this
    args = datatype.expressions
    if dtype in _DTYPE_TO_PRIMITIVE and not args:
        return _DTYPE_TO_PRIMITIVE[dtype]
    if dtype == exp.DType.DECIMAL and len(args) == 2:
        precision, scale = (int(p.this.name) for p in args)
        return t.Decimal(precision, scale)
    if dtype == exp.DType.ARRAY and len(args) == 1:
        return t.Array(datatype_to_sql_type(args[0]))
    if dtype == exp.DType.MAP and len(args) == 2:
        return t.Map(datatype_to_sql_type(args[0]), datatype_to_sql_type(args[1]))
    if dtype == exp.DType.STRUCT:
        return t.Struct(tuple(_struct_field(f) for f in args))
    raise ValueError(f"Unknown type: {datatype.sql()}")


def _struct_field(column_def: exp.Expr) -> t.StructField:
    ident = column_def.this
    name = ident.name if ident.quoted else ident.name.upper()
    return t.StructField(name, datatype_to_sql_type(column_def.args["kind"]))


# --- tree finishing ----------------------------------------------------------------------------


def finish_expression(
    tree: exp.Expr, allow_struct_star: bool = False, fallback: Token | None = None, sql: str | None = None
) -> exp.Expr:
    """Bring a freshly parsed tree to the conventions of :mod:`streamsql.sql.ast`.

    Upper-cases unquoted identifiers and function names, drops redundant parentheses (the tree
    already encodes precedence), and rejects node types and literals ksqlDB does not have, so the
    planner never sees sqlglot-only syntax. ``allow_struct_star`` admits a top-level ``x->*``.
    Errors point at the offending node's first token, or at ``fallback`` (the expression's start).
    """
    tree = _normalize(tree)
    for node in tree.walk():
        if isinstance(node, exp.Tuple) and sql is not None and node.expressions:
            comma = _tuple_comma(node, sql)
            if comma is not None:  # ksqlDB's grammar reads ``(a`` and then wants the ')'
                raise KsqlSyntaxError("missing ')' at ','", Token(TokenType.COMMA, ",", start=comma, end=comma))
        if isinstance(node, exp.Is) and not isinstance(node.expression, exp.Null):
            # ksqlDB's grammar has IS [NOT] NULL and IS [NOT] DISTINCT FROM only: whatever else
            # follows IS is where its parser stops
            raise KsqlSyntaxError(f"mismatched input '{_node_text(node.expression)}' expecting {{'NULL', 'DISTINCT'}}",
                                  _first_token(node.expression) or _first_token(node) or fallback)
        problem = _check_node(node, allow_struct_star and node is tree)
        if problem:
            raise KsqlSyntaxError(problem, _first_token(node) or fallback)
    return tree


def _tuple_comma(node: exp.Tuple, sql: str) -> int | None:
    """The offset of the comma after a parenthesized list's first item, when its text shows one."""
    ends = [n.meta["end"] for n in node.expressions[0].walk() if "end" in n.meta]
    if not ends:
        return None
    offset = max(ends) + 1
    while offset < len(sql) and sql[offset] in " \t\r\n)":
        offset += 1
    return offset if sql[offset : offset + 1] == "," else None


def _normalize(tree: exp.Expr) -> exp.Expr:
    for node in list(tree.walk()):
        if node.args.get("negate"):  # sqlglot's ``a NOT LIKE b`` form; ksqlDB's tree is NOT(LIKE)
            node.set("negate", None)
            tree = _wrap_in_not(node.parent if isinstance(node.parent, exp.Escape) else node, tree)
        if isinstance(node, exp.Identifier) and not node.quoted:
            node.set("this", node.this.upper())
        elif isinstance(node, exp.Anonymous):
            # a quoted function name (an Identifier) is kept as written
            node.set("this", node.this.upper() if isinstance(node.this, str) else node.this.name)
    while isinstance(tree, exp.Paren):
        tree = tree.this.pop()
    for paren in list(tree.find_all(exp.Paren)):
        paren.replace(paren.this)
    return tree


def _wrap_in_not(node: exp.Expr, root: exp.Expr) -> exp.Expr:
    """Put ``node`` under a new Not in its place; returns the (possibly new) root."""
    negated = exp.Not()
    if node is root:
        negated.set("this", node)
        return negated
    node.replace(negated)
    negated.set("this", node)
    return root


def _check_node(node: exp.Expr, struct_star_ok: bool) -> str | None:
    """Why ``node`` is not ksqlDB syntax, or None when it is. The node's text is rendered only
    for a rejected node: rendering every node's subtree would make parsing quadratic in the
    length of an ``a + b + ...`` chain."""
    if (
        not isinstance(node, ALLOWED_NODES)
        or isinstance(node, exp.Column)
        and (node.args.get("db") or not isinstance(node.this, (exp.Identifier, exp.Star)))
        or isinstance(node, exp.Dot) and isinstance(node.expression, exp.Star) and not struct_star_ok
        or isinstance(node, exp.In) and not node.expressions
    ):
        return f"Syntax error at or near '{_node_text(node)}'"
    if isinstance(node, exp.Literal) and not node.is_string and _out_of_range(node):
        sign = "-" if isinstance(node.parent, exp.Neg) else ""
        return f"Invalid numeric literal: {sign}{node.this}"
    return None


def _out_of_range(literal: exp.Literal) -> bool:
    """ksqlDB rejects integer literals outside BIGINT at parse time."""
    if not literal.this.isdigit():
        return False
    limit = _MAX_BIGINT + 1 if isinstance(literal.parent, exp.Neg) else _MAX_BIGINT
    return int(literal.this) > limit


def _first_token(node: exp.Expr) -> Token | None:
    """A token standing for the earliest source position recorded in ``node``'s subtree."""
    positioned = [n.meta for n in node.walk() if "start" in n.meta]
    if not positioned:
        return None
    meta = min(positioned, key=lambda m: m["start"])
    return Token(TokenType.VAR, _node_text(node), start=meta["start"], end=meta["end"])


def _node_text(node: exp.Expr) -> str:
    try:
        return to_ksql(node)
    except Exception:  # noqa: BLE001 - only for the message; the node is rejected either way
        return type(node).__name__


#: Nodes rendered with an operator between or before operands; nested ones get parentheses.
_OPERATOR_NODES = (exp.Binary, exp.Not, exp.Neg, exp.Between, exp.In)


def to_ksql(expression: exp.Expr) -> str:
    """ksqlDB-style text of an expression, e.g. for EXPLAIN output and messages.

    The parser drops parentheses (the tree encodes precedence), so plain ``.sql()`` would print
    ``(a + b) * c`` as ``A + B * C``. Like ksqlDB's own formatter, this parenthesizes every
    operator nested in another: ``(A + B) * C``.
    """
    tree = expression.copy()
    for node in list(tree.walk()):
        parent = node.parent
        nested = isinstance(parent, _OPERATOR_NODES) and not isinstance(parent, exp.Escape)
        if isinstance(node, _OPERATOR_NODES) and nested:
            paren = exp.Paren()
            node.replace(paren)
            paren.set("this", node)
    try:
        return tree.sql(dialect=KSQL)
    except RecursionError:
        # sqlglot renders a chain of one operator in a loop, but not one wrapped in parentheses
        # at every link: a chain of thousands of terms is shown without them (issue #52)
        return expression.sql(dialect=KSQL)
