"""The initial snapshot against the real connector (tests/golden/events_snapshot*).

Recorded by tools/record_debezium with ``snapshot.mode=initial``: the corpus rows exist
before either slot; Debezium 3.6.3 snapshots them and streams the changes; the capture
starts with pgcdc-events' own snapshot (``capture --snapshot-mode initial``: the slot
created with its exported snapshot, the tables read with COPY in it), then the
changes of the same slot. test_golden.py compares every record whole; the fields it
sets aside in ``r`` events (each side took its own snapshot: transaction, position,
time) are checked here for what they must hold.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pgcdc_events.events.config import EventConfig
from pgcdc_events.events.decoder import EventDecoder
from pgcdc_events.events.jsonconv import JsonRecordWriter
from pgcdc_events.protocol import Begin, PgOutputReader
from support.golden import Recording, recordings

RECORDINGS = recordings("events_snapshot*")


def _payloads(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r["value"]["payload"] for r in records if r.get("value") is not None]


def _ours(recording: Recording) -> list[dict[str, Any]]:
    config = EventConfig.from_properties(recording.properties)
    decoder = EventDecoder(config, catalog=recording.catalog)
    writer = JsonRecordWriter.for_config(config)
    return [json.loads(writer.record_line(r)) for r in decoder.feed_rows(recording.capture)]


def test_the_recordings_are_there() -> None:
    assert {r.corpus for r in RECORDINGS} >= {"events_snapshot", "events_snapshot_edges"}
    for recording in RECORDINGS:
        assert recording.properties["snapshot.mode"] == "initial"
        assert recording.meta["capture_snapshot"]["rows"] > 0


@pytest.mark.parametrize("recording", RECORDINGS, ids=[r.key for r in RECORDINGS])
def test_read_events_equal_the_connectors(recording: Recording) -> None:
    """Topic, key and every value field but the snapshot's own position, transaction and
    time; the markers in the same order; then the streamed records."""
    theirs, ours = recording.records, _ours(recording)
    assert [r["topic"] for r in ours] == [r["topic"] for r in theirs]
    mine, real = _payloads(ours), _payloads(theirs)
    assert [(p["op"], p["source"]["snapshot"]) for p in mine] == [
        (p["op"], p["source"]["snapshot"]) for p in real]
    assert sum(p["op"] == "r" for p in real) > 0
    for ra, rb in zip(ours, theirs, strict=True):
        assert ra["key"] == rb["key"]
        if rb["value"] is None:  # a tombstone
            assert ra["value"] is None
            continue
        a, b = ra["value"]["payload"], rb["value"]["payload"]
        assert (a["before"], a["after"], a["op"]) == (b["before"], b["after"], b["op"])
        assert ra["value"]["schema"] == rb["value"]["schema"]


@pytest.mark.parametrize("recording", RECORDINGS, ids=[r.key for r in RECORDINGS])
def test_the_snapshot_fields_are_the_snapshots(recording: Recording) -> None:
    """Each side's read events share one position, transaction and time; ours are the
    slot's consistent point, the snapshot transaction's xid and the snapshot's time as
    the capture's snapshot block records them; ``sequence`` has the same form."""
    begin = next(r for r in recording.capture if r.snapshot)
    message = PgOutputReader().read(begin.data)
    assert isinstance(message, Begin)
    for side, records in (("ours", _ours(recording)), ("theirs", recording.records)):
        reads = [p["source"] for p in _payloads(records) if p["op"] == "r"]
        fields = {(s["lsn"], s["txId"], s["ts_us"], s["sequence"]) for s in reads}
        assert len(fields) == 1, side
        lsn, tx_id, ts_us, seq = fields.pop()
        assert seq == f'[null,"{lsn}"]', side
        if side == "ours":
            assert lsn == int(begin.lsn) == message.final_lsn
            assert tx_id == message.xid == begin.xid
            assert ts_us == message.commit_datetime.timestamp() * 1_000_000 // 1
    # the first streamed change comes after both snapshots' positions
    first_stream = next(r for r in recording.capture if not r.snapshot)
    assert first_stream.lsn > begin.lsn


def test_decode_and_inspect_read_the_snapshot_block(tmp_path: Any) -> None:
    """The CLI on a recorded capture: decode (one process and several) writes the read
    events; inspect marks the snapshot's messages."""
    from pgcdc_events.cli import main  # noqa: PLC0415

    recording = next(r for r in RECORDINGS if r.corpus == "events_snapshot")
    capture = recording.path / "capture.jsonl"
    outputs = []
    for workers in ("1", "2"):
        out = tmp_path / f"records-{workers}.jsonl"
        assert main(["decode", "--capture", str(capture), "--output", str(out), "-q",
                     "--workers", workers, "--catalog", str(recording.path / "catalog.json"),
                     "-c", "topic.prefix=pgcdc"]) == 0
        outputs.append([json.loads(x) for x in out.read_text().splitlines()])
    ops = [r["value"]["payload"]["op"] for r in outputs[0] if r["value"] is not None]
    assert ops.count("r") == sum(p["op"] == "r" for p in _payloads(recording.records))
    strip = [[{**r, "value": {**r["value"], "payload": {**r["value"]["payload"], "ts_ms": 0,
                                                            "ts_us": 0, "ts_ns": 0}}}
              if r["value"] else r for r in out] for out in outputs]
    for out in strip:
        for r in out:
            r["headers"] = None
    assert strip[0] == strip[1]
    inspected = tmp_path / "inspect.jsonl"
    assert main(["inspect", str(capture), "--output", str(inspected)]) == 0
    lines = [json.loads(x) for x in inspected.read_text().splitlines()]
    assert sum(bool(x.get("snapshot")) for x in lines) == recording.meta["capture_snapshot"][
        "rows"]
