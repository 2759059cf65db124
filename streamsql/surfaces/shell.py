"""The interactive ``streamsql`` shell, modelled on ksqlDB's ``ksql`` CLI.

``streamsql`` (no arguments) opens it on the data directory's local server, started in the
background when none runs (``surfaces/local_server.py``; no JVM in the shell's process, and the
queries outlive the shell); ``streamsql shell http://host:8088`` on a ksqlDB-compatible server;
``--embedded`` with an engine in the shell's own process. Input is edited as one multi-line
buffer: Enter runs it once it ends with ``;`` (outside quotes and comments) or is a shell
command, and starts a new line otherwise.
Statements run in order through the backend; each result prints as it arrives, in the ksql CLI's
layouts (:mod:`streamsql.surfaces.console`). Query rows stream until the query ends (LIMIT, pull
query done) or the user presses Ctrl-C, which ends the query and returns to the prompt.

Ctrl-C while a query runs is read as a key, not delivered as SIGINT: the terminal's signal keys
are switched off while statements run, because SIGINT reaches every process of the terminal's
foreground group, including Spark's Python workers, whose running tasks (and so the persistent
queries they serve) it would kill. Without a terminal, SIGINT is caught and ends the query.

Non-interactive: ``--execute "…"`` and ``--file f.sql`` run through the same handler (shell
commands, SELECT and PRINT included) and exit non-zero at the first error.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import re
import select
import shutil
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from streamsql.errors import StreamsqlError
from streamsql.runtime import results as r
from streamsql.surfaces import console
from streamsql.surfaces.backends import Backend, hide_secrets
from streamsql.surfaces.shell_syntax import is_cli_command, is_complete

if TYPE_CHECKING:
    from prompt_toolkit.history import History
    from prompt_toolkit.key_binding import KeyPressEvent

log = logging.getLogger(__name__)

HELP = """\
Statements end with ';' and may span lines (Enter continues until the ';').
  CREATE STREAM|TABLE ... / CREATE ... AS SELECT ... / INSERT INTO ... / DROP ... / TERMINATE ...
  SELECT ... EMIT CHANGES [LIMIT n];  push query: rows stream until LIMIT or Ctrl-C
  SELECT ... FROM table WHERE ...;    pull query
  SHOW STREAMS|TABLES|TOPICS|QUERIES|PROPERTIES|FUNCTIONS|VARIABLES; DESCRIBE [EXTENDED] name;
  PRINT topic [FROM BEGINNING] [LIMIT n]; EXPLAIN query_id;
  SET 'property'='value'; UNSET 'property'; DEFINE name='value'; then ${name} in statements

Shell commands (case-insensitive, ';' optional):
  help                        this text
  output [JSON|TABULAR]       show or set how results print
  run script 'file.sql'       run a file's statements
  history                     previous inputs
  clear                       clear the screen
  version                     the streamsql version
  exit | quit | Ctrl-D        leave the shell

