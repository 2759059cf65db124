"""The ``streamsql`` command.

    streamsql                              the interactive shell on the data directory's local server
    streamsql shell [URL] [-e SQL | -f F]  the shell, on a ksqlDB-compatible server when given its URL
    streamsql demo [--count N]             run the seed pipeline on sample data (embedded default)
    streamsql run FILE.sql [--until-idle]  headless runner (sent to the local server while it runs)
    streamsql broker [--port N]            the data directory's local broker, in the foreground
    streamsql broker start|status|stop     the data directory's local broker, in the background
    streamsql produce SAMPLE --topic T     write deterministic sample records
    streamsql server [--port 8088]         ksqlDB-compatible REST server (command log in Kafka)
    streamsql server start|status|stop     the data directory's local server, in the background
    streamsql topology FILE.sql [--format F]  the file's pipeline as text, JSON, DOT, Mermaid, SVG or PNG
    streamsql seeds [--copy DIR]           the seed pipelines shipped in the package (copied to DIR to run or edit)

Every command that needs Kafka and is given no bootstrap servers (flag, environment variable
``STREAMSQL_BOOTSTRAP_SERVERS``, or config file) uses the local broker of its data directory
(``kafka/broker.LocalBroker``): the one already running, or one it starts in the background and
leaves running for the next command, saying so in one line. ``streamsql broker stop`` stops it.
The shell given no URL talks to the data directory's local server the same way
(``surfaces/local_server.LocalServer``), started in the background by the first shell.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from streamsql.errors import StreamsqlError
from streamsql.runtime.config import resolve_config
from streamsql.samples import SAMPLES as SAMPLE_NAMES
from streamsql.seeds import PIPELINES_DIR
from streamsql.surfaces.command_config import command_config, kafka_cluster, topics_note

if TYPE_CHECKING:
    from streamsql.runtime.engine import Engine
    from streamsql.surfaces.local_server import LocalServer
    from streamsql.surfaces.progress import ProgressDisplay

TOPOLOGY_FORMATS = ("text", "json", "dot", "mermaid")
BROKER_ACTIONS = ("start", "status", "stop")
SERVER_ACTIONS = ("start", "status", "stop")
#: the REST server's HTTP listeners (``server/main.py``)
HTTP_SERVERS = ("hypercorn", "granian")
#: drawn by Graphviz's ``dot`` from the DOT text
RENDERED_FORMATS = ("svg", "png")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-servers",
                   help="Kafka cluster to use (default: the data directory's local broker, started in the background "
                        "if none runs)")
    p.add_argument("--data-dir", help="where the catalog and checkpoints live (default ./.streamsql)")
    p.add_argument("--config", help="properties file (bootstrap.servers=..., ksql properties)")
    p.add_argument("--spark-master", help="Spark master URL (default local[2]; spark://HOST:7077 for a cluster)")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="a Spark setting, e.g. spark.executor.memory=2g (repeatable; overrides the config file's)")
    p.add_argument("--kafka-property", action="append", default=[], metavar="KEY=VALUE",
                   help="a Kafka client setting for every client, e.g. security.protocol=SASL_SSL (repeatable; "
                        "overrides the config file's and STREAMSQL_KAFKA_* variables)")
    p.add_argument("--spark-ui", action="store_true",
                   help="turn on Spark's web UI (off by default; SHOW QUERIES EXTENDED links each query's page)")


def positive_int(text: str) -> int:
    """An argument that must be a whole number of at least 1 (a limit, a timeout)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not '{text}'") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    from streamsql import __version__

    parser = argparse.ArgumentParser(prog="streamsql",
                                     description="ksqlDB's SQL on Spark Structured Streaming over Kafka")
    parser.add_argument("--version", action="version", version=f"streamsql {__version__}")
    sub = parser.add_subparsers(dest="command")

    run = sub.add_parser("run", help="run a .sql file headlessly")
    run.add_argument("file", help="the .sql file whose statements run in order")
    run.add_argument("--until-idle", action="store_true", help="process what the topics hold, then exit 0")
    run.add_argument("--define", action="append", default=[], metavar="NAME=VALUE",
                     help="a variable for ${NAME} in the file, as ksqlDB's --define (repeatable)")
    run.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                     help="show each query's batches, rate and lag on standard error (default: on a terminal)")
    run.add_argument("--metrics-port", type=int, metavar="PORT",
                     help="serve Prometheus metrics of the queries on http://0.0.0.0:PORT/metrics")
    _common(run)

    demo = sub.add_parser("demo", help="the main job: the seed pipeline fraud_filter.sql on sample payments")
    demo.add_argument("--count", type=int, default=20000, help="sample payments to produce")
    _common(demo)

    broker = sub.add_parser("broker", help="the data directory's local Kafka-compatible broker: in the foreground, "
                                           "or start/status/stop in the background")
    broker.add_argument("action", nargs="?", choices=BROKER_ACTIONS,
                        help="start it in the background, show it, or stop it (default: run it in the foreground)")
    broker.add_argument("--port", type=int, help="port on 127.0.0.1 (default: 9092 in the foreground, a free one "
                                                         "with start)")
    broker.add_argument("--data-dir", help="the data directory whose broker this is, where it records its "
                                           "address, log and topics (default ./.streamsql)")
    broker.add_argument("--memory", action="store_true",
                        help="keep no topics: they are in <data dir>/topics-memory without fsyncs, emptied "
                             "at start and removed when the broker stops (default: durable, in "
                             "<data dir>/topics, kept across stop and start)")
    broker.add_argument("--config", help="properties file whose streamsql.data.dir names the data directory")

    produce = sub.add_parser("produce", help="write deterministic sample records to a topic")
    produce.add_argument("sample", choices=sorted(SAMPLE_NAMES), help="which sample records")
    produce.add_argument("--topic", required=True, help="the topic to write (created if missing)")
    produce.add_argument("--count", type=int, default=10000, help="how many records")
    produce.add_argument("--partitions", type=int, default=2, help="partitions of the topic when it is created")
    _common(produce)

    shell = sub.add_parser("shell", help="the interactive shell (the default command)")
    shell.add_argument("url", nargs="?", help="a ksqlDB-compatible server, e.g. http://localhost:8088 "
                                               "(default: the data directory's local server, started in the "
                                               "background if none runs)")
    shell.add_argument("--embedded", action="store_true",
                       help="run the engine in this shell's process instead of the local server (its queries "
                            "stop when the shell ends)")
    shell.add_argument("-e", "--execute", help="run these statements, print their results and exit")
    shell.add_argument("-f", "--file", help="run this file's statements, print their results and exit")
    shell.add_argument("-d", "--define", action="append", default=[], metavar="NAME=VALUE",
                       help="define a variable for ${NAME} substitution (repeatable)")
    shell.add_argument("--output", choices=["TABULAR", "JSON"], type=str.upper, default="TABULAR")
    shell.add_argument("-u", "--user", help="user for the server's HTTP basic auth (as ksql's CLI; asks for the "
                                            "password when -p is not given)")
    shell.add_argument("-p", "--password", help="password for --user (prefer the prompt: a password on the "
                                                "command line is seen by other users of the machine)")
    _common(shell)
    server = sub.add_parser("server", help="serve ksqlDB's REST API (statements durable in a Kafka command topic): "
                                           "in the foreground, or the data directory's local server with "
                                           "start/status/stop")
    server.add_argument("action", nargs="?", choices=SERVER_ACTIONS,
                        help="the data directory's local server (the one `streamsql shell` uses): start it in the "
                             "background, show it, or stop it (default: serve in the foreground)")
    server.add_argument("--port", type=int, help="port (default 8088 in the foreground, a free one with start)")
    server.add_argument("--host", default="127.0.0.1",
                        help="interface to listen on: this machine only unless told (0.0.0.0: every interface, "
                             "as ksqlDB; pair it with --auth-file)")
    server.add_argument("--auth-file", help="users for HTTP basic auth, 'user: password[,role]' per line; roles "
                                            "admin, developer, reader (docs/security.md)")
    server.add_argument("--tls-cert", help="PEM certificate: serve HTTPS (needs --tls-key)")
    server.add_argument("--tls-key", help="PEM private key for --tls-cert")
    server.add_argument("--max-request-bytes", type=int, default=4 * 1024 * 1024,
                        help="larger request bodies are refused with 413")
    server.add_argument("--command-timeout-ms", type=int, default=5000,
                        help="how long a request waits for its commandSequenceNumber (503 after)")
    server.add_argument("--max-connections", type=positive_int, default=1000,
                        help="open connections at most; one more is answered 503 and closed")
    server.add_argument("--request-header-timeout-ms", type=positive_int, default=30000,
                        help="a request whose line and headers take longer to arrive is closed (slow clients)")
    server.add_argument("--http-server", choices=HTTP_SERVERS, default="hypercorn",
                        help="the HTTP listener: hypercorn (default) or granian (HTTP in Rust: about a fifth of "
                             "the CPU per request; --max-connections does not apply; docs/performance.md)")
    _common(server)

    topology = sub.add_parser("topology", help="draw a .sql file's pipeline: sources, queries and their steps, "
                                               "sinks, internal topics (nothing runs; a scratch broker)")
    topology.add_argument("file", help="the .sql file to draw")
    topology.add_argument("--format", choices=[*TOPOLOGY_FORMATS, *RENDERED_FORMATS], default="text",
                          help="text (default), json, dot (Graphviz), mermaid, or svg/png (rendered by Graphviz's "
                               "dot, which must be installed)")
    topology.add_argument("-o", "--output", help="write here instead of standard output (needed for png)")
    topology.add_argument("--query", help="only this query and what it reads and writes (its id, e.g. CTAS_T_2)")
    topology.add_argument("--define", action="append", default=[], metavar="NAME=VALUE",
                          help="a variable for ${NAME} in the file (repeatable)")
    topology.add_argument("--config", help="properties file (ksql properties, schema registry)")
    topology.add_argument("--spark-master", help="Spark master URL (default local[2]); Spark checks the types")

    seeds = sub.add_parser("seeds", help="list the seed pipelines shipped in the package, or copy them to a directory")
    seeds.add_argument("--copy", metavar="DIR", help="copy the seed .sql files into DIR (an existing file is kept)")

    test = sub.add_parser("test", help="run ksqlDB query-validation tests (QTT) or a ksql-test-runner trio")
    from streamsql.conformance.command import add_arguments as _test_arguments

    _test_arguments(test)
    return parser


