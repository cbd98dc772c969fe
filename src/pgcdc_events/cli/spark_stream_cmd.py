"""``pgcdc-events spark stream``: follow a directory of rotating capture files with Spark
Structured Streaming and keep one target per table equal to the source table.

The capture files come from ``pgcdc-events capture --follow --rotate-every S``; each table's
events are applied to a Delta Lake table under ``--output`` (``--target delta``, the
default: the AUTO CDC rules of :mod:`pgcdc_events.spark.autocdc`, SCD type 1 or 2, with
Spark's parameter names as options) or a Parquet directory (``--target parquet``), and,
with ``--target-dsn``, to the PostgreSQL table of the same name there (``--target-dsn-file``
keeps the DSN off the command line, and the password may come from ``~/.pgpass`` or
``PGPASSFILE``).
One streaming query decodes each micro-batch (in Spark tasks) and applies every table's
changes to its targets (:meth:`~pgcdc_events.spark.stream.DecodedStream.apply`); a table
whose first change comes later is applied from then on, and so is a table created after
the catalog was taken (without ``--tables``). ``--checkpoint`` holds the query's
checkpoint and the decoder's state: a stopped or killed run continues where it was.
One progress line per decoded micro-batch goes to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import Iterator
from typing import Any, Final

from pgcdc_events.cli.decode_cmd import load_config
from pgcdc_events.errors import ConfigurationError, PgCdcError
from pgcdc_events.protocol.lsn import Lsn

__all__ = ["DEFAULT_MB_PER_TRIGGER", "max_bytes_per_trigger", "register"]

#: ``--max-mb-per-trigger`` when no bound is given: about 250,000 capture lines, a tenth
#: of a 1 GB driver's heap (a micro-batch of 167 MB, 651,000 lines, ran in 1 GB).
DEFAULT_MB_PER_TRIGGER: Final = 64.0


def register(sub: Any) -> None:
    """Add ``stream`` to the ``spark`` subcommands."""
    parser = sub.add_parser(
        "stream", help="follow rotating capture files; keep per-table targets up to date",
        description="Decode a directory of rotating capture files (capture --follow "
        "--rotate-every S) continuously with Spark Structured Streaming and apply each "
        "table's changes to a Delta Lake table (or a Parquet directory) under OUTPUT/tables "
        "(and to PostgreSQL with --target-dsn), exactly once across restarts from "
        "--checkpoint. The AUTO CDC options take the names of Spark's create_auto_cdc_flow "
        "and apply to every table (pick one with --tables).")
    parser.add_argument("--input", required=True, metavar="DIR",
                        help="the directory of rotating capture files")
    parser.add_argument("--catalog", required=True,
                        help="catalog snapshot JSON (the tables' shapes; take it again after "
                        "an ALTER TABLE and restart)")
    parser.add_argument("--config", help="connector .properties file")
    parser.add_argument("-c", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="a connector property (repeatable; wins over --config)")
    parser.add_argument("--output", "-o", required=True,
                        help="directory: tables/, one Delta table (or Parquet directory) per "
                        "table (and records/ with --records)")
    parser.add_argument("--records", action="store_true",
                        help="also write every decoded record under OUTPUT/records (one "
                        "Parquet file per micro-batch), for queries of your own; the targets "
                        "do not need them")
    parser.add_argument("--checkpoint", required=True, metavar="DIR",
                        help="checkpoint location of the query (and the decoder's state)")
    parser.add_argument("--tables", help="comma-separated schema.table names (default: the "
                        "catalog's tables the configuration includes)")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--target-dsn", metavar="DSN",
                        help="also apply to the PostgreSQL tables of the same names there "
                        "(created beforehand, with a primary key); the password comes from "
                        "~/.pgpass, PGPASSFILE, passfile= or PGPASSWORD, as with libpq")
    target.add_argument("--target-dsn-file", metavar="PATH",
                        help="read the target DSN from this file (so that no secret is on the "
                        "command line)")
    parser.add_argument("--target", choices=("delta", "parquet"), default="delta",
                        help="what each table is kept as under OUTPUT/tables: a Delta Lake "
                        "table (the default; readable by deltalake, DuckDB and Spark with "
                        "Delta) or a directory of Parquet files")
    cdc = parser.add_argument_group(
        "AUTO CDC (--target delta)", "the rules of Spark's create_auto_cdc_flow, for every "
        "table applied; COLS is a comma-separated list of column names")
    cdc.add_argument("--keys", metavar="COLS",
                     help="the columns that identify a row (default: the table's key)")
    cdc.add_argument("--sequence-by", metavar="COLS",
                     help="the columns that order the changes (default: the change's "
                     "position in the stream, source.sequence)")
    cdc.add_argument("--stored-as-scd-type", type=int, choices=(1, 2), default=1,
                     help="1: the rows as they are now (default); 2: one row per version, "
                     "with __START_AT and __END_AT")
    columns = cdc.add_mutually_exclusive_group()
    columns.add_argument("--column-list", metavar="COLS", help="keep only these columns "
                         "(and the keys)")
    columns.add_argument("--except-column-list", metavar="COLS",
                         help="leave these columns out (never the keys)")
    history = cdc.add_mutually_exclusive_group()
    history.add_argument("--track-history-column-list", metavar="COLS",
                         help="with --stored-as-scd-type 2: a change to these columns "
                         "starts a new version (default: any column)")
    history.add_argument("--track-history-except-column-list", metavar="COLS",
                         help="with --stored-as-scd-type 2: a change to these columns "
                         "only updates the current version")
    cdc.add_argument("--tombstone-retention-seconds", type=float, metavar="S",
                     help="how long a deleted key bars older changes (default 604800: "
                     "7 days)")
    parser.add_argument("--buckets", type=int,
                        help="with --target parquet: files per table (rows hashed by key; "
                        "default 16)")
    parser.add_argument("--trigger", type=float, default=1.0, metavar="S",
                        help="seconds between micro-batches (default 1)")
    bound = parser.add_mutually_exclusive_group()
    bound.add_argument("--max-files-per-trigger", type=int, metavar="N",
                       help="capture files per micro-batch at most")
    bound.add_argument("--max-mb-per-trigger", type=float, metavar="MB",
                       help="megabytes of capture files per micro-batch at most (at least "
                       f"one file; default {DEFAULT_MB_PER_TRIGGER:g} unless "
                       "--max-files-per-trigger: a backlog is read in micro-batches the "
                       "driver's memory holds)")
    parser.add_argument("--driver-memory", metavar="SIZE",
                        help="the Spark driver's heap, e.g. 4g (spark.driver.memory; with a "
                        "local master the tasks share it; default Spark's, 1g)")
    parser.add_argument("--stop-when-idle", type=float, metavar="S",
                        help="stop once no new capture row came for S seconds (default: run "
                        "until Ctrl-C)")
    parser.add_argument("--master", help="Spark master (default: local[*])")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    from pgcdc_events.cli.spark_cmd import add_ui_argument  # noqa: PLC0415

    add_ui_argument(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run the streaming query; Spark errors become one line."""
    from pgcdc_events.cli.spark_cmd import run_spark  # noqa: PLC0415

    return run_spark(_run, args)