Keys: Tab completes keywords, sources, columns, functions, properties and ${variables};
      Ctrl-C clears the input (at the prompt) or ends the running query; Up/Down walk the history."""


def _version() -> str:
    from streamsql import __version__

    return __version__


class Shell:
    def __init__(self, backend: Backend, out: TextIO | None = None, output_format: str = "TABULAR",
                 history_file: Path | None = None) -> None:
        self.backend = backend
        self.out = out or sys.stdout
        self.output_format = output_format.upper()
        self.history_file = history_file
        self._history: list[str] = []

    # --- entry points ---------------------------------------------------------------------------

    def run_interactive(self) -> int:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.key_binding import KeyBindings
        from prompt_toolkit.lexers import PygmentsLexer
        from prompt_toolkit.styles import Style

        from streamsql.surfaces.shell_syntax import STYLE, KsqlCompleter, KsqlLexer

        bindings = KeyBindings()

        @bindings.add("enter")
        def _enter(event: KeyPressEvent) -> None:
            buffer = event.current_buffer
            if buffer.complete_state is not None and buffer.complete_state.current_completion is not None:
                buffer.apply_completion(buffer.complete_state.current_completion)
                return
            if is_complete(buffer.text):
                buffer.validate_and_handle()
            else:
                buffer.insert_text("\n")

        history = _secret_free_history(self.history_file)
        session: PromptSession[str] = PromptSession(
            message="streamsql> ", multiline=True, key_bindings=bindings, history=history,
            prompt_continuation=lambda width, line_number, soft_wrap: " " * (width - 2) + "> ",
            completer=KsqlCompleter(self.backend.vocabulary), complete_while_typing=False,
            lexer=PygmentsLexer(KsqlLexer), style=Style.from_dict(STYLE), enable_history_search=False)
        self._history = list(history.load_history_strings())[::-1]
        self._print(self._banner())
        while True:
            try:
                text = session.prompt()
            except KeyboardInterrupt:
                continue  # Ctrl-C at the prompt clears the input, as in the ksql CLI
            except EOFError:
                break
            self._history.append(hide_secrets(text))
            if not self.handle(text):
                break
        self._print("Exiting streamsql.")
        return 0

    def run_text(self, text: str) -> int:
        """``--execute`` / ``--file``: run ``text`` (shell commands allowed on their own lines);
        0 if everything succeeded, 1 at the first error."""
        for chunk in _split_commands(text):
            if is_cli_command(chunk):
                ok = self._command(chunk)
                if ok is None:
                    return 0
                if not ok:
                    return 1
            elif not self._statements(chunk):
                return 1
        return 0

    def handle(self, text: str) -> bool:
        """One input from the prompt. Returns False when the user asked to leave."""
        if not text.strip():
            return True
        if is_cli_command(text):
            return self._command(text) is not None
        self._statements(text)
        return True

    # --- shell commands -------------------------------------------------------------------------

    def _command(self, text: str) -> bool | None:
        """Run a shell command: True if it went well, False if it failed, None for exit."""
        words = text.strip().rstrip(";").split()
        first = words[0].lower()
        if first in ("exit", "quit"):
            return None
        if first == "help":
            self._print(HELP)
        elif first == "version":
            self._print(f"streamsql v{_version()}")
        elif first == "clear":
            self.out.write("\x1b[2J\x1b[H")
            self.out.flush()
        elif first == "history":
            for n, entry in enumerate(self._history, start=1):
                self._print(f"{n:5d}  {entry}")
        elif first == "output":
            if len(words) == 1:
                self._print(f"Output format: {self.output_format}")
            elif words[1].upper() in ("JSON", "TABULAR"):
                self.output_format = words[1].upper()
                self._print(f"Output format set to {self.output_format}")
            else:
                self._print(f"Error: Invalid output format: '{words[1]}' (expected JSON or TABULAR)")
                return False
        elif first == "run":
            return self._run_script(text)
        return True

    def _run_script(self, text: str) -> bool:
        m = re.match(r"\s*run\s+script\s+'((?:''|[^'])*)'\s*;?\s*$", text, re.IGNORECASE)
        if not m:
            self._print("Error: usage: RUN SCRIPT '<path to file>'")
            return False
        path = Path(m.group(1).replace("''", "'")).expanduser()
        try:
            script = path.read_text(encoding="utf-8")
        except OSError as e:
            self._print(f"Error: cannot read script {path}: {e.strerror or e}")
            return False
        return self._statements(script)

    # --- statements -----------------------------------------------------------------------------

    def _statements(self, text: str) -> bool:
        """Run the statements of ``text`` in order, printing each result; stop at the first error
        (printed with its position) or when the user interrupts. True if all succeeded."""
        with _interrupt_watch() as interrupted:
            try:
                for result in self.backend.execute(text):
                    if isinstance(result, r.RowStream):
                        if not self._stream(result, interrupted):
                            return False
                    else:
                        self._show(result)
                    if interrupted(read_keys=False):
                        break
            except StreamsqlError as e:
                for done in getattr(e, "entities", []):
                    self._show(done)
                self._error(e, text)
                return False
            except Exception as e:  # a bug below the shell: say so, keep the shell alive
                log.exception("statement failed unexpectedly")
                self._print(f"Internal error ({type(e).__name__}): {e}")
                return False
        return True

    def _show(self, result: r.Result) -> None:
        result = _without_secrets(result)
        if self.output_format == "JSON":
            self._print(console.render_json(result))
        else:
            self._print("\n" + console.render_entity(result, _terminal_width()))

    def _stream(self, stream: r.RowStream, interrupted: Callable[..., bool]) -> bool:
        """Print a query's rows as they arrive, until it ends or Ctrl-C. False if it failed."""
        as_json = self.output_format == "JSON"
        boxes = console.RowBoxes([name for name, _ in stream.columns], _terminal_width())
        if stream.kind == "push":
            self._print("Press CTRL-C to interrupt")
        if as_json:
            self._print(console.stream_header_json(stream))
        elif stream.kind != "print":
            self._print(boxes.header())
        error: Exception | None = None
        try:
            while True:
                row = stream.poll(0.1)
                if row is None:
                    break
                if row is not r.RowStream.TIMEOUT:
                    if stream.kind == "print":
                        self._print(str(row[0]))
                    else:
                        self._print(console.stream_row_json(row) if as_json else boxes.row(row))
                if interrupted():
                    break
        except Exception as e:  # the query failed while streaming (the engine's error, or the server's)
            error = e
        finally:
            stream.close()
        if stream.kind == "pull" and not as_json:
            self._print(boxes.border())
        if error is not None:
            self._error(error, "")
        if stream.kind == "print":
            self._print("Topic printing ceased")
            return error is None
        if stream.limit_reached:
            self._print("Limit Reached")
        self._print("Query terminated")
        return error is None

    def _error(self, error: Exception, text: str) -> None:
        """The error's message; for a parse error, also the offending line with a caret under the
        column (positions are 1-based within the input that was run)."""
        self._print(hide_secrets(str(error)))
        m = re.match(r"line (\d+):(\d+):", str(error))
        lines = hide_secrets(text).splitlines()
        if m and 1 <= int(m.group(1)) <= len(lines):
            line, column = int(m.group(1)), int(m.group(2))
            source, start = lines[line - 1], max(0, column - 60)
            shown = ("..." if start else "") + source[start : start + 100]
            self._print(f"  {shown}\n  {' ' * (column - 1 - start + (3 if start else 0))}^")

    def _banner(self) -> str:
        return (f"streamsql v{_version()}: ksqlDB's SQL on Spark Structured Streaming\n"
                f"Connected to {self.backend.description}\n"
                f"Type 'help' for help, 'exit' or Ctrl-D to leave.\n")

    def _print(self, text: str) -> None:
        print(text, file=self.out, flush=True)


