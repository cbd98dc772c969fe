"""``pgcdc-events capture`` and ``tail``: read a replication slot into capture or event lines.

``capture`` appends capture JSON Lines (or, with ``--decode``, Debezium records)
to ``--output``, with a checkpoint beside it, and advances the slot only past
what is on disk: the output holds every change exactly once, across crashes and
restarts. ``tail`` prints Debezium records of the slot's changes (to standard
output unless ``--output`` is given); on standard output it leaves the slot
where it is unless ``--advance`` is given. Needs pg8000 (the ``pg`` extra).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from pgcdc_events.adapters import (
    CaptureSink,
    CaptureStats,
    DecodingOptions,
    DurableOutput,
    EventSink,
    Output,
    SlotReader,
    SlotStatus,
    StreamOutput,
    run_capture,
)
from pgcdc_events.adapters.capture import IDLE_ACK_INTERVAL, ActionQuery, Heartbeat
from pgcdc_events.adapters.connection import parse_conninfo
from pgcdc_events.adapters.names import split_identifiers
from pgcdc_events.adapters.rotating import RotatingOutput
from pgcdc_events.adapters.snapshot import DEFAULT_SNAPSHOT_MODE, SNAPSHOT_MODES
from pgcdc_events.adapters.stream import StreamReader
from pgcdc_events.cli._io import add_dsn_arguments, count
from pgcdc_events.errors import ConfigurationError
from pgcdc_events.protocol.lsn import Lsn

if TYPE_CHECKING:  # the event layer loads with --decode or signals only (start-up time)
    from pgcdc_events.adapters.incremental import IncrementalCapture
    from pgcdc_events.types.catalog import CatalogSnapshot

__all__ = ["register", "register_tail"]

_MIB = 1024 * 1024
#: The connector properties a capture without --decode honours.
_HEARTBEAT = ("heartbeat.interval.ms", "heartbeat.action.query")
#: The connector properties the capture itself honours, with or without --decode.
_CAPTURE_PROPERTIES = (*_HEARTBEAT, "snapshot.max.threads")


def _common(parser: argparse.ArgumentParser) -> None:
    slot = parser.add_argument_group("slot")
    add_dsn_arguments(slot)
    slot.add_argument("--slot", required=True, help="the logical replication slot to read")
    slot.add_argument("--publication", required=True, action="append", metavar="NAME",
                      help="publication to decode (repeatable, or comma-separated; read as "
                      "PostgreSQL does: folded to lower case unless double-quoted)")
    slot.add_argument("--create-slot", action="store_true",
                      help="create the slot if it does not exist (never otherwise)")
    slot.add_argument("--create-publication", action="store_true",
                      help="create missing publications FOR ALL TABLES (or --table)")
    slot.add_argument("--table", action="append", default=None, metavar="SCHEMA.TABLE",
                      help="the tables of a created publication (repeatable; an SQL name, quoted "
                      "parts kept as written)")
    opts = parser.add_argument_group("pgoutput options (default: what the server supports)")
    opts.add_argument("--proto-version", type=int, choices=(1, 2, 3, 4))
    opts.add_argument("--binary", action="store_true", help="binary tuple format")
    opts.add_argument("--messages", action=argparse.BooleanOptionalAction, default=None,
                      help="logical decoding messages (default: on for PostgreSQL 14+)")
    opts.add_argument("--streaming", choices=("off", "on", "parallel"), default="off",
                      help="let the server send big transactions before they commit "
                      "(they are still delivered whole)")
    opts.add_argument("--two-phase", action=argparse.BooleanOptionalAction, default=None,
                      help="decode prepared transactions at PREPARE (default: as the slot was "
                      "created)")
    slot.add_argument("--snapshot-mode", choices=SNAPSHOT_MODES, default=None,
                      help="the connector's snapshot.mode: initial (capture's default): a new "
                      "output starts with the published tables' rows, read in the snapshot "
                      "the slot exports when --create-slot creates it, then streams; "
                      "initial_only: the snapshot, then stop; when_needed: as initial, and "
                      "again when the output's slot is gone (with --create-slot); no_data "
                      "(tail's default): no snapshot, stream from the slot's position")
    slot.add_argument("--reader", choices=("stream", "sql"), default="stream",
                      help="stream: hold the slot on a replication connection (the server "
                      "refuses any other reader; the default); sql: peek through SQL functions "
                      "(for hosts that refuse replication connections; the slot is held only "
                      "during each peek)")
    loop = parser.add_argument_group("loop")
    loop.add_argument("--follow", "-f", action="store_true",
                      help="keep polling until interrupted (Ctrl-C stops after the current read)")
    loop.add_argument("--poll-interval", type=float, default=1.0, metavar="S",
                      help="seconds between polls when caught up (default 1)")
    loop.add_argument("--max-changes", type=int, metavar="N",
                      help="stop after N changes (at a transaction boundary)")
    loop.add_argument("--batch-rows", type=int, default=None, metavar="N",
                      help="messages per read, committed and acknowledged together (default "
                      "100000 streaming, 10000 with --reader sql; grows for bigger "
                      "transactions)")
    loop.add_argument("--memory-limit", type=float, default=64.0, metavar="MIB",
                      help="memory for transactions being assembled; beyond it they spill to "
                      "a temporary file (default 64)")
    loop.add_argument("--retry-for", type=float, default=10.0, metavar="S",
                      help="without --follow, give up reconnecting after S seconds (default 10)")
    loop.add_argument("--warn-retained", type=float, default=1024.0, metavar="MB",
                      help="warn on stderr when the server keeps more than MB megabytes of "
                      "WAL for the slot (its restart position; default 1024, 0: never)")
    loop.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    events = parser.add_argument_group("events (Debezium records)")
    events.add_argument("--config", help="connector .properties file")
    events.add_argument("-c", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="a connector property (repeatable)")
    events.add_argument("--catalog", help="catalog snapshot JSON (pgcdc-events catalog; "
                        "default: read from the connection when the capture starts)")
    events.add_argument("--workers", type=int, default=None, metavar="N",
                        help="with --decode into an --output file: N processes decode the "
                        "units side by side while this one reads the slot and writes the "
                        "records (default: the cores this process may use, where the "
                        "platform can fork); 1: decode in this process")
    events.add_argument("--catalog-from-another-database", action="store_true",
                        help="use --catalog although it is a snapshot of another database "
                        "than the one read (its name becomes source.db)")


def register(commands: Any) -> None:
    """Add ``capture`` to the CLI's subparsers."""
    parser = commands.add_parser(
        "capture",
        help="read a replication slot into capture JSON Lines, exactly once",
        description="Stream a logical replication slot (START_REPLICATION on a replication "
        "connection, holding the slot; --reader sql peeks through SQL functions instead) and "
        "append its messages to --output as capture JSON Lines, or Debezium records with "
        "--decode. The output is locked, fsync'ed and checkpointed (OUTPUT.checkpoint.json) "
        "before the slot is acknowledged, so after any crash a restart continues with every "
        "change exactly once.",
    )
    parser.add_argument("--output", "-o", required=True, metavar="DIR_OR_FILE",
                        help="output file, or a directory for capture.jsonl / events.jsonl")
    parser.add_argument("--decode", action="store_true",
                        help="write Debezium records instead of capture rows")
    rotate = parser.add_argument_group(
        "rotating files (a directory of whole-transaction capture files, each renamed into "
        "place once durable: a source for Spark's file stream; see docs/operations.md)")
    rotate.add_argument("--rotate-every", type=float, metavar="SECONDS",
                        help="finalize the current file SECONDS after its first transaction")
    rotate.add_argument("--rotate-size", type=float, metavar="MB",
                        help="finalize the current file once it holds MB megabytes")
    _common(parser)
    parser.set_defaults(run=lambda args: run(args, "capture"))


