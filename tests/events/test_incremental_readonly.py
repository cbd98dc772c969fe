"""The read-only window (:class:`ReadOnlyChunkWindow`) on real streams: the watermarks are
the server's ``pg_current_snapshot()`` values, the records come from a real slot's
pgoutput bytes through :class:`EventDecoder`, and the chunk rows from a real ``SELECT``.
Each test places transactions around the watermarks to check one of the connector's
rules (``PostgresReadOnlyIncrementalSnapshotContext.updateWindowState`` and
``PostgresReadOnlyIncrementalSnapshotChangeEventSource.processMessage`` /
``readUntilNewTransactionChange``, ``debezium/debezium`` v3.6.1.Final, unchanged in 3.6.3).

Ports ``PgSnapshotTest`` (``debezium-connector-postgres/src/test/java/io/debezium/connector/
postgresql/PgSnapshotTest.java``): its three methods, with the Java assertions' values.
"""

from __future__ import annotations

from typing import Any

import pg8000.native
import pytest

from pgcdc_events.events import EventConfig, EventDecoder
from pgcdc_events.events.incremental import (
    IncrementalSnapshotError,
    PgSnapshot,
    ReadOnlyChunkWindow,
    widen_xid,
)
from pgcdc_events.events.records import ChangeRecord
from pgcdc_events.types.catalog import fetch_catalog
from support.capture import Capturer

CLOCK_NS = 1_700_000_000_000_000_000


def test_parse_a_snapshot_with_transactions_in_progress() -> None:
    """``PgSnapshotTest.parseCorrectPgSnapshotWithInProgressTransactions``."""
    snapshot = PgSnapshot.parse("795:799:795,797")
    assert (snapshot.xmin, snapshot.xmax) == (795, 799)
    assert set(snapshot.xip) >= {795, 797}
    assert str(snapshot) == "795:799:795,797"


def test_parse_a_snapshot_without_transactions_in_progress() -> None:
    """``PgSnapshotTest.parseCorrectPgSnapshotWithoutInProgressTransactions``."""
    snapshot = PgSnapshot.parse("795:799:")
    assert (snapshot.xmin, snapshot.xmax, snapshot.xip) == (795, 799, ())


@pytest.mark.parametrize("text", ["795::", "", "a:b:", "795:799:x", "1:2:3:4"])
def test_a_wrong_snapshot_is_refused(text: str) -> None:
    """``PgSnapshotTest.parseAWrongPgSnapshotWillThrowException`` (``795::``), and others."""
    with pytest.raises(IncrementalSnapshotError, match="is not a pg_current_snapshot"):
        PgSnapshot.parse(text)


def test_parse_the_servers_snapshot(pg_conn: Any, pg_cluster: Any) -> None:
    """The server's own text, with a transaction in progress in ``xip`` (once a later
    transaction id completed: ``xmax`` is the last completed id plus one)."""
    database = pg_conn.run("SELECT current_database()")[0][0]
    other = pg8000.native.Connection(**{**pg_cluster.dsn(), "database": database})
    try:
        other.run("BEGIN")
        xid = int(other.run("SELECT CAST(pg_current_xact_id() AS text)")[0][0])
        pg_conn.run("SELECT pg_current_xact_id()")  # a later id completes: xmax past it
        snapshot = PgSnapshot.parse(pg_conn.run("SELECT CAST(pg_current_snapshot() AS text)")[0][0])
        other.run("COMMIT")
    finally:
        other.close()
    assert xid in snapshot.xip and snapshot.xmin <= xid < snapshot.xmax