def cmd_run(args: argparse.Namespace) -> int:
    from streamsql.runtime.engine import Engine
    from streamsql.runtime.progress import count_from_start
    from streamsql.surfaces.runner import install_interrupt, run_file
    from streamsql.surfaces.terminal import ErrorCount, engine_logs_to_file

    path = Path(args.file)
    if not path.exists():
        print(f"Error: file not found: {path}", file=sys.stderr)
        return 2
    variables = _variables(args.define)
    if variables is None:
        return 2
    engine_config = command_config(args)
    from streamsql.surfaces.local_server import LocalServer

    server = LocalServer(engine_config.data_dir)
    if server.find() is not None:
        if args.until_idle:
            return _refuse_beside_local_server(server, "`--until-idle`", "or run the file on the server without "
                                                                          "--until-idle")
        return _submit_to_local_server(server, path, args)
    stop = threading.Event()
    install_interrupt(stop)
    log_file = engine_logs_to_file(engine_config.data_dir, "run")
    if log_file is not None:
        print(f"streamsql: engine logs (Spark, Kafka clients) go to {log_file}", file=sys.stderr, flush=True)
    with kafka_cluster(engine_config) as config, ErrorCount() as errors:
        engine = Engine(config)
        engine.session.variables.update(variables)
        count_from_start(engine)
        metrics = None
        try:
            for notice in engine.start():
                print(f"streamsql: {notice}", file=sys.stderr, flush=True)
            if args.metrics_port is not None:
                from streamsql.extras import require

                require("prometheus_client", "server", "--metrics-port")
                from streamsql.runtime.metrics import serve

                metrics = serve(engine, args.metrics_port)
                print(f"streamsql: Prometheus metrics on http://0.0.0.0:{args.metrics_port}/metrics",
                      file=sys.stderr, flush=True)
            progress = LiveProgress(engine, args.progress)
            try:
                return run_file(engine, path, args.until_idle, stop=stop, statements_done=progress.start)
            finally:
                progress.stop()
                print(f"streamsql: {run_summary(engine, errors.count, log_file)}", file=sys.stderr, flush=True)
        finally:
            if metrics is not None:
                metrics.shutdown()
            engine.close()


