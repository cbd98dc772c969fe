"""Spark decoding of a real capture equals the event layer's records, field for field.

One capture from the throwaway server covers the type mapper's corpus (every type,
edge values, NULLs, TOAST-free updates under FULL and DEFAULT identity,
deletes), ALTER TABLE in the middle of the capture (a column added, a type
widened, a column dropped), a large transaction streamed in blocks with a
subtransaction rolled back, a streamed transaction that aborts, two-phase
transactions committed and rolled back, TRUNCATE, logical messages and a
primary-key change, decoded with transaction metadata on.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pg8000.native
import pytest

from pgcdc_events.events import EventConfig
from pgcdc_events.testing import Transaction, op_insert, render, table
from pgcdc_events.testing.workload import Change, Schedule, TruncateTables
from pgcdc_events.types.catalog import fetch_catalog
from support.capture import Capturer

CORPUS = Path(__file__).resolve().parents[1] / "golden" / "types" / "default" / "corpus.sql"


def statements(sql: str) -> list[str]:
    """The statements of a corpus file (``--`` comment lines dropped, ``;`` at line ends)."""
    text = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))
    return [s.strip() for s in re.split(r";\s*\n", text + "\n") if s.strip()]


AFTER = [
    # ALTER TABLE mid-capture: a column added, a type widened, a column dropped.
    "ALTER TABLE t_defaults ADD COLUMN d_new text DEFAULT 'new'",
    "INSERT INTO t_defaults (id, d_new) VALUES (10, 'added')",
    "ALTER TABLE t_defaults ALTER COLUMN d_int TYPE bigint",
    "UPDATE t_defaults SET d_int = 9000000000 WHERE id = 3",
    "ALTER TABLE t_defaults DROP COLUMN d_text",
    "INSERT INTO t_defaults (id) VALUES (11)",
    "UPDATE t_defaults SET id = 12 WHERE id = 11",
    # A large transaction (streamed past logical_decoding_work_mem) with a rolled-back
    # subtransaction, then one that aborts as a whole.
    "CREATE TABLE t_big (id int PRIMARY KEY, payload text, n bigint)",
    "BEGIN",
    "INSERT INTO t_big SELECT g, repeat('x', 60) || g, g * 7 FROM generate_series(1, 3000) g",
    "SAVEPOINT sp",
    "INSERT INTO t_big SELECT g, 'undone', 0 FROM generate_series(3001, 3400) g",
    "ROLLBACK TO SAVEPOINT sp",
    "SELECT pg_logical_emit_message(true, 'big', 'inside the streamed transaction')",
    "UPDATE t_big SET payload = 'changed' WHERE id <= 20",
    "DELETE FROM t_big WHERE id > 2990",
    "COMMIT",
    "BEGIN",
    "INSERT INTO t_big SELECT g, repeat('y', 60), 1 FROM generate_series(5000, 7000) g",
    "ROLLBACK",
    # Two-phase transactions.
    "BEGIN",
    "INSERT INTO t_big VALUES (8000, 'prepared', 1)",
    "PREPARE TRANSACTION 'spark-g1'",
    "COMMIT PREPARED 'spark-g1'",
    "BEGIN",
    "INSERT INTO t_big VALUES (8001, 'rolled back', 1)",
    "PREPARE TRANSACTION 'spark-g2'",
    "ROLLBACK PREPARED 'spark-g2'",
    "SELECT pg_logical_emit_message(false, 'plain', 'not transactional')",
    "TRUNCATE t_hstore_range",
    "INSERT INTO t_hstore_range (id) VALUES (1000)",
]


@pytest.fixture(scope="module")
def live_capture(pg_cluster: Any) -> Any:
    """The capture and catalog of the workload above (one database, module-wide)."""
    admin = pg8000.native.Connection(**pg_cluster.dsn())
    admin.run('CREATE DATABASE "spark_live"')
    admin.close()
    conn = pg8000.native.Connection(**{**pg_cluster.dsn(), "database": "spark_live"})
    try:
        for extension in ("hstore", "ltree", "citext", "postgis"):
            conn.run(f"CREATE EXTENSION IF NOT EXISTS {extension}")
        setup, _, changes = CORPUS.read_text(encoding="utf-8").partition("-- @changes")
        for statement in statements(setup):
            conn.run(statement)
        capturer = Capturer(conn, slot="spark_live", two_phase=True)
        for statement in [*statements(changes), *AFTER]:
            conn.run(statement)
        rows = capturer.changes(proto_version=3, streaming=True, two_phase=True, messages=True,
                                work_mem=64)
        catalog = fetch_catalog(conn)
        capturer.drop()
        yield rows, catalog
    finally:
        conn.close()
        admin = pg8000.native.Connection(**pg_cluster.dsn())
        admin.run('DROP DATABASE IF EXISTS "spark_live" WITH (FORCE)')
        admin.close()


def test_the_capture_has_everything(live_capture: Any) -> None:
    rows, _ = live_capture
    kinds = {chr(r.data[0]) for r in rows}
    assert {"S", "E", "c", "A", "b", "P", "K", "r", "T", "M", "R", "Y"} <= kinds
    relations = [r for r in rows if r.data[:1] == b"R"]
    assert len(relations) > 7


CONFIG = {"topic.prefix": "pgcdc", "database.dbname": "spark_live",
          "skipped.operations": "none", "provide.transaction.metadata": "true"}


def test_spark_equals_the_event_layer(live_capture: Any,
                                      spark_matches_decoder: Callable[..., Any]) -> None:
    rows, catalog = live_capture
    decoded = spark_matches_decoder(rows, EventConfig.from_properties(CONFIG), catalog,
                                    flavour="semantic")
    assert "public.t_big" in decoded.tables
    assert len(decoded.versions["public.t_defaults"]) == 4


def test_in_process_pipeline_equals_the_event_layer(
        live_capture: Any, arrow_matches_decoder: Callable[..., Any]) -> None:
    rows, catalog = live_capture
    config = EventConfig.from_properties(CONFIG)
    tables = arrow_matches_decoder(rows, config, catalog, flavour="literal", batch_size=333)
    big = tables["public.t_big"]
    # inserts, updates, deletes with their tombstones, the prepared insert
    assert big.num_rows == 3000 + 20 + 2 * 10 + 1


def test_changes_without_transaction_xids(spark_matches_decoder: Callable[..., Any]) -> None:
    """A capture whose xid column is null for ordinary changes and names the subtransaction
    for streamed ones (as a replication-protocol consumer may record it): changes find their
    transaction by stream order (the bucketed forward fill), with a truncate inside a
    transaction and a prepared transaction committed after a later one."""
    t = table("public.t", {"id": "int4", "v": "text"}, primary_key="id")
    one, two = op_insert(t, {"id": 1, "v": "a"}), op_insert(t, {"id": 2, "v": "b"})
    sub = Change(two.table, None, two.new, subtransaction=1)
    streamed = Transaction((one, sub), streamed=True, block_ends=(2,))
    truncating = Transaction((TruncateTables((t,)), op_insert(t, {"id": 3, "v": "c"})))
    first = Transaction((op_insert(t, {"id": 4, "v": "d"}),))
    prepared = Transaction((op_insert(t, {"id": 5, "v": "e"}),), two_phase=True, gid="g")
    schedule = Schedule(((0, ("block", 0)), (0, ("end",)), (1, ("end",)), (3, ("prepare",)),
                         (2, ("end",)), (3, ("end",))))
    w = render([t], [streamed, truncating, first, prepared], schedule)
    rows = w.capture()
    assert any(r.xid is None and r.data[:1] == b"I" for r in rows)
    config = EventConfig.from_properties({"topic.prefix": "t", "skipped.operations": "none"})
    spark_matches_decoder(rows, config, w.catalog, flavour="semantic")