class Window:
    """A slot, a decoder and a :class:`ReadOnlyChunkWindow` over table ``t``."""

    def __init__(self, conn: Any, properties: dict[str, str] | None = None) -> None:
        conn.run("CREATE TABLE t (id int PRIMARY KEY, v text)")
        conn.run("CREATE TABLE debezium_signal (id varchar(64) PRIMARY KEY, type varchar(32), "
                 "data varchar(2048))")
        conn.run("INSERT INTO t SELECT g * 10, 'v' || g FROM generate_series(1, 5) g")
        self.conn = conn
        self.cap = Capturer(conn, slot="s", publication="pub_s")
        self.cap.changes()
        catalog = fetch_catalog(conn)
        self.decoder = EventDecoder(EventConfig.from_properties({"topic.prefix": "x", **(properties or {})}),
                                    catalog=catalog, clock=lambda: CLOCK_NS)
        self.window = ReadOnlyChunkWindow(self.decoder,
                                          signal_data_collection="public.debezium_signal")
        self.table = catalog.table("public", "t")

    def snapshot(self) -> str:
        return str(self.conn.run("SELECT CAST(pg_current_snapshot() AS text)")[0][0])

    def read_chunk(self, between: str | None = None) -> None:
        """Low watermark, the chunk's SELECT, ``between`` (SQL), high watermark."""
        assert self.table is not None
        self.window.begin_chunk("c1", self.table)
        self.window.set_low_watermark(self.snapshot())
        rows = self.conn.run("SELECT CAST(id AS text), v FROM t ORDER BY id")
        self.window.chunk("c1", self.table, rows, chunk_key=["id"])
        if between is not None:
            self.conn.run(between)
        self.window.set_high_watermark(self.snapshot())

    def stream(self) -> list[str]:
        """The slot's changes through the window, as labels (``op:key``, ``commit:xid``
        when :meth:`ReadOnlyChunkWindow.commit` closed the window there)."""
        out: list[str] = []
        for row in self.cap.changes():
            for record in self.decoder.feed(row.data, row.lsn):
                out += labels(self.window.receive(record))
            if row.data[:1] == b"C":
                closed = self.window.commit(self.decoder.metrics.last_transaction_id, row.lsn)
                if closed is not None:
                    out += ["commit", *labels(closed)]
        return out


def labels(records: list[ChangeRecord]) -> list[str]:
    return [f"{r.op}:{r.key['id']}" for r in records
            if r.key is not None and r.value is not None and r.topic == "x.public.t"]


def test_a_change_committed_before_the_low_watermark_closes_the_window_at_once(
        pg_conn: Any) -> None:
    """A change whose transaction id is below the low watermark's ``xmin`` (committed
    before the chunk was read, streamed after) does not open the window: the chunk being
    in flight with its window not open, its rows go out *before* that change
    (``processMessage``: ``snapshotRunning() && isWindowClosed()``), the read of its key
    already showing it; nothing is removed."""
    w = Window(pg_conn)
    pg_conn.run("UPDATE t SET v = 'before' WHERE id = 20")
    w.read_chunk()
    assert w.stream() == ["r:10", "r:20", "r:30", "r:40", "r:50", "u:20"]
    assert w.window.pending_chunk is None


def test_a_change_after_the_low_watermark_opens_the_window_and_removes_its_row(
        pg_conn: Any) -> None:
    """A change made after the SELECT (its transaction id at least the low ``xmin``) opens
    the window and removes its key's row; its commit then closes the window
    (``isTransactionVisible``: it committed before the high watermark, so its id is at
    most the high ``xmin``), before the next transaction's change."""
    w = Window(pg_conn)
    w.read_chunk(between="UPDATE t SET v = 'after' WHERE id = 20")
    pg_conn.run("UPDATE t SET v = 'later' WHERE id = 30")
    assert w.stream() == ["u:20", "commit", "r:10", "r:30", "r:40", "r:50", "u:30"]


def test_a_transaction_after_both_watermarks_closes_the_window_before_its_change(
        pg_conn: Any) -> None:
    """``updateWindowState``: with the window open, a change whose transaction id is above
    both watermarks' ``xmax`` closes it, and the rows go out before that change (no
    commit is given to the window here, so only the change can close it)."""
    w = Window(pg_conn)
    w.read_chunk(between="UPDATE t SET v = 'after' WHERE id = 20")
    pg_conn.run("SELECT pg_current_xact_id()")  # an id used up: the next is above xmax
    pg_conn.run("UPDATE t SET v = 'later' WHERE id = 30")
    out: list[str] = []
    for row in w.cap.changes():
        for record in w.decoder.feed(row.data, row.lsn):
            out += labels(w.window.receive(record))
    assert out == ["u:20", "r:10", "r:30", "r:40", "r:50", "u:30"]


