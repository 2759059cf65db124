"""Building the driver JVM's class-data sharing archive (``runtime/class_archive.py`` finds
and maps it): once per installation, by ``python -m streamsql.setup.class_archive``
(``scripts/setup.sh`` runs it).

A child process starts a session with the dump flag, runs a small pipeline of every kind of
query over an embedded broker (so the streaming, state-store, Python data source and join
classes are loaded), stops, and waits for its JVM to exit and write the archive; the file is
renamed into place only then, so a cut-off build leaves nothing behind. It runs the engine, so it
lives here, above it, and nothing the engine imports imports it.
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from streamsql.runtime import local_fs
from streamsql.runtime.class_archive import QUIET, archive_path

log = logging.getLogger(__name__)

#: the pipeline the dump run executes: every kind of query a session runs, a few records each
WARM_UP_SQL = """
CREATE STREAM cds_payments (id VARCHAR KEY, merchant VARCHAR, amount DOUBLE)
  WITH (KAFKA_TOPIC='cds_payments', VALUE_FORMAT='JSON', PARTITIONS=2);
CREATE TABLE cds_merchants (merchant VARCHAR PRIMARY KEY, region VARCHAR)
  WITH (KAFKA_TOPIC='cds_merchants', VALUE_FORMAT='JSON', PARTITIONS=2);
INSERT INTO cds_merchants (merchant, region) VALUES ('m1', 'north');
INSERT INTO cds_merchants (merchant, region) VALUES ('m2', 'south');
INSERT INTO cds_payments (id, merchant, amount) VALUES ('p1', 'm1', 10.5);
INSERT INTO cds_payments (id, merchant, amount) VALUES ('p2', 'm2', 99.0);
INSERT INTO cds_payments (id, merchant, amount) VALUES ('p3', 'm1', 1.0);
CREATE STREAM cds_large AS SELECT id, merchant, amount * 2 AS doubled FROM cds_payments
  WHERE amount > 5 EMIT CHANGES;
CREATE TABLE cds_window_sums AS SELECT merchant, SUM(amount) AS total, COUNT(*) AS n
  FROM cds_payments WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY merchant EMIT CHANGES;
CREATE TABLE cds_latest AS SELECT merchant, LATEST_BY_OFFSET(amount) AS last_amount
  FROM cds_payments GROUP BY merchant EMIT CHANGES;
CREATE STREAM cds_enriched AS SELECT p.merchant, p.id, p.amount, m.region FROM cds_payments p
  JOIN cds_merchants m ON p.merchant = m.merchant EMIT CHANGES;
"""


def _dump(target: Path) -> None:
    """In the child: run :data:`WARM_UP_SQL` in a session whose JVM writes ``target`` at exit,
    then stop the session and wait for the JVM to exit (the archive is written then)."""
    from pyspark import SparkContext

    from streamsql.kafka.broker import EmbeddedBroker
    from streamsql.runtime.config import EngineConfig
    from streamsql.runtime.engine import Engine
    from streamsql.runtime.spark import get_spark, session_settings, stop_spark

    base = session_settings("local[2]")["spark.driver.extraJavaOptions"]
    options = f"{base} -XX:ArchiveClassesAtExit={target} {QUIET}"
    with tempfile.TemporaryDirectory(prefix="streamsql-cds-") as tmp:
        broker = EmbeddedBroker(data_dir=Path(tmp) / "broker").start()
        try:
            spark = get_spark("local[2]", conf={"spark.driver.extraJavaOptions": options})
            engine = Engine(EngineConfig(broker.bootstrap_servers, Path(tmp) / "data"), spark=spark)
            engine.start()
            try:
                engine.execute(WARM_UP_SQL)
                engine.wait_until_idle()
                engine.execute("SELECT * FROM cds_latest WHERE merchant = 'm1';")
            finally:
                engine.close()
            gateway = SparkContext._gateway
            proc = getattr(gateway, "proc", None)
            stop_spark()
            if proc is not None:  # the JVM exits when its stdin closes, writing the archive
                if proc.stdin is not None:
                    proc.stdin.close()
                proc.wait(timeout=300)
        finally:
            broker.stop()


def build(path: Path, timeout_s: float = 600) -> bool:
    """Build the archive at ``path`` in a child process; True when written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    partial.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "STREAMSQL_CLASS_ARCHIVE"}
    env["STREAMSQL_CLASS_ARCHIVE"] = ""  # the dump run itself must not map an older archive
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "streamsql.setup.class_archive", "--dump", str(partial)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout_s)
    if result.returncode != 0 or not partial.is_file() or partial.stat().st_size == 0:
        partial.unlink(missing_ok=True)
        tail = result.stdout.decode(errors="replace").strip().splitlines()[-10:]
        log.warning("the Spark class archive could not be built (exit code %s): %s",
                    result.returncode, "\n".join(tail))
        return False
    partial.replace(path)
    log.info("Spark class archive written: %s (%.0f MB, %.0f s)", path, path.stat().st_size / 2**20,
             time.monotonic() - started)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streamsql.setup.class_archive",
                                     description="Build the driver JVM's class-data sharing archive.")
    parser.add_argument("--force", action="store_true", help="rebuild even when the archive exists")
    parser.add_argument("--dump", metavar="FILE", help=argparse.SUPPRESS)  # the child's side
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.dump:
        _dump(Path(args.dump))
        return 0
    local_fs.ensure_built()  # first: the archive's class path includes it
    path = archive_path()
    if path is None:
        print("STREAMSQL_CLASS_ARCHIVE is empty: no class archive")
        return 0
    if path.is_file() and not args.force:
        return 0
    # a failed build is not an error of the setup: sessions then start without the archive
    try:
        build(path)
    except (OSError, subprocess.SubprocessError) as e:
        log.warning("the Spark class archive could not be built at %s: %s", path, e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