def register_tail(commands: Any) -> None:
    """Add ``tail`` to the CLI's subparsers."""
    parser = commands.add_parser(
        "tail",
        help="print the Debezium records of a replication slot's changes",
        description="Decode a logical replication slot into Debezium records (JsonConverter "
        "JSON, one a line). On standard output the slot is only peeked at (use --advance to "
        "consume it); with --output it behaves as 'capture --decode'.",
    )
    parser.add_argument("--output", "-o", metavar="DIR_OR_FILE",
                        help="checkpointed output instead of standard output")
    parser.add_argument("--advance", action="store_true",
                        help="on standard output, advance the slot past what was printed")
    _common(parser)
    parser.set_defaults(run=lambda args: run(args, "tail"), decode=True)


@contextmanager
def _graceful_interrupts(name: str, quiet: bool) -> Iterator[Callable[[], bool]]:
    """First Ctrl-C (or SIGTERM): stop after the current read; a second Ctrl-C: stop now."""
    stop = False

    def handler(signum: int, frame: Any) -> None:
        nonlocal stop
        if stop and signum == signal.SIGINT:
            raise KeyboardInterrupt
        stop = True
        if not quiet:
            print(f"pgcdc-events {name}: stopping after the current read "
                  "(Ctrl-C again to stop now)", file=sys.stderr, flush=True)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield lambda: stop
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _size(n: int | None) -> str:
    """Bytes for humans: ``512 B``, ``1.2 kB``, ``3.4 MB``."""
    if n is None:
        return "?"
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("kB", "MB", "GB"):
        value /= 1024
        if value < 1024 or unit == "GB":
            break
    return f"{value:,.1f} {unit}"