def test_a_commit_at_the_high_watermarks_xmax_closes_the_window(pg_conn: Any) -> None:
    """``maxInProgressTransactionCommitted``: the first transaction after the high
    watermark has the id of its ``xmax``; its commit closes the window (its change,
    streamed before the commit, did not: its id is not above ``xmax``)."""
    w = Window(pg_conn)
    w.read_chunk()
    high = w.window.high
    assert high is not None
    pg_conn.run("INSERT INTO t VALUES (60, 'new')")
    assert int(pg_conn.run("SELECT max(xmin::text::bigint) FROM t")[0][0]) == high.xmax
    assert w.stream() == ["c:60", "commit", "r:10", "r:20", "r:30", "r:40", "r:50"]
    assert w.window.commit_again(high.xmax) is None  # closed at xmax: no loop


def test_an_idle_poll_closes_the_window_with_a_visible_transaction(pg_conn: Any) -> None:
    """``readUntilNewTransactionChange`` at an idle poll: the last transaction seen is at
    most the high watermark's ``xmin`` (visible to the chunk's read): the window closes;
    without any transaction seen (``None``) it cannot."""
    w = Window(pg_conn)
    pg_conn.run("INSERT INTO debezium_signal VALUES ('x', 'log', '{\"message\": \"hi\"}')")
    seen = w.stream()
    assert seen == []
    last = w.decoder.metrics.last_transaction_id
    w.read_chunk()
    assert w.window.commit(None) is None
    closed = w.window.commit(last)
    assert closed is not None and labels(closed) == ["r:10", "r:20", "r:30", "r:40", "r:50"]
    source = closed[0].value["source"]
    assert (source["snapshot"], source["txId"], source["lsn"]) == ("incremental", None, None)
    assert w.window.commit(last) is None  # nothing in flight


@pytest.mark.parametrize(("xid", "near", "wide"), [
    (795, 790, 795),                                    # epoch 0: unchanged
    (5, (3 << 32) | 2, (3 << 32) | 5),                  # the watermark's epoch
    (0xFFFFFFF0, (3 << 32) | 5, (2 << 32) | 0xFFFFFFF0),  # just before the epoch turned
    (5, (2 << 32) | 0xFFFFFFF0, (3 << 32) | 5),          # just after it turned
    (0xFFFFFFF0, 5, 0xFFFFFFF0),                        # epoch 0: never below zero
])
def test_widen_xid(xid: int, near: int, wide: int) -> None:
    """pgoutput's 32-bit transaction ids compared with ``pg_current_snapshot()``'s 64-bit
    ones: the 32-bit id is taken in the epoch that puts it nearest to the watermark (a
    cluster past 2^32 transactions cannot be made in a test: the rule is checked alone)."""
    assert widen_xid(xid, near) == wide


def test_a_truncate_after_both_watermarks_closes_the_window_too(pg_conn: Any) -> None:
    """A truncate is a data change event to the connector (``processMessage`` runs for
    it when ``skipped.operations`` does not skip it): one in a transaction above both
    ``xmax`` closes the open window before it."""
    pg_conn.run("CREATE TABLE other (id int PRIMARY KEY)")
    w = Window(pg_conn, {"skipped.operations": "none"})
    w.read_chunk(between="UPDATE t SET v = 'after' WHERE id = 20")
    pg_conn.run("SELECT pg_current_xact_id()")
    pg_conn.run("TRUNCATE other")
    out: list[str] = []
    for row in w.cap.changes():
        for record in w.decoder.feed(row.data, row.lsn):
            out += [*labels(w.window.receive(record)), *(["t"] if record.op == "t" else [])]
    assert out == ["u:20", "r:10", "r:30", "r:40", "r:50", "t"]
