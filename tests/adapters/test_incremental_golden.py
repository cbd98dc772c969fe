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
from typing import Any

import pytest

from pgcdc_events.adapters.incremental import IncrementalSnapshotter
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
    """The corpus's statements (one per ``;`` at the end of a line; no comments)."""
    lines = [line for line in sql.splitlines() if not line.lstrip().startswith("--")]
    return [s.strip() for s in re.split(r";\s*$", "\n".join(lines), flags=re.MULTILINE)
            if s.strip()]


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
