"""The incremental snapshot adapter on a real PostgreSQL: signals in, chunks read with pg8000,
watermarks written, the slot's changes resolved by :class:`ChunkWindow`.

The stream is a real slot (``pg_logical_slot_get_binary_changes``) decoded by
:class:`EventDecoder`; every record goes through :meth:`IncrementalSnapshotter.receive`,
which reads the next chunk when the previous close watermark came back. Changes are run
at the snapshotter's own steps (``on_step``): right after the open watermark (before the
chunk is read) and right before the close watermark (after it).

Ports (``debezium/debezium`` at aad5519902, ``debezium-embedded/src/test/java/io/debezium/
pipeline/source/snapshot/incremental/AbstractIncrementalSnapshotTest.java`` unless said
otherwise; the PostgreSQL ITs are ``debezium-connector-postgres/src/test/java/io/debezium/
connector/postgresql/IncrementalSnapshotIT.java``), each test naming its methods. The
connector's check, ``consumeMixedWithIncrementalSnapshot``, is the invariant here: the last
event per key equals the table's row, and every row no change touched is read exactly once.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgcdc_events.adapters.errors import SlotError
from pgcdc_events.adapters.incremental import IncrementalSettings, IncrementalSnapshotter
from pgcdc_events.errors import ConfigurationError
from pgcdc_events.events import EventConfig, EventDecoder
from pgcdc_events.events.incremental import ReadOnlyChunkWindow
from pgcdc_events.events.records import ChangeRecord
from pgcdc_events.types.catalog import fetch_catalog
from support.capture import Capturer

SIGNAL_DDL = ("CREATE TABLE debezium_signal (id varchar(64) PRIMARY KEY, type varchar(32) "
              "NOT NULL, data varchar(2048) NULL)")
CLOCK_NS = 1_700_000_000_000_000_000


class Harness:
    """A slot, a decoder and a snapshotter; :meth:`pump` runs the stream through it until
    nothing is left (each close watermark makes the snapshotter read the next chunk)."""

    def __init__(self, conn: Any, *, chunk_size: int = 1024, strategy: str = "insert_insert",
                 properties: dict[str, str] | None = None, slot: str = "s",
                 cap: Capturer | None = None, decoder: EventDecoder | None = None,
                 state: dict[str, Any] | None = None) -> None:
        self.conn = conn
        self.cap = cap if cap is not None else Capturer(conn, slot=slot, publication=f"pub_{slot}")
        self.config = EventConfig.from_properties({"topic.prefix": "x", **(properties or {})})
        self.catalog = fetch_catalog(conn)
        self.decoder = decoder if decoder is not None else EventDecoder(
            self.config, catalog=self.catalog, clock=lambda: CLOCK_NS)
        self.hooks: list[Callable[[int, str], None]] = []
        self.chunks = -1
        self.snap = IncrementalSnapshotter.from_properties(
            conn, self.catalog, self.decoder,
            {"signal.data.collection": "public.debezium_signal",
             "incremental.snapshot.chunk.size": str(chunk_size),
             "incremental.snapshot.watermarking.strategy": strategy},
            state=state, on_step=self._step)
        self.out: list[ChangeRecord] = []
        self.saved: dict[str, Any] = {}

    def _step(self, step: str, chunk_id: str) -> None:
        if step == "after_open":
            self.chunks += 1
        for hook in self.hooks:
            hook(self.chunks, step)

    def at(self, chunk: int, step: str, sql: str) -> None:
        """Run ``sql`` at ``step`` of chunk number ``chunk`` (0 is the first)."""
        self.hooks.append(lambda n, s: self.conn.run(sql) if (n, s) == (chunk, step) else None)

    def signal(self, signal_id: str, signal_type: str, data: Any = None) -> None:
        text = data if data is None or isinstance(data, str) else json.dumps(data)
        self.conn.run("INSERT INTO debezium_signal VALUES (:i, :t, :d)", i=signal_id,
                      t=signal_type, d=text)

    def pump(self, limit: int | None = None) -> None:
        """Feed the slot's changes through the snapshotter until none are left (or until
        ``limit`` records went out)."""
        while True:
            rows = self.cap.changes()
            if not rows:
                return
            for record in self.decoder.feed_rows(rows):
                self.out += self.snap.receive(record)
                # what a capture checkpoints with the output it made durable
                self.saved = json.loads(json.dumps(self.snap.state()))
                if limit is not None and len(self.out) >= limit:
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
        key = tuple(record.key.values)
        if record.op == "d":
            state.pop(key, None)
        else:
            state[key] = record.value["after"].as_dict()
    return state


def table_state(harness: Harness, table: str) -> dict[Any, dict[str, Any]]:
    """``SELECT *`` as the decoder converts it (the catalog's types), keyed by the
    event key: the rows read back through the same path as events' ``after``."""
    records = harness.of(table)
    columns = [c[0] for c in harness.conn.run(
        "SELECT attname FROM pg_attribute WHERE attrelid = CAST(:t AS regclass) AND attnum > 0 "
        "AND NOT attisdropped ORDER BY attnum", t=table)]
    key_fields = [f.name for f in records[-1].key_schema.fields] \
        if records and records[-1].key_schema else ["id"]
    out: dict[Any, dict[str, Any]] = {}
    text_rows = harness.conn.run(
        f"SELECT {', '.join(f'CAST({c} AS text)' for c in columns)} FROM {table}")
    for row in text_rows:
        as_text = dict(zip(columns, row, strict=True))
        out[tuple(as_text[k] for k in key_fields)] = as_text
    return out


def text_replay(records: list[ChangeRecord]) -> dict[Any, dict[str, Any]]:
    """:func:`replay` with every value as text (compared with :func:`table_state`)."""
    def text(v: Any) -> str | None:
        return None if v is None else str(v)

    return {tuple(text(k) for k in key): {c: text(v) for c, v in row.items()}
            for key, row in replay(records).items()}


def labels(out: list[ChangeRecord]) -> list[list[str]]:
    """Each window's records as labels (``open``, ``close``, ``<op>:<key>``)."""
    windows: list[list[str]] = []
    current: list[str] | None = None
    for record in out:
        if record.value is None:
            continue
        if record.topic.endswith("debezium_signal"):
            row = record.value["after"] if record.op == "c" else record.value["before"]
            kind = row["type"] if record.op == "c" else "delete-open"
            if kind == "snapshot-window-open":
                current = ["open"]
            elif kind in ("snapshot-window-close", "delete-open") and current is not None:
                windows.append([*current, "close"])
                current = None
            continue
        if current is not None and record.key is not None:
            current.append(f"{record.op}:{','.join(str(v) for v in record.key.values)}")
    return windows


def check_invariants(harness: Harness, table: str, initial: list[tuple[Any, ...]],
                     touched: set[tuple[Any, ...]] | None = None) -> None:
    """``consumeMixedWithIncrementalSnapshot``: replay gives ``SELECT *``; every row no
    change touched is read exactly once (and no row is read twice)."""
    assert text_replay(harness.of(table)) == table_state(harness, table)
    reads = harness.reads(table)
    assert len(reads) == len(set(reads)), f"a row was read twice: {reads}"
    touched = touched or set()
    untouched = [k for k in initial if k not in touched]
    assert sorted(k for k in reads if k not in touched) == sorted(untouched)


def simple_table(conn: Any, rows: int = 6) -> list[tuple[Any, ...]]:
    conn.run("CREATE TABLE t (id int PRIMARY KEY, v text)")
    conn.run(SIGNAL_DDL)
    conn.run("INSERT INTO t SELECT g * 10, 'v' || g FROM generate_series(1, :n) g", n=rows)
    return [(g * 10,) for g in range(1, rows + 1)]


# -- windows with concurrent changes ------------------------------------------------------------

CHANGES = {
    "insert": ("INSERT INTO t VALUES (25, 'new')", ["c:25"]),
    "update": ("UPDATE t SET v = 'changed' WHERE id = 20", ["u:20"]),
    "delete": ("DELETE FROM t WHERE id = 30", ["d:30"]),
}


@pytest.mark.parametrize("strategy", ["insert_insert", "insert_delete"])
@pytest.mark.parametrize("step", ["after_open", "before_close"])
@pytest.mark.parametrize("change", list(CHANGES))
def test_a_change_in_the_window(pg_conn: Any, change: str, step: str, strategy: str) -> None:
    """A change right after the open watermark (before the chunk's SELECT) or right before
    the close watermark (after it): its event goes out as streamed, its key's row is not
    read, every other row is read once, replay gives the table. Ports ``inserts``,
    ``updates``, ``insertInsertWatermarkingStrategy`` and ``insertDeleteWatermarkingStrategy``
    (the watermark rows' events: two inserts, or an insert and the delete of it)."""
    initial = simple_table(pg_conn)
    h = Harness(pg_conn, strategy=strategy)
    sql, streamed = CHANGES[change]
    h.at(0, step, sql)
    h.signal("ad-hoc-1", "execute-snapshot", {"data-collections": ["public.t"]})
    h.pump()
    touched = {(int(s.split(":")[1]),) for s in streamed}
    reads = [f"r:{k[0]}" for k in initial if k not in touched]
    assert labels(h.out) == [["open", *streamed, *reads, "close"], ["open", "close"]]
    check_invariants(h, "t", initial, touched)
    signals = [r.op for r in h.out if r.topic == "x.public.debezium_signal"]
    assert signals == (["c"] * 5 if strategy == "insert_insert"
                       else ["c", "c", "d", None, "c", "d", None])
    assert not h.snap.context.running and h.snap.state() == {}


def test_changes_in_every_window_of_many_chunks(pg_conn: Any) -> None:
    """Chunks of 3 over 20 rows, an update, an insert and a delete in each window, at
    both steps (``updates`` with its batches of updates while the snapshot runs)."""
    initial = simple_table(pg_conn, 20)
    h = Harness(pg_conn, chunk_size=3)
    touched: set[tuple[Any, ...]] = set()

    def hook(n: int, step: str) -> None:
        key = (n * 3 + 1) * 10 if step == "after_open" else (n * 3 + 2) * 10
        pg_conn.run("UPDATE t SET v = v || 'u' WHERE id = :k", k=key)
        pg_conn.run("DELETE FROM t WHERE id = :k", k=key + 10)
        pg_conn.run("INSERT INTO t VALUES (:k, 'i') ON CONFLICT DO NOTHING", k=key + 5)
        touched.update({(key,), (key + 10,), (key + 5,)})

    h.hooks.append(lambda n, s: hook(n, s) if s in ("after_open", "before_close") else None)
    h.signal("ad-hoc-1", "execute-snapshot", {"data-collections": ["public.t"]})
    h.pump()
    check_invariants(h, "t", initial, touched)
    assert h.chunks >= 7


# -- key shapes -------------------------------------------------------------------------------


def test_composite_key_in_message_key_columns_order(pg_conn: Any) -> None:
    """PostgreSQL ``IncrementalSnapshotIT.incrementalSnapshotMustRespectMessageKeyColumnsOrder``:
    a four-column primary key chunked by ``message.key.columns`` (pk4, pk3, pk2, pk1), rows
    in that order, one chunk of 2 after another (row-value bounds)."""
    pg_conn.run("CREATE TABLE a4 (pk1 int, pk2 int, pk3 int, pk4 int, aa int, "
                "PRIMARY KEY (pk1, pk2, pk3, pk4))")
    pg_conn.run(SIGNAL_DDL)
    rows = [(1, 2, 3, 4), (4, 3, 2, 1), (2, 2, 2, 2), (3, 1, 1, 1), (1, 1, 1, 9)]
    for n, r in enumerate(rows):
        pg_conn.run("INSERT INTO a4 VALUES (:a, :b, :c, :d, :n)", a=r[0], b=r[1], c=r[2], d=r[3],
                    n=n)
    h = Harness(pg_conn, chunk_size=2,
                properties={"message.key.columns": "public.a4:pk4,pk3,pk2,pk1"})
    h.signal("ad-hoc-1", "execute-snapshot", {"data-collections": ["public.a4"]})
    h.pump()
    expected = sorted((r[3], r[2], r[1], r[0]) for r in rows)
    assert h.reads("a4") == expected
    check_invariants(h, "a4", expected)


def test_nullable_composite_key_one_row_a_chunk(pg_conn: Any) -> None:
    """``insertsWithoutPksAndNull``: a table without a primary key, keyed by
    ``message.key.columns`` over columns that hold NULLs, read one row a chunk so that
    every bound holds a NULL once (the ``OR`` form); all 9 rows, each once."""
    pg_conn.run("CREATE TABLE a42 (pk1 int, pk2 int, pk3 int, pk4 int, aa int)")
    pg_conn.run(SIGNAL_DDL)
    pg_conn.run("INSERT INTO a42 SELECT NULLIF(a, 10), NULLIF(b, 1), 0, 0, a + b "
                "FROM generate_series(10, 30, 10) a, generate_series(1, 3) b")
    h = Harness(pg_conn, chunk_size=1,
                properties={"message.key.columns": "public.a42:pk1,pk2,pk3,pk4"})
    h.signal("ad-hoc-1", "execute-snapshot", {"data-collections": ["public.a42"]})
    h.pump()
    values = sorted(r.value["after"]["aa"] for r in h.of("a42") if r.value is not None)
    assert values == sorted(a + b for a in (10, 20, 30) for b in (1, 2, 3))
    assert len(h.reads("a42")) == 9
    # PostgreSQL sorts NULL last: key order with NULLs after the values
    assert h.reads("a42")[:3] == [(20, 2, 0, 0), (20, 3, 0, 0), (20, None, 0, 0)]


def test_numeric_key_with_nan_and_infinities(pg_conn: Any) -> None:
    """PostgreSQL ``IncrementalSnapshotIT.insertsNumericPkWithSpecialValues``: 21 rows,
    chunks of 10; the key order is -Infinity, 1..18, Infinity, NaN, so the second chunk
    ends on Infinity (the third's lower bound) and NaN is the maximum key, bound into
    every chunk query. Every row read once, with its value."""
    pg_conn.run("CREATE TABLE anumeric (pk numeric PRIMARY KEY, aa int)")
    pg_conn.run(SIGNAL_DDL)
    pg_conn.run("INSERT INTO anumeric SELECT g, g FROM generate_series(1, 18) g")
    pg_conn.run("INSERT INTO anumeric VALUES ('-Infinity', 100), ('Infinity', 101), "
                "('NaN', 102)")
    h = Harness(pg_conn, chunk_size=10, properties={"decimal.handling.mode": "string"})
    h.signal("ad-hoc-1", "execute-snapshot", {"data-collections": ["public.anumeric"]})
    h.pump()
    got = {r.key["pk"]: r.value["after"]["aa"] for r in h.of("anumeric")
           if r.op == "r" and r.key is not None and r.value is not None}
    assert got == {**{str(i): i for i in range(1, 19)}, "NEGATIVE_INFINITY": 100,
                   "POSITIVE_INFINITY": 101, "NAN": 102}  # the IT's specialAwareKey names
    assert len(h.reads("anumeric")) == 21
    assert [len(w) - 2 for w in labels(h.out)] == [10, 10, 1, 0]


def test_enum_key(pg_conn: Any) -> None:
    """PostgreSQL ``IncrementalSnapshotIT.insertsEnumPk``: an enum primary key, read in the
    enum's order (its text bound back as the chunk's lower bound), chunks of 2."""
    pg_conn.run("CREATE TYPE enum_type AS ENUM ('UP', 'DOWN', 'LEFT', 'RIGHT', 'STORY')")
    pg_conn.run("CREATE TABLE enumpk (pk enum_type PRIMARY KEY, aa int)")
    pg_conn.run(SIGNAL_DDL)
    values = ["UP", "DOWN", "LEFT", "RIGHT", "STORY"]
    for n, v in enumerate(values):
        pg_conn.run("INSERT INTO enumpk VALUES (CAST(:v AS enum_type), :n)", v=v, n=n)
    h = Harness(pg_conn, chunk_size=2)
    h.signal("ad-hoc-1", "execute-snapshot", {"data-collections": ["public.enumpk"]})
    h.pump()
    assert h.reads("enumpk") == [(v,) for v in values]
    assert [r.value["after"]["aa"] for r in h.of("enumpk") if r.value is not None] == [0, 1, 2,
                                                                                         3, 4]


def test_surrogate_key_and_additional_condition(pg_conn: Any) -> None:
    """``snapshotWithAdditionalConditionWithSurrogateKey`` and ``snapshotWithSurrogateKey``:
    chunks ordered and bounded by ``aa``, only rows matching the filter (an ``OR`` inside
    it stays inside its parentheses), each once; the events are still keyed by ``id``."""
    pg_conn.run("CREATE TABLE s (id int PRIMARY KEY, aa int NOT NULL, color text)")
    pg_conn.run(SIGNAL_DDL)
    pg_conn.run("INSERT INTO s SELECT g, 100 - g, CASE WHEN g % 3 = 0 THEN 'blue' ELSE 'red' "
                "END FROM generate_series(1, 12) g")
    h = Harness(pg_conn, chunk_size=2)
    h.signal("ad-hoc-1", "execute-snapshot", {
        "data-collections": ["public.s"], "surrogate-key": "aa",
        "additional-conditions": [{"data-collection": "public.s",
                                   "filter": "color = 'blue' OR id = 1"}]})
    h.pump()
    assert h.reads("s") == [(12,), (9,), (6,), (3,), (1,)]  # by aa ascending


def test_partitioned_table(pg_conn: Any) -> None:
    """PostgreSQL ``IncrementalSnapshotIT.snapshotPartitionedTable``: the partitioned
    table and each partition can be snapshotted; the root reads every partition's rows."""
    pg_conn.run("CREATE TABLE part (pk int, aa int, PRIMARY KEY (pk, aa)) PARTITION BY "
                "RANGE (aa)")
    pg_conn.run("CREATE TABLE part1 PARTITION OF part FOR VALUES FROM (0) TO (500)")
    pg_conn.run("CREATE TABLE part2 PARTITION OF part FOR VALUES FROM (500) TO (1000)")
    pg_conn.run(SIGNAL_DDL)
    pg_conn.run("INSERT INTO part SELECT g + 1, g * 100 FROM generate_series(0, 9) g")
    h = Harness(pg_conn, chunk_size=3)
    for n, table in enumerate(["public.part", "public.part1", "public.part2"]):
        h.signal(f"ad-hoc-{n}", "execute-snapshot", {"data-collections": [table]})
    h.pump()
    assert h.reads("part") == [(g + 1, g * 100) for g in range(10)]
    assert h.reads("part1") == [(g + 1, g * 100) for g in range(5)]
    assert h.reads("part2") == [(g + 1, g * 100) for g in range(5, 10)]


def test_column_filters_project_and_keep_the_width(pg_conn: Any) -> None:
    """With ``column.exclude.list`` the chunk query lists the included columns; the rows
    reach the window in the table's width, the excluded column absent from the events."""
    pg_conn.run("CREATE TABLE t (id int PRIMARY KEY, secret text NOT NULL, v text)")
    pg_conn.run(SIGNAL_DDL)
    pg_conn.run("INSERT INTO t VALUES (1, 's', 'a'), (2, 's', 'b')")
    h = Harness(pg_conn, properties={"column.exclude.list": "public.t.secret"})
    h.signal("ad-hoc-1", "execute-snapshot", {"data-collections": ["public.t"]})
    h.pump()
    afters = [r.value["after"].as_dict() for r in h.of("t") if r.value is not None]
    assert afters == [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]


# -- signals ---------------------------------------------------------------------------------


def test_invalid_tables_and_tables_without_key_are_skipped(pg_conn: Any,
                                                           caplog: pytest.LogCaptureFixture
                                                           ) -> None:
    """``invalidTablesInTheList`` (names matching no table are skipped, the valid one
    read), ``shouldNotGetStuckOnInvalidSurrogateKey`` (a bad surrogate key skips the table
    and the next signal works), and a table without a key: each named in a warning."""
    initial = simple_table(pg_conn, 3)
    pg_conn.run("CREATE TABLE nokey (a int)")
    pg_conn.run("INSERT INTO nokey VALUES (1)")
    h = Harness(pg_conn)
    caplog.set_level(logging.WARNING, "pgcdc_events")
    h.signal("bad-key", "execute-snapshot", {"data-collections": ["public.t"],
                                             "surrogate-key": "totally_invalid_column_name"})
    h.signal("ad-hoc-1", "execute-snapshot",
             {"data-collections": ["invalid1", "public.t", "public.nokey", "invalid2"]})
    h.signal("broken", "execute-snapshot", "{not json")
    h.pump()
    assert h.reads("t") == initial
    check_invariants(h, "t", initial)
    text = caplog.text
    assert "totally_invalid_column_name" in text and "public.t" in text
    assert "skipped invalid1" in text and "skipped invalid2" in text
    assert "skipped public.nokey in the incremental snapshot: the table has no primary key" in text
    assert "'broken'" in text


def test_blocking_snapshot_is_refused_by_name(pg_conn: Any,
                                              caplog: pytest.LogCaptureFixture) -> None:
    simple_table(pg_conn, 2)
    h = Harness(pg_conn)
    h.signal("blk", "execute-snapshot", {"data-collections": ["public.t"], "type": "blocking"})
    h.pump()
    assert h.reads("t") == []
    assert "skipped execute-snapshot signal 'blk': blocking" in caplog.text


def test_pause_resume_and_stop(pg_conn: Any) -> None:
    """``pause-snapshot`` stops reading chunks after the current window; ``resume-snapshot``
    goes on from there. ``removeNotYetCapturedCollectionFromInProgressIncrementalSnapshot``:
    a ``stop-snapshot`` of a queued table removes it; ``stopCurrentIncrementalSnapshot
    WithoutCollections...``: a stop without collections ends the snapshot."""
    initial = simple_table(pg_conn, 6)
    pg_conn.run("CREATE TABLE b (id int PRIMARY KEY)")
    pg_conn.run("INSERT INTO b SELECT generate_series(1, 4)")
    pg_conn.run("CREATE TABLE c (id int PRIMARY KEY)")
    pg_conn.run("INSERT INTO c SELECT generate_series(1, 4)")
    h = Harness(pg_conn, chunk_size=2)
    h.at(0, "after_open", "INSERT INTO debezium_signal VALUES ('p', 'pause-snapshot', NULL)")
    h.signal("ad-hoc-1", "execute-snapshot",
             {"data-collections": ["public.t", "public.b", "public.c"]})
    h.pump()
    assert h.reads("t") == initial[:2] and h.snap.context.paused
    h.signal("stop-b", "stop-snapshot", {"data-collections": ["public.b"]})
    h.pump()
    assert [c.table for c in h.snap.context.collections] == ["public.t", "public.c"]
    h.at(3, "after_open", "INSERT INTO debezium_signal VALUES ('stop', 'stop-snapshot', NULL)")
    h.signal("r", "resume-snapshot")
    h.pump()
    assert h.reads("t") == initial
    assert h.reads("b") == []
    assert h.reads("c") == [(1,), (2,)]  # stopped in chunk 3, t's end and c's first
    assert not h.snap.context.running and h.snap.state() == {}


# -- crash and resume ---------------------------------------------------------------------------


def test_resume_after_a_crash_mid_table(pg_conn: Any) -> None:
    """``snapshotOnlyWithRestart`` / ``updatesWithRestart`` and
    ``whenSnapshotMultipleTablesAndConnectorRestartsThenOnlyNotAlreadyProcessedTableMustBeProcessed``:
    two tables; the snapshotter dies in the middle of the second (while it handles a close
    watermark: that window's ``r`` events are lost with it, and the next chunk was read);
    a new one made from the state saved with the last output goes on after the last key
    sent: the first table is not read again, no row is lost or read twice, and the
    replay is the table, with updates around the crash."""
    pg_conn.run("CREATE TABLE a (id int PRIMARY KEY, aa int)")
    pg_conn.run("INSERT INTO a SELECT g, g FROM generate_series(1, 5) g")
    initial = simple_table(pg_conn, 11)
    h = Harness(pg_conn, chunk_size=3)
    # chunks: 0 a 1-3, 1 a 4-5, 2 a done + t 10-30, 3 t 40-60, 4 t 70-90 (dies), ...
    h.at(4, "before_close", "UPDATE t SET v = 'x' WHERE id IN (70, 80)")

    def crash(n: int, step: str) -> None:
        if (n, step) == (4, "before_close"):
            raise _CrashError

    h.hooks.append(crash)
    h.signal("ad-hoc-1", "execute-snapshot", {"data-collections": ["public.a", "public.t"]})
    with pytest.raises(_CrashError):
        h.pump()
    state = h.saved
    assert json.loads(state["incremental_snapshot_collections"])[0][
        "incremental_snapshot_collections_id"] == "public.t"
    assert state["incremental_snapshot_primary_key"] == ["30"]
    assert state["incremental_snapshot_maximum_key"] == ["110"]
    assert h.reads("a") == [(k,) for k in range(1, 6)]
    assert h.reads("t") == [(10,), (20,), (30,)]
    # the restart: a new snapshotter from the saved state, on the same stream
    h2 = Harness(pg_conn, chunk_size=3, cap=h.cap, decoder=h.decoder, state=state)
    h2.out = list(h.out)
    h2.at(0, "after_open", "UPDATE t SET v = 'y' WHERE id = 90")
    h2.snap.start()
    h2.pump()
    assert h2.reads("a") == [(k,) for k in range(1, 6)]  # not read again
    check_invariants(h2, "t", initial, {(70,), (80,), (90,)})
    assert h2.snap.state() == {}


class _CrashError(Exception):
    pass


def test_settings_are_refused_by_name(pg_conn: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"signal\.data\.collection"):
        IncrementalSettings.from_properties({})
    with pytest.raises(ConfigurationError, match=r"incremental\.snapshot\.chunk\.size"):
        IncrementalSettings.from_properties({"signal.data.collection": "a.b",
                                             "incremental.snapshot.chunk.size": "0"})
    with pytest.raises(ConfigurationError, match="insert_update"):
        IncrementalSettings.from_properties({
            "signal.data.collection": "a.b",
            "incremental.snapshot.watermarking.strategy": "insert_update"})
    settings = IncrementalSettings.from_properties({"signal.data.collection": "a.b",
                                                    "read.only": "true"})
    assert settings == IncrementalSettings("a.b", 1024, "insert_insert", True)
    config = EventConfig.from_properties({"topic.prefix": "x"})
    decoder = EventDecoder(config, catalog=fetch_catalog(pg_conn))
    snapshotter = IncrementalSnapshotter(pg_conn, fetch_catalog(pg_conn), decoder, settings)
    assert isinstance(snapshotter.window, ReadOnlyChunkWindow)  # tests/adapters/test_readonly*


def test_read_rows_equal_the_streamed_rows(pg_conn: Any) -> None:
    """The ``r`` events of a chunk carry each row as the stream carries it: the values of
    the chunk query come back as the types' text output (pgoutput's form), so that an
    ``r`` event's ``after`` equals the ``after`` of the insert that wrote the row, for
    types whose Python form would print otherwise (bool, timestamptz, bytea, jsonb,
    numeric, arrays, intervals)."""
    pg_conn.run("CREATE TABLE w (id int PRIMARY KEY, b bool, ts timestamptz, raw bytea, "
                "doc jsonb, n numeric(10, 3), arr int[], iv interval, d date)")
    pg_conn.run(SIGNAL_DDL)
    h = Harness(pg_conn, chunk_size=2)
    pg_conn.run("INSERT INTO w VALUES (1, true, '2024-02-29 12:34:56.789+05:30', '\\x00ff', "
                "'{\"a\": [1, 2]}', 1.5, '{1,NULL,3}', '1 day 02:03:04', '2024-01-01'), "
                "(2, false, '1999-12-31 23:59:59+00', '', 'null', -0.001, '{}', '-1 mons', "
                "'infinity'), (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)")
    h.signal("ad-hoc-1", "execute-snapshot", {"data-collections": ["public.w"]})
    h.pump()
    inserted = {r.key["id"]: r.value["after"] for r in h.of("w")
                if r.op == "c" and r.key is not None and r.value is not None}
    read = {r.key["id"]: r.value["after"] for r in h.of("w")
            if r.op == "r" and r.key is not None and r.value is not None}
    assert sorted(read) == [1, 2, 3]
    assert read == inserted


def test_a_table_created_after_the_snapshotter(pg_conn: Any) -> None:
    """``snapshotNewTableWithoutCapturedSchema`` and PostgreSQL ``IncrementalSnapshotIT.
    snapshotNewTableWithoutTableIncludeList``: a table created while streaming is found
    (the catalog is read again) and snapshotted."""
    simple_table(pg_conn, 1)
    h = Harness(pg_conn)
    pg_conn.run("CREATE TABLE late (id int PRIMARY KEY, v text)")
    pg_conn.run("INSERT INTO late VALUES (1, 'a'), (2, 'b')")
    h.signal("ad-hoc-1", "execute-snapshot", {"data-collections": ["public.late"]})
    h.pump()
    assert h.reads("late") == [(1,), (2,)]


_EXAMPLES = itertools.count()
OPS = st.sampled_from(["insert", "update", "delete", "key change"])
KEYS = st.integers(0, 12)
CHANGE = st.tuples(st.integers(0, 4), st.sampled_from(["after_open", "before_close"]), OPS,
                   KEYS, KEYS)


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(initial=st.dictionaries(KEYS, st.text("ab", max_size=2), min_size=1, max_size=10),
       chunk_size=st.integers(1, 4), changes=st.lists(CHANGE, max_size=8),
       strategy=st.sampled_from(["insert_insert", "insert_delete"]))
def test_random_windows_keep_the_table(pg_conn: Any, initial: dict[int, str], chunk_size: int,
                                       changes: list[tuple[int, str, str, int, int]],
                                       strategy: str) -> None:
    """The adapter end to end, for random tables, chunk sizes and changes at random steps
    of random windows (``AbstractSnapshotTest.consumeMixedWithIncrementalSnapshot``'s
    check): replay gives ``SELECT *``, every row no change touched is read exactly once."""
    n = next(_EXAMPLES)
    pg_conn.run("DROP TABLE IF EXISTS t, debezium_signal")
    pg_conn.run("CREATE TABLE t (id int PRIMARY KEY, v text)")
    pg_conn.run(SIGNAL_DDL)
    for key, value in initial.items():
        pg_conn.run("INSERT INTO t VALUES (:k, :v)", k=key, v=value)
    h = Harness(pg_conn, chunk_size=chunk_size, strategy=strategy, slot=f"r{n}")
    touched: set[tuple[Any, ...]] = set()

    def hook(chunk: int, step: str) -> None:
        for c_chunk, c_step, op, key, other in changes:
            if (c_chunk, c_step) != (chunk, step):
                continue
            exists = bool(pg_conn.run("SELECT 1 FROM t WHERE id = :k", k=key))
            if op == "insert" or not exists:
                pg_conn.run("INSERT INTO t VALUES (:k, 'i') ON CONFLICT (id) DO UPDATE SET "
                            "v = 'x'", k=key)
            elif op == "update":
                pg_conn.run("UPDATE t SET v = v || 'u' WHERE id = :k", k=key)
            elif op == "delete":
                pg_conn.run("DELETE FROM t WHERE id = :k", k=key)
            else:
                pg_conn.run("DELETE FROM t WHERE id = :o", o=other)
                pg_conn.run("UPDATE t SET id = :o WHERE id = :k", o=other, k=key)
            touched.update({(key,), (other,)})

    h.hooks.append(hook)
    try:
        h.signal("ad-hoc-1", "execute-snapshot", {"data-collections": ["public.t"]})
        h.pump()
        assert not h.snap.context.running
        check_invariants(h, "t", [(k,) for k in sorted(initial)], touched)
    finally:
        h.cap.drop()


def test_a_failing_chunk_query_skips_its_table(pg_conn: Any,
                                               caplog: pytest.LogCaptureFixture) -> None:
    """An additional condition the server refuses (here a column that does not exist) is
    named in a warning with the server's message and its table skipped; the window it
    was in still closes and the next table is read."""
    initial = simple_table(pg_conn, 3)
    pg_conn.run("CREATE TABLE b (id int PRIMARY KEY)")
    pg_conn.run("INSERT INTO b VALUES (1)")
    h = Harness(pg_conn)
    h.signal("bad", "execute-snapshot", {
        "data-collections": ["public.b"],
        "additional-conditions": [{"data-collection": "public.b", "filter": "nope = 1"}]})
    h.pump()
    h.signal("good", "execute-snapshot", {
        "data-collections": ["public.b", "public.t"],
        "additional-conditions": [{"data-collection": "public.b", "filter": "nope = 1"}]})
    h.pump()
    assert h.reads("b") == []
    assert h.reads("t") == initial
    assert caplog.text.count("skipped public.b in the incremental snapshot: the chunk query "
                             "failed: column \"nope\" does not exist (SQLSTATE 42703)") == 2
    assert [len(w) for w in labels(h.out)] == [2, 5, 2]  # b alone; b then t; t's end
    assert h.snap.state() == {}


def test_a_refused_watermark_is_our_error(pg_conn: Any) -> None:
    """The signalling table refuses the watermark row (here a check constraint; in
    production a missing INSERT privilege): one of our errors, naming the table and the
    server's message, no traceback of the driver's."""
    simple_table(pg_conn, 1)
    pg_conn.run("ALTER TABLE debezium_signal ADD CHECK (type <> 'snapshot-window-open')")
    h = Harness(pg_conn)
    h.signal("ad-hoc-1", "execute-snapshot", {"data-collections": ["public.t"]})
    with pytest.raises(SlotError, match=r"write the incremental snapshot watermark into "
                       r"public\.debezium_signal: new row for relation \"debezium_signal\" "
                       r"violates check constraint") as error:
        h.pump()
    assert error.value.__cause__ is None and error.value.__suppress_context__


def test_an_additional_condition_is_one_statement_taken_as_written(
        pg_conn: Any, caplog: pytest.LogCaptureFixture) -> None:
    """The filter is SQL as the user wrote it: array slices and casts (``:`` that a
    driver could take for parameter markers) and quoted ``?`` work; a second statement
    appended to it is refused by the server (the query is one extended-protocol
    statement, even the first chunk's, which binds nothing), and the table is skipped."""
    pg_conn.run("CREATE TABLE t (id int PRIMARY KEY, arr int[], note text)")
    pg_conn.run(SIGNAL_DDL)
    pg_conn.run("INSERT INTO t VALUES (1, '{1,2,3}', 'a?b'), (2, '{5,6}', 'x'), "
                "(3, '{1,9}', 'a:b')")
    h = Harness(pg_conn, chunk_size=1)
    h.signal("ad-hoc-1", "execute-snapshot", {"data-collections": ["public.t"],
              "additional-conditions": [{"data-collection": "public.t", "filter":
                                         "arr[1:1] = '{1}'::int[] AND note <> ':x ?'"}]})
    h.pump()
    assert h.reads("t") == [(1,), (3,)]
    h.signal("evil", "execute-snapshot", {"data-collections": ["public.t"],
              "additional-conditions": [{"data-collection": "public.t", "filter":
                                         "true; DROP TABLE t"}]})
    h.pump()
    assert pg_conn.run("SELECT count(*) FROM t") == [[3]]
    assert "skipped public.t in the incremental snapshot: the chunk query failed" in caplog.text
    assert h.reads("t") == [(1,), (3,)]
