"""Incremental snapshots against the real connector (tests/golden/events_incremental).

Recorded by tools/record_debezium (corpus ``events_incremental``, modes
``incremental-insert-insert`` and ``incremental-insert-delete``): Debezium 3.6.3 streams
with ``snapshot.mode=no_data`` while four ``execute-snapshot`` rows are inserted into the
signalling table; it reads the tables in chunks of 2 and writes its watermark rows, and
nothing else changes meanwhile, so its windows are deterministic.

Here the same setup runs on the test's database, the same signal rows are inserted, and
pgcdc-events' :class:`IncrementalSnapshotter` (with the recording's connector
properties) does the snapshot on a slot of its own. The records are compared one by one,
in order, as JsonConverter JSON: topic, key, schema and payload. Set aside, because
they change with every run or are not the connector's: the times (``ts_*``), the
stream positions and transaction ids of the streamed events (``lsn``, ``txId``,
``sequence``), the database name, ``source.version``, the watermark rows' ids (a
random UUID per chunk: numbered here in order of appearance) and timestamps (their
JSON keys are compared), and the ``runId`` header. What those fields must hold is
checked apart: every ``r`` event carries the ``sequence`` of its window's close
watermark, and ``lsn``/``txId`` null.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest

from pgcdc_events.adapters.incremental import IncrementalSnapshotter
from pgcdc_events.errors import ConversionError
from pgcdc_events.events import EventConfig, EventDecoder
from pgcdc_events.events.jsonconv import JsonRecordWriter
from pgcdc_events.events.records import ChangeRecord
from pgcdc_events.types.catalog import fetch_catalog
from support.capture import Capturer
from support.golden import Recording, recordings

RECORDINGS = recordings("events_incremental", incremental=True)
SENTINEL = "recorder_sentinel"
_CHANGES = re.compile(r"^--\s*@changes\s*$", re.MULTILINE)
_PER_RUN_SOURCE = ("ts_ms", "ts_us", "ts_ns", "db", "version")
_PER_RUN_STREAM = ("lsn", "txId", "sequence")


def _statements(sql: str) -> list[str]:
    """The corpus's statements: each ends with ``;`` at the end of a line, outside a
    ``$$`` body (comment lines left out)."""
    out: list[str] = []
    current: list[str] = []
    in_body = False
    for line in sql.splitlines():
        if not current and line.lstrip().startswith("--"):
            continue
        current.append(line)
        in_body ^= line.count("$$") % 2 == 1
        if not in_body and line.rstrip().endswith(";"):
            statement = "\n".join(current).strip().removesuffix(";")
            if statement:
                out.append(statement)
            current = []
    assert not "\n".join(current).strip(), "a statement without its ';'"
    return out


def _corpus(recording: Recording) -> tuple[list[str], list[str]]:
    setup, changes = _CHANGES.split((recording.path / "corpus.sql").read_text(), maxsplit=1)
    return _statements(setup), _statements(changes)


def _ours(conn: Any, recording: Recording) -> list[dict[str, Any]]:
    """Our records for the recording's corpus, run live on ``conn``'s database."""
    setup, changes = _corpus(recording)
    for statement in setup:
        conn.run(statement)
    properties = recording.properties
    cap = Capturer(conn, slot="inc_golden", publication="inc_golden")
    config = EventConfig.from_properties(properties)
    catalog = fetch_catalog(conn)
    decoder = EventDecoder(config, catalog=catalog)
    snapshotter = IncrementalSnapshotter.from_properties(conn, catalog, decoder, properties)
    for statement in changes:
        conn.run(statement)
    out: list[ChangeRecord] = []
    while rows := cap.changes(messages=True):
        for record in decoder.feed_rows(rows):
            out += snapshotter.receive(record)
    assert not snapshotter.waiting and snapshotter.state() == {}
    writer = JsonRecordWriter.for_config(config)
    return [json.loads(writer.record_line(r)) for r in out]


def _theirs(recording: Recording) -> list[dict[str, Any]]:
    return [r for r in recording.records if not r["topic"].endswith("." + SENTINEL)]


def _payload(record: dict[str, Any]) -> dict[str, Any] | None:
    value = record["value"]
    return None if value is None else value["payload"]


def _normalised(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``records`` with the per-run fields set aside (see the module docstring)."""
    watermarks: dict[str, str] = {}

    def watermark(row_id: str) -> str:
        chunk, _, end = row_id.rpartition("-")
        if end not in ("open", "close"):
            return row_id
        return f"chunk{watermarks.setdefault(chunk, str(len(watermarks)))}-{end}"

    out = []
    for record in json.loads(json.dumps(records)):  # a deep copy
        record["headers"] = {k: v for k, v in record["headers"].items()
                             if not k.endswith(".runId")}
        key = record["key"]
        if record["topic"].endswith(".debezium_signal") and key is not None:
            key["payload"]["id"] = watermark(key["payload"]["id"])
        payload = _payload(record)
        if payload is None:
            out.append(record)
            continue
        for field in ("ts_ms", "ts_us", "ts_ns"):
            payload.pop(field, None)
        source = payload["source"]
        for field in _PER_RUN_SOURCE:
            source.pop(field)
        if payload["op"] != "r":
            for field in _PER_RUN_STREAM:
                source.pop(field)
        else:
            source.pop("sequence")  # checked in test_read_events_carry_the_close_position
        for image in ("before", "after"):
            row = payload[image]
            if record["topic"].endswith(".debezium_signal") and row is not None:
                row["id"] = watermark(row["id"])
                if row["type"] and row["type"].startswith("snapshot-window-"):
                    row["data"] = sorted(json.loads(row["data"]))
        out.append(record)
    return out