def read_dsn(args: argparse.Namespace) -> str:
    """``--dsn``, or the contents of ``--dsn-file`` (surrounding white space dropped)."""
    if args.dsn is not None:
        return str(args.dsn)
    try:
        with open(args.dsn_file, encoding="utf-8") as fh:
            return fh.read().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"--dsn-file {args.dsn_file!r}: cannot read it: "
                                 f"{getattr(exc, 'strerror', None) or exc}") from None


def _rotating(args: argparse.Namespace, publications: tuple[str, ...], every: float | None,
              size: float | None, name: str) -> RotatingOutput:
    """The rotating output of ``--rotate-every`` / ``--rotate-size``, opened."""
    if size is not None and size <= 0:
        raise ConfigurationError(f"--rotate-size must be positive, got {size:g}")
    output = RotatingOutput(args.output, slot=args.slot, publications=publications,
                            every=every, size=None if size is None else max(1, int(size * 1e6)))
    checkpoint = output.open()
    if not args.quiet and checkpoint.lsn is not None:  # (a first run has nothing to say)
        done = f", finished {len(output.recovered)} renamed file" if output.recovered else ""
        print(f"pgcdc-events {name}: {output.directory}: {count(checkpoint.offset, 'file')}, "
              f"{count(checkpoint.changes, 'change')} so far; continuing after "
              f"{Lsn(checkpoint.lsn)}{done}", file=sys.stderr, flush=True)
    return output


def _properties(path: str | None, overrides: list[str]) -> dict[str, str]:
    """The connector properties of ``--config`` and ``-c`` as given (``-c`` wins)."""
    props: dict[str, str] = {}
    if path:
        from pgcdc_events.properties import load_properties  # noqa: PLC0415 - start-up

        try:
            props.update(load_properties(path))
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigurationError(f"--config {path!r}: cannot read it: "
                                     f"{getattr(exc, 'strerror', None) or exc}") from None
    for item in overrides:
        key, sep, value = item.partition("=")
        if sep:
            props[key.strip()] = value.strip()
    return props