# --- helpers ----------------------------------------------------------------------------------------


def _without_secrets(result: r.Result) -> r.Result:
    """The result as the shell may show it: a SET's echo and SHOW PROPERTIES with every secret
    value ``[hidden]``, whichever backend answered (the embedded engine echoes SET in clear)."""
    from streamsql.kafka.settings import HIDDEN, is_secret

    if isinstance(result, r.Properties):
        def hidden(values: dict[str, str]) -> dict[str, str]:
            return {k: HIDDEN if is_secret(k) else v for k, v in values.items()}

        return dataclasses.replace(result, properties=hidden(result.properties), overridden=hidden(result.overridden))
    if isinstance(result, r.CommandStatus):
        return dataclasses.replace(result, message=hide_secrets(result.message))
    return result


def _secret_free_history(path: Path | None) -> History:
    """prompt_toolkit's history (a file, else memory) storing every input with its secrets
    hidden: the history file is plain text in the user's home, and Up recalls what was stored."""
    from prompt_toolkit.history import FileHistory, InMemoryHistory

    base: type[History] = FileHistory if path is not None else InMemoryHistory

    class SecretFreeHistory(base):  # type: ignore[valid-type,misc]
        def append_string(self, string: str) -> None:
            super().append_string(hide_secrets(string))

    return SecretFreeHistory(str(path)) if path is not None else SecretFreeHistory()