def _refuse_beside_local_server(server: LocalServer, what: str, alternative: str = "") -> int:
    """A command that runs an engine of its own, refused while the local server holds the data
    directory (one engine per data directory), saying how to go on."""
    record = server.find()
    pid = f" (pid {record.pid})" if record is not None else ""
    print(f"Error: the local server of {server.data_dir}{pid} runs the queries of this data directory, and {what} "
          f"runs an engine of its own on it: stop the server first (`streamsql server stop`)"
          f"{', ' + alternative if alternative else ''}", file=sys.stderr)
    return 1


def _submit_to_local_server(server: LocalServer, path: Path, args: argparse.Namespace) -> int:
    """``streamsql run FILE`` while the data directory's local server runs: its statements go to
    that server, in order, as the shell's ``--file`` sends them; the persistent queries they
    start run there, and the command ends (ksqlDB's ``RUN SCRIPT``)."""
    import types

    from streamsql.surfaces.backends import RemoteBackend
    from streamsql.surfaces.shell import drive

    record = server.find()
    if record is None:
        raise StreamsqlError(f"the local server of {server.data_dir} stopped")
    url, user, password = server.client(record)
    print(f"streamsql: the local server of {server.data_dir} runs (pid {record.pid}): sending {path} to it; its "
          f"queries keep running there (`streamsql shell` shows them, `streamsql server stop` stops them)",
          file=sys.stderr, flush=True)
    ignored = [flag for flag, given in (("--progress", args.progress), ("--metrics-port", args.metrics_port),
                                        ("--bootstrap-servers", args.bootstrap_servers)) if given]
    if ignored:
        print(f"streamsql: {', '.join(ignored)} apply to an engine this command runs, not to the server's",
              file=sys.stderr, flush=True)
    options = types.SimpleNamespace(file=str(path), define=args.define, output="TABULAR")
    return drive(RemoteBackend(url, user, password), options, server.data_dir / "shell_history")


