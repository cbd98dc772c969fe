"""The window of an incremental snapshot's chunks, on real streams.

A small driver here plays the capture adapter (not built yet): it writes the watermark
rows into a real signalling table, reads the chunks with :mod:`pgcdc_events.events.snapshot_sql`'s
queries, runs changes at fixed points of a window (right after the open watermark,
right before the close watermark), and feeds the records an :class:`EventDecoder`
makes of the slot's pgoutput bytes through :class:`ChunkWindow`. What comes out must
be what the connector emits: in each window the open watermark's event, the streamed
events, the rows no streamed event of their key removed as ``r`` events in key order,
the close watermark's event; and, the DBLog invariant the connector's
``AbstractIncrementalSnapshotTest`` asserts, the last event per key is the table's row
and every row no change touched is read exactly once.

Ports (``debezium/debezium`` refs/heads/3.6, commit 6f830f234f, unless said otherwise):
``AbstractIncrementalSnapshotTest`` (debezium-embedded) is database-driven; its logic that
needs no connector is here: ``snapshotWithDuplicateDataCollections`` and
``snapshotWithRegexDataCollections(NotExist)`` as :func:`expand_data_collections`,
``stopCurrentIncrementalSnapshotWithoutCollections...`` /
``removeNotYetCapturedCollectionFromInProgressIncrementalSnapshot`` /
``removeStartedCapturedCollectionFromInProgressIncrementalSnapshot`` as
``apply_stop``, ``insertInsertWatermarkingStrategy`` / ``insertDeleteWatermarkingStrategy``
and ``updates`` / ``inserts`` as windows on real streams. ``obsoleteSourceInfoIsExcludedFromRecord``
(PostgreSQL ``IncrementalSnapshotIT``) is the source-block check.
"""

from __future__ import annotations

import io
import itertools
import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgcdc_events.events import EventConfig, EventDecoder
from pgcdc_events.events.incremental import (
    ChunkWindow,
    IncrementalSnapshotContext,
    IncrementalSnapshotError,
    SnapshotCollection,
    expand_data_collections,
)
from pgcdc_events.events.records import ChangeRecord
from pgcdc_events.events.signals import AdditionalCondition, ExecuteSnapshot, StopSnapshot
from pgcdc_events.events.snapshot_sql import ChunkQuery, ChunkQueryBuilder, ChunkTable
from pgcdc_events.types.catalog import fetch_catalog
from support.capture import Capturer

_ESCAPES = {b"b": b"\b", b"f": b"\f", b"n": b"\n", b"r": b"\r", b"t": b"\t", b"v": b"\v"}
SIGNAL_DDL = ("CREATE TABLE debezium_signal (id varchar(64) PRIMARY KEY, type varchar(32) "
              "NOT NULL, data varchar(2048) NULL)")
CLOCK_NS = 1_700_000_000_000_000_000
Hook = Callable[[int, str], None]


def copy_rows(conn: Any, query: ChunkQuery) -> list[list[bytes | None]]:
    """The rows of ``query`` in COPY text format, its values inlined as literals."""
    sql = query.sql
    for value in query.params:
        text = value.decode() if isinstance(value, bytes) else str(value)
        sql = sql.replace("?", "'" + text.replace("'", "''") + "'", 1)
    buffer = io.BytesIO()
    conn.run(f"COPY ({sql}) TO STDOUT", stream=buffer)
    return [[None if f == b"\\N" else re.sub(rb"\\(.)", lambda m: _ESCAPES.get(m.group(1),
                                                                                m.group(1)), f)
             for f in line.split(b"\t")] for line in buffer.getvalue().splitlines()]