@pytest.fixture(params=RECORDINGS, ids=[r.mode for r in RECORDINGS])
def recording(request: pytest.FixtureRequest) -> Recording:
    return request.param  # type: ignore[no-any-return]


FILTERED = recordings("events_incremental_filtered", incremental=True)


PARTITIONED = recordings("events_incremental_partitioned", incremental=True)
STOPPED = recordings("events_incremental_stop", incremental=True)
OTHERS = FILTERED + PARTITIONED + STOPPED


@pytest.mark.parametrize("filtered", OTHERS, ids=[r.corpus for r in OTHERS])
def test_filters_partitions_and_stops_as_the_connector(pg_conn: Any, filtered: Recording) -> None:
    """``events_incremental_filtered``: ``table.include.list`` leaves ``inc_out`` out; a
    signal naming it snapshots nothing, and a regex matching it and ``inc_in`` snapshots
    ``inc_in`` only (3.6.3 matches the regexes against the captured tables, and skips a
    named table it does not capture with a warning). ``events_incremental_partitioned``
    (PostgreSQL ``IncrementalSnapshotIT.snapshotPartitionedTable``): the partitioned parent
    is read through the parent, its events on the parent's topic, and a partition named
    on its own on the partition's. ``events_incremental_stop`` (``removeNotYetCaptured
    CollectionFromInProgressIncrementalSnapshot``): a ``stop-snapshot`` of the second of
    three tables, arriving right after the ``execute-snapshot``, removes it; the first and
    the third are read. Record by record as above."""
    assert filtered.meta["checks"]["incremental_reads_per_table"] in (
        {"public.inc_in": 3}, {"public.part": 5, "public.part2": 2},
        {"public.stop_a": 4, "public.stop_c": 4})
    ours, theirs = _normalised(_ours(pg_conn, filtered)), _normalised(_theirs(filtered))
    assert [(r["topic"], (_payload(r) or {}).get("op")) for r in ours] == [
        (r["topic"], (_payload(r) or {}).get("op")) for r in theirs]
    for mine, real in zip(ours, theirs, strict=True):
        assert mine == real


NAN_PRECISE = recordings("events_incremental_nan_precise", incremental=True)