def run_summary(engine: Engine, errors_logged: int, log_file: Path | None) -> str:
    """The line ``streamsql run`` ends with: its persistent queries, the records they read and
    wrote, and how many errors went to the log (and where that is)."""
    from streamsql.runtime.progress import engine_totals

    totals = engine_totals(engine)
    queries = len(engine.queries)
    where = f" (see {log_file})" if log_file is not None and errors_logged else ""
    return (f"done: {queries} persistent {'query' if queries == 1 else 'queries'}, {totals.input_rows:,} records in, "
            f"{totals.output_rows:,} out; {errors_logged} error{'' if errors_logged == 1 else 's'} logged{where}")


class LiveProgress:
    """The progress display of a run: on with ``--progress``, off with ``--no-progress``, else on
    when standard error is a terminal; started once the file's statements have run."""

    def __init__(self, engine: Engine, wanted: bool | None) -> None:
        self.engine = engine
        self.wanted = wanted is True or (wanted is None and sys.stderr.isatty())
        self.display: ProgressDisplay | None = None

    def start(self) -> None:
        from streamsql.surfaces.progress import ProgressDisplay

        if self.wanted and self.display is None:
            self.display = ProgressDisplay(self.engine).start()

    def stop(self) -> None:
        if self.display is not None:
            self.display.stop()


def _variables(definitions: list[str]) -> dict[str, str] | None:
    """``--define NAME=VALUE`` flags as variables (None, with the error printed, if one is malformed)."""
    variables = {}
    for definition in definitions:
        name, sep, value = definition.partition("=")
        if not sep or not name.strip():
            print(f"Error: --define takes NAME=VALUE, not '{definition}'", file=sys.stderr)
            return None
        variables[name.strip()] = value
    return variables


