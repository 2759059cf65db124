"""The ``streamsql test`` command: QTT files/directories, or ksql-test-runner's trio."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

# the runners (Spark, the engine) are imported when a run starts: every command's parser holds
# this one's arguments, and the shell must start in well under a second
from streamsql.conformance.cases import (
    DEFAULT_TIMEOUT_S,
    QttCase,
    collect_files,
    load_file,
    load_test_runner_case,
)
from streamsql.conformance.results import (
    FAILED,
    INFRASTRUCTURE,
    CaseResult,
    file_line,
    summarize,
    summary_line,
    top_failures,
    write_report,
)

#: 2 × cores: a case's time is mostly CPU (query start, micro-batches), plus waits on the broker and
#: on Spark's trigger loop that more cases in flight fill (corpus sample on 2 cores: 2 → 3 cut 13%;
#: with cheaper cases, session 33, 3 → 4 cut another 6-8% in three paired runs, 5 no better than 4)
DEFAULT_PARALLEL = 2 * (os.cpu_count() or 1)


def _parallel(value: int | None) -> int:
    """``--parallel``, or 2 × cores when not given (a machine-dependent default is resolved here,
    not in the parser, so the generated reference page is the same on every machine)."""
    return DEFAULT_PARALLEL if value is None else value


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="*", help="QTT files or directories of them (*.json)")
    p.add_argument("--json", dest="json_report", metavar="REPORT", help="write per-test status/reason/duration here")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="per-test timeout in seconds")
    p.add_argument("--filter", "-k", action="append", default=[],
                   help="run only tests whose id contains this text (repeatable)")
    p.add_argument("--ids", help="file of test ids to run, one per line (# comments)")
    p.add_argument("--parallel", "-j", type=int,
                   help="cases to run at once (each on its own engine; shared broker and SparkSession; "
                        "default: 2 × cores, since a case also waits on the broker)")
    p.add_argument("--verbose", "-v", action="store_true", help="print every failing test with its reason")
    p.add_argument("--sql", "-s", dest="sql_file", help="ksql-test-runner: statements file")
    p.add_argument("--input", "-i", dest="input_file", help="ksql-test-runner: input.json")
    p.add_argument("--output", "-o", dest="output_file", help="ksql-test-runner: output.json")
    p.add_argument("--config", help="with --sql: the properties file your pipeline runs with, as `streamsql run` "
                                    "reads it (default ./streamsql.properties); the record cache stays off")
    p.add_argument("--settings", choices=("corpus", "defaults"), default="corpus",
                   help="QTT files: the corpus's settings (one shuffle partition, Spark code generation off, one "
                        "aggregation bucket), or the engine's defaults as `streamsql run` has them; ksqlDB's test "
                        "functions either way (docs/conformance.md compares the two)")
    p.add_argument("--bootstrap-servers", help="a single-broker Kafka cluster to use (default: embedded broker)")
    p.add_argument("--spark-master", help="Spark master URL (default local[2])")


def read_ids(path: Path) -> list[str]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.rstrip("\n")
        if line.strip() and not line.lstrip().startswith("#"):
            out.append(line.strip())
    return out


def select(cases: list[QttCase], filters: list[str], ids: list[str] | None) -> list[QttCase]:
    if filters:
        cases = [c for c in cases if any(f in c.id for f in filters)]
    if ids is not None:
        wanted = set(ids)  # read stripped (read_ids): a few corpus names end in a space
        cases = [c for c in cases if c.id.strip() in wanted]
    return cases


def run_command(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out if out is not None else sys.stdout  # as it is now, not as it was at import
    from streamsql.conformance.rqtt import is_rqtt_path

    trio = args.sql_file is not None
    if not trio and args.paths and all(is_rqtt_path(Path(p)) for p in args.paths):
        from streamsql.conformance.rqtt import run_rqtt_command  # REST tests: through a real server

        return run_rqtt_command(args, out)
    cases_by_file: dict[str, Sequence[QttCase | CaseResult]]
    engine_properties = None
    if trio:
        if args.output_file is None:
            print("Error: --sql needs --output (and usually --input)", file=sys.stderr)
            return 2
        from streamsql.errors import ConfigError

        try:  # a user's own pipeline runs with the settings `streamsql run` gives it
            engine_properties = user_settings(getattr(args, "config", None))
        except ConfigError as e:
            print(f"Error: {e}", file=sys.stderr)
            return 2
        cases_by_file = {Path(args.sql_file).name: [load_test_runner_case(
            Path(args.sql_file), Path(args.input_file) if args.input_file else None, Path(args.output_file))]}
    else:
        if not args.paths:
            print("Error: give QTT files or directories, or --sql/--input/--output", file=sys.stderr)
            return 2
        try:
            files = collect_files([Path(p) for p in args.paths])
        except FileNotFoundError as e:
            print(f"Error: {e}", file=sys.stderr)
            return 2
        ids = read_ids(Path(args.ids)) if args.ids else None
        cases_by_file = {}
        for f in files:
            try:
                cases = load_file(f)
            except Exception as e:  # noqa: BLE001 - an unreadable file is reported, the run goes on
                print(f"{f.name}: cannot read: {e}", file=out, flush=True)
                cases_by_file[f.name] = [CaseResult(f"{f.stem}/<file>", f.name, "failed", f"cannot read file: {e}")]
                continue
            picked = select(cases, args.filter, ids)
            if picked:
                cases_by_file[f.name] = picked
        if getattr(args, "settings", "corpus") == "defaults":
            from streamsql.conformance.qtt import QTT_FUNCTIONS

            engine_properties = dict(QTT_FUNCTIONS)  # and the session's Spark settings: the engine's
    results = run_cases(cases_by_file, args, out, engine_properties)
    return 1 if summarize(results).not_passed else 0


def user_settings(config_file: str | None) -> dict[str, str]:
    """The ksqlDB properties of the user's properties file (``--config``, else
    ./streamsql.properties), read as ``streamsql run`` reads it; its Spark settings go to the
    session this run creates. The runner still turns the record cache off for each case, as
    ksql-test-runner does (every aggregate update is an output record)."""
    from streamsql.runtime.config import resolve_config
    from streamsql.runtime.spark import configure

    config = resolve_config(None, None, config_file)
    if config.spark_conf:
        configure(config.spark_conf)
    return dict(config.properties)


def run_cases(cases_by_file: Mapping[str, Sequence[QttCase | CaseResult]], args: argparse.Namespace,
              out: TextIO, engine_properties: dict[str, str] | None = None) -> list[CaseResult]:
    """Runs the cases; with ``engine_properties`` (a user's pipeline: :func:`user_settings`) each
    engine starts with them and Spark keeps its session's settings, else with the corpus's."""
    from streamsql.conformance.qtt import QttRunner, runner_settings
    from streamsql.runtime.spark import get_spark

    started = time.monotonic()
    broker = None
    bootstrap = args.bootstrap_servers
    if not bootstrap:
        from streamsql.kafka.broker import EmbeddedBroker

        broker = EmbeddedBroker().start()
        bootstrap = broker.bootstrap_servers
        print(f"streamsql: started an embedded broker at {bootstrap} for the test run", file=sys.stderr, flush=True)
    results: list[CaseResult] = []
    spark = None
    runner = None
    settings = contextlib.ExitStack()
    try:
        spark = get_spark(args.spark_master)
        if engine_properties is None:  # the corpus's settings (docs/conformance.md)
            settings.enter_context(runner_settings(spark))
        runner = QttRunner(bootstrap, spark, timeout_s=args.timeout, spark_master=args.spark_master,
                           parallel=_parallel(getattr(args, "parallel", 1)), engine_properties=engine_properties)
        # one stream of cases across all files, so that ``--parallel`` keeps every worker busy
        # through files with a single case; results come back in order and each file's line is
        # printed when its last case is in
        runnable = [c for cases in cases_by_file.values() for c in cases if not isinstance(c, CaseResult)]
        stream = iter(runner.iter_results(runnable))
        for file, cases in cases_by_file.items():
            file_results = []
            for item in cases:
                res = item if isinstance(item, CaseResult) else next(stream)
                file_results.append(res)
                results.append(res)
                if args.verbose and res.status in (FAILED, INFRASTRUCTURE):
                    print(f"  FAILED {res.id}: {res.reason}", file=out, flush=True)
                if args.json_report:
                    write_report(Path(args.json_report), results, time.monotonic() - started)
            if args.sql_file:
                r = file_results[0]
                print(">>> Test passed!" if r.status == "passed" else f">>>>> Test failed: {r.reason}", file=out)
            print(file_line(file, file_results), file=out, flush=True)
    finally:
        if runner is not None:
            runner.close()
        if spark is not None:
            for q in spark.streams.active:
                try:
                    q.stop()
                except Exception:  # noqa: BLE001
                    pass
            settings.close()
            spark.stop()
        if broker is not None:
            broker.stop()
    elapsed = time.monotonic() - started
    if args.json_report:
        write_report(Path(args.json_report), results, elapsed)
    failures = top_failures(results)
    if failures and len(results) > 1:
        print("most common failure reasons:", file=out)
        for category, count in failures:
            print(f"  {count:5d}  {category}", file=out)
    print(f"total time {elapsed:.1f}s", file=out)
    print(summary_line(results), file=out, flush=True)
    return results