@pytest.mark.parametrize("recording", NAN_PRECISE, ids=[r.mode for r in NAN_PRECISE])
def test_special_numeric_keys_in_precise_mode_stop_with_our_error(pg_conn: Any,
                                                                  recording: Recording) -> None:
    """A numeric key holding ``NaN`` and ``±Infinity`` under ``decimal.handling.mode=precise``
    (no VariableScaleDecimal for them). 3.6.3 logs a warning, emits no ``r`` event for the
    table (not even its finite key), leaves the window open and streams on: the table is
    lost without an error. pgcdc-events stops with its one-line ``ConversionError`` naming
    the column and the value, and nothing is emitted as read (docs/differences-from-
    debezium.md, "Signals")."""
    theirs = _theirs(recording)
    assert [(_payload(r) or {}).get("op") for r in theirs] == ["c", "c"]  # signal, open
    assert (_payload(theirs[1]) or {})["after"]["type"] == "snapshot-window-open"
    assert any("Error while executing incremental snapshot for table 'public.nan_key', "
               "skipping and continuing streaming" in w
               for w in recording.meta["connector_warnings"])
    with pytest.raises(ConversionError) as raised:
        _ours(pg_conn, recording)
    message = str(raised.value)
    assert "\n" not in message and message.startswith("public.nan_key.id (numeric): ")
    assert "Infinity" in message and "VariableScaleDecimal" in message


def test_the_recordings_are_there() -> None:
    assert {r.mode for r in RECORDINGS} == {"incremental-insert-insert",
                                            "incremental-insert-delete"}
    for rec in RECORDINGS:
        assert rec.meta["problems"] == [] and not rec.meta["connector_failed"]
        assert rec.meta["checks"]["op_count_mismatches"] == {}
        assert sum(rec.meta["checks"]["incremental_reads_per_table"].values()) == 35


def test_records_equal_the_connectors(pg_conn: Any, recording: Recording) -> None:
    """Every record, in order: the signals' and watermarks' events, the ``r`` events of
    each window in key order (composite, reordered ``message.key.columns``, nullable key
    columns, enum order, surrogate key, filter, numeric ``-Infinity`` .. ``Infinity``,
    ``NaN``), the empty table skipped, and the window that finds the last table done."""
    ours, theirs = _normalised(_ours(pg_conn, recording)), _normalised(_theirs(recording))
    assert [(r["topic"], (_payload(r) or {}).get("op")) for r in ours] == [
        (r["topic"], (_payload(r) or {}).get("op")) for r in theirs]
    for mine, real in zip(ours, theirs, strict=True):
        assert mine == real


def test_read_events_carry_the_close_position(pg_conn: Any, recording: Recording) -> None:
    """Each ``r`` event's ``source.sequence`` is that of its window's close watermark (the
    close row's insert, or with ``insert_delete`` the open row's deletion), on both sides;
    ``lsn`` and ``txId`` are null."""
    for side in (_ours(pg_conn, recording), _theirs(recording)):
        pending: list[dict[str, Any]] = []
        closes = 0
        for record in side:
            payload = _payload(record)
            if payload is None:
                continue
            source = payload["source"]
            if payload["op"] == "r":
                assert (source["lsn"], source["txId"]) == (None, None)
                pending.append(source)
            elif source["table"] == "debezium_signal" and (
                    payload["op"] == "d" or payload["after"]["type"] == "snapshot-window-close"):
                assert all(s["sequence"] == source["sequence"] for s in pending)
                closes += bool(pending)
                pending = []
        assert not pending and closes == 20


# -- under a concurrent workload: what any correct run gives ------------------------------------

WORKLOAD = recordings("events_incremental_workload", incremental=True)
WORKLOAD_TABLES = ("wl_single", "wl_pair")