def cmd_topology(args: argparse.Namespace) -> int:
    """Plan the file (nothing starts; the company's Kafka is never contacted) and draw its
    pipeline. A scratch embedded broker holds the file's topics while Spark analyses the
    queries (it reads their inputs' metadata)."""
    import shutil
    import subprocess
    import tempfile

    from streamsql.kafka.broker import EmbeddedBroker
    from streamsql.runtime.engine import Engine
    from streamsql.runtime.topology import render

    path = Path(args.file)
    if not path.exists():
        print(f"Error: file not found: {path}", file=sys.stderr)
        return 2
    variables = _variables(args.define)
    if variables is None:
        return 2
    dot = shutil.which("dot") if args.format in RENDERED_FORMATS else None
    if args.format in RENDERED_FORMATS and dot is None:
        print(f"Error: --format {args.format} needs Graphviz's `dot` on the PATH (apt-get install graphviz, "
              f"brew install graphviz); --format dot or mermaid write the text without it", file=sys.stderr)
        return 2
    if args.format == "png" and not args.output:
        print("Error: --format png needs --output FILE", file=sys.stderr)
        return 2
    broker = EmbeddedBroker(die_with_parent=True).start()
    try:
        with tempfile.TemporaryDirectory(prefix="streamsql-topology-") as data_dir:
            config = resolve_config(broker.bootstrap_servers, data_dir, args.config, args.spark_master, None)
            config.kafka = {}  # the embedded broker speaks plaintext
            engine = Engine(config)
            engine.session.variables.update(variables)
            try:
                for skipped in engine.plan_only(path.read_text(encoding="utf-8")):
                    print(f"streamsql: not drawn (runs no query): {skipped.splitlines()[0][:100]}", file=sys.stderr)
                graph = engine.topology(args.query)
            finally:
                engine.close()
    finally:
        broker.stop()
    data = render(graph, "dot" if dot else args.format).encode("utf-8")
    if dot is not None:
        done = subprocess.run([dot, f"-T{args.format}"], input=data, capture_output=True, check=False)
        if done.returncode != 0:
            print(f"Error: dot failed: {done.stderr.decode(errors='replace').strip()}", file=sys.stderr)
            return 1
        data = done.stdout
    if args.output:
        Path(args.output).write_bytes(data)
    else:
        sys.stdout.buffer.write(data if data.endswith(b"\n") else data + b"\n")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """The main job: fraud filter over sample payments, on the embedded default."""
    from streamsql import samples
    from streamsql.runtime.engine import Engine
    from streamsql.surfaces.runner import run_file
    from streamsql.surfaces.terminal import engine_logs_to_file

    engine_config = command_config(args)
    from streamsql.surfaces.local_server import LocalServer

    server = LocalServer(engine_config.data_dir)
    if server.find() is not None:
        return _refuse_beside_local_server(server, "`streamsql demo`", "or give the demo its own --data-dir")
    log_file = engine_logs_to_file(engine_config.data_dir, "demo")
    if log_file is not None:
        print(f"streamsql: engine logs (Spark, Kafka clients) go to {log_file}", file=sys.stderr, flush=True)
    with kafka_cluster(engine_config) as config:
        assert config.bootstrap_servers
        engine = Engine(config)
        held = _records_in(engine, "payments")
        if held:  # a second demo on the same local broker reuses its payments (and resumes its query)
            n = held
            print(f"streamsql: topic 'payments' already holds {n} payments; producing none", flush=True)
        else:
            n = samples.produce(config.bootstrap_servers, "payments", "payments", args.count, partitions=2)
            print(f"streamsql: produced {n} sample payments to topic 'payments'", flush=True)
        try:
            for notice in engine.start():
                print(f"streamsql: {notice}", file=sys.stderr, flush=True)
            progress = LiveProgress(engine, None)
            try:
                code = run_file(engine, PIPELINES_DIR / "fraud_filter.sql", until_idle=True,
                                statements_done=progress.start)
            finally:
                progress.stop()
            if code != 0:
                return code
            records = engine.admin.read_all("FRAUDULENT_PAYMENTS")
            print(f"\nfraudulent_payments: {len(records)} of {n} payments flagged (fraudProbability > 0.8); first 5:")
            for rec in records[:5]:
                key = rec.key.decode() if rec.key else None
                value = rec.value.decode() if rec.value else None
                print(f"  key={key} value={value}")
            return 0
        finally:
            engine.close()


def _records_in(engine: Engine, topic: str) -> int:
    """How many records ``topic`` holds (0 when it does not exist)."""
    if not engine.admin.topic_exists(topic):
        return 0
    from streamsql.kafka.admin import EndOffsets

    offsets = EndOffsets(engine.bootstrap_servers, topic)
    try:
        parts = offsets.partitions()
        ends, starts = offsets.ends(parts), offsets.earliest(parts)
        return sum(ends[p] - starts[p] for p in parts)
    finally:
        offsets.close()