def _heartbeat(properties: dict[str, str], reader: SlotReader) -> Heartbeat:
    """The capture's heartbeat: ``heartbeat.interval.ms`` (0: the idle acknowledgement
    every :data:`IDLE_ACK_INTERVAL` seconds, no heartbeat) and ``heartbeat.action.query``."""
    raw = properties.get("heartbeat.interval.ms", "0").strip() or "0"
    try:
        interval_ms = int(raw)
    except ValueError:
        interval_ms = -1
    if interval_ms < 0:
        raise ConfigurationError(f"heartbeat.interval.ms: expected a number of milliseconds "
                                 f"(0 or more), got {raw!r}")
    query = properties.get("heartbeat.action.query", "").strip()
    if query and not interval_ms:
        raise ConfigurationError("heartbeat.action.query runs at each heartbeat: set "
                                 "heartbeat.interval.ms too")
    action = None
    if query:
        action = ActionQuery(reader.settings or parse_conninfo({}), query)
    return Heartbeat(interval=interval_ms / 1000 if interval_ms else IDLE_ACK_INTERVAL,
                     action=action)


def _snapshot_threads(properties: dict[str, str]) -> int:
    """``snapshot.max.threads``: how many tables the initial snapshot reads at once."""
    raw = properties.get("snapshot.max.threads", "1").strip() or "1"
    try:
        threads = int(raw)
    except ValueError:
        threads = 0
    if threads < 1:
        raise ConfigurationError(f"snapshot.max.threads: expected a number of threads (1 or "
                                 f"more), got {raw!r}")
    return threads


def _connected_catalog(reader: SlotReader, given: CatalogSnapshot | None, path: str | None,
                       other_database: bool, name: str | None) -> CatalogSnapshot:
    """The catalog to decode with, once ``reader`` is connected: read from its connection
    (enums, domains, PostGIS, NOT NULL, keys and ``source.db`` as the database has them),
    or ``given`` (``--catalog``) when it is a snapshot of the database read (else refused,
    unless ``other_database``)."""
    from pgcdc_events.types.catalog import fetch_catalog  # noqa: PLC0415 - start-up

    database = reader.info.database if reader.info is not None else None
    if given is None:
        catalog: CatalogSnapshot = reader.call(fetch_catalog, action="read the catalog")
        if name is not None:
            print(f"pgcdc-events {name}: catalog read from database {catalog.database!r}: "
                  f"{len(catalog.tables)} tables, {len(catalog.types)} types",
                  file=sys.stderr, flush=True)
        return catalog
    if database is not None and given.database != database and not other_database:
        raise ConfigurationError(
            f"--catalog {path!r} is a snapshot of database {given.database!r}, but the slot "
            f"is read from database {database!r}: every record would say source.db "
            f"{given.database!r} and be decoded with another database's tables; leave "
            "--catalog out (the catalog is then read from the connection), take it from "
            f"{database!r} (pgcdc-events catalog), or add --catalog-from-another-database "
            "to use it anyway")
    return given


def _catalog_again(reader: Callable[[], Any], name: str | None,
                   speaks: Callable[[], bool] = lambda: True
                   ) -> Callable[[], CatalogSnapshot]:
    """The catalog read again from the reader's connection, for a table created or altered
    after the capture read it (a Relation message the catalog does not describe)."""
    def again() -> CatalogSnapshot:
        from pgcdc_events.types.catalog import fetch_catalog  # noqa: PLC0415 - start-up

        catalog: CatalogSnapshot = reader().call(fetch_catalog,
                                                 action="read the catalog again")
        if name is not None and speaks():
            print(f"pgcdc-events {name}: catalog read again from database "
                  f"{catalog.database!r} (a table created or altered since): "
                  f"{len(catalog.tables)} tables, {len(catalog.types)} types",
                  file=sys.stderr, flush=True)
        return catalog
    return again


class _Warnings(logging.Handler):
    """The library's warnings (a malformed signal, a table without a key...) on stderr,
    one line each, named after the command."""

    def __init__(self, name: str) -> None:
        super().__init__(logging.WARNING)
        self.name = name

    def emit(self, record: logging.LogRecord) -> None:
        print(f"pgcdc-events {self.name}: warning: {record.getMessage()}", file=sys.stderr,
              flush=True)


