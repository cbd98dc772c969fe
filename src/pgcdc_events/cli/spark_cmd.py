"""``pgcdc-events spark decode``: a capture decoded by Spark into one dataset per table.

Runs from the shell (a local Spark) or under ``spark-submit`` (whatever master it
gives). ``--format json`` writes the JsonConverter records ``pgcdc-events decode``
writes, one directory per table, so the two decoders can be diffed record by
record; ``--format parquet`` (the default) writes the events, or with
``--flatten`` Debezium's ExtractNewRecordState rows.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, Final

from pgcdc_events.cli._io import count
from pgcdc_events.cli.decode_cmd import load_config
from pgcdc_events.errors import PgCdcError

__all__ = ["register"]


def register(commands: Any) -> None:
    """Add ``spark`` and its ``decode`` subcommand to the CLI's subparsers."""
    spark = commands.add_parser("spark", help="decode captures with Apache Spark (spark extra)",
                                description="Spark jobs over captures (needs pyspark).")
    sub = spark.add_subparsers(dest="spark_command", metavar="SUBCOMMAND", required=True)
    parser = sub.add_parser(
        "decode", help="decode a capture into one dataset per table",
        description="Decode a capture (JSON Lines file or Parquet dataset with position, lsn, "
        "xid, data) with Spark into one dataset per captured table under OUTPUT: Parquet "
        "events (or flattened rows), or the JsonConverter records of `pgcdc-events decode`.")
    parser.add_argument("--capture", required=True,
                        help="capture JSON Lines file, or Parquet dataset with an ordering column")
    parser.add_argument("--catalog", help="catalog snapshot JSON")
    parser.add_argument("--config", help="connector .properties file")
    parser.add_argument("-c", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="a connector property (repeatable; wins over --config)")
    parser.add_argument("--output", "-o", required=True, help="output directory")
    parser.add_argument("--format", choices=("parquet", "json"), default="parquet")
    parser.add_argument("--flatten", action="store_true",
                        help="write ExtractNewRecordState rows instead of events")
    parser.add_argument("--delete-handling-mode", choices=("none", "drop", "rewrite"),
                        default="rewrite", help="with --flatten (default: rewrite)")
    parser.add_argument("--add-fields", default="op,table,lsn,source.ts_ms",
                        help="with --flatten: metadata columns, as the SMT's add.fields")
    parser.add_argument("--flavour", choices=("literal", "semantic"), default="semantic",
                        help="Spark types of the values in Parquet (json is always literal)")
    parser.add_argument("--order-by", default="position",
                        help="ordering column of a Parquet capture (default: position)")
    parser.add_argument("--tables", help="comma-separated schema.table names to write")
    parser.add_argument("--tombstones", action="store_true",
                        help="keep delete tombstones in Parquet events (json always has them)")
    parser.add_argument("--run-id", help="the __debezium.context.runId header (json)")
    parser.add_argument("--master", help="Spark master when not under spark-submit "
                        "(default: local[*])")
    parser.add_argument("--quiet", "-q", action="store_true",
                        help="no progress on stderr, no Spark INFO/WARN lines or progress bars")
    add_ui_argument(parser)
    parser.set_defaults(run=run)
    from pgcdc_events.cli import spark_stream_cmd  # noqa: PLC0415

    spark_stream_cmd.register(sub)


def add_ui_argument(parser: argparse.ArgumentParser) -> None:
    """``--spark-ui``: what every ``pgcdc-events spark`` subcommand takes."""
    parser.add_argument("--spark-ui", action="store_true",
                        help="start Spark's web UI, without its kill links, on 127.0.0.1 only "
                        "with a local master (unless SPARK_LOCAL_IP says otherwise) "
                        "(default: no web UI)")


#: Spark settings of every session ``pgcdc-events spark`` starts: Hadoop's writers (the
#: checkpoints, ``--flatten``'s datasets) create files 0600 and directories 0700.
PRIVATE_FILES: Final = {"spark.hadoop.fs.permissions.umask-mode": "077"}


def session_settings(args: argparse.Namespace, master: str | None
                     ) -> tuple[dict[str, str], dict[str, str]]:
    """The Spark settings and the environment variables of the session a ``pgcdc-events
    spark`` subcommand starts on ``master``: no web UI unless ``--spark-ui`` (which has no
    authentication: its kill links are off and, on a local master, it is bound to
    127.0.0.1 through ``SPARK_LOCAL_IP`` unless that is set; a cluster's driver must stay
    reachable, so there Spark's own settings decide), and private files
    (:data:`PRIVATE_FILES`)."""
    conf = {**PRIVATE_FILES, "spark.ui.enabled": "true" if args.spark_ui else "false",
            "spark.ui.killEnabled": "false"}
    local = master is not None and master.startswith("local")
    env = {"SPARK_LOCAL_IP": "127.0.0.1"} if args.spark_ui and local else {}
    return conf, env


def start_session(args: argparse.Namespace, app: str, master: str | None,
                  conf: dict[str, str]) -> Any:
    """The SparkSession of a subcommand, with :func:`session_settings` (``conf`` last)."""
    from pgcdc_events.spark import session  # noqa: PLC0415

    settings, env = session_settings(args, master)
    for name, value in env.items():
        os.environ.setdefault(name, value)
    return session(master, app, quiet=True, log_level="off", conf={**settings, **conf})


@contextlib.contextmanager
def private_umask() -> Iterator[None]:
    """Files 0600 and directories 0700 for what this process, the JVM it starts and Spark's
    Python workers create (umask 077), restored after."""
    old = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(old)