def cmd_broker(args: argparse.Namespace) -> int:
    """The data directory's local broker: ``start``/``status``/``stop`` it in the background, or
    (no action) run it in the foreground until Ctrl-C, recorded so the other commands use it."""
    import datetime

    from streamsql.kafka.broker import LocalBroker

    # the data directory as every other command resolves it (flag, config file, ./.streamsql)
    data_dir = resolve_config(None, args.data_dir, args.config).data_dir
    local = LocalBroker(data_dir)
    if args.action == "status":
        record = local.find()
        if record is None:
            print(f"no local broker runs for {data_dir}")
            return 1
        since = datetime.datetime.fromtimestamp(record.started_at).isoformat(timespec="seconds")
        print(f"local broker of {data_dir}: {record.bootstrap_servers}, pid {record.pid}, {record.mode}, "
              f"running since {since}, cluster id {record.cluster_id}; {topics_note(record, data_dir)}")
        return 0
    if args.action == "stop":
        from streamsql.surfaces.local_server import LocalServer

        server = LocalServer(data_dir).find()
        if server is not None and "--bootstrap-servers" not in server.engine_args:
            print(f"Error: the local server of {data_dir} (pid {server.pid}) uses this broker: stop it first "
                  f"(`streamsql server stop`)", file=sys.stderr)
            return 1
        stopped = local.stop()
        if stopped is None:
            print(f"no local broker runs for {data_dir}")
            return 1
        if stopped.durable:
            print(f"stopped the local broker of {data_dir} (pid {stopped.pid}); its topics are kept in "
                  f"{local.topics_dir} for the next start")
        else:
            print(f"stopped the local broker of {data_dir} (pid {stopped.pid}); its topics were not kept and are "
                  f"gone: the next engine on {data_dir} starts with an empty catalog")
        return 0
    if args.action == "start":
        record, started = local.ensure(args.port, memory=args.memory)
        if started:
            print(f"started the local broker of {data_dir} at {record.bootstrap_servers} in the background "
                  f"(pid {record.pid}; {topics_note(record, data_dir)}); `streamsql broker stop` stops it")
        else:
            print(f"the local broker of {data_dir} already runs at {record.bootstrap_servers} (pid {record.pid})")
            if args.port is not None and args.port != record.port:
                print(f"Error: it listens on {record.port}, not {args.port}; stop it first", file=sys.stderr)
                return 1
        return 0
    import signal

    from streamsql.surfaces.termination import exit_on_signal

    # SIGTERM (docker stop, systemd) ends the command through the finally blocks below: the
    # broker stops and its record goes (kill -9 cannot run them; the kernel then stops the broker)
    exit_on_signal(signal.SIGTERM, 0)
    launched = local.launch(args.port or 9092, memory=args.memory, die_with_parent=True)
    broker = launched.broker
    try:
        record = local.register(launched)
    except BaseException:
        launched.stop()
        raise
    print(f"streamsql: local broker of {data_dir} listening on {broker.bootstrap_servers} "
          f"({topics_note(record, data_dir)}); Ctrl-C to stop", flush=True)
    try:
        code = broker.wait()
        # stopped from outside (`streamsql broker stop` sends SIGTERM, then SIGKILL): a normal end
        return 0 if code in (-signal.SIGTERM, -signal.SIGKILL) else code
    except KeyboardInterrupt:
        return 0
    finally:
        local.unregister(record)
        launched.stop()


def cmd_produce(args: argparse.Namespace) -> int:
    from streamsql import samples

    with kafka_cluster(command_config(args)) as config:
        assert config.bootstrap_servers
        n = samples.produce(config.bootstrap_servers, args.sample, args.topic, args.count, args.partitions)
        print(f"produced {n} records to {args.topic}")
    return 0


def cmd_shell(args: argparse.Namespace) -> int:
    from streamsql.surfaces.shell import run_shell

    return run_shell(args)


def cmd_server(args: argparse.Namespace) -> int:
    if args.action is not None:
        return local_server_action(args)
    from streamsql.extras import require

    for module in ("hypercorn", "prometheus_client"):
        require(module, "server", "streamsql server")
    from streamsql.server.app import ServerSettings
    from streamsql.server.authorization import load_users
    from streamsql.server.limits import LimitSettings
    from streamsql.server.main import ListenOptions, serve
    from streamsql.surfaces.terminal import engine_logs_to_file

    if bool(args.tls_cert) != bool(args.tls_key):
        print("Error: --tls-cert and --tls-key go together", file=sys.stderr)
        return 2
    engine_config = command_config(args)
    log_file = engine_logs_to_file(engine_config.data_dir, "server")
    if log_file is not None:
        print(f"streamsql: engine logs (Spark, Kafka clients, requests) go to {log_file}", file=sys.stderr, flush=True)
    settings = ServerSettings(max_request_bytes=args.max_request_bytes, command_wait_s=args.command_timeout_ms / 1000,
                              users=load_users(args.auth_file) if args.auth_file else {},
                              limits=LimitSettings.from_config(engine_config))
    with kafka_cluster(engine_config) as config:
        listen = ListenOptions(args.host, args.port or 8088, args.tls_cert, args.tls_key, args.max_connections,
                               args.request_header_timeout_ms / 1000, args.http_server)
        return serve(config, listen, settings)


