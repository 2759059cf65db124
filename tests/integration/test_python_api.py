"""``streamsql.connect()``: seed 002 from Python on the default embedded broker, with pull and
push queries as a DataFrame and as dicts, and the scratch directory gone after close."""

from __future__ import annotations

import itertools
import json

import pytest

import streamsql
from streamsql import samples
from streamsql.errors import StreamsqlError
from streamsql.seeds import PIPELINES_DIR

pytestmark = pytest.mark.integration

SEED_002 = PIPELINES_DIR / "fraud_filter.sql"


def test_seed_002_from_python(spark) -> None:  # type: ignore[no-untyped-def]
    count = 400
    expected = sum(1 for _, value, _ in samples.payments(count) if json.loads(value)["fraudProbability"] > 0.8)
    with streamsql.connect(spark=spark) as ss:  # its own embedded broker and a scratch data directory
        scratch = ss.engine.data_dir
        assert samples.produce(ss.bootstrap_servers, "payments", "payments", count, partitions=2) == count
        ss.run_file(SEED_002)  # until idle
        flagged = ss.query(f"SELECT * FROM fraudulent_payments EMIT CHANGES LIMIT {expected};")
        assert len(flagged) == expected > 0
        assert list(flagged.columns) == ["PAYMENTID", "ACCOUNTID", "AMOUNT", "CURRENCY", "MERCHANT",
                                         "FRAUDPROBABILITY"]
        assert (flagged["FRAUDPROBABILITY"] > 0.8).all()
        pulled = ss.query("SELECT PAYMENTID, AMOUNT FROM fraudulent_payments;")  # a pull query over the stream
        assert sorted(pulled["PAYMENTID"]) == sorted(flagged["PAYMENTID"])
        first = list(itertools.islice(ss.stream("SELECT PAYMENTID, AMOUNT FROM fraudulent_payments EMIT CHANGES;"),
                                      3))
        assert len(first) == 3 and set(first[0]) == {"PAYMENTID", "AMOUNT"}
        assert "FRAUDULENT_PAYMENTS" in ss.topology("mermaid")
        with pytest.raises(StreamsqlError, match="expected one SELECT statement"):
            ss.query("SHOW STREAMS;")
    assert not scratch.exists()
