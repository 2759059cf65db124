"""The sample generators behind ``streamsql produce``: deterministic, and shaped as the seed
pipelines read them."""

from __future__ import annotations

import json

from streamsql.samples import SAMPLES, log_lines


def test_log_lines_are_repeatable_json_lines_with_a_skewed_vocabulary() -> None:
    first, again = list(log_lines(500, seed=4)), list(log_lines(500, seed=4))
    assert first == again and list(log_lines(5, seed=5)) != first[:5]
    words: dict[str, int] = {}
    for key, value, _ts in first:
        line = json.loads(value)
        assert key is None and set(line) == {"service", "msg"} and 3 <= len(line["msg"].split()) <= 10
        for w in line["msg"].split():
            words[w] = words.get(w, 0) + 1
    ranked = sorted(words.values(), reverse=True)
    assert ranked[0] > 5 * ranked[-1]  # heavy hitters exist
    assert [ts for _k, _v, ts in first] == sorted(ts for _k, _v, ts in first)
    assert set(SAMPLES) == {"payments", "flights", "logs"}
