"""The pg8000 slot reader against a live server: peeks never consume, advances stop at what
is durable and at unresolved PREPAREs, and every misconfiguration is one of our errors."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pg8000.native
import pytest

from pgcdc_events.adapters import (
    ConnectionLostError,
    DecodingOptions,
    PrivilegeError,
    PublicationNotFoundError,
    ServerConfigError,
    SlotBusyError,
    SlotError,
    SlotLostError,
    SlotNotFoundError,
    SlotReader,
    parse_dsn,
)
from pgcdc_events.adapters.pg8000 import translate_error
from pgcdc_events.errors import ConfigurationError, PgCdcError
from pgcdc_events.protocol import Lsn
from pgcdc_events.testing.cluster import TempCluster


@pytest.fixture
def dsn(pg_cluster: TempCluster, pg_conn: Any) -> dict[str, Any]:
    database = pg_conn.run("SELECT current_database()")[0][0]
    pg_conn.run("CREATE TABLE t (id int PRIMARY KEY, v text)")
    return {**pg_cluster.dsn(), "database": database}


def _reader(dsn: dict[str, Any], **kwargs: Any) -> SlotReader:
    reader = SlotReader(dsn, slot=kwargs.pop("slot", "s"),
                        publications=kwargs.pop("publications", ["p"]), **kwargs)
    reader.connect()
    return reader


def _units(reader: SlotReader, after: int | None = None, limit: int | None = None) -> list[Any]:
    out = []
    for unit in reader.read(after, limit):
        out.append((unit.kind, unit.end_lsn, unit.changes, unit.seen,
                    "".join(chr(r.data[0]) for r in unit)))
        unit.close()
    return out


def test_peek_never_consumes_and_advance_stops_at_what_was_read(pg_conn: Any,
                                                               dsn: dict[str, Any]) -> None:
    reader = _reader(dsn)
    info = reader.prepare(create_slot=True, create_publication=True)
    assert info.created_slot and info.created_publications == ("p",)
    assert info.options.proto_version >= 2 and info.options.messages
    for i in range(3):
        pg_conn.run(f"INSERT INTO t VALUES ({i}, 'x')")
    first = _units(reader)
    assert [u[0] for u in first] == ["transaction"] * 3
    assert _units(reader) == first  # a peek consumes nothing
    assert reader.status().confirmed_lsn == info.confirmed_lsn
    # only the first two units are read; advancing "to the end of the world" stops there
    limited = _units(reader, limit=5)  # BRIC + BIC: stops after the second commit
    assert len(limited) == 2
    moved = reader.advance(2**63)
    assert moved == limited[-1][1]
    rest = _units(reader)
    assert [u[:3] for u in rest] == [u[:3] for u in first[2:]]
    assert rest[0][4] == "BRIC"  # a new read announces its relations again
    # after= marks units already delivered
    assert [u[3] for u in _units(reader, after=first[2][1])] == [True]
    reader.close()


def test_prepared_transactions_hold_the_slot_until_resolved(pg_cluster: TempCluster,
                                                            pg_conn: Any,
                                                            dsn: dict[str, Any]) -> None:
    reader = _reader(dsn, options=DecodingOptions(two_phase=True))
    reader.prepare(create_slot=True, create_publication=True)
    assert reader.info is not None and reader.info.options.two_phase
    other = pg8000.native.Connection(**dsn)
    try:
        other.run("BEGIN")
        other.run("INSERT INTO t VALUES (1, 'prepared')")
        other.run("PREPARE TRANSACTION 'g1'")
        pg_conn.run("INSERT INTO t VALUES (2, 'after')")
        units = _units(reader)
        assert [u[0] for u in units] == ["transaction"]
        hold = reader.last_batch.hold_lsn
        assert hold is not None and hold < units[0][1]
        assert reader.advance(units[0][1]) == Lsn(hold)  # not past the PREPARE
        assert _units(reader, after=units[0][1]) == [(*units[0][:3], True, units[0][4])]
        other.run("COMMIT PREPARED 'g1'")
    finally:
        other.close()
    units = _units(reader, after=units[0][1])
    assert [(u[0], u[3]) for u in units] == [("transaction", True), ("prepared", False)]
    assert units[1][4].startswith("b") and units[1][4].endswith("PK")
    reader.advance(units[1][1])
    assert _units(reader) == []
    reader.close()


def test_a_streamed_transaction_in_progress_is_not_delivered(pg_conn: Any,
                                                             dsn: dict[str, Any]) -> None:
    reader = _reader(dsn, options=DecodingOptions(streaming="on"),
                     session_settings={"logical_decoding_work_mem": "64kB"})
    reader.prepare(create_slot=True, create_publication=True)
    other = pg8000.native.Connection(**dsn)
    try:
        other.run("BEGIN")
        other.run("INSERT INTO t SELECT g, repeat('x', 200) FROM generate_series(1, 2000) g")
        pg_conn.run("INSERT INTO t VALUES (0, 'small')")
        units = _units(reader)
        assert [u[0] for u in units] == ["transaction"]
        assert reader.last_batch.incomplete == 1  # the stream blocks were read, then dropped
        reader.advance(units[0][1])
        other.run("COMMIT")
    finally:
        other.close()
    units = _units(reader, after=units[0][1])
    # Delivered whole, once. Its changes all lie before the slot's position now, where the
    # server does not stream (it re-decodes them), so it comes as an ordinary transaction.
    assert [(u[0], u[2]) for u in units] == [("transaction", 2000)]
    assert units[0][4].startswith("BR") and units[0][4].endswith("IC")


def test_missing_slot_and_publication(pg_conn: Any, dsn: dict[str, Any]) -> None:
    reader = _reader(dsn)
    with pytest.raises(PublicationNotFoundError, match="'p'") as info:
        reader.prepare()
    assert "--create-publication" in str(info.value)
    pg_conn.run("CREATE PUBLICATION p FOR ALL TABLES")
    with pytest.raises(SlotNotFoundError, match="'s' does not exist") as slot_info:
        reader.prepare()
    assert slot_info.value.slot == "s" and "--create-slot" in str(slot_info.value)
    reader.prepare(create_slot=True)
    # the publication is dropped under a running reader: the server's error, translated
    pg_conn.run("DROP PUBLICATION p")
    with pytest.raises(PublicationNotFoundError) as later:
        pg_conn.run("INSERT INTO t VALUES (1, 'x')")
        _units(reader)
    assert later.value.sqlstate == "42704"
    reader.close()


def test_a_slot_of_another_kind_or_database(pg_cluster: TempCluster, pg_conn: Any,
                                            dsn: dict[str, Any]) -> None:
    pg_conn.run("CREATE PUBLICATION p FOR ALL TABLES")
    pg_conn.run("SELECT pg_create_physical_replication_slot('phys')")
    reader = _reader(dsn, slot="phys")
    with pytest.raises(SlotError, match="physical slot"):
        reader.prepare()
    reader.close()
    admin = pg8000.native.Connection(**pg_cluster.dsn())
    try:
        admin.run("SELECT pg_create_logical_replication_slot('elsewhere', 'pgoutput')")
        reader = _reader(dsn, slot="elsewhere")
        with pytest.raises(SlotError, match="belongs to database 'postgres'"):
            reader.prepare()
        reader.close()
    finally:
        admin.run("SELECT pg_drop_replication_slot('elsewhere')")
        admin.close()
    pg_conn.run("SELECT pg_drop_replication_slot('phys')")


def test_a_role_without_replication(pg_cluster: TempCluster, pg_conn: Any,
                                    dsn: dict[str, Any]) -> None:
    pg_conn.run("CREATE PUBLICATION p FOR ALL TABLES")
    pg_conn.run("DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'plain') THEN"
                " CREATE ROLE plain LOGIN; END IF; END $$")
    reader = _reader({**dsn, "user": "plain"})
    with pytest.raises(PrivilegeError, match="REPLICATION"):
        reader.prepare(create_slot=True)
    reader.close()


def test_a_lost_connection_is_our_error(pg_conn: Any, dsn: dict[str, Any]) -> None:
    reader = _reader(dsn)
    reader.prepare(create_slot=True, create_publication=True)
    pid = reader._conn.run("SELECT pg_backend_pid()")[0][0]
    pg_conn.run(f"SELECT pg_terminate_backend({pid})")
    with pytest.raises(ConnectionLostError) as info:
        _units(reader)
    assert isinstance(info.value, PgCdcError)
    reader.connect()  # and it can reconnect
    reader.prepare()
    assert _units(reader) == []
    reader.close()


def test_options_the_server_cannot_honour(dsn: dict[str, Any], pg_conn: Any) -> None:
    pg_conn.run("CREATE PUBLICATION p FOR ALL TABLES")
    reader = _reader(dsn)
    reader.prepare(create_slot=True)
    reader.requested = DecodingOptions(two_phase=True)
    with pytest.raises(ConfigurationError, match="without two-phase"):
        reader.prepare()
    reader.requested = DecodingOptions(proto_version=1, streaming="on")
    with pytest.raises(ConfigurationError, match="proto_version 2"):
        reader.prepare()
    reader.close()
    with pytest.raises(ServerConfigError, match="proto_version 4 needs PostgreSQL 16"):
        DecodingOptions(proto_version=4).resolve(150004, False)
    with pytest.raises(ServerConfigError, match="binary needs PostgreSQL 14"):
        DecodingOptions(binary=True).resolve(130010, False)


@pytest.mark.parametrize(("code", "message", "expected"), [
    ("55006", 'replication slot "s" is active for PID 42', SlotBusyError),
    ("42704", 'replication slot "s" does not exist', SlotNotFoundError),
    ("42704", 'publication "p" does not exist', PublicationNotFoundError),
    ("55000", "logical decoding requires wal_level >= logical", ServerConfigError),
    ("55000", 'can no longer get changes from replication slot "s"', SlotLostError),
    ("42501", "permission denied to use replication slots", PrivilegeError),
    ("57P01", "terminating connection due to administrator command", ConnectionLostError),
    ("XX000", "something else", SlotError),
])
def test_server_errors_translate(code: str, message: str, expected: type) -> None:
    exc = pg8000.native.DatabaseError({"S": "ERROR", "C": code, "M": message})
    error = translate_error(exc, slot="s", publications=["p"], action="read")
    assert type(error) is expected
    assert error.sqlstate == code and message in str(error) and "read" in str(error)
    lost = translate_error(pg8000.native.InterfaceError("network error"), slot="s")
    assert type(lost) is ConnectionLostError and lost.sqlstate is None


def test_parse_dsn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGUSER", "envuser")
    assert parse_dsn("postgresql://u:p%40ss@db.example:6543/app?sslmode=disable") == {
        "host": "db.example", "port": 6543, "user": "u", "password": "p@ss", "database": "app",
        "application_name": "pgcdc-events", "ssl_context": False}  # disable: no SSLRequest at all
    kw = parse_dsn("host=/run/pg dbname='my db' port=5433")
    assert kw["unix_sock"] == "/run/pg/.s.PGSQL.5433" and kw["database"] == "my db"
    assert kw["user"] == "envuser"
    assert "ssl_context" in parse_dsn("postgresql://h/db?sslmode=require")
    for bad in ("postgresql://h:99999/db", "host", "port=abc"):
        with pytest.raises(ConfigurationError, match="--dsn"):
            parse_dsn(bad)


@pytest.fixture(scope="module")
def small_wal_cluster() -> Iterator[TempCluster]:
    cluster = TempCluster(settings={"max_slot_wal_keep_size": "1MB", "wal_keep_size": "0"})
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def test_lost_slot_then_wal_level_replica(small_wal_cluster: TempCluster) -> None:
    cluster = small_wal_cluster
    conn = pg8000.native.Connection(**cluster.dsn())
    try:
        conn.run("CREATE TABLE filler (x text)")
        conn.run("CREATE PUBLICATION p FOR ALL TABLES")
        reader = _reader(cluster.dsn())
        reader.prepare(create_slot=True)
        for _ in range(4):  # several WAL segments past max_slot_wal_keep_size
            conn.run("INSERT INTO filler SELECT repeat('x', 1000) FROM generate_series(1, 2000)")
            conn.run("SELECT pg_switch_wal()")
        conn.run("CHECKPOINT")
        with pytest.raises(SlotLostError, match=r"invalidated|no longer") as info:
            reader.prepare()
            _units(reader)
        assert "operations.md" in str(info.value)
        reader.close()
        conn.run("SELECT pg_drop_replication_slot('s')")
        conn.run("ALTER SYSTEM SET wal_level = replica")
    finally:
        conn.close()
    cluster.restart()
    reader = _reader(cluster.dsn())
    with pytest.raises(ServerConfigError, match="wal_level is 'replica'") as config_info:
        reader.prepare(create_slot=True)
    assert "wal_level = logical" in str(config_info.value)
    reader.close()


def test_a_transaction_committing_right_after_a_lone_message_is_not_skipped(
        pg_conn: Any, dsn: dict[str, Any]) -> None:
    """A non-transactional message's row LSN is the end of its record; its transaction's
    COMMIT record can start exactly there. Advancing one byte past the message (as an
    earlier version did) made the slot skip that commit: a lost transaction."""
    reader = _reader(dsn)
    reader.prepare(create_slot=True, create_publication=True)
    pg_conn.run("BEGIN")
    pg_conn.run("INSERT INTO t VALUES (1, 'x')")
    pg_conn.run("SELECT pg_logical_emit_message(false, 'p', 'inside')")
    pg_conn.run("COMMIT")
    units = _units(reader, limit=1)  # the read stops after the message's record
    assert [u[0] for u in units] == ["message"]
    reader.advance(units[0][1])
    units = _units(reader, after=units[0][1])
    assert [(u[0], u[2], u[3]) for u in units] == [("transaction", 1, False)]