def _incremental(args: argparse.Namespace, name: str, properties: dict[str, str],
                 reader: SlotReader, publications: tuple[str, ...], decode: bool
                 ) -> IncrementalCapture:
    """The incremental snapshots of ``signal.data.collection`` (see docs/snapshots.md)."""
    from pgcdc_events.adapters.incremental import IncrementalCapture  # noqa: PLC0415
    from pgcdc_events.cli.decode_cmd import load_config  # noqa: PLC0415 - start-up

    settings = reader.settings or parse_conninfo({})

    def connect() -> Any:
        return settings.connect()[0]

    def progress(text: str) -> None:
        print(f"pgcdc-events {name}: {text}", file=sys.stderr, flush=True)

    logger = logging.getLogger("pgcdc_events")
    if not any(isinstance(h, _Warnings) for h in logger.handlers):
        logger.addHandler(_Warnings(name))
    return IncrementalCapture(connect, properties, load_config(args.config, args.overrides),
                              decode=decode, publications=publications,
                              progress=None if args.quiet else progress)


def _decoding_processes(args: argparse.Namespace, incremental_on: bool) -> int:
    """How many decoding processes ``--decode`` runs (``--workers``; 0: it decodes in the
    capture process): into an output file, without incremental snapshots (their windows
    need the decoder in the capture), where the platform can fork; by default as many
    as this process may use cores, when more than one."""
    workers = args.workers
    if workers is not None and workers < 1:
        raise ConfigurationError(f"--workers must be positive, got {workers}")
    if workers == 1 or args.output in (None, "-") or incremental_on:
        return 0
    from pgcdc_events.cli._capture_decoder import can_fork  # noqa: PLC0415 - start-up

    if not can_fork():
        return 0
    if workers is None:
        from pgcdc_events.cli._parallel import default_workers  # noqa: PLC0415 - start-up

        workers = default_workers()
    return workers if workers > 1 else 0