def _terminal_width() -> int:
    return shutil.get_terminal_size((120, 40)).columns or 120


def _split_commands(text: str) -> list[str]:
    """Cut a script into runs of statements and lines holding a shell command (``output JSON``,
    ``run script 'x'`` ...), keeping statements' own line breaks."""
    chunks: list[str] = []
    pending: list[str] = []
    for line in text.splitlines(keepends=True):
        if is_cli_command(line) and is_complete("".join(pending)):
            if "".join(pending).strip():
                chunks.append("".join(pending))
            chunks.append(line.strip())
            pending = []
        else:
            pending.append(line)
    if "".join(pending).strip():
        chunks.append("".join(pending))
    return chunks


@contextlib.contextmanager
def _interrupt_watch() -> Iterator[Callable[..., bool]]:
    """Yield a check "has the user pressed Ctrl-C?". On a terminal, its signal keys are off
    (Ctrl-C arrives as a byte, and no SIGINT reaches Spark's workers) and echo is off; the check
    reads the keys typed since (dropping them: they were typed while rows streamed) unless told
    not to, so keys typed ahead during other statements reach the next prompt. Without a
    terminal, SIGINT is caught."""
    fd = sys.stdin.fileno() if sys.stdin is not None and not sys.stdin.closed else -1
    pressed = threading.Event()
    if fd >= 0 and os.isatty(fd):
        import termios

        saved = termios.tcgetattr(fd)
        quiet = termios.tcgetattr(fd)
        quiet[3] &= ~(termios.ICANON | termios.ECHO | termios.ISIG)
        quiet[6][termios.VMIN], quiet[6][termios.VTIME] = 0, 0
        termios.tcsetattr(fd, termios.TCSANOW, quiet)

        def check_keys(read_keys: bool = True) -> bool:
            while read_keys and not pressed.is_set() and select.select([fd], [], [], 0)[0]:
                data = os.read(fd, 256)
                if not data:
                    break
                if b"\x03" in data:
                    pressed.set()
            return pressed.is_set()

        try:
            yield check_keys
        finally:
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)
        return

    def on_sigint(_signum: int, _frame: object) -> None:
        pressed.set()

    def check_signal(read_keys: bool = True) -> bool:
        # Spark installs its own SIGINT handler (cancel every job) when its context starts,
        # which can happen during a statement: keep ours in place.
        if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is not on_sigint:
            signal.signal(signal.SIGINT, on_sigint)
        return pressed.is_set()

    previous = signal.getsignal(signal.SIGINT) if threading.current_thread() is threading.main_thread() else None
    check_signal()
    try:
        yield check_signal
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


# --- the command ------------------------------------------------------------------------------------


def run_shell(args: object) -> int:
    """``streamsql shell`` (and plain ``streamsql``): connect the backend the arguments name, then
    run ``--execute`` / ``--file`` / piped input, or the interactive prompt."""
    from streamsql.surfaces.termination import exit_on_signal

    # SIGTERM (a closed terminal window's session, `kill`) leaves through the finally blocks:
    # the terminal's modes restored, an embedded engine closed
    exit_on_signal(signal.SIGTERM, 143)
    url = getattr(args, "url", None)
    user, password = getattr(args, "user", None), getattr(args, "password", None)
    if url:
        from streamsql.surfaces.backends import RemoteBackend

        if user is not None and password is None:
            password = _ask_password(user)
        return drive(RemoteBackend(url, user, password), args, Path.home() / ".streamsql_history")
    if user is not None or password is not None:
        print("Error: -u/--user and -p/--password are for a server: give its URL (streamsql shell -u USER "
              "http://host:8088)", file=sys.stderr)
        return 2
    if not getattr(args, "embedded", False):
        import importlib.util

        if all(importlib.util.find_spec(m) is not None for m in ("hypercorn", "prometheus_client")):
            return _on_local_server(args)
        print("streamsql: the local server needs the optional package 'hypercorn' (pip install "
              "'streamsql-spark[server]'); running the engine in this shell instead", file=sys.stderr, flush=True)
    return _embedded(args)