def _size(n: int | None) -> str:
    if n is None:
        return "?"
    if n < 1024:
        return f"{n} B"
    return f"{n / 1024:,.1f} kB" if n < 1 << 20 else f"{n / (1 << 20):,.1f} MB"


def _input_lsn(directory: str) -> int | None:
    """The LSN the capture has reached (its checkpoint), if readable."""
    import json  # noqa: PLC0415

    try:
        with open(os.path.join(directory, "_capture.checkpoint.json"), encoding="utf-8") as fh:
            text = json.load(fh).get("lsn")
        return None if text is None else int(Lsn.parse(text))
    except (OSError, ValueError, PgCdcError):
        return None


def target_settings(args: argparse.Namespace) -> Any:
    """The target database's connection settings (``--target-dsn`` or
    ``--target-dsn-file``, read as ``capture`` reads ``--dsn``/``--dsn-file``: the
    password from the DSN, ``PGPASSWORD`` or the password file), ``None`` without one."""
    if args.target_dsn is None and args.target_dsn_file is None:
        return None
    from pgcdc_events.adapters.connection import parse_conninfo  # noqa: PLC0415
    from pgcdc_events.cli.capture_cmd import read_dsn  # noqa: PLC0415

    try:
        dsn = read_dsn(argparse.Namespace(dsn=args.target_dsn, dsn_file=args.target_dsn_file))
    except ConfigurationError as exc:
        raise ConfigurationError(str(exc).replace("--dsn-file", "--target-dsn-file", 1)
                                 ) from None
    return parse_conninfo(dsn)


