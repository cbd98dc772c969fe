"""Snapshot rows in the capture format: a fourth key that round-trips, old lines unchanged."""

from __future__ import annotations

import json

import pytest

from pgcdc_events.protocol import CaptureRow, Lsn, iter_capture
from pgcdc_events.protocol.capture import CaptureError, dump_capture_row


def test_a_snapshot_row_round_trips_and_a_stream_row_keeps_its_canonical_line() -> None:
    snap = CaptureRow(Lsn(0x150EAB0), 731, bytes.fromhex("4900004005"), snapshot=True)
    line = dump_capture_row(snap)
    assert json.loads(line) == {"lsn": "0/150EAB0", "xid": 731, "data": "4900004005",
                                "snapshot": True}
    assert line == json.dumps(snap.to_json(), separators=(", ", ": "))  # canonical
    assert CaptureRow.from_line(line) == snap
    assert CaptureRow.from_line(line.replace("true}", "true }")) == snap  # any JSON
    no_xid = CaptureRow(Lsn(5), None, b"B", snapshot=True)
    assert CaptureRow.from_line(dump_capture_row(no_xid)) == no_xid
    stream = CaptureRow(Lsn(0x150EAB0), 731, bytes.fromhex("4900004005"))
    assert dump_capture_row(stream) == (
        '{"lsn": "0/150EAB0", "xid": 731, "data": "4900004005"}')  # no fourth key
    assert CaptureRow.from_line(dump_capture_row(stream)).snapshot is False
    old = '{"lsn": "0/1", "xid": null, "data": "42"}\n'  # a line from before snapshots
    assert list(iter_capture([old])) == [CaptureRow(Lsn(1), None, b"\x42")]


@pytest.mark.parametrize("value", ['"yes"', "1", "null"])
def test_a_snapshot_key_that_is_not_a_boolean_is_refused(value: str) -> None:
    with pytest.raises(CaptureError, match="line 3: 'snapshot' as true or false"):
        CaptureRow.from_line(f'{{"lsn": "0/1", "xid": 1, "data": "42", "snapshot": {value}}}',
                             line_number=3)