def _on_local_server(args: object) -> int:
    """The shell on its data directory's local server, started in the background if none runs."""
    from streamsql.runtime.config import resolve_config
    from streamsql.surfaces.backends import RemoteBackend
    from streamsql.surfaces.local_server import LocalServer, engine_args

    data_dir = resolve_config(None, getattr(args, "data_dir", None), getattr(args, "config", None)).data_dir
    local = LocalServer(data_dir)
    wanted = engine_args(args)
    record, started = local.ensure(wanted)
    if not started and wanted and wanted != record.engine_args:
        print(f"streamsql: the local server of {local.data_dir} runs with {' '.join(record.engine_args) or 'no flags'}"
              f"; the flags given here ({' '.join(wanted)}) apply when it starts: `streamsql server stop` first",
              file=sys.stderr, flush=True)
    url, user, password = local.client(record)
    backend = RemoteBackend(url, user, password)
    backend.description = (f"the local server of {local.data_dir} at {url} (pid {record.pid}; its log: "
                           f"{local.log_path})")
    return drive(backend, args, local.data_dir / "shell_history")


def _embedded(args: object) -> int:
    """The shell with its own engine in this process (``--embedded``)."""
    from streamsql.runtime.engine import Engine
    from streamsql.surfaces.backends import EmbeddedBackend
    from streamsql.surfaces.command_config import command_config, kafka_cluster
    from streamsql.surfaces.terminal import engine_logs_to_file

    engine_config = command_config(args)  # type: ignore[arg-type]
    log_file = engine_logs_to_file(engine_config.data_dir, "shell")
    with kafka_cluster(engine_config) as config:
        engine = Engine(config)
        backend = EmbeddedBackend(engine, f"the embedded engine (Kafka at {config.bootstrap_servers}, "
                                          f"data in {config.data_dir})")
        if log_file is not None:
            backend.description += f"\nEngine logs (Spark, Kafka clients, processing log) go to {log_file}"
        try:
            for notice in engine.start():
                print(f"streamsql: {notice}", file=sys.stderr, flush=True)
            if _interactive(args):
                engine.warm_up_in_background()  # while the user types the first statement
            return drive(backend, args, Path(config.data_dir) / "shell_history")
        finally:
            backend.close()


def _ask_password(user: str) -> str:
    """The password for ``-u`` without ``-p``, as ksql's CLI asks for it: from the terminal,
    not echoed (``getpass`` reads /dev/tty, so piped statements on stdin stay statements)."""
    import getpass

    try:
        return getpass.getpass(f"Enter password for {user}: ")
    except (EOFError, KeyboardInterrupt):
        print(file=sys.stderr)
        raise SystemExit(2) from None


def _interactive(args: object) -> bool:
    return not (getattr(args, "execute", None) or getattr(args, "file", None)) and sys.stdin.isatty()


def drive(backend: Backend, args: object, history_file: Path) -> int:
    """Run the shell on ``backend``: ``--define`` variables first, then ``--execute``, ``--file``,
    piped standard input, or the interactive prompt."""
    shell = Shell(backend, output_format=getattr(args, "output", "TABULAR") or "TABULAR", history_file=history_file)
    for definition in getattr(args, "define", None) or []:
        name, sep, value = definition.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name.strip()):
            print(f"Error: --define expects NAME=VALUE, got '{definition}'", file=sys.stderr)
            return 2
        quoted = value.replace("'", "''")
        for _ in backend.execute(f"DEFINE {name.strip()} = '{quoted}';"):
            pass
    execute, file = getattr(args, "execute", None), getattr(args, "file", None)
    if execute:
        return shell.run_text(execute)
    if file:
        try:
            text = Path(file).read_text(encoding="utf-8")
        except OSError as e:
            print(f"Error: cannot read {file}: {e.strerror or e}", file=sys.stderr)
            return 2
        return shell.run_text(text)
    if not sys.stdin.isatty():
        return shell.run_text(sys.stdin.read())
    history_file.parent.mkdir(parents=True, exist_ok=True)
    return shell.run_interactive()
