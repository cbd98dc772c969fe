"""Chunk lines: the rows of an incremental snapshot's chunk, recorded in a capture.

A reader that does not take them refuses them by line, with a message saying what they
are; one that predates them (``CaptureRow.from_json`` without the ``chunk`` rule) refuses
them too, quoting the line's ``data``, which is a sentence and not hex.
"""

from __future__ import annotations

import json

import pytest

from pgcdc_events.protocol.capture import (
    CHUNK_DATA,
    CaptureError,
    CaptureRow,
    dump_chunk_line,
    iter_capture,
    read_chunk_line,
)
from pgcdc_events.protocol.lsn import Lsn

CHUNK = {"id": "c1", "table": {"oid": 1, "namespace": "public", "name": "t",
                               "replica_identity": "d", "columns": []},
         "key": ["id"], "signal": "public.debezium_signal", "strategy": "insert_insert",
         "rows": [["1", "é"], ["2", None]]}


def test_a_chunk_line_round_trips() -> None:
    line = dump_chunk_line(0x16B3748, CHUNK)
    assert line.isascii() and "\n" not in line
    assert line.startswith('{"lsn": "0/16B3748", "xid": null, "data": "not pgoutput')
    read = read_chunk_line(line, line_number=3)
    assert read is not None and read.lsn == Lsn(0x16B3748) and read.chunk == CHUNK
    assert read_chunk_line(b'{"lsn": "0/1", "xid": null, "data": "42"}') is None


def test_readers_of_messages_refuse_it_by_line() -> None:
    line = dump_chunk_line(1, CHUNK)
    with pytest.raises(CaptureError) as info:
        list(iter_capture(["", line]))
    assert str(info.value).startswith("line 2: a pgoutput message, not an incremental snapshot "
                                      "chunk line")
    assert "\n" not in str(info.value)


def test_a_reader_that_predates_chunk_lines_refuses_it_quoting_its_data() -> None:
    """What ``from_json`` did before the ``chunk`` rule: its fields checked, the rest
    ignored; the ``data`` that is not hex stops it, and the error quotes it."""
    obj = json.loads(dump_chunk_line(1, CHUNK))
    del obj["chunk"]  # what an old reader looks at
    with pytest.raises(CaptureError) as info:
        CaptureRow.from_json(obj, line=7)
    assert "line 7: 'data' as a hex string" in str(info.value)
    assert CHUNK_DATA[:60] in str(info.value)


def test_a_malformed_chunk_line_is_named() -> None:
    bad = dump_chunk_line(1, {"id": "c1", "rows": "nope", "table": {}})
    with pytest.raises(CaptureError, match="line 5: an incremental snapshot chunk line"):
        read_chunk_line(bad, line_number=5)
