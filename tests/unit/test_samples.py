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


def test_flight_batches_are_the_sources_five_field_gzipped_lines() -> None:
    import gzip

    from streamsql.samples import flight_batches

    batches = list(flight_batches(50, seed=3))
    assert batches == list(flight_batches(50, seed=3))
    sizes = []
    for key, value, _ts in batches:
        lines = gzip.decompress(value).decode().split("\n")
        sizes.append(len(lines))
        for line in lines:
            origin, destination, date, price, cabin = line.split(",")
            assert len(origin) == len(destination) == 3 and date.startswith("2026-03-") and float(price) > 0
            assert cabin in {"Y", "W", "J", "F"}
        assert key is None
    assert min(sizes) >= 3 and 15 <= sum(sizes) / len(sizes) <= 25


def test_enrich_flight_batch_appends_line_uuid_batch_uuid_and_timestamp() -> None:
    import gzip
    import hashlib
    import uuid

    from streamsql.samples import enrich_flight_batch

    payload = gzip.compress(b"LHR,IST,2020-08-01,169.99,Y\n\nLHR,IST,2020-08-01,169.99,Y\n")
    enriched = enrich_flight_batch(payload, 0, 7, 1_596_272_400_000)  # 2020-08-01T09:00:00Z
    batch = str(uuid.UUID(bytes=hashlib.md5(b"cflight_searches/0/7").digest()))
    assert [line.split(",")[6:] for line in enriched] == [[batch, "2020-08-01T09:00:00"]] * 2
    uuids = [line.split(",")[5] for line in enriched]
    assert uuids == [str(uuid.UUID(bytes=hashlib.md5(f"{batch}/{n}".encode()).digest())) for n in (1, 2)]
    assert [line.split(",")[:5] for line in enriched] == [["LHR", "IST", "2020-08-01", "169.99", "Y"]] * 2
