"""The shell's knowledge of the dialect's surface: when an input is complete, what to complete,
and how to colour it.

Completion looks at the word before the cursor and the keyword before that word, so it offers
what can follow: sources after FROM/JOIN/INTO/DESCRIBE/DROP ..., query ids after TERMINATE and
EXPLAIN, quoted property names after SET/UNSET, variables inside ``${``, SHOW targets after SHOW,
and elsewhere keywords, functions, sources and the columns of the sources the statement names.
Suggestions follow the case the user types in (``sel`` -> ``select``), since unquoted names are
case-insensitive.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from pygments.lexer import RegexLexer, words
from pygments.token import Comment, Keyword, Name, Number, Operator, Punctuation, String, Whitespace

from streamsql.runtime.vocabulary import KEYWORDS, SHOW_TARGETS, TYPES, Vocabulary
from streamsql.sql import ends_statement

CLI_COMMANDS = ["help", "exit", "quit", "clear", "history", "version", "output"]
_SOURCE_CONTEXT = {"FROM", "JOIN", "INTO", "DESCRIBE", "EXTENDED", "STREAM", "TABLE"}


# --- complete input -------------------------------------------------------------------------------


def is_cli_command(text: str) -> bool:
    """A shell command (``help``, ``exit``, ``output JSON``, ``run script 'f'`` ...), which needs
    no ``;`` (as in the ksql CLI)."""
    words_ = text.strip().rstrip(";").split()
    if not words_:
        return False
    first = words_[0].lower()
    if first in ("help", "exit", "quit", "clear", "history", "version"):
        return len(words_) == 1
    if first == "output":
        return len(words_) <= 2
    return len(words_) >= 2 and first == "run" and words_[1].lower() == "script"


def is_complete(text: str) -> bool:
    return not text.strip() or is_cli_command(text) or ends_statement(text)


# --- completion -----------------------------------------------------------------------------------


def _in_case(word: str, typed: str) -> str:
    return word.lower() if typed and typed == typed.lower() and typed.upper() != typed else word


class KsqlCompleter(Completer):
    """Completion from a :class:`Vocabulary`, fetched through ``vocabulary()`` on each request
    (the embedded engine answers from memory; a remote backend caches between inputs)."""

    def __init__(self, vocabulary: Callable[[], Vocabulary]) -> None:
        self._vocabulary = vocabulary

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterator[Completion]:
        before = document.text_before_cursor
        match = re.search(r"(\$\{[A-Za-z0-9_]*)$", before) or re.search(r"('[^'\s]*|[A-Za-z_][A-Za-z0-9_]*)$", before)
        typed = match.group(1) if match else ""
        statement = before[: len(before) - len(typed)].rsplit(";", 1)[-1]
        try:
            vocab = self._vocabulary()
        except Exception:  # completion must never break the prompt
            return
        for candidate in self._candidates(statement, typed, vocab):
            if candidate.upper().startswith(typed.upper()) and candidate.upper() != typed.upper():
                yield Completion(_in_case(candidate, typed) if not typed.startswith(("'", "$")) else candidate,
                                 start_position=-len(typed))

    def _candidates(self, statement: str, typed: str, vocab: Vocabulary) -> Iterable[str]:
        if typed.startswith("${"):
            return [f"${{{v}}}" for v in vocab.variables]
        previous = [w.upper() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", statement)]
        last = previous[-1] if previous else ""
        if typed.startswith("'"):
            return [f"'{p}'" for p in vocab.properties] if last in ("SET", "UNSET") else []
        if not previous:
            return CLI_COMMANDS + KEYWORDS
        if last in ("SHOW", "LIST"):
            return SHOW_TARGETS
        if last == "FUNCTION":
            return vocab.functions
        if last in ("TERMINATE", "EXPLAIN", "PAUSE", "RESUME"):
            return vocab.queries + (["ALL"] if last != "EXPLAIN" else [])
        if last == "PRINT":
            return vocab.topics + list(vocab.sources)
        if last in ("SET", "UNSET"):
            return [f"'{p}'" for p in vocab.properties]
        if last in ("STREAM", "TABLE", "TYPE") and previous[0] == "CREATE" or last == "AS" and len(previous) <= 4:
            return []  # a new name is being written
        if last in _SOURCE_CONTEXT:
            return sorted(vocab.sources)
        named = [name for name in vocab.sources if name in previous]
        columns = sorted({c for name in (named or vocab.sources) for c in vocab.columns.get(name, [])})
        return columns + sorted(vocab.sources) + vocab.functions + KEYWORDS + TYPES


# --- highlighting ---------------------------------------------------------------------------------


class KsqlLexer(RegexLexer):
    """Pygments lexer for ksqlDB statements (keywords, types, strings, `quoted` names, numbers,
    ``${variables}``, comments, function calls)."""

    name = "ksql"
    aliases = ["ksql"]
    flags = re.IGNORECASE | re.MULTILINE
    tokens = {
        "root": [
            (r"\s+", Whitespace),
            (r"--.*?$", Comment.Single),
            (r"/\*[\s\S]*?(\*/|$)", Comment.Multiline),
            (r"'(?:''|[^'])*'?", String.Single),
            (r"`(?:``|[^`])*`?", Name.Quoted),
            (r'"(?:""|[^"])*"?', Name),
            (r"\$\{[A-Za-z_][A-Za-z0-9_]*\}", Name.Variable),
            (r"\d+(\.\d*)?([eE][-+]?\d+)?", Number),
            (words(KEYWORDS, prefix=r"\b", suffix=r"\b"), Keyword),
            (words(TYPES, prefix=r"\b", suffix=r"\b"), Keyword.Type),
            (r"[A-Za-z_][A-Za-z0-9_]*(?=\s*\()", Name.Function),
            (r"[A-Za-z_][A-Za-z0-9_]*", Name),
            (r"->|=>|:=|<=|>=|<>|!=|\|\||[-+*/%=<>]", Operator),
            (r".", Punctuation),
        ]
    }


STYLE = {
    "pygments.keyword": "bold #5f87d7",
    "pygments.keyword.type": "#af87d7",
    "pygments.literal.string": "#87af5f",
    "pygments.literal.number": "#d7875f",
    "pygments.name.function": "#5fafaf",
    "pygments.name.variable": "italic #d7af5f",
    "pygments.name.quoted": "#d7d787",
    "pygments.comment": "italic #808080",
    "pygments.operator": "#d75f5f",
}
