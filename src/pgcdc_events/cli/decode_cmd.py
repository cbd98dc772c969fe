"""``pgcdc-events decode``: a capture in, Debezium JsonConverter records out, one a line."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import stat
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

import attrs

from pgcdc_events.cli._io import count as counted
from pgcdc_events.cli._io import open_binary_input, open_binary_output
from pgcdc_events.cli._parallel import DecodeJob, default_workers, run_decode
from pgcdc_events.errors import ConfigurationError, PgCdcError
from pgcdc_events.events import EventConfig
from pgcdc_events.properties import load_properties
from pgcdc_events.protocol.capture import CaptureRow
from pgcdc_events.protocol.lsn import Lsn
from pgcdc_events.types.catalog import CatalogSnapshot

DEFAULT_PREFIX = "pgcdc"


def register(commands: Any) -> None:
    """Add the subcommand to the CLI's subparsers."""
    parser = commands.add_parser(
        "decode",
        help="decode a capture into Debezium change-event records (JsonConverter JSON)",
        description="Decode a capture (JSON Lines of {lsn, xid, data}) into the records the "
        "Debezium PostgreSQL connector would produce (with -c plugin.name=yboutput, those of "
        "the YugabyteDB connector for a yboutput capture), one {topic, key, value, headers} "
        "object a line, key/value/headers as Kafka's JsonConverter writes them.",
    )
    parser.add_argument("--capture", required=True, help="capture JSON Lines ('-' for stdin)")
    parser.add_argument("--catalog", help="catalog snapshot JSON (pgcdc-events catalog)")
    parser.add_argument("--config", help="connector .properties file")
    parser.add_argument("-c", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="a connector property (repeatable; wins over --config)")
    parser.add_argument("--output", "-o", help="write here instead of stdout")
    parser.add_argument("--proto-version", type=int, choices=(1, 2, 3, 4))
    parser.add_argument("--streaming", choices=("off", "on", "parallel"))
    parser.add_argument("--memory-limit", type=float, default=64.0, metavar="MIB",
                        help="memory for streamed and prepared transactions being assembled; "
                        "beyond it they spill to a temporary file (default 64)")
    parser.add_argument("--workers", type=int, default=None, metavar="N",
                        help="processes decoding whole transactions in parallel, the output "
                        "unchanged (default: one per core this process may use; 1: decode in "
                        "this process)")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    parser.add_argument("--summary", action="store_true",
                        help="at the end, a table of the records by topic and op on stderr")
    parser.set_defaults(run=run)


def load_config(config_path: str | None, overrides: list[str]) -> EventConfig:
    """Connector properties from a file and ``key=value`` overrides (``topic.prefix`` defaults
    to ``pgcdc``)."""
    props: dict[str, str] = {"topic.prefix": DEFAULT_PREFIX}
    if config_path:
        _refuse_json(config_path)
        props.update(load_properties(config_path))
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigurationError(f"-c expects key=value, got {item!r}")
        props[key.strip()] = value.strip()
    return EventConfig.from_properties(props)