#: The AUTO CDC options: (argument name, AutoCdc parameter, whether a list of columns).
_CDC_OPTIONS: Final = (
    ("keys", "keys", True), ("sequence_by", "sequence_by", True),
    ("column_list", "column_list", True), ("except_column_list", "except_column_list", True),
    ("track_history_column_list", "track_history_column_list", True),
    ("track_history_except_column_list", "track_history_except_column_list", True),
    ("tombstone_retention_seconds", "tombstone_retention_seconds", False),
)


def _columns(option: str, text: str) -> list[str]:
    names = [c.strip() for c in text.split(",")]
    if not text.strip() or any(not c for c in names):
        raise ConfigurationError(f"--{option.replace('_', '-')} {text!r}: give "
                                 "comma-separated column names")
    return names


def cdc_options(args: argparse.Namespace) -> dict[str, Any]:
    """The :class:`~pgcdc_events.spark.delta.DeltaTarget` parameters the AUTO CDC options
    give, checked by the rules before the JVM starts (one line per mistake)."""
    given = {name: getattr(args, name) for name, _, _ in _CDC_OPTIONS
             if getattr(args, name) is not None}
    if args.stored_as_scd_type != 1:
        given["stored_as_scd_type"] = args.stored_as_scd_type
    if args.target != "delta":
        if given:
            first = next(iter(given)).replace("_", "-")
            raise ConfigurationError(f"--{first} is an AUTO CDC option: it needs --target "
                                     "delta")
        return {}
    if args.buckets is not None:
        raise ConfigurationError("--buckets is for --target parquet (a Delta table's files "
                                 "are Delta's)")
    options: dict[str, Any] = {"stored_as_scd_type": args.stored_as_scd_type}
    for name, parameter, is_list in _CDC_OPTIONS:
        value = getattr(args, name)
        if value is not None:
            options[parameter] = _columns(name, value) if is_list else value
    from pgcdc_events.spark.autocdc import AutoCdc, AutoCdcError  # noqa: PLC0415

    try:  # the rules check their options; keys come from the events when not given
        AutoCdc(**{"keys": ["-"], **options})
    except AutoCdcError as exc:
        message = str(exc).replace("track_history_*", "--track-history-*")
        for _, parameter, _ in (*_CDC_OPTIONS, ("", "stored_as_scd_type", False)):
            message = message.replace(parameter, "--" + parameter.replace("_", "-"))
        raise ConfigurationError(message) from None
    return options


def max_bytes_per_trigger(args: argparse.Namespace) -> int | None:
    """The bytes bound of a micro-batch (Spark's ``maxBytesPerTrigger``): ``None`` with
    ``--max-files-per-trigger``, else ``--max-mb-per-trigger`` (default
    :data:`DEFAULT_MB_PER_TRIGGER`) in bytes, at least one."""
    if (args.max_files_per_trigger is not None and args.max_files_per_trigger < 1) or \
            (args.max_mb_per_trigger is not None and not args.max_mb_per_trigger > 0):
        raise ConfigurationError("--max-files-per-trigger and --max-mb-per-trigger must be "
                                 "positive")
    if args.max_files_per_trigger is not None:
        return None
    return max(1, int((args.max_mb_per_trigger or DEFAULT_MB_PER_TRIGGER) * 1e6))