class Driver:
    """What the capture adapter will do, reduced to a test: signals in, chunks read,
    watermarks written, the stream decoded and passed through the window."""

    def __init__(self, conn: Any, *, strategy: str = "insert_insert", chunk_size: int = 1024,
                 slot: str = "s", properties: dict[str, str] | None = None,
                 late: bool = False) -> None:
        self.conn = conn
        #: Hand the chunk's rows to the window only after the stream up to the moment
        #: they were read has gone through it (an adapter that reads asynchronously).
        self.late = late
        self.strategy = strategy
        self.cap = Capturer(conn, slot=slot, publication=f"pub_{slot}")
        self.config = EventConfig.from_properties({"topic.prefix": "x", **(properties or {})})
        self.catalog = fetch_catalog(conn)
        self.decoder = EventDecoder(self.config, catalog=self.catalog, clock=lambda: CLOCK_NS)
        self.window = ChunkWindow(self.decoder, signal_data_collection="public.debezium_signal",
                                  watermarking_strategy=strategy)
        self.builder = ChunkQueryBuilder(chunk_size=chunk_size)
        self.out: list[ChangeRecord] = []
        self.chunks = 0

    def pump(self) -> None:
        for record in self.decoder.feed_rows(self.cap.changes()):
            self.out += self.window.receive(record)

    def signal(self, signal_id: str, signal_type: str, data: str | None) -> None:
        self.conn.run("INSERT INTO debezium_signal VALUES (:i, :t, :d)", i=signal_id,
                      t=signal_type, d=data)

    def snapshot(self, data: dict[str, Any], hook: Hook | None = None) -> None:
        """Send an execute-snapshot signal and run the snapshot to its end."""
        self.signal("ad-hoc-1", "execute-snapshot", json.dumps(data))
        self.pump()
        context = self.window.context
        for signal in self.window.signals():
            if isinstance(signal, ExecuteSnapshot):
                known = [f"{t.namespace}.{t.name}" for t in self.catalog.tables]
                context.add(signal.id, expand_data_collections(signal.data_collections, known),
                            signal.additional_conditions, signal.surrogate_key)
        while context.running:
            self.read_chunk(hook)

    def read_chunk(self, hook: Hook | None) -> None:
        context = self.window.context
        current = context.current
        assert current is not None
        schema, name = current.table.split(".")
        catalog_table = self.catalog.table(schema, name)
        assert catalog_table is not None
        table = ChunkTable.from_catalog(catalog_table, self.config)
        keys = [c.name for c in self.builder.key_columns(table, current.surrogate_key)]
        positions = [[c.name for c in table.columns].index(k) for k in keys]
        n, self.chunks = self.chunks, self.chunks + 1
        chunk_id = f"chunk{n:04d}"
        self.window.begin_chunk(chunk_id, catalog_table)
        self.signal(f"{chunk_id}-open", "snapshot-window-open", '{"openWindowTimestamp": "t"}')
        if hook is not None:
            hook(n, "after_open")
        rows: list[list[bytes | None]] = []
        if context.maximum_key is None:
            top = copy_rows(self.conn, self.builder.max_key_query(
                table, additional_condition=current.condition,
                surrogate_key=current.surrogate_key))
            context.set_maximum_key([top[0][p] for p in positions] if top else None)
        if context.maximum_key is not None:
            rows = copy_rows(self.conn, self.builder.chunk_query(
                table, chunk_end=context.chunk_end, maximum_key=context.maximum_key,
                additional_condition=current.condition, surrogate_key=current.surrogate_key))
        if self.late:
            self.pump()
        self.window.chunk(chunk_id, catalog_table, rows, chunk_key=keys)
        if not rows:
            context.next_collection()  # the table is done (or empty)
        if hook is not None:
            hook(n, "before_close")
        if self.strategy == "insert_insert":
            self.signal(f"{chunk_id}-close", "snapshot-window-close",
                        '{"openWindowTimestamp": "t", "closeWindowTimestamp": "t"}')
        else:
            self.conn.run("DELETE FROM debezium_signal WHERE id = :i", i=f"{chunk_id}-open")
        self.pump()

    def of(self, table: str) -> list[ChangeRecord]:
        return [r for r in self.out if r.topic == f"x.public.{table}"]


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


def table_state(conn: Any, table: str, key: str = "id") -> dict[Any, dict[str, Any]]:
    columns = [r[0] for r in conn.run(
        "SELECT attname FROM pg_attribute WHERE attrelid = :t::regclass AND attnum > 0 "
        "AND NOT attisdropped ORDER BY attnum", t=table)]
    rows = conn.run(f"SELECT * FROM {table}")
    return {(dict(zip(columns, r, strict=True))[key],): dict(zip(columns, r, strict=True))
            for r in rows}


