"""``pgcdc-events validate``: check Kafka Connect JSON records of Debezium change events."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pgcdc_events.cli._io import count, open_input
from pgcdc_events.testing.validate import validate_file

EXIT_INVALID = 1


def register(commands: Any) -> None:
    """Add the subcommand to the CLI's subparsers."""
    parser = commands.add_parser(
        "validate",
        help="check change-event records (JSON Lines as decode writes them)",
        description="Check every record of a JSON Lines file of {topic, key, value, headers} "
        "objects (key, value and headers in Kafka JsonConverter form, as 'decode' writes "
        "them or as read from a Debezium topic): payloads against their schemas, and "
        "Debezium's envelope rules. Reports each invalid record with its line and field; "
        "exits 1 when any is invalid.",
    )
    parser.add_argument("records", metavar="RECORDS.jsonl", help="records file ('-' for stdin)")
    parser.add_argument("--max-problems", type=int, default=5, metavar="N",
                        help="problems shown per invalid record (default 5)")
    parser.add_argument("--quiet", "-q", action="store_true", help="no summary on stderr")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Validate the file; one line per problem on stdout, a summary on stderr."""
    total = invalid = schemaless = 0
    with open_input(args.records) as src:
        for number, report in validate_file(src):
            total += 1
            if report.schemaless:
                schemaless += 1
            if report.ok:
                continue
            invalid += 1
            for problem in report.problems[:max(args.max_problems, 1)]:
                print(f"{args.records}:{number}: {problem}")
            hidden = len(report.problems) - max(args.max_problems, 1)
            if hidden > 0:
                print(f"{args.records}:{number}: ... {hidden} more "
                      f"{'problem' if hidden == 1 else 'problems'}")
    if not args.quiet:
        print(f"pgcdc-events validate: {count(total, 'record')}, {invalid:,} invalid",
              file=sys.stderr)
        if schemaless:
            carry = "carries" if schemaless == 1 else "carry"
            print(f"pgcdc-events validate: note: {count(schemaless, 'record')} {carry} no schema "
                  "(schemas.enable=false): only Debezium's envelope rules were checked "
                  "for their schemaless parts", file=sys.stderr)
    return EXIT_INVALID if invalid else 0
