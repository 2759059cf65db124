"""Seed text functions: the word cutter used by queries/heavy_hitters.sql."""

from __future__ import annotations

from streamsql.udf import udf


@udf(name="SPLIT_WORDS", returns="ARRAY<VARCHAR>", params=["VARCHAR"],
     description="Splits text on whitespace into an array of words (for EXPLODE); NULL stays NULL.")
def split_words(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return text.split()


@udf(name="SPLIT_WORDS", returns="ARRAY<VARCHAR>", params=["VARCHAR", "BOOLEAN"],
     description="Splits text on whitespace; with lowercase=TRUE the words are lower-cased first.")
def split_words_case(text: str | None, lowercase: bool | None) -> list[str] | None:
    if text is None:
        return None
    return (text.lower() if lowercase else text).split()