def windows(out: list[ChangeRecord]) -> list[list[str]]:
    """The records of each window as short labels: ``open``, ``close``, ``r:<id>``,
    ``<op>:<id>`` for streamed changes, between the open and close watermarks."""
    labels: list[list[str]] = []
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
                current.append("close")
                labels.append(current)
                current = None
            continue
        if current is not None:
            key = ",".join(str(v) for v in record.key.values) if record.key else None
            current.append(f"{record.op}:{key}")
    return labels


# -- deterministic windows ---------------------------------------------------------------------

CHANGES = {
    "insert": "INSERT INTO t VALUES (25, 'new')",
    "update": "UPDATE t SET v = 'changed' WHERE id = 20",
    "delete": "DELETE FROM t WHERE id = 30",
    "key change": "UPDATE t SET id = 45 WHERE id = 40",
}
# the streamed events of each change, and the keys whose buffered row it removes
STREAMED = {"insert": ["c:25"], "update": ["u:20"], "delete": ["d:30"],
            "key change": ["d:40", "c:45"]}


@pytest.mark.parametrize("strategy", ["insert_insert", "insert_delete"])
@pytest.mark.parametrize("when", ["after_open", "before_close"])
@pytest.mark.parametrize("change", list(CHANGES))
def test_a_change_inside_the_window(pg_conn: Any, change: str, when: str, strategy: str) -> None:
    """One change right after the open watermark (before the chunk is read) or right
    before the close watermark (after it): the streamed event goes out as it came, the
    row of its key is not read, every other row is read once, and the consumer ends with
    the table. Ports the logic of ``AbstractIncrementalSnapshotTest.inserts`` / ``updates``
    and of ``insertInsertWatermarkingStrategy`` / ``insertDeleteWatermarkingStrategy``."""
    pg_conn.run("CREATE TABLE t (id int PRIMARY KEY, v text)")
    pg_conn.run(SIGNAL_DDL)
    pg_conn.run("INSERT INTO t SELECT g * 10, 'v' || g FROM generate_series(1, 6) g")
    driver = Driver(pg_conn, strategy=strategy)

    def hook(chunk: int, at: str) -> None:
        if chunk == 0 and at == when:
            pg_conn.run(CHANGES[change])

    driver.snapshot({"data-collections": ["public.t"]}, hook)
    touched = {int(label.split(":")[1]) for label in STREAMED[change]}
    reads = [f"r:{k}" for k in (10, 20, 30, 40, 50, 60) if k not in touched]
    assert windows(driver.out) == [["open", *STREAMED[change], *reads, "close"],
                                   ["open", "close"]]  # the empty chunk that ends the table
    assert replay(driver.of("t")) == table_state(pg_conn, "t")
    # the insert_delete close is a delete of the open row (and its tombstone)
    closes = [r for r in driver.out if r.topic == "x.public.debezium_signal"]
    assert [r.op for r in closes] == (["c", "c", "c", "c", "c"] if strategy == "insert_insert"
                                      else ["c", "c", "d", None, "c", "d", None])


@pytest.mark.parametrize("change", ["insert", "update", "key change"])
def test_rows_given_after_the_windows_changes_streamed(pg_conn: Any, change: str) -> None:
    """The rows of a chunk may reach the window after changes of the window went through
    it: those changes still remove their keys' rows."""
    pg_conn.run("CREATE TABLE t (id int PRIMARY KEY, v text)")
    pg_conn.run(SIGNAL_DDL)
    pg_conn.run("INSERT INTO t SELECT g * 10, 'v' || g FROM generate_series(1, 6) g")
    driver = Driver(pg_conn, late=True)
    driver.snapshot({"data-collections": ["public.t"]},
                    lambda n, at: pg_conn.run(CHANGES[change])
                    if (n, at) == (0, "after_open") else None)
    touched = {int(label.split(":")[1]) for label in STREAMED[change]}
    reads = [f"r:{k}" for k in (10, 20, 30, 40, 50, 60) if k not in touched]
    assert windows(driver.out) == [["open", *STREAMED[change], *reads, "close"],
                                   ["open", "close"]]
    assert replay(driver.of("t")) == table_state(pg_conn, "t")


