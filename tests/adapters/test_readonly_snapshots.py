"""Read-only incremental snapshots (``read.only=true``) on a real PostgreSQL: the watermarks
are ``pg_current_snapshot()`` values, the window is recognised in the stream by transaction
ids (:class:`ReadOnlyChunkWindow`), and nothing is written to the source.

The snapshotter's connection is a read-only session (``default_transaction_read_only``):
an ``INSERT`` of a watermark row would fail. The signals come from another channel (as
``signal.file`` gives them: :meth:`IncrementalSnapshotter.signal`). The stream is a real
slot; the harness calls :meth:`IncrementalSnapshotter.commit` at each Commit, as the
connector's ``processTransactionCommittedEvent``, and at each idle poll with the last
transaction's id (``processHeartbeat``).

Ports (``debezium/debezium`` at v3.6.1.Final; 3.6.3 has the same read-only sources):
``debezium-connector-postgres/src/test/java/io/debezium/connector/postgresql/
ReadOnlyIncrementalSnapshotIT.java``, which runs ``IncrementalSnapshotIT`` and
``debezium-embedded/.../AbstractIncrementalSnapshotTest.java`` with ``read.only=true`` and
a Kafka signal channel; each test names the methods it ports. The check is the
connector's ``consumeMixedWithIncrementalSnapshot``: the last event per key equals the
table's row, and every row no change touched is read exactly once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pg8000.native
import pytest

from pgcdc_events.adapters.incremental import IncrementalSettings, IncrementalSnapshotter
from pgcdc_events.events import EventConfig, EventDecoder
from pgcdc_events.events.records import ChangeRecord
from pgcdc_events.events.signals import parse_signal
from pgcdc_events.types.catalog import fetch_catalog
from support.capture import Capturer

SIGNAL_DDL = ("CREATE TABLE debezium_signal (id varchar(64) PRIMARY KEY, type varchar(32) "
              "NOT NULL, data varchar(2048) NULL)")
CLOCK_NS = 1_700_000_000_000_000_000


@pytest.fixture
def db_dsn(pg_cluster: Any, pg_conn: Any) -> dict[str, Any]:
    """How to connect to the test's database."""
    return {**pg_cluster.dsn(), "database": pg_conn.run("SELECT current_database()")[0][0]}


