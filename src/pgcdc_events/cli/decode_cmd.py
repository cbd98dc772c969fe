"""``pgcdc-events decode``: a capture in, Debezium JsonConverter records out, one a line."""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from typing import Any

from pgcdc_events.cli._io import open_input, open_output
from pgcdc_events.cli._parallel import DecodeJob, default_workers, run_decode
from pgcdc_events.errors import ConfigurationError
from pgcdc_events.events import EventConfig
from pgcdc_events.properties import load_properties
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
    if args.workers is not None and args.workers < 1:
        raise ConfigurationError(f"--workers must be at least 1, got {args.workers}")
    job = DecodeJob(config, catalog, args.proto_version, args.streaming,
                    int(args.memory_limit * 1024 * 1024), run_id=str(uuid.uuid4()))
    started = time.monotonic()
    last_report = [started]

    def report(lines: int, count: int) -> None:
        now = time.monotonic()
        if not args.quiet and now - last_report[0] > 2:
            last_report[0] = now
            print(f"pgcdc-events decode: {lines} messages, {count} records, "
                  f"{lines / (now - started):,.0f} messages/s", file=sys.stderr)

    with open_input(args.capture) as src, open_output(args.output) as out:
        lines, count = run_decode(job, src, out, report=report,
                                  workers=args.workers or default_workers())
    if not args.quiet and time.monotonic() - started > 2:
        print(f"pgcdc-events decode: done, {lines} messages, {count} records", file=sys.stderr)
    return 0