def _rows(conn: Any, table: str) -> dict[tuple[Any, ...], dict[str, Any]]:
    """``SELECT *`` keyed by the primary key (the tables hold ints and text only)."""
    key = {"wl_single": ("id",), "wl_pair": ("a", "b")}[table]
    result = conn.run(f"SELECT * FROM {table}")
    names = [c["name"] for c in conn.columns]
    rows = [dict(zip(names, row, strict=True)) for row in result]
    return {tuple(r[k] for k in key): r for r in rows}


def _json_replay(records: list[dict[str, Any]], topic_end: str
                 ) -> tuple[dict[tuple[Any, ...], dict[str, Any]], list[tuple[Any, ...]],
                            set[tuple[Any, ...]]]:
    """The last event per key of one topic (JsonConverter records), the keys read (``r``,
    in order) and the keys any streamed change touched."""
    state: dict[tuple[Any, ...], dict[str, Any]] = {}
    reads: list[tuple[Any, ...]] = []
    touched: set[tuple[Any, ...]] = set()
    for record in records:
        payload = _payload(record)
        if not record["topic"].endswith(topic_end) or payload is None:
            continue
        key = tuple(record["key"]["payload"].values())
        if payload["op"] == "r":
            reads.append(key)
        else:
            touched.add(key)
        if payload["op"] == "d":
            state.pop(key, None)
        else:
            state[key] = payload["after"]
    return state, reads, touched


def _check_workload_invariants(records: list[dict[str, Any]],
                               initial: dict[str, set[tuple[Any, ...]]],
                               final: dict[str, dict[tuple[Any, ...], dict[str, Any]]],
                               *, require_race: bool = True) -> None:
    """``consumeMixedWithIncrementalSnapshot``'s check: replaying the records gives the
    tables' final rows; every row no change touched is read exactly once; no row is read
    twice; and (``require_race``) changes did run inside the snapshot's windows (else
    nothing raced)."""
    raced = 0
    in_window = False
    for record in records:
        payload = _payload(record)
        if payload is None:
            continue
        if payload["source"]["table"] == "debezium_signal":
            row = payload["after"] or {}
            in_window = row.get("type") == "snapshot-window-open"
        elif in_window and payload["op"] != "r":
            raced += 1
    assert raced > 0 or not require_race, "no change ran inside a window: nothing raced"
    for table in WORKLOAD_TABLES:
        state, reads, touched = _json_replay(records, f".public.{table}")
        assert state == final[table], table
        assert len(reads) == len(set(reads)), f"{table}: a row was read twice"
        untouched = initial[table] - touched
        assert untouched and set(reads) >= untouched, table
    done = [r for r in records if r["topic"].endswith(".wl_zz_done")]
    assert [(_payload(r) or {}).get("op") for r in done] == ["r"]


def _run_workload(conn: Any, recording: Recording) -> tuple[
        dict[str, set[tuple[Any, ...]]], dict[str, dict[tuple[Any, ...], dict[str, Any]]]]:
    """The setup and the (deterministic) workload on ``conn``, without a snapshot: the
    tables' keys before the workload and their rows after it."""
    setup, changes = _corpus(recording)
    for statement in setup:
        conn.run(statement)
    initial = {t: set(_rows(conn, t)) for t in WORKLOAD_TABLES}
    for statement in changes:
        conn.run(statement)
    return initial, {t: _rows(conn, t) for t in WORKLOAD_TABLES}


@pytest.mark.parametrize("recording", WORKLOAD, ids=[r.mode for r in WORKLOAD])
def test_the_connector_under_a_workload_meets_the_invariants(pg_conn: Any,
                                                             recording: Recording) -> None:
    """The recording: Debezium 3.6.3's own run meets the invariants (the referee for the
    check itself, and for the recording)."""
    assert recording.meta["problems"] == [] and not recording.meta["connector_failed"]
    assert recording.meta["checks"]["op_count_mismatches"] == {}
    initial, final = _run_workload(pg_conn, recording)
    _check_workload_invariants(_theirs(recording), initial, final)