def run(args: argparse.Namespace, name: str) -> int:  # noqa: C901, PLR0915
    """Run capture or tail."""
    # as pgoutput reads publication_names: unquoted folded to lower case, "a,b" one name
    publications = tuple(dict.fromkeys(
        name for item in args.publication
        for name in split_identifiers(item, what="--publication")))
    for flag, value in (("--warn-retained", args.warn_retained),
                        ("--poll-interval", args.poll_interval),
                        ("--memory-limit", args.memory_limit), ("--retry-for", args.retry_for)):
        if value < 0:
            raise ConfigurationError(f"{flag} must not be negative, got {value}")
    if args.max_changes is not None and args.max_changes < 1:
        raise ConfigurationError(f"--max-changes must be positive, got {args.max_changes}")
    if args.batch_rows is None:  # a streaming read costs no query: commit less often
        args.batch_rows = 10_000 if getattr(args, "reader", "stream") == "sql" else 100_000
    if args.batch_rows < 1:
        raise ConfigurationError(f"--batch-rows must be positive, got {args.batch_rows}")
    if args.table and not args.create_publication:
        raise ConfigurationError("--table only shapes a publication created with "
                                 "--create-publication")
    decode = bool(args.decode)
    if not decode and args.catalog:
        raise ConfigurationError("--catalog shapes Debezium records: add --decode")
    properties = _properties(args.config, args.overrides)
    incremental_on = bool((properties.get("signal.data.collection") or "").strip())
    shaping = [item.partition("=")[0].strip() for item in args.overrides
               if not item.partition("=")[0].strip().startswith(_CAPTURE_PROPERTIES)]
    if not decode and shaping and not incremental_on:
        raise ConfigurationError(f"-c {shaping[0]} shapes Debezium records: add --decode "
                                 "(without it, only heartbeat.interval.ms, "
                                 "heartbeat.action.query and snapshot.max.threads apply)")
    if args.workers is not None and not decode:
        raise ConfigurationError("--workers says where records are decoded: add --decode")
    separate = _decoding_processes(args, incremental_on) if decode else 0
    snapshot_mode = args.snapshot_mode or (DEFAULT_SNAPSHOT_MODE if name == "capture"
                                           else "no_data")
    memory = int(args.memory_limit * _MIB)
    options = DecodingOptions(proto_version=args.proto_version, binary=args.binary,
                              messages=args.messages, streaming=args.streaming,
                              two_phase=args.two_phase)
    sink: CaptureSink | EventSink
    if decode:
        from pgcdc_events.cli.decode_cmd import load_config  # noqa: PLC0415 - start-up
        from pgcdc_events.types.catalog import CatalogSnapshot  # noqa: PLC0415 - start-up

        config = load_config(args.config, args.overrides)
        catalog = CatalogSnapshot.load(args.catalog) if args.catalog else None
        speaks: Callable[[], bool] = lambda: True  # noqa: E731 - one process says all
        if separate:  # decoding processes: the one that owns the lines says it
            from pgcdc_events.cli import _capture_decoder  # noqa: PLC0415 - start-up

            speaks = _capture_decoder.speaks
        if catalog is not None and config.database and catalog.database != config.database \
                and not args.catalog_from_another_database:
            raise ConfigurationError(
                f"--catalog {args.catalog!r} is a snapshot of database {catalog.database!r}, "
                f"not of database.dbname {config.database!r}; add "
                "--catalog-from-another-database to use it anyway")
        sink = EventSink(config, catalog=catalog, memory_limit=memory,
                         catalog_for=lambda given: _connected_catalog(
                             reader, given, args.catalog, args.catalog_from_another_database,
                             None if args.quiet else name),
                         catalog_refresh=None if catalog is not None else _catalog_again(
                             # decoding processes read it on connections of their own
                             (lambda: own) if separate else (lambda: reader),
                             None if args.quiet else name, speaks))
    else:
        sink = CaptureSink()
    reader_class = StreamReader if args.reader == "stream" else SlotReader
    reader = reader_class(read_dsn(args), slot=args.slot, publications=publications,
                          options=options, memory_limit=memory)
    if separate:
        from pgcdc_events.cli._capture_decoder import OwnConnection  # noqa: PLC0415

        own = OwnConnection(reader.settings or parse_conninfo({}), args.slot,
                            retry_for=args.retry_for, follow=args.follow,
                            notify=None if args.quiet else lambda text: print(
                                f"pgcdc-events {name}: {text}", file=sys.stderr, flush=True))
    heartbeat = _heartbeat(properties, reader)
    incremental = _incremental(args, name, properties, reader, publications, decode) \
        if incremental_on else None
    output: Output
    to_stdout = args.output in (None, "-")
    every, size = getattr(args, "rotate_every", None), getattr(args, "rotate_size", None)
    if incremental is not None and to_stdout:
        raise ConfigurationError("signal.data.collection: an incremental snapshot keeps its "
                                 "progress in the checkpoint of an --output file (and writes "
                                 "watermark rows), not on standard output")
    if every is not None or size is not None:
        if incremental is not None:
            raise ConfigurationError("signal.data.collection: incremental snapshots write "
                                     "into one output file, not into rotating files")
        if decode or to_stdout:
            raise ConfigurationError("--rotate-every and --rotate-size write capture files "
                                     "into a directory: not with --decode or standard output")
        output = _rotating(args, publications, every, size, name)
        advance = True
    elif to_stdout:
        output = StreamOutput(kind=sink.kind, slot=args.slot, publications=publications)
        advance = bool(getattr(args, "advance", False))
    else:
        durable = DurableOutput(args.output, kind=sink.kind, slot=args.slot,
                                publications=publications)
        checkpoint = durable.open()
        # (a first run has nothing to say, unless it cut what a failed one left)
        if not args.quiet and (checkpoint.lsn is not None or durable.truncated):
            at = "the slot's position" if checkpoint.lsn is None else f"{Lsn(checkpoint.lsn)}"
            cut = f", cut {durable.truncated} uncommitted bytes" if durable.truncated else ""
            print(f"pgcdc-events {name}: {durable.path}: "
                  f"{count(checkpoint.units, 'transaction')}, "
                  f"{count(checkpoint.changes, 'change')} so far; continuing after {at}{cut}",
                  file=sys.stderr, flush=True)
        output = durable
        advance = True
        if separate and isinstance(sink, EventSink):
            from pgcdc_events.cli._capture_decoder import (  # noqa: PLC0415 - start-up
                DecodingOutput,
                ForwardingSink,
            )

            output = DecodingOutput(durable, sink, separate)
            sink = ForwardingSink(sink, output)

    warned = [False]

    def progress(stats: CaptureStats, status: SlotStatus | None) -> None:
        retained = None if status is None else status.retained_bytes
        if retained is not None and args.warn_retained > 0:
            over = retained > args.warn_retained * _MIB
            if over and not warned[0]:  # once each time it goes over (warnings even with -q)
                print(f"pgcdc-events {name}: warning: the server keeps {_size(retained)} of WAL "
                      f"for slot {args.slot!r}, over --warn-retained {args.warn_retained:g} MB "
                      "(a long transaction, an unresolved PREPARE, or a capture that cannot "
                      "keep up holds it); see docs/operations.md, 'Running for weeks'",
                      file=sys.stderr, flush=True)
            warned[0] = over
        if args.quiet:
            return
        lag = "" if status is None else (f", lag {_size(status.lag_bytes)}, retained "
                                         f"{_size(retained)}")
        print(f"pgcdc-events {name}: {stats.changes:,} changes, {stats.units:,} transactions"
              f", lsn {stats.lsn if stats.lsn is not None else '-'}{lag}",
              file=sys.stderr, flush=True)

    def notify(message: str) -> None:
        print(f"pgcdc-events {name}: {message}", file=sys.stderr, flush=True)

    try:
        with _graceful_interrupts(name, args.quiet) as should_stop:
            stats = run_capture(
                reader, output, sink, follow=args.follow, poll_interval=args.poll_interval,
                max_changes=args.max_changes, batch_rows=args.batch_rows,
                create_slot=args.create_slot, create_publication=args.create_publication,
                tables=tuple(args.table) if args.table else None, retry_for=args.retry_for,
                should_stop=should_stop, progress=progress, advance=advance,
                notify=None if args.quiet else notify, snapshot_mode=snapshot_mode,
                heartbeat=heartbeat, snapshot_threads=_snapshot_threads(properties),
                incremental=incremental,
            )
    finally:
        output.close()
        reader.close()
        if incremental is not None:
            incremental.close()
        if isinstance(heartbeat.action, ActionQuery):
            heartbeat.action.close()
    if not args.quiet and stats.snapshot_tables:
        print(f"pgcdc-events {name}: snapshot of {stats.snapshot_tables:,} tables, "
              f"{stats.snapshot_rows:,} rows, consistent with the slot at {stats.lsn}",
              file=sys.stderr, flush=True)
    if not args.quiet:
        print(f"pgcdc-events {name}: done ({stats.stopped_by}), {stats.changes:,} changes in "
              f"{stats.units:,} transactions; position {stats.lsn or '-'}"
              f"{_decoded_by(output) if decode else ''}", file=sys.stderr, flush=True)
    return 0


def _decoded_by(output: Output) -> str:
    """Where ``--decode``'s records were decoded, for the last line: by how many decoding
    processes, with the records each one decoded (the proof that they ran), or here."""
    decoded: tuple[int, ...] | None = getattr(output, "decoded", None)  # DecodingOutput's
    if decoded is None:
        return "; records decoded in this process"
    return (f"; records decoded by {len(decoded)} processes "
            f"({' + '.join(f'{n:,}' for n in decoded)})")