def make_private(path: str) -> None:
    """``chmod`` a local output tree to 0600 files and 0700 directories: for what a Spark
    session started before this command (its own umask, Hadoop's 022) wrote."""
    if not os.path.isdir(path):
        return
    os.chmod(path, 0o700)
    for root, dirs, files in os.walk(path):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o700, follow_symlinks=False)
        for name in files:
            full = os.path.join(root, name)
            if not os.path.islink(full):
                os.chmod(full, 0o600)


def run(args: argparse.Namespace) -> int:
    """Decode the capture with Spark and write each table; Spark errors become one line."""
    return run_spark(_run, args)


def run_spark(body: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """``body(args)`` with pyspark required and Spark's errors (a worker's included) as one
    line: what every ``pgcdc-events spark`` subcommand runs in."""
    try:
        from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]  # noqa: PLC0415
        from pyspark.errors import PySparkException  # noqa: PLC0415
    except ImportError:
        raise PgCdcError("pgcdc-events spark needs pyspark: install the 'spark' extra "
                         "(pip install 'pgcdc-events[spark]')") from None
    try:
        with private_umask():
            return body(args)
    except (PySparkException, Py4JJavaError) as exc:
        raise PgCdcError(_spark_message(exc)) from None


#: A line of a Python traceback naming one of this library's exceptions.
_OURS: Final = re.compile(r"\s*pgcdc_events(?:\.\w+)*\.(\w+): (.*)")
#: A line of a Python traceback naming any exception.
_PYTHON_ERROR: Final = re.compile(r"\s*(?:\w+\.)*(\w*(?:Error|Exception|Exit|Interrupt)): (.*)")
_ERROR_CLASS: Final = re.compile(r"\s*(\[[A-Z_]+\])")


def _spark_message(exc: BaseException) -> str:
    """The useful line of a Spark failure: the last of this library's exceptions in the
    Python traceback Spark carries (a streaming query's :class:`SparkQueryError` names
    its cause), else the last Python exception line after Spark's error class, else
    Spark's first line."""
    text = str(exc)
    lines = text.splitlines()
    for line in reversed(lines):
        match = _OURS.fullmatch(line.rstrip())
        if match is not None:
            name, message = match.groups()
            return message if name == "SparkQueryError" else f"{name}: {message}"
    first = next((line.strip() for line in lines if line.strip()), type(exc).__name__)
    for line in reversed(lines):
        match = _PYTHON_ERROR.fullmatch(line.rstrip())
        if match is not None:
            head = _ERROR_CLASS.match(first)
            return (f"{head.group(1)} " if head else "") + f"{match.group(1)}: {match.group(2)}"
    return first[:500]


def _run(args: argparse.Namespace) -> int:
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    from pgcdc_events.spark import decode_capture, read_capture  # noqa: PLC0415
    from pgcdc_events.spark.capture import check_capture  # noqa: PLC0415
    from pgcdc_events.spark.flatten import flatten  # noqa: PLC0415
    from pgcdc_events.spark.write import table_directory, write_tables  # noqa: PLC0415
    from pgcdc_events.types.catalog import CatalogSnapshot  # noqa: PLC0415

    config = load_config(args.config, args.overrides)
    catalog = CatalogSnapshot.load(args.catalog) if args.catalog else None
    check_capture(args.capture, order_by=args.order_by)  # before the JVM starts
    started = time.monotonic()
    under_submit = "spark.master" in os.environ.get("PYSPARK_SUBMIT_ARGS", "")
    # Spark's own log is off: progress is ours (unless -q), errors are one line of ours.
    logging.getLogger("DataFrameQueryContextLogger").setLevel(logging.CRITICAL)
    spark = start_session(args, "pgcdc-events spark decode",
                          args.master or (None if under_submit else "local[*]"),
                          {"spark.ui.showConsoleProgress": str(not args.quiet).lower()})
    capture = read_capture(spark, args.capture, order_by=args.order_by)
    json = args.format == "json" and not args.flatten
    decoded = decode_capture(capture, config, catalog=catalog, order_by=args.order_by,
                             flavour="literal" if json else args.flavour,
                             tombstones=json or args.tombstones, lines=json, payload=not json,
                             run_id=args.run_id or str(uuid.uuid4()))
    wanted = decoded.tables
    if args.tables:
        names = [t.strip() for t in args.tables.split(",") if t.strip()]
        for name in names:
            decoded.layout(name)  # raises for an unknown table
        wanted = tuple(t for t in wanted if t in names)
    if args.flatten:
        decoded.records.count()  # the one decoding pass, persisted; each table reads it

        def write(table: str) -> None:
            target = os.path.join(args.output, table_directory(table))
            frame = flatten(decoded.table(table), delete_handling_mode=args.delete_handling_mode,
                            add_fields=args.add_fields)
            writer = frame.write.mode("overwrite")
            (writer.json if args.format == "json" else writer.parquet)(target)

        # ExtractNewRecordState is a Spark projection per table: small jobs, side by side.
        with ThreadPoolExecutor(max_workers=max(1, min(8, len(wanted)))) as pool:
            for future in [pool.submit(write, table) for table in wanted]:
                future.result()
    else:  # every table from the one pass, in one job
        write_tables(decoded, args.output, tables=wanted, fmt="json" if json else "parquet")
    if not args.quiet:
        for table in wanted:
            print(f"pgcdc-events spark decode: wrote {table} to "
                  f"{os.path.join(args.output, table_directory(table))}", file=sys.stderr)
    decoded.unpersist()
    make_private(args.output)
    if not args.quiet:
        print(f"pgcdc-events spark decode: {count(len(wanted), 'table')} in "
              f"{time.monotonic() - started:.1f}s", file=sys.stderr)
    return 0
