"""``pgcdc-events catalog``: write the catalog snapshot of a database as JSON (needs pg8000)."""

from __future__ import annotations

import argparse
from typing import Any

from pgcdc_events.adapters.pg8000 import parse_dsn
from pgcdc_events.cli._io import open_output
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
    parser.add_argument("--dsn", required=True,
                        help="postgresql://user[:password]@host[:port]/database, or "
                        "libpq key=value pairs (PG* environment variables fill the gaps)")
    parser.add_argument("--schema", action="append", default=[],
                        help="keep only this schema's tables (repeatable)")
    parser.add_argument("--output", "-o", help="write here instead of stdout")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Fetch and write the snapshot."""
    try:
        import pg8000.native  # noqa: PLC0415 - optional dependency
    except ImportError:
        raise ConfigurationError("the catalog command needs pg8000: pip install "
                                 "'pgcdc-events[pg]'") from None
    kwargs = parse_dsn(args.dsn)
    where = f"{kwargs.get('host', 'localhost')}:{kwargs.get('port')}/{kwargs.get('database', '')}"
    try:
        conn = pg8000.native.Connection(**kwargs)
    except (pg8000.exceptions.InterfaceError, OSError) as exc:
        raise PgCdcError(f"cannot connect to {where}: {exc}") from None
    except pg8000.exceptions.DatabaseError as exc:
        message = exc.args[0].get("M") if exc.args and isinstance(exc.args[0], dict) else exc
        raise PgCdcError(f"cannot connect to {where}: {message}") from None
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