def test_read_events_carry_the_connectors_source_block(pg_conn: Any) -> None:
    """``r`` events: ``snapshot="incremental"``; ``lsn``, ``txId``, ``xmin``, ``origin``,
    ``origin_lsn`` null (PostgreSQL ``IncrementalSnapshotIT.obsoleteSourceInfoIsExcludedFromRecord``,
    ``PostgresSourceInfoStructMaker.struct``); ``sequence`` and the record's position those
    of the close watermark; the envelope's and value's schemas those of streamed events."""
    pg_conn.run("CREATE TABLE t (id int PRIMARY KEY, v text)")
    pg_conn.run(SIGNAL_DDL)
    pg_conn.run("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
    driver = Driver(pg_conn)
    driver.snapshot({"data-collections": ["public.t"]},
                    lambda n, at: pg_conn.run("INSERT INTO t VALUES (3, 'c')")
                    if (n, at) == (0, "after_open") else None)
    reads = [r for r in driver.out if r.op == "r"]
    streamed = [r for r in driver.out if r.topic == "x.public.t" and r.op == "c"]
    close = driver.out[driver.out.index(reads[-1]) + 1]
    assert close.topic == "x.public.debezium_signal"
    assert close.value is not None and close.value["after"]["id"] == "chunk0000-close"
    assert [r.key["id"] for r in reads if r.key is not None] == [1, 2]
    for record in reads:
        assert record.value is not None
        source = record.value["source"]
        assert source["snapshot"] == "incremental"
        assert [source[f] for f in ("lsn", "txId", "xmin", "origin", "origin_lsn")] == [None] * 5
        assert source["sequence"] == close.value["source"]["sequence"]
        assert (source["schema"], source["table"]) == ("public", "t")
        assert source["db"] == close.value["source"]["db"] == driver.decoder.config.database
        assert record.lsn == close.lsn
        assert record.value["before"] is None
        assert record.value_schema == streamed[0].value_schema
        assert record.key_schema == streamed[0].key_schema
    assert reads[0].value is not None and reads[0].value["after"].as_dict() == {"id": 1, "v": "a"}
    assert json.loads(reads[0].value["source"]["sequence"])[1] == str(close.lsn)


def test_multiple_chunks_resume_after_the_last_key_and_respect_filters(pg_conn: Any) -> None:
    """Chunks of 2 over a composite key ordered by ``message.key.columns`` (pk2, pk1), an
    additional condition, and the checkpoint after each window. Ports the logic of
    ``AbstractIncrementalSnapshotTest.snapshotWithAdditionalCondition`` (only matching
    rows) and PostgreSQL ``IncrementalSnapshotIT.incrementalSnapshotMustRespectMessageKeyColumnsOrder``."""
    pg_conn.run("CREATE TABLE a4 (pk1 int, pk2 int, aa int, PRIMARY KEY (pk1, pk2))")
    pg_conn.run(SIGNAL_DDL)
    pg_conn.run("INSERT INTO a4 VALUES (1, 3, 0), (2, 1, 1), (3, 2, 2), (4, 4, 12345678), "
                "(5, 5, 12345678), (6, 6, 12345678)")
    driver = Driver(pg_conn, chunk_size=2,
                    properties={"message.key.columns": "public.a4:pk2,pk1"})
    checkpoints: list[dict[str, Any]] = []
    driver.snapshot({"data-collections": ["public.a4"], "additional-conditions": [
        {"data-collection": "public.a4", "filter": "aa = 12345678 OR aa = 1"}]},
        lambda n, at: checkpoints.append(driver.window.context.to_offset())
        if at == "after_open" else None)
    reads = [r.value["after"]["aa"] for r in driver.out if r.op == "r" and r.value is not None]
    assert reads == [1, 12345678, 12345678, 12345678]  # in (pk2, pk1) order, filtered
    assert [w.count("open") for w in windows(driver.out)] == [1, 1, 1]
    collections = json.dumps([{"incremental_snapshot_collections_id": "public.a4",
                               "incremental_snapshot_collections_additional_condition":
                                   "aa = 12345678 OR aa = 1",
                               "incremental_snapshot_collections_surrogate_key": None}],
                             separators=(",", ":"))
    assert checkpoints == [
        {"incremental_snapshot_primary_key": None, "incremental_snapshot_maximum_key": None,
         "incremental_snapshot_collections": collections,
         "incremental_snapshot_correlation_id": "ad-hoc-1"},
        {"incremental_snapshot_primary_key": ["4", "4"],
         "incremental_snapshot_maximum_key": ["6", "6"],
         "incremental_snapshot_collections": collections,
         "incremental_snapshot_correlation_id": "ad-hoc-1"},
        {"incremental_snapshot_primary_key": ["6", "6"],
         "incremental_snapshot_maximum_key": ["6", "6"],
         "incremental_snapshot_collections": collections,
         "incremental_snapshot_correlation_id": "ad-hoc-1"},
    ]
    assert driver.window.context.to_offset() == {}
    restored = IncrementalSnapshotContext.from_offset(checkpoints[1])
    assert restored.chunk_end == ("4", "4") and restored.maximum_key == ("6", "6")
    assert restored.current == SnapshotCollection("public.a4", "aa = 12345678 OR aa = 1")


def test_surrogate_key_orders_the_chunks(pg_conn: Any) -> None:
    """``AbstractIncrementalSnapshotTest.snapshotWithSurrogateKey``: chunks by ``aa``; the
    window is still keyed by the message key, so a streamed change of that row removes it,
    and a row whose surrogate key moves past the chunk is read again in a later chunk
    (with its newer value: the connector does the same)."""
    pg_conn.run("CREATE TABLE s (id int PRIMARY KEY, aa int NOT NULL)")
    pg_conn.run(SIGNAL_DDL)
    pg_conn.run("INSERT INTO s VALUES (1, 30), (2, 10), (3, 20), (4, 40)")
    driver = Driver(pg_conn, chunk_size=3)
    driver.snapshot({"data-collections": ["public.s"], "surrogate-key": "aa"},
                    lambda n, at: pg_conn.run("UPDATE s SET aa = 35 WHERE id = 3")
                    if (n, at) == (0, "before_close") else None)
    assert windows(driver.out) == [["open", "u:3", "r:2", "r:1", "close"],
                                   ["open", "r:3", "r:4", "close"], ["open", "close"]]
    assert replay(driver.of("s")) == table_state(pg_conn, "s")


def test_watermarks_of_other_chunks_are_ignored_and_signals_queued(pg_conn: Any) -> None:
    """``AbstractIncrementalSnapshotContext.notExpectedChunk``: a watermark whose id is not
    the current chunk's (a replay after a restart) neither opens nor closes the window;
    other signals are queued for the embedder, warnings included."""
    pg_conn.run("CREATE TABLE t (id int PRIMARY KEY, v text)")
    pg_conn.run(SIGNAL_DDL)
    pg_conn.run("INSERT INTO t VALUES (1, 'a')")
    driver = Driver(pg_conn)
    driver.signal("old-open", "snapshot-window-open", None)
    driver.signal("old-close", "snapshot-window-close", None)
    driver.signal("p1", "pause-snapshot", None)
    driver.signal("bad", "execute-snapshot", '{"data-collections": []}')
    driver.pump()
    assert [r.op for r in driver.out] == ["c", "c", "c", "c"]
    signals = driver.window.signals()
    assert [type(s).__name__ for s in signals] == ["PauseSnapshot", "SignalWarning"]
    assert driver.window.signals() == []
    assert not driver.window.context.window_opened


def test_a_close_watermark_without_its_rows_is_an_error(pg_conn: Any) -> None:
    pg_conn.run("CREATE TABLE t (id int PRIMARY KEY, v text)")
    pg_conn.run(SIGNAL_DDL)
    driver = Driver(pg_conn)
    catalog_table = driver.catalog.table("public", "t")
    assert catalog_table is not None
    driver.window.begin_chunk("c1", catalog_table)
    driver.signal("c1-open", "snapshot-window-open", None)
    driver.signal("c1-close", "snapshot-window-close", None)
    with pytest.raises(IncrementalSnapshotError, match=r"'c1-close' came back at LSN .* the rows "
                       r"of chunk 'c1' were never given"):
        driver.pump()


# -- the property: the DBLog invariant ----------------------------------------------------------

_EXAMPLES = itertools.count()
OPS = st.sampled_from(["insert", "update", "delete", "key change"])
KEYS = st.integers(0, 12)  # few keys, so that changes hit rows of the chunk being read
CHANGE = st.tuples(st.integers(0, 3), st.sampled_from(["after_open", "before_close"]), OPS,
                   KEYS, KEYS)


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(initial=st.dictionaries(KEYS, st.text("abc", max_size=3), min_size=1, max_size=10),
       chunk_size=st.integers(1, 4), changes=st.lists(CHANGE, max_size=8),
       strategy=st.sampled_from(["insert_insert", "insert_delete"]))
def test_windows_keep_the_table(pg_conn: Any, initial: dict[int, str], chunk_size: int,
                                changes: list[tuple[int, str, str, int, int]],
                                strategy: str) -> None:
    """For random table contents, chunk sizes and changes at random points of random
    windows: replaying what comes out (last event per key) gives the table as it is at
    the end, and every row no change touched is read exactly once, as an ``r`` event of
    its value (``AbstractSnapshotTest.consumeMixedWithIncrementalSnapshot``'s check)."""
    n = next(_EXAMPLES)
    pg_conn.run("DROP TABLE IF EXISTS t, debezium_signal")
    pg_conn.run("CREATE TABLE t (id int PRIMARY KEY, v text)")
    pg_conn.run(SIGNAL_DDL)
    for key, value in initial.items():
        pg_conn.run("INSERT INTO t VALUES (:k, :v)", k=key, v=value)
    driver = Driver(pg_conn, strategy=strategy, chunk_size=chunk_size, slot=f"p{n}")
    touched: set[int] = set()

    def hook(chunk: int, at: str) -> None:
        for c_chunk, c_at, op, key, other in changes:
            if (c_chunk, c_at) != (chunk, at):
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
                touched.add(other)
                pg_conn.run("UPDATE t SET id = :o WHERE id = :k", o=other, k=key)
            touched.update((key, other))

    try:
        driver.snapshot({"data-collections": ["public.t"]}, hook)
        assert replay(driver.of("t")) == table_state(pg_conn, "t")
        reads = [r.key["id"] for r in driver.of("t") if r.op == "r" and r.key is not None]
        untouched = sorted(k for k in initial if k not in touched)
        assert [k for k in reads if k not in touched] == untouched
        for window in windows(driver.out):
            labels = window[1:-1]
            first_read = next((i for i, x in enumerate(labels) if x.startswith("r:")),
                              len(labels))
            assert not any(x.startswith("r:") is False for x in labels[first_read:])
    finally:
        driver.cap.drop()


# -- the context: pure logic ------------------------------------------------------------------


def test_expand_data_collections() -> None:
    """``AbstractIncrementalSnapshotChangeEventSource.expandAndDedupeDataCollectionIds``:
    ``AbstractIncrementalSnapshotTest.snapshotWithRegexDataCollections`` (``.*`` matches
    every table), ``snapshotWithDuplicateDataCollections`` (DBZ-6945: ``[s1.a, s1.a]`` is
    one table), ``snapshotWithRegexDataCollectionsNotExist`` and ``invalidTablesInTheList``
    (a name matching nothing is kept, to be skipped later)."""
    known = ["s1.a", "s1.b", "s1.a42"]
    assert expand_data_collections([".*"], known) == known
    assert expand_data_collections(["s1.a", "s1.a"], known) == ["s1.a"]
    assert expand_data_collections([".*notExist"], known) == [".*notExist"]
    assert expand_data_collections(["invalid1", "s1.a", "invalid2"], known) == [
        "invalid1", "s1.a", "invalid2"]
    assert expand_data_collections(["s1\\.a.*", "s1.b"], known) == ["s1.a", "s1.a42", "s1.b"]


def test_context_queue_conditions_and_stop() -> None:
    """``AbstractIncrementalSnapshotContext`` and ``checkAndProcessStopFlag``:
    ``removeNotYetCapturedCollectionFromInProgressIncrementalSnapshot`` (a queued table
    goes at once), ``removeStartedCapturedCollectionFromInProgressIncrementalSnapshot``
    (the current one moves the snapshot on), ``stopCurrentIncrementalSnapshotWithoutCollections``
    (no collections: everything, and the correlation id is unset)."""
    context = IncrementalSnapshotContext()
    context.add("sig", ["s1.a", "s1.b", "s1.c"],
                [AdditionalCondition("S1.B", "x = 1"), AdditionalCondition(".*", "y = 2")], "sk")
    assert [c.additional_condition for c in context.collections] == ["y = 2", "x = 1", "y = 2"]
    assert context.current == SnapshotCollection("s1.a", "y = 2", "sk")
    context.set_maximum_key(["9"])
    context.next_chunk_position(["3"])
    context.request_stop(["s1.b"])
    assert context.apply_stop(["s1.a", "s1.b", "s1.c"]) == ["s1.b"]
    assert [c.table for c in context.collections] == ["s1.a", "s1.c"]
    assert context.chunk_end == ("3",)
    context.request_stop(["s1.a"])
    assert context.apply_stop(["s1.a", "s1.b", "s1.c"]) == ["s1.a"]
    assert context.current is not None and context.current.table == "s1.c"
    assert context.chunk_end is None and context.maximum_key is None
    stop = StopSnapshot("stop", None)
    context.request_stop(stop.data_collections)
    assert context.apply_stop(["s1.a", "s1.b", "s1.c"]) == ["s1.c"]
    assert not context.running and context.correlation_id is None
    context.request_stop(None)  # nothing runs: ignored
    assert context.stop_requests == []


def test_context_windows_and_revert() -> None:
    context = IncrementalSnapshotContext()
    assert not context.open_window("x-open")  # no chunk yet
    context.add("sig", ["s.t"])
    context.start_chunk("abc")
    assert not context.open_window("zzz-open")
    assert context.open_window("abc-open") and context.window_opened
    context.next_chunk_position(["5"])
    context.send_event(["2"])
    context.revert_chunk()
    assert context.chunk_end == ("2",) and not context.window_opened


def test_loads_offsets_written_by_debezium_3_6() -> None:
    """debezium/debezium@aad5519902 ``debezium-connector-common/src/test/java/io/debezium/
    pipeline/source/snapshot/incremental/SignalBasedIncrementalSnapshotContextTest.java``
    ``shouldLoadOffsetsWrittenWithoutPerCollectionCorrelationId``: the 3.6 offset form (no
    per-collection correlation id) loads its tables. Its keys, hex of Java-serialized
    arrays, are not ours: they are refused by name."""
    offsets = {"incremental_snapshot_collections":
               '[{"incremental_snapshot_collections_id":"public.a",'
               '"incremental_snapshot_collections_additional_condition":null,'
               '"incremental_snapshot_collections_surrogate_key":null}]'}
    restored = IncrementalSnapshotContext.from_offset(offsets)
    assert [c.table for c in restored.collections] == ["public.a"]
    assert restored.chunk_end is None
    with pytest.raises(IncrementalSnapshotError, match="incremental_snapshot_primary_key"):
        IncrementalSnapshotContext.from_offset({**offsets,
                                                "incremental_snapshot_primary_key": "aced0005"})
    with pytest.raises(IncrementalSnapshotError, match="does not parse"):
        IncrementalSnapshotContext.from_offset({"incremental_snapshot_collections": "[{]"})
    assert IncrementalSnapshotContext.from_offset({}).running is False
