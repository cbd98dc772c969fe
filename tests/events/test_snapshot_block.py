"""A capture's snapshot block in the decoder: what it accepts, and a damaged block refused
with the message and LSN (the block itself is real in tests/golden/events_snapshot*)."""

from __future__ import annotations

import pytest

from pgcdc_events.errors import ProtocolError
from pgcdc_events.events import EventConfig, EventDecoder
from pgcdc_events.protocol import (
    Begin,
    Commit,
    Delete,
    Insert,
    Relation,
    RelationColumn,
    TupleData,
)
from pgcdc_events.protocol.encoder import encode_message

REL = Relation(7, "public", "t", "d", (RelationColumn(1, "id", 23, -1),))


def _decoder() -> EventDecoder:
    return EventDecoder(EventConfig.from_properties({"topic.prefix": "p"}))


def _row(i: int) -> bytes:
    return encode_message(Insert(7, TupleData.from_text((str(i),))))


def test_a_block_gives_read_events_then_the_stream_goes_on() -> None:
    decoder = _decoder()
    out = []
    for data in (encode_message(Begin(500, 0, 9)), encode_message(REL), _row(1), _row(2),
                 encode_message(Commit(0, 500, 500, 0))):
        out += decoder.feed(data, 500, snapshot=True)
    out += decoder.feed(encode_message(Begin(600, 0, 10)), 550)
    out += decoder.feed(_row(3), 560)
    assert [(r.value["op"], r.value["source"]["snapshot"], r.value["source"]["txId"])  # type: ignore[index]
            for r in out] == [("r", "first", 9), ("r", "last", 9), ("c", None, 10)]


def test_an_insert_before_the_blocks_begin_is_refused() -> None:
    decoder = _decoder()
    decoder.feed(encode_message(REL), 1, snapshot=True)
    with pytest.raises(ProtocolError, match="no Begin"):
        decoder.feed(_row(1), 500, snapshot=True)


def test_a_streamed_change_inside_a_block_is_refused() -> None:
    decoder = _decoder()
    decoder.feed(encode_message(Begin(500, 0, 9)), 500, snapshot=True)
    decoder.feed(encode_message(REL), 500, snapshot=True)
    with pytest.raises(ProtocolError, match=r"Commit before any streamed message.*0/258"):
        decoder.feed(_row(1), 600)


def test_only_schema_rows_and_inserts_belong_in_a_block() -> None:
    decoder = _decoder()
    decoder.feed(encode_message(Begin(500, 0, 9)), 500, snapshot=True)
    decoder.feed(encode_message(REL), 500, snapshot=True)
    with pytest.raises(ProtocolError, match=r"only Begin, Type, Relation, Insert and Commit.*"
                       r"a snapshot Delete at LSN 0/1F4"):
        decoder.feed(encode_message(Delete(7, "K", TupleData.from_text(("1",)))), 500,
                     snapshot=True)