@pytest.fixture
def ro_conn(db_dsn: dict[str, Any]) -> Iterator[Any]:
    """A second connection to the test's database, in a read-only session: what the
    read-only snapshotter is given (any write it tried would fail)."""
    conn = pg8000.native.Connection(**db_dsn)
    conn.run("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
    try:
        yield conn
    finally:
        conn.close()


class Harness:
    """A slot, a decoder and a read-only snapshotter. :meth:`pump` feeds the slot's
    changes one message at a time, calls ``commit`` after each Commit, and, when the slot
    is drained, ``commit`` again as an idle poll (the last transaction's id) while that
    makes progress."""

    def __init__(self, conn: Any, ro: Any, *, chunk_size: int = 10,
                 properties: dict[str, str] | None = None, after: Harness | None = None,
                 state: dict[str, Any] | None = None) -> None:
        self.conn = conn
        self.cap = after.cap if after else Capturer(conn, slot="s", publication="pub_s")
        self.config = EventConfig.from_properties({"topic.prefix": "x", **(properties or {})})
        self.catalog = fetch_catalog(conn)
        self.decoder = after.decoder if after else EventDecoder(
            self.config, catalog=self.catalog, clock=lambda: CLOCK_NS)
        self.hooks: list[Callable[[int, str], None]] = []
        self.chunks = -1
        self.snap = IncrementalSnapshotter(
            ro, self.catalog, self.decoder,
            IncrementalSettings("public.debezium_signal", chunk_size, read_only=True),
            on_step=self._step, source_signals=False, state=state)
        self.out: list[ChangeRecord] = list(after.out) if after else []
        self.last_xid: int | None = after.last_xid if after else None
        self.idle_polls = True
        self.crash_after_reads: int | None = None
        self.saved: dict[str, Any] = {}

    def _step(self, step: str, chunk_id: str) -> None:
        if step == "after_open":
            self.chunks += 1
        for hook in self.hooks:
            hook(self.chunks, step)

    def at(self, chunk: int, step: str, sql: str) -> None:
        """Run ``sql`` (on the writable connection) at ``step`` of chunk ``chunk``."""
        self.hooks.append(lambda n, s: self.conn.run(sql) if (n, s) == (chunk, step) else None)

    def signal(self, signal_type: str, data: str | None = None, signal_id: str = "ad-hoc"
               ) -> None:
        self.snap.signal(parse_signal(signal_id, signal_type, data))

    def snapshot(self, *tables: str) -> None:
        names = ",".join(f'"{t}"' for t in tables)
        self.signal("execute-snapshot", f'{{"data-collections": [{names}], "type": "INCREMENTAL"}}')

    def pump(self) -> None:
        while True:
            rows = self.cap.changes()
            for row in rows:
                for record in self.decoder.feed(row.data, row.lsn):
                    self.out += self.snap.receive(record)
                if row.data[:1] == b"C":
                    self.last_xid = self.decoder.metrics.last_transaction_id
                    self.out += self.snap.commit(self.last_xid, row.lsn)
                self.saved = json.loads(json.dumps(self.snap.state()))  # the checkpoint
                if self.crash_after_reads is not None and \
                        len(self.reads("t")) >= self.crash_after_reads:
                    return  # the rest of this read of the slot is lost with the process
            if rows:
                continue
            if not self.idle_polls:
                return
            before = len(self.out), self.snap.context.chunk_end, self.snap.context.running
            self.out += self.snap.commit(self.last_xid)  # an idle poll
            if (len(self.out), self.snap.context.chunk_end, self.snap.context.running) == before:
                return

    def of(self, table: str) -> list[ChangeRecord]:
        return [r for r in self.out if r.topic == f"x.public.{table}"]

    def reads(self, table: str) -> list[tuple[Any, ...]]:
        return [tuple(r.key.values) for r in self.of(table) if r.op == "r" and r.key is not None]


def replay(records: list[ChangeRecord]) -> dict[Any, dict[str, Any]]:
    """The state a consumer keeps: the last event per key (deletes remove it)."""
    state: dict[Any, dict[str, Any]] = {}
    for record in records:
        if record.value is None or record.key is None:
            continue
        key = tuple(str(v) for v in record.key.values)
        if record.op == "d":
            state.pop(key, None)
        else:
            state[key] = {c: None if v is None else str(v)
                          for c, v in record.value["after"].as_dict().items()}
    return state


def table_state(conn: Any, table: str, key: list[str]) -> dict[Any, dict[str, Any]]:
    """``SELECT *`` with every value as text, by key."""
    columns = [c[0] for c in conn.run(
        "SELECT attname FROM pg_attribute WHERE attrelid = CAST(:t AS regclass) AND attnum > 0 "
        "AND NOT attisdropped ORDER BY attnum", t=table)]
    rows = conn.run(f"SELECT {', '.join(f'CAST({c} AS text)' for c in columns)} FROM {table}")
    out = {}
    for row in rows:
        as_text = dict(zip(columns, row, strict=True))
        out[tuple(as_text[k] for k in key)] = as_text
    return out


def check_invariants(h: Harness, table: str, initial: list[tuple[Any, ...]],
                     touched: set[tuple[Any, ...]] = frozenset(), key: tuple[str, ...] = ("id",)
                     ) -> None:
    """``consumeMixedWithIncrementalSnapshot``: replay gives ``SELECT *``; every row no
    change touched is read exactly once, and no row twice."""
    assert replay(h.of(table)) == table_state(h.conn, table, list(key))
    reads = h.reads(table)
    assert len(reads) == len(set(reads)), f"a row was read twice: {reads}"
    assert sorted(k for k in reads if k not in touched) == \
        sorted(k for k in initial if k not in touched)


def simple_table(conn: Any, rows: int = 25) -> list[tuple[Any, ...]]:
    conn.run("CREATE TABLE t (id int PRIMARY KEY, v text)")
    conn.run(SIGNAL_DDL)
    conn.run("INSERT INTO t SELECT g * 10, 'v' || g FROM generate_series(1, :n) g", n=rows)
    return [(g * 10,) for g in range(1, rows + 1)]


def inserts_on_signal_table(conn: Any) -> int:
    conn.run("SELECT pg_stat_force_next_flush()")
    return int(conn.run("SELECT n_tup_ins + n_tup_upd + n_tup_del FROM pg_stat_user_tables "
                        "WHERE relname = 'debezium_signal'")[0][0])


# -- tests ------------------------------------------------------------------------------------

def test_snapshot_only_reads_every_row_once_and_writes_nothing(pg_conn: Any, ro_conn: Any
                                                                ) -> None:
    """Ports ``snapshotOnly`` (``AbstractIncrementalSnapshotTest``, as
    ``ReadOnlyIncrementalSnapshotIT`` runs it): every row read once as ``r``, in key
    order, with the incremental source block; nothing written to the signalling table
    (its statistics and the stream), the snapshotter's session being read-only."""
    initial = simple_table(pg_conn)
    h = Harness(pg_conn, ro_conn)
    h.cap.changes()  # the slot exists from here
    written_before = inserts_on_signal_table(pg_conn)
    pg_conn.run("INSERT INTO t VALUES (1000, 'after the slot')")  # a transaction to close on
    h.snapshot("public.t")
    h.pump()
    check_invariants(h, "t", [*initial, (1000,)])
    assert h.reads("t") == sorted(h.reads("t"))
    assert h.chunks == 3 and not h.snap.context.running
    read = next(r for r in h.of("t") if r.op == "r")
    source = read.value["source"]
    assert (source["snapshot"], source["lsn"], source["txId"], source["xmin"]) == \
        ("incremental", None, None, None)
    assert not [r for r in h.out if r.topic.endswith("debezium_signal")]
    assert inserts_on_signal_table(pg_conn) == written_before
    assert pg_conn.run("SELECT count(*) FROM debezium_signal")[0][0] == 0


CHANGES = {
    "insert": ("INSERT INTO t VALUES (25, 'new')", (25,)),
    "update": ("UPDATE t SET v = 'changed' WHERE id = 20", (20,)),
    "delete": ("DELETE FROM t WHERE id = 30", (30,)),
}


@pytest.mark.parametrize("step", ["after_open", "before_close"])
@pytest.mark.parametrize("change", list(CHANGES))
def test_a_change_in_the_window(pg_conn: Any, ro_conn: Any, change: str, step: str) -> None:
    """A change right after the low watermark (before the chunk's SELECT) or right after
    the SELECT (before the high watermark): its event goes out as streamed, and the row
    of its key is not read after it (the change's transaction id opens the window, and
    its event removes the buffered row); replay gives the table, every other row is read
    once. Ports ``inserts``, ``updates``, ``deletes`` (``AbstractIncrementalSnapshotTest``
    as ``ReadOnlyIncrementalSnapshotIT`` runs them, with the change placed in the window)."""
    initial = simple_table(pg_conn)
    h = Harness(pg_conn, ro_conn)
    h.cap.changes()
    sql, key = CHANGES[change]
    h.at(0, step, sql)
    h.snapshot("public.t")
    h.pump()
    check_invariants(h, "t", initial, {key})
    events = [(r.op, tuple(r.key.values)) for r in h.of("t") if r.key is not None]
    streamed = [e for e in events if e[0] not in ("r", None)]
    assert streamed == [({"insert": "c", "update": "u", "delete": "d"}[change], key)]
    # no read of the key goes out after its change (the change is newer than the read)
    assert ("r", key) not in events[events.index(streamed[0]):]


def test_the_close_waits_for_a_transaction_on_a_quiet_database(pg_conn: Any, ro_conn: Any
                                                                ) -> None:
    """Nothing commits after the signal, and no transaction was seen yet: the chunk is
    read, but no window can close (the connector's ``readUntilNewTransactionChange`` has
    no transaction id to compare), so no ``r`` event goes out, however many idle polls.
    One transaction (what ``heartbeat.action.query`` runs) is enough: its commit is the
    high watermark's ``xmax`` and closes the first window; the next idle poll, with its id,
    closes the others one after the other while the watermarks stay the same."""
    initial = simple_table(pg_conn)
    pg_conn.run("CREATE TABLE heartbeat (id int PRIMARY KEY, ts timestamptz)")
    h = Harness(pg_conn, ro_conn)
    h.cap.changes()
    h.snapshot("public.t")
    for _ in range(3):
        h.pump()
    assert h.last_xid is None and h.reads("t") == [] and h.chunks == 0
    assert h.snap.waiting
    h.idle_polls = False
    pg_conn.run("INSERT INTO heartbeat VALUES (1, now())")  # the heartbeat action query
    h.pump()
    assert h.reads("t") == initial[:10] and h.chunks == 1
    h.out += h.snap.commit(h.last_xid)  # one idle poll: every other chunk, one by one
    assert h.reads("t") == initial and not h.snap.context.running
    h.idle_polls = True
    h.pump()
    check_invariants(h, "t", initial)
    assert not h.snap.context.running


def test_a_workload_during_the_snapshot(pg_conn: Any, ro_conn: Any, db_dsn: dict[str, Any]
                                        ) -> None:
    """Inserts, updates and deletes in every window, several per chunk, some in
    transactions still open across a watermark (their ids are in ``xip``): replay gives
    the table, every row no change touched is read exactly once. Ports
    ``snapshotWithWorkload`` style checks of ``AbstractIncrementalSnapshotTest``
    (``consumeMixedWithIncrementalSnapshot``) as ``ReadOnlyIncrementalSnapshotIT`` runs them."""
    initial = simple_table(pg_conn, rows=60)
    other = pg8000.native.Connection(**db_dsn)
    h = Harness(pg_conn, ro_conn, chunk_size=7)
    h.cap.changes()
    touched: set[tuple[Any, ...]] = set()
    state = {"open": False}

    def workload(n: int, step: str) -> None:
        base = n * 70
        if step == "after_open":
            pg_conn.run(f"UPDATE t SET v = 'u{n}' WHERE id = {base + 10}")
            touched.add((base + 10,))
            if state["open"]:
                other.run("COMMIT")  # a transaction begun in the previous window
                state["open"] = False
        elif step == "before_close":
            pg_conn.run(f"DELETE FROM t WHERE id = {base + 20}")
            pg_conn.run(f"INSERT INTO t VALUES ({base + 15}, 'i{n}')")
            touched.update({(base + 20,), (base + 15,)})
            other.run("BEGIN")
            other.run(f"UPDATE t SET v = 'x{n}' WHERE id = {base + 40}")
            touched.add((base + 40,))
            state["open"] = True

    h.hooks.append(workload)
    h.snapshot("public.t")
    h.pump()
    if state["open"]:
        other.run("COMMIT")
        h.pump()
    other.close()
    check_invariants(h, "t", initial, touched)


ROW_COUNT = 1000  # AbstractSnapshotTest.ROW_COUNT


def _a4_insert(first_id: int, count: int) -> str:
    """``populate4PkTable``'s rows: id = pk1*1000 + pk2*100 + pk3*10 + pk4, aa = id - 1."""
    return ("INSERT INTO a4 (pk1, pk2, pk3, pk4, aa) SELECT g / 1000, (g / 100) % 10, "
            f"(g / 10) % 10, g % 10, g - 1 FROM generate_series({first_id}, "
            f"{first_id + count - 1}) g")


def test_messages_are_processed_only_while_a_snapshot_runs(pg_conn: Any, ro_conn: Any) -> None:
    """Ports ``processingOfMessagesShouldHappenOnlyWhenSnapshotIsRunning`` (DBZ-9016,
    ``ReadOnlyIncrementalSnapshotIT``): a snapshot of the four-column-key table ``a4``
    (``ROW_COUNT`` rows), one transaction inserting ``ROW_COUNT`` more while it runs, then
    ``ROW_COUNT`` autocommitted inserts after it ended: every id maps to ``aa = id - 1``
    (the Java ``dbChanges`` map: the last event per key), and nothing fails once the
    snapshot is over (the connector logged "Skipping read chunk because snapshot is not
    running" 0 times; here: no chunk read after it)."""
    pg_conn.run(SIGNAL_DDL)
    pg_conn.run("CREATE TABLE a4 (pk1 integer, pk2 integer, pk3 integer, pk4 integer, "
                "aa integer, PRIMARY KEY(pk1, pk2, pk3, pk4))")
    pg_conn.run(_a4_insert(1, ROW_COUNT))
    h = Harness(pg_conn, ro_conn)
    h.cap.changes()
    h.snapshot("public.a4")
    h.pump()  # the IT's sleep: no transaction yet, the first window waits
    pg_conn.run("BEGIN")
    pg_conn.run(_a4_insert(ROW_COUNT + 1, ROW_COUNT))
    pg_conn.run("COMMIT")
    h.pump()
    assert not h.snap.context.running
    chunks = h.chunks

    def changes() -> dict[int, int]:
        out: dict[int, int] = {}
        for record in h.of("a4"):
            if record.value is None or record.key is None or record.op == "d":
                continue
            k = record.key
            out[k["pk1"] * 1000 + k["pk2"] * 100 + k["pk3"] * 10 + k["pk4"]] = \
                record.value["after"]["aa"]
        return out

    assert changes() == {i + 1: i for i in range(2 * ROW_COUNT)}
    for i in range(ROW_COUNT, 2 * ROW_COUNT):
        pg_conn.run(_a4_insert(i + ROW_COUNT + 1, 1))
    h.pump()
    assert changes() == {i + 1: i for i in range(3 * ROW_COUNT)}
    assert h.chunks == chunks
    reads = h.reads("a4")
    assert len(reads) == len(set(reads))


def test_resume_after_a_crash_mid_table(pg_conn: Any, ro_conn: Any) -> None:
    """Ports ``snapshotOnlyWithRestart`` and ``updatesWithRestart``
    (``AbstractIncrementalSnapshotTest``, as ``ReadOnlyIncrementalSnapshotIT`` runs them):
    the process stops after a window's ``r`` events went out, while the next chunk is in
    flight, with a change in it; a snapshotter made from the checkpoint (the
    connector's offset keys; no watermark is kept) starts again: it reads that chunk again
    after the last key sent, and every row no change touched is read exactly once over
    the two runs."""
    initial = simple_table(pg_conn, rows=45)
    h = Harness(pg_conn, ro_conn)
    h.cap.changes()
    h.at(2, "before_close", "UPDATE t SET v = 'changed' WHERE id = 250")
    h.at(3, "before_close", "UPDATE t SET v = 'changed' WHERE id = 350")  # in flight
    h.crash_after_reads = 20
    h.snapshot("public.t")
    pg_conn.run("UPDATE t SET v = 'a transaction' WHERE id = 10")
    h.pump()
    sent = h.reads("t")
    assert h.snap.waiting and len(sent) < len(initial)
    assert h.saved["incremental_snapshot_primary_key"] == [str(sent[-1][0])]
    again = Harness(pg_conn, ro_conn, after=h, state=h.saved)
    again.snap.start()
    again.pump()
    assert h.chunks == 3 and sent[-1] == (300,)  # the fourth chunk was in flight
    check_invariants(again, "t", initial, {(10,), (250,), (350,)})
    assert not again.snap.context.running