def _refuse_json(path: str) -> None:
    """A JSON file (a Kafka Connect REST request, say) is not read as properties, where its
    first line would be an unknown property called ``{``."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            start = fh.read(4096).lstrip()
    except OSError:
        return  # load_properties reports it
    if start.startswith(("{", "[")):
        raise ConfigurationError(
            f"--config {path}: this is JSON (a Kafka Connect REST request?); --config reads a "
            "Java .properties file, one key=value a line (examples/connector.properties). "
            "Convert the connector's \"config\" object with: jq -r '.config // . | "
            f"to_entries[] | \"\\(.key)=\\(.value)\"' {path} > connector.properties")


def run(args: argparse.Namespace) -> int:
    """Decode the capture; errors name the capture line."""
    config = load_config(args.config, args.overrides)
    if config.not_applicable and not args.quiet:
        n = len(config.not_applicable)
        print(f"pgcdc-events decode: note: {counted(n, 'property', 'properties')} "
              f"{'does' if n == 1 else 'do'} not shape events, ignored: "
              f"{', '.join(config.not_applicable)}", file=sys.stderr)
    if args.memory_limit < 0:
        raise ConfigurationError(f"--memory-limit must not be negative, got {args.memory_limit}")
    catalog = CatalogSnapshot.load(args.catalog) if args.catalog else None
    if args.workers is not None and args.workers < 1:
        raise ConfigurationError(f"--workers must be at least 1, got {args.workers}")
    job = DecodeJob(config, catalog, args.proto_version, args.streaming,
                    int(args.memory_limit * 1024 * 1024), run_id=str(uuid.uuid4()))
    tally: Counter[tuple[str, str]] | None = Counter() if args.summary else None
    started = time.monotonic()
    last_report = [started]

    def report(lines: int, count: int) -> None:
        now = time.monotonic()
        if not args.quiet and now - last_report[0] > 2:
            last_report[0] = now
            print(f"pgcdc-events decode: {counted(lines, 'message')}, "
                  f"{counted(count, 'record')}, "
                  f"{lines / (now - started):,.0f} messages/s", file=sys.stderr)

    _refuse_same_file(args.capture, args.output)
    cut = unfinished_transaction(args.capture) if args.capture != "-" else None
    with open_binary_input(args.capture) as src, open_binary_output(args.output) as out, \
            _terminate_as_interrupt():
        lines, count = run_decode(job, src if cut is None else _upto(src, cut.offset), out,
                                  report=report, tally=tally,
                                  workers=args.workers or default_workers())
        if cut is not None:  # left out of the output, but its errors are still reported
            with open_binary_input(args.capture) as again, open(os.devnull, "wb") as nowhere:
                run_decode(job, again, nowhere, workers=1)
            print(f"pgcdc-events decode: warning: {cut.describe()}", file=sys.stderr,
                  flush=True)
    if tally is not None:
        where = "standard output" if args.output in (None, "-") else args.output
        print(summary(tally, f"{counted(count, 'record')} from {counted(lines, 'message')}, "
                      f"written to {where} (JsonConverter JSON, one a line)"), file=sys.stderr)
    elif not args.quiet and time.monotonic() - started > 2:
        print(f"pgcdc-events decode: done, {counted(lines, 'message')}, "
              f"{counted(count, 'record')}", file=sys.stderr)
    return 0


#: Messages that end a transaction (Commit, Prepare) or begin one (Begin, Begin Prepare),
#: and the messages a transaction holds besides its changes (Relation, Type, Origin, Message,
#: Truncate, Insert, Update, Delete); any other message is outside every transaction.
_ENDS, _BEGINS, _INSIDE = frozenset(b"CP"), frozenset(b"Bb"), frozenset(b"RYOMTIUD")
#: Bytes read at once while looking for the capture's last transaction boundary.
_TAIL_BLOCK = 1 << 20


@attrs.frozen
class Unfinished:
    """A transaction the capture begins and never ends: where its BEGIN line starts."""

    offset: int
    xid: int | None
    lsn: Lsn
    lines: int

    def describe(self) -> str:
        """What decode does about it, in one line."""
        return (f"the capture ends inside transaction xid {self.xid} (BEGIN at LSN {self.lsn}, "
                f"the last {counted(self.lines, 'line')}): it was cut before its COMMIT, so "
                "it is left out and its changes are not decoded; capture again (or continue "
                "the capture) to get it whole")


def unfinished_transaction(path: str) -> Unfinished | None:
    """The transaction a capture file ends inside, if any (read backwards from its end, up
    to the last transaction boundary); ``None`` for anything that is not a regular file,
    or a last line that does not parse (decoding reports it)."""
    try:
        with open(path, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                return None
            end = fh.seek(0, os.SEEK_END)
            tail = b""
            lines = 0
            while end > 0 or tail:
                start = max(end - _TAIL_BLOCK, 0)
                fh.seek(start)
                block = fh.read(end - start) + tail
                end = start
                parts = block.split(b"\n")
                tail = parts[0] if start > 0 else b""
                whole = parts[1:] if start > 0 else parts
                position = start + len(block)
                for line in reversed(whole):
                    position -= len(line) + 1
                    if not line.strip():
                        continue
                    lines += 1
                    try:
                        row = CaptureRow.from_line(line)
                    except PgCdcError:
                        return None
                    tag = row.data[:1]
                    if row.snapshot or not tag or tag[0] in _ENDS:
                        return None
                    if tag[0] in _BEGINS:
                        return Unfinished(max(position + 1, 0), row.xid, row.lsn, lines)
                    if tag[0] not in _INSIDE:
                        return None
                if start == 0:
                    return None
    except OSError:
        return None  # reported when the capture is opened for decoding
    return None


def _upto(src: Iterable[bytes], offset: int) -> Iterator[bytes]:
    """The lines of ``src`` that start before byte ``offset``."""
    read = 0
    for line in src:
        if read >= offset:
            return
        read += len(line)
        yield line


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM stops the run as Ctrl-C does: the worker processes are stopped and their
    temporary files removed (the default action would leave both behind)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


#: Column order of the summary: Debezium's ops, then the other kinds of record.
_COLUMNS = ("c", "r", "u", "d", "t", "m", "tombstone", "transaction", "heartbeat")
_LEGEND = {"c": "create", "r": "read (snapshot)", "u": "update", "d": "delete",
           "t": "truncate", "m": "logical message"}


def summary(tally: Counter[tuple[str, str]], headline: str) -> str:
    """A table of record counts by topic (rows) and op (columns), under ``headline``."""
    labels = sorted({label for _, label in tally},
                    key=lambda x: (_COLUMNS.index(x) if x in _COLUMNS else len(_COLUMNS), x))
    topics = sorted({topic for topic, _ in tally})
    width = max([len("topic"), *map(len, topics)])
    cells = [max(len(label), 3) for label in labels]
    lines = [headline, "  " + "topic".ljust(width) + "".join(
        "  " + label.rjust(w) for label, w in zip(labels, cells, strict=True))]
    for topic in topics:
        lines.append("  " + topic.ljust(width) + "".join(
            "  " + (str(tally[topic, label]) if tally[topic, label] else ".").rjust(w)
            for label, w in zip(labels, cells, strict=True)))
    legend = ", ".join(f"{label} {_LEGEND[label]}" for label in labels if label in _LEGEND)
    if legend:
        lines.append(f"  ({legend})")
    return "\n".join(lines)


def _refuse_same_file(source: str, target: str | None) -> None:
    """Writing the output would empty the input first: refuse (links and symlinks included)."""
    if source == "-" or target in (None, "-"):
        return
    assert target is not None
    try:
        same = os.path.samefile(source, target)
    except OSError:  # the output does not exist yet (or the input does not: reported later)
        same = False
    if same:
        raise ConfigurationError(f"--output {target!r} is the input --capture {source!r}: "
                                 "writing it would destroy the capture; choose another file")
