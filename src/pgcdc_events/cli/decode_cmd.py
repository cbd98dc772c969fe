"""``pgcdc-events decode``: a capture in, Debezium JsonConverter records out, one a line."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from pgcdc_events.cli._io import open_input, open_output
from pgcdc_events.errors import ConfigurationError, PgCdcError
from pgcdc_events.events import EventConfig, EventDecoder, JsonRecordWriter
from pgcdc_events.properties import load_properties
from pgcdc_events.protocol import CaptureError, CaptureRow
from pgcdc_events.types.catalog import CatalogSnapshot

DEFAULT_PREFIX = "pgcdc"


def register(commands: Any) -> None:
    """Add the subcommand to the CLI's subparsers."""
    parser = commands.add_parser(
        "decode",
        help="decode a capture into Debezium change-event records (JsonConverter JSON)",
        description="Decode a capture (JSON Lines of {lsn, xid, data}) into the records the "
        "Debezium PostgreSQL connector would produce, one {topic, key, value, headers} object "
        "a line, key/value/headers as Kafka's JsonConverter writes them.",
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
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    parser.set_defaults(run=run)


def load_config(config_path: str | None, overrides: list[str]) -> EventConfig:
    """Connector properties from a file and ``key=value`` overrides (``topic.prefix`` defaults
    to ``pgcdc``)."""
    props: dict[str, str] = {"topic.prefix": DEFAULT_PREFIX}
    if config_path:
        props.update(load_properties(config_path))
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigurationError(f"-c expects key=value, got {item!r}")
        props[key.strip()] = value.strip()
    return EventConfig.from_properties(props)


def run(args: argparse.Namespace) -> int:
    """Decode the capture; errors name the capture line."""
    config = load_config(args.config, args.overrides)
    for name in config.not_applicable:
        if not args.quiet:
            print(f"pgcdc-events decode: note: {name} does not shape events; ignored",
                  file=sys.stderr)
    if args.memory_limit < 0:
        raise ConfigurationError(f"--memory-limit must not be negative, got {args.memory_limit}")
    catalog = CatalogSnapshot.load(args.catalog) if args.catalog else None
    decoder = EventDecoder(config, catalog=catalog, proto_version=args.proto_version,
                           streaming=args.streaming,
                           memory_limit=int(args.memory_limit * 1024 * 1024))
    writer = JsonRecordWriter.for_config(config)
    started = last_report = time.monotonic()
    count = lines = 0
    _refuse_same_file(args.capture, args.output)
    with open_input(args.capture) as src, open_output(args.output) as out:
        for number, line in enumerate(src, 1):
            if not line.strip():
                continue
            row = CaptureRow.from_line(line, line_number=number)
            try:
                # lazily: a big streamed transaction is written as it is read back
                for record in decoder.iter_feed(row.data, row.lsn):
                    out.write(writer.record_line(record))
                    out.write("\n")
                    count += 1
            except CaptureError:
                raise
            except PgCdcError as exc:
                raise CaptureError(str(exc), line=number) from None
            lines += 1
            now = time.monotonic()
            if not args.quiet and now - last_report > 2:
                last_report = now
                print(f"pgcdc-events decode: {lines} messages, {count} records, "
                      f"{lines / (now - started):,.0f} messages/s", file=sys.stderr)
    if not args.quiet and time.monotonic() - started > 2:
        print(f"pgcdc-events decode: done, {lines} messages, {count} records", file=sys.stderr)
    return 0


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
