"""The ``pgcdc-events`` command line: small subcommands over the library's layers.

Errors reach the user as one line on stderr and a non-zero exit status, never
as a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import warnings
from collections.abc import Sequence
from typing import TextIO

from pgcdc_events import __version__
from pgcdc_events.errors import PgCdcError

__all__ = ["main"]

EXIT_BAD_INPUT = 1
EXIT_USAGE = 2


#: Each subcommand, in the order of the help: its module and the function registering it.
_COMMANDS = (("inspect", "inspect_cmd", "register"), ("decode", "decode_cmd", "register"),
             ("catalog", "catalog_cmd", "register"), ("capture", "capture_cmd", "register"),
             ("tail", "capture_cmd", "register_tail"), ("validate", "validate_cmd", "register"),
             ("spark", "spark_cmd", "register"))


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser with every subcommand registered, or only ``command`` when it
    names one (its module alone is imported: ``capture`` starts without the event layer)."""
    known = {name for name, _, _ in _COMMANDS}
    parser = argparse.ArgumentParser(
        prog="pgcdc-events",
        description="Decode PostgreSQL pgoutput captures into messages and Debezium events.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module, register in _COMMANDS:
        if command not in known or name == command:
            getattr(importlib.import_module(f"pgcdc_events.cli.{module}"), register)(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    given = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(given[0] if given else None)
    args = parser.parse_args(given)

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