def _run(args: argparse.Namespace) -> int:
    from pgcdc_events.cli.spark_cmd import start_session  # noqa: PLC0415
    from pgcdc_events.spark.stream import jvm_exit  # noqa: PLC0415
    from pgcdc_events.types.catalog import CatalogSnapshot  # noqa: PLC0415

    if args.trigger < 0 or (args.buckets is not None and args.buckets < 1):
        raise ConfigurationError("--trigger must not be negative, --buckets must be positive")
    max_bytes = max_bytes_per_trigger(args)
    cdc = cdc_options(args)
    if not os.path.isdir(args.input):
        raise ConfigurationError(f"--input {args.input}: not a directory (the --output of "
                                 "capture --rotate-every)")
    if os.path.isdir(os.path.join(args.checkpoint, "tables")):
        raise ConfigurationError(
            f"--checkpoint {args.checkpoint}: written by an earlier version that ran one "
            "query per table (its tables/ directory); finish it with that version, or start "
            "again with a new checkpoint and output")
    config = load_config(args.config, args.overrides)
    catalog = CatalogSnapshot.load(args.catalog)
    settings = target_settings(args)  # before the JVM starts: a bad DSN fails at once
    logging.getLogger("DataFrameQueryContextLogger").setLevel(logging.CRITICAL)
    spark = start_session(args, "pgcdc-events spark stream", args.master or "local[*]",
                          {"spark.ui.showConsoleProgress": "false",
                           **({"spark.driver.memory": args.driver_memory}
                              if args.driver_memory else {})})
    with _quiet_lost_jvm(spark):
        try:
            return _follow(args, spark, config, catalog, cdc, settings, max_bytes)
        except Exception as exc:
            from py4j.protocol import Py4JError  # type: ignore[import-untyped]  # noqa: PLC0415

            if isinstance(exc, (Py4JError, OSError)) and not isinstance(exc, PgCdcError):
                died = jvm_exit(spark)
                if died is not None:  # the JVM is gone: why, not py4j's "Answer ... empty"
                    raise PgCdcError(died) from None
            raise


def _not_py4j(record: logging.LogRecord) -> bool:
    return "py4j" not in record.pathname


@contextlib.contextmanager
def _quiet_lost_jvm(spark: Any) -> Iterator[None]:
    """No traceback on stderr when the JVM dies under the command (its one line says
    why): py4j logs each lost call (to the root logger too), and pyspark's accumulator
    server prints the connection the JVM dropped."""
    py4j = logging.getLogger("py4j")
    level = py4j.level
    py4j.setLevel(logging.CRITICAL)
    logging.getLogger().addFilter(_not_py4j)
    server = getattr(spark.sparkContext, "_accumulatorServer", None)
    if server is not None:
        loud = server.handle_error

        def handle_error(request: Any, client_address: Any) -> None:
            if not isinstance(sys.exc_info()[1], (EOFError, ConnectionError)):
                loud(request, client_address)

        server.handle_error = handle_error
    try:
        yield
    finally:
        py4j.setLevel(level)
        logging.getLogger().removeFilter(_not_py4j)
        if server is not None:
            del server.handle_error


