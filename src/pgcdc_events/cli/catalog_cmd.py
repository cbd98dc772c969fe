"""``pgcdc-events catalog``: write the catalog snapshot of a database as JSON (needs pg8000)."""

from __future__ import annotations

import argparse
from typing import Any

from pgcdc_events.adapters.connection import ServerUnreachableError, parse_conninfo
from pgcdc_events.cli._io import add_dsn_arguments, open_output
from pgcdc_events.errors import ConfigurationError, PgCdcError
from pgcdc_events.types.catalog import fetch_catalog


def register(commands: Any) -> None:
    """Add the subcommand to the CLI's subparsers."""
    parser = commands.add_parser(
        "catalog",
        help="write the catalog snapshot (types, keys, defaults) of a database as JSON",
        description="Run the catalog query against a database and write the snapshot that "
        "decode needs for NOT NULL, primary keys, defaults, enums and domains.",
    )
    add_dsn_arguments(parser)
    parser.add_argument("--schema", action="append", default=[],
                        help="keep only this schema's tables (repeatable)")
    parser.add_argument("--output", "-o", help="write here instead of stdout")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Fetch and write the snapshot."""
    from pgcdc_events.cli.capture_cmd import read_dsn  # noqa: PLC0415 - shared with capture

    try:
        import pg8000.native  # noqa: F401, PLC0415 - optional dependency
    except ImportError:
        raise ConfigurationError("the catalog command needs pg8000: pip install "
                                 "'pgcdc-events[pg]'") from None
    settings = parse_conninfo(read_dsn(args))
    try:
        conn, _ = settings.connect()
    except ServerUnreachableError as exc:  # one line, the system's words
        raise PgCdcError(f"cannot connect to {exc.address}: {exc.reason}") from None
    except PgCdcError as exc:  # refused: authentication, TLS, database (never the password)
        raise PgCdcError(f"cannot connect: {exc}") from None
    try:
        snapshot = fetch_catalog(conn)
    finally:
        conn.close()
    if args.schema:
        snapshot = snapshot.filtered(args.schema)
    with open_output(args.output) as out:
        out.write(snapshot.dumps())
        out.write("\n")
    return 0
