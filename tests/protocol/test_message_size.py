"""A message larger than the cap (``max_message_size``, by default PostgreSQL's MaxAllocSize,
which no walsender message can exceed) is refused before its bytes are decoded, naming the
line or frame, the LSN and the size; a message at the cap is read. The oversized messages
are built by hand: PostgreSQL cannot send them."""

from __future__ import annotations

import json

import pytest

from pgcdc_events.errors import ProtocolError
from pgcdc_events.protocol import (
    MAX_MESSAGE_SIZE,
    CaptureError,
    CaptureRow,
    Lsn,
    XLogData,
    dump_capture_row,
    encode_copy_data,
    iter_capture,
    parse_copy_data,
)
from pgcdc_events.protocol.capture import read_canonical

LSN = Lsn.parse("0/16B3748")
CAP = 64


def _message(size: int) -> bytes:
    return b"M\x01" + bytes(size - 2)  # a logical message's head, then padding


def test_the_default_cap_is_maxallocsize() -> None:
    assert MAX_MESSAGE_SIZE == 2**30 - 1


def test_a_capture_line_over_the_cap_is_refused_naming_line_lsn_and_size() -> None:
    line = dump_capture_row(CaptureRow(LSN, 7, _message(CAP + 1)))
    with pytest.raises(CaptureError) as info:
        list(iter_capture(["", line], max_message_size=CAP))
    assert str(info.value) == ("line 2: a message of at most 64 bytes (max_message_size) "
                               "(the message at LSN 0/16B3748 has 65 bytes)")
    assert info.value.line == 2
    assert read_canonical(line.encode(), max_message_size=CAP) is None


def test_a_line_in_another_json_form_is_refused_the_same_way() -> None:
    line = json.dumps({"data": _message(CAP + 10).hex(), "xid": None, "lsn": str(LSN)})
    with pytest.raises(CaptureError, match=r"^line 5: a message of at most 64 bytes .*"
                       r"LSN 0/16B3748 has 74 bytes\)$"):
        CaptureRow.from_line(line, line_number=5, max_message_size=CAP)


@pytest.mark.parametrize("form", ["canonical", "json"])
def test_a_message_at_the_cap_is_read(form: str) -> None:
    row = CaptureRow(LSN, None, _message(CAP))
    line = dump_capture_row(row) if form == "canonical" else json.dumps(row.to_json(), indent=1)
    assert CaptureRow.from_line(line, max_message_size=CAP) == row
    if form == "canonical":
        assert read_canonical(line.encode(), max_message_size=CAP) == (LSN, row.data, False)


def test_an_xlogdata_frame_over_the_cap_is_refused_naming_lsn_and_size() -> None:
    frame = encode_copy_data(XLogData(int(LSN), int(LSN), 0, _message(CAP + 1)))
    with pytest.raises(ProtocolError) as info:
        parse_copy_data(frame, max_message_size=CAP)
    assert str(info.value) == ("message 'w', offset 25: a message of at most 64 bytes "
                               "(max_message_size) (the message at LSN 0/16B3748 has 65 bytes)")
    assert parse_copy_data(frame, max_message_size=CAP + 1).payload == _message(CAP + 1)
    assert parse_copy_data(memoryview(frame)).payload == _message(CAP + 1)