def _follow(args: argparse.Namespace, spark: Any, config: Any, catalog: Any,  # noqa: C901, PLR0915
            cdc: dict[str, Any], settings: Any, max_bytes: int | None) -> int:
    """The query of :func:`_run`, on its session, until stopped."""
    from pgcdc_events.spark.apply import ParquetTarget, PostgresTarget  # noqa: PLC0415
    from pgcdc_events.spark.delta import DeltaTarget  # noqa: PLC0415
    from pgcdc_events.spark.stream import (  # noqa: PLC0415
        BatchProgress,
        decode_stream,
        read_capture_files,
    )
    from pgcdc_events.spark.write import table_directory  # noqa: PLC0415

    last_row = [time.monotonic()]

    def progress(batch: BatchProgress) -> None:
        if batch.rows:
            last_row[0] = time.monotonic()
        if args.quiet or batch.skipped:
            return
        input_lsn = _input_lsn(args.input)
        lag = (None if input_lsn is None or batch.lsn is None
               else max(0, input_lsn - batch.lsn))
        seconds = batch.lag_seconds
        print(f"pgcdc-events spark stream: batch {batch.batch_id}: {batch.rows:,} rows, "
              f"{batch.records:,} records, {batch.pending:,} waiting; lsn "
              f"{Lsn(batch.lsn) if batch.lsn is not None else '-'}, lag {_size(lag)}"
              + (f", {seconds:.1f} s" if seconds is not None else "")
              + f" ({batch.seconds:.2f} s)", file=sys.stderr, flush=True)

    # the files, whose lines decode_stream's Python tasks read (the fast path)
    source = read_capture_files(spark, args.input,
                                max_files_per_trigger=args.max_files_per_trigger,
                                max_bytes_per_trigger=max_bytes)
    checkpoint = os.path.join(args.checkpoint, "decode")
    stream = decode_stream(source, config, catalog=catalog,
                           path=args.output if args.records else None,
                           checkpoint=checkpoint, progress=progress)
    keyed = [t for t in stream.tables if stream.layout(t).key_type is not None]
    wanted = keyed
    if args.tables:
        wanted = [t.strip() for t in args.tables.split(",") if t.strip()]
        for name in wanted:
            if stream.layout(name).key_type is None:  # (an unknown table is named too)
                raise ConfigurationError(f"{name} has no key (no primary key, no "
                                         "message.key.columns): its changes cannot be applied")
    elif not args.quiet:
        for name in stream.tables:
            if name not in keyed:
                print(f"pgcdc-events spark stream: {name} has no key (no primary key, no "
                      "message.key.columns): not applied", file=sys.stderr, flush=True)
    def target(table: str, layout: Any) -> _Both:
        path = os.path.join(args.output, "tables", table_directory(table))
        lake: Any = (DeltaTarget(path, **cdc) if args.target == "delta" else
                     ParquetTarget(path, buckets=args.buckets or 16))
        pg = None
        if settings is not None:
            pg = PostgresTarget(lambda settings=settings: settings.connect()[0],
                                layout.schema_name, layout.table_name)
        return _Both(lake, pg)

    for table in wanted:  # every table's targets in the decoding query itself
        stream.apply(table, target(table, stream.layout(table)))

    def new_table(table: str, layout: Any) -> _Both | None:
        """A table created after the catalog was taken, first seen in a micro-batch."""
        if layout.key_type is None:
            if not args.quiet:
                print(f"pgcdc-events spark stream: {table} (not in the catalog) has no key: "
                      "not applied", file=sys.stderr, flush=True)
            return None
        return target(table, layout)

    if not args.tables:
        stream.apply_new_tables(new_table)
    query = stream.start(trigger_seconds=args.trigger)
    stop = [False]

    def handler(signum: int, frame: Any) -> None:
        stop[0] = True

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while not stop[0]:
            if query.exception() is not None:
                raise query.exception()  # type: ignore[misc]
            if args.stop_when_idle is not None and \
                    time.monotonic() - last_row[0] > args.stop_when_idle:
                query.processAllAvailable()
                break
            time.sleep(0.2)
    finally:
        for s, old in previous.items():
            signal.signal(s, old)
        query.stop()
    if not args.quiet:
        print(f"pgcdc-events spark stream: stopped; {len(wanted)} tables under "
              f"{os.path.join(args.output, 'tables')}", file=sys.stderr, flush=True)
    return 0


class _Both:
    """A table's target in the decoding query (:meth:`DecodedStream.apply
    <pgcdc_events.spark.stream.DecodedStream.apply>`, which names the table in a failure):
    the Delta or Parquet target, then PostgreSQL (if any), from one collect of the table's
    flattened changes."""

    def __init__(self, lake: Any, pg: Any) -> None:
        self.lake, self.pg = lake, pg

    def apply_changes(self, df: Any, batch_id: int, keys: Any) -> None:
        """One micro-batch of the table's flattened changes (a
        :class:`~pgcdc_events.spark.stream.ChangesTarget`)."""
        from pgcdc_events.spark._session import to_arrow_table  # noqa: PLC0415
        from pgcdc_events.spark.delta import DeltaTarget  # noqa: PLC0415

        changes = None
        if isinstance(self.lake, DeltaTarget):
            app_id = self.lake.app_id_of(df)
            last = self.lake.last_batch(app_id)
            if last is None or batch_id > last:
                changes = to_arrow_table(df)
                self.lake.apply(changes, batch_id, app_id=app_id, keys=keys)
        else:
            last = self.lake.last_batch()
            if last is None or batch_id > last:
                changes = to_arrow_table(df)
                self.lake.apply(changes, batch_id, keys=keys)
        if self.pg is not None:
            self.pg.apply(changes if changes is not None else to_arrow_table(df), batch_id,
                          keys=keys)