def local_server_action(args: argparse.Namespace) -> int:
    """``streamsql server start|status|stop``: the data directory's local server."""
    import datetime

    from streamsql.surfaces.local_server import LocalServer, engine_args

    data_dir = resolve_config(None, args.data_dir, args.config).data_dir
    local = LocalServer(data_dir)
    if args.action == "status":
        record = local.find()
        if record is None:
            print(f"no local server runs for {local.data_dir}")
            return 1
        since = datetime.datetime.fromtimestamp(record.started_at).isoformat(timespec="seconds")
        flags = f", started with {' '.join(record.engine_args)}" if record.engine_args else ""
        print(f"local server of {local.data_dir}: {record.url}, pid {record.pid}, running since {since}{flags}; "
              f"log {local.log_path}")
        return 0
    if args.action == "stop":
        stopped = local.stop()
        if stopped is None:
            print(f"no local server runs for {local.data_dir}")
            return 1
        print(f"stopped the local server of {local.data_dir} (pid {stopped.pid}); its persistent queries resume "
              f"when it starts again")
        return 0
    from streamsql.extras import require

    for module in ("hypercorn", "prometheus_client"):
        require(module, "server", "streamsql server")
    record, started = local.ensure(engine_args(args), args.port, notify=False)
    if started:
        print(f"started the local server of {local.data_dir} at {record.url} in the background (pid {record.pid}, "
              f"log {local.log_path}); `streamsql shell` connects to it, `streamsql server stop` stops it")
    else:
        print(f"the local server of {local.data_dir} already runs at {record.url} (pid {record.pid})")
        if args.port is not None and args.port != record.port:
            print(f"Error: it listens on {record.port}, not {args.port}; stop it first", file=sys.stderr)
            return 1
    return 0


def cmd_seeds(args: argparse.Namespace) -> int:
    """The seed pipelines: listed with their paths inside the installed package, or copied to a
    directory (``streamsql seeds --copy . && streamsql run heavy_hitters.sql``)."""
    import shutil

    from streamsql import seeds

    found = seeds.pipelines()
    if args.copy is None:
        for name, path in found.items():
            print(f"{name:32s} {path}")
        print(f"functions: {seeds.FUNCTIONS_DIR} (loaded by every engine)")
        return 0
    target = Path(args.copy)
    target.mkdir(parents=True, exist_ok=True)
    for name, path in found.items():
        dest = target / path.name
        if dest.exists():
            print(f"kept {dest} (exists)")
        else:
            shutil.copyfile(path, dest)
            print(f"copied {name} to {dest}")
    return 0


def cmd_test(args: argparse.Namespace) -> int:
    """QTT conformance runner: a line per file, then ``N passed, M failed``; exit 1 if any failed."""
    import signal

    from streamsql.conformance.command import run_command
    from streamsql.surfaces.termination import exit_on_signal

    # SIGTERM (a CI job's timeout) ends the run through its finally blocks: the REST server, the
    # registry server and the embedded broker it started stop with it (termination.py: not
    # inside kafka-python's loop, which would swallow the SystemExit)
    exit_on_signal(signal.SIGTERM, 143)
    return run_command(args)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=os.environ.get("STREAMSQL_LOG_LEVEL", "WARNING"),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    parser = build_parser()
    args = parser.parse_args(argv)
    commands = {"run": cmd_run, "demo": cmd_demo, "broker": cmd_broker, "produce": cmd_produce, "test": cmd_test,
                "shell": cmd_shell, "server": cmd_server, "topology": cmd_topology, "seeds": cmd_seeds}
    if args.command is None:
        args = parser.parse_args(["shell"])
    try:
        return commands[args.command](args)
    except StreamsqlError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # a second Ctrl-C while a command stops: it stopped what it could
        print("streamsql: interrupted", file=sys.stderr, flush=True)
        return 130


if __name__ == "__main__":
    sys.exit(main())
