"""A fresh database on the tests' throwaway cluster, dropped after with its slots."""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterator
from typing import Any

from pgcdc_events.testing.cluster import TempCluster

_counter = itertools.count(1)


@contextlib.contextmanager
def fresh_database(cluster: TempCluster, prefix: str = "test") -> Iterator[tuple[Any, str]]:
    """A pg8000 ``native.Connection`` to a new database of ``cluster`` and the database's
    name; after, its prepared transactions rolled back, its replication slots dropped (their
    readers ended first) and the database dropped."""
    import pg8000.native  # noqa: PLC0415 - only server tests need the driver

    name = f"{prefix}_{os.getpid()}_{next(_counter)}"
    admin = pg8000.native.Connection(**cluster.dsn())
    try:
        admin.run(f'CREATE DATABASE "{name}"')
    finally:
        admin.close()
    try:
        conn = pg8000.native.Connection(**{**cluster.dsn(), "database": name})
        try:
            yield conn, name
        finally:
            with contextlib.suppress(Exception):  # a test may have broken the connection
                conn.close()
    finally:
        _drop(cluster, name)


def database_url(cluster: TempCluster, name: str) -> str:
    """The URL of database ``name`` of ``cluster``."""
    return f"postgresql://{cluster.user}@{cluster.host}:{cluster.port}/{name}"


def _drop(cluster: TempCluster, name: str) -> None:
    """Roll back prepared transactions, drop replication slots, then drop the database."""
    import pg8000.native  # noqa: PLC0415 - only server tests need the driver

    conn = pg8000.native.Connection(**{**cluster.dsn(), "database": name})
    try:
        for (gid,) in conn.run(
            "SELECT gid FROM pg_prepared_xacts WHERE database = current_database()"
        ):
            conn.run("ROLLBACK PREPARED " + "'" + gid.replace("'", "''") + "'")
    finally:
        conn.close()
    admin = pg8000.native.Connection(**cluster.dsn())
    try:
        admin.run(
            "SELECT pg_terminate_backend(active_pid, 5000) FROM pg_replication_slots"
            " WHERE database = :db AND active_pid IS NOT NULL",
            db=name,
        )
        admin.run(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
            " WHERE database = :db",
            db=name,
        )
        admin.run(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        admin.close()