@pytest.mark.parametrize("recording", WORKLOAD, ids=[r.mode for r in WORKLOAD])
def test_ours_under_the_same_workload_meets_the_invariants(
        pg_cluster: Any, pg_conn: Any, recording: Recording) -> None:
    """The same setup, signal and workload with ``IncrementalSnapshotter``: the workload
    runs on its own connection in a thread while the stream is pumped, so the windows and
    the changes interleave as the timing has it (each window is held open 20 ms after its
    chunk was read, as a slow connector would); the invariants hold whatever it was."""
    _live_workload(pg_cluster, pg_conn, recording, hold=0.02)


@pytest.mark.slow
@pytest.mark.parametrize("run", range(12))
def test_ours_under_workloads_campaign(pg_cluster: Any, pg_conn: Any, run: int) -> None:
    """The live workload again under other timings, chunk sizes and strategies."""
    hold = (0.0, 0.005, 0.02, 0.05)[run % 4]
    chunk = (1, 3, 10, 64)[run // 4 % 4]
    strategy = ("insert_insert", "insert_delete")[run % 2]
    _live_workload(pg_cluster, pg_conn, WORKLOAD[0], hold=hold, overrides={
        "incremental.snapshot.chunk.size": str(chunk),
        "incremental.snapshot.watermarking.strategy": strategy})


def _live_workload(pg_cluster: Any, pg_conn: Any, recording: Recording, *, hold: float,
                   overrides: dict[str, str] | None = None) -> None:
    """Run the recording's setup, signal and workload live with ``IncrementalSnapshotter``
    (the workload in a thread; each window held open ``hold`` s after its chunk read) and
    check the invariants."""
    import threading  # noqa: PLC0415

    import pg8000.native  # noqa: PLC0415

    database = pg_conn.run("SELECT current_database()")[0][0]
    reference = pg8000.native.Connection(**{**pg_cluster.dsn(), "database": database})
    try:  # the final rows, from the same SQL on a copy of the tables in another schema
        reference.run("CREATE SCHEMA ref")
        reference.run("SET search_path = ref")
        initial, final = _run_workload(reference, recording)
        reference.run("DROP SCHEMA ref CASCADE")
    finally:
        reference.close()
    setup, changes = _corpus(recording)
    for statement in setup:
        pg_conn.run(statement)
    properties = {**recording.properties, **(overrides or {})}
    cap = Capturer(pg_conn, slot="inc_workload", publication="inc_workload")
    config = EventConfig.from_properties(properties)
    catalog = fetch_catalog(pg_conn)
    decoder = EventDecoder(config, catalog=catalog)
    # a slow reader: each window stays open a while after its chunk was read, so that
    # changes committed meanwhile make buffered rows stale (what the window must drop)
    snapshotter = IncrementalSnapshotter.from_properties(
        pg_conn, catalog, decoder, properties,
        on_step=lambda step, _: time.sleep(hold) if step == "after_read" and hold else None)
    signal, workload = changes[0], changes[1:]
    pg_conn.run(signal)
    failures: list[BaseException] = []

    def run_workload() -> None:
        conn = pg8000.native.Connection(**{**pg_cluster.dsn(), "database": database})
        try:
            for statement in workload:
                conn.run(statement)
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)
        finally:
            conn.close()

    thread = threading.Thread(target=run_workload)
    out: list[ChangeRecord] = []
    first = cap.changes(messages=True)  # the signal: the first chunk is read at once
    for record in decoder.feed_rows(first):
        out += snapshotter.receive(record)
    thread.start()
    try:
        while True:
            rows = cap.changes(messages=True)
            for record in decoder.feed_rows(rows):
                out += snapshotter.receive(record)
            if not rows and not thread.is_alive() and not snapshotter.waiting \
                    and snapshotter.state() == {}:
                break
    finally:
        thread.join()
    assert not failures, failures
    writer = JsonRecordWriter.for_config(config)
    _check_workload_invariants([json.loads(writer.record_line(r)) for r in out], initial, final,
                               require_race=hold >= 0.02)
