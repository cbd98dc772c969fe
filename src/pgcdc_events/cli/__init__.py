"""The ``pgcdc-events`` command line: small subcommands over the library's layers.

Errors reach the user as one line on stderr and a non-zero exit status, never
as a traceback.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence
from typing import TextIO

from pgcdc_events import __version__
from pgcdc_events.cli import (
    capture_cmd,
    catalog_cmd,
    decode_cmd,
    inspect_cmd,
    spark_cmd,
    validate_cmd,
)
from pgcdc_events.errors import PgCdcError

__all__ = ["main"]

EXIT_BAD_INPUT = 1
EXIT_USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="pgcdc-events",
        description="Decode PostgreSQL pgoutput captures into messages and Debezium events.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    inspect_cmd.register(commands)
    decode_cmd.register(commands)
    catalog_cmd.register(commands)
    capture_cmd.register(commands)
    capture_cmd.register_tail(commands)
    validate_cmd.register(commands)
    spark_cmd.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: TextIO | None = None, line: str | None = None) -> None:
        print(f"pgcdc-events {args.command}: warning: {message}", file=sys.stderr)

    try:
        with warnings.catch_warnings():
            warnings.showwarning = show
            status: int = args.run(args)
    except PgCdcError as exc:
        print(f"pgcdc-events {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except UnicodeDecodeError as exc:
        print(f"pgcdc-events {args.command}: error: input is not UTF-8 text: {exc}",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # the reader went away (e.g. `| head`): stop quietly
        sys.stderr.close()
        return 0
    except OSError as exc:
        print(f"pgcdc-events {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print(f"pgcdc-events {args.command}: interrupted", file=sys.stderr)
        return 130
    return status
