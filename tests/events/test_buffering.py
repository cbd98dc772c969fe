"""Buffered transactions: re-streaming, what may be acknowledged, and commits for unknown ones."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pgcdc_events.errors import ProtocolError
from pgcdc_events.events import EventConfig, EventDecoder, JsonRecordWriter
from pgcdc_events.protocol import (
    Begin,
    BeginPrepare,
    Commit,
    CommitPrepared,
    Delete,
    Insert,
    LogicalMessage,
    Message,
    Origin,
    PgOutputReader,
    Prepare,
    Relation,
    RelationColumn,
    RollbackPrepared,
    StreamCommit,
    StreamStart,
    StreamStop,
    TupleData,
    Update,
    encode_message,
    iter_capture,
)

RELATION = Relation(1, "public", "t", "d", (RelationColumn(1, "id", 23, -1),))


def decoder(**options: Any) -> EventDecoder:
    return EventDecoder(EventConfig(topic_prefix="p"), clock=lambda: 1, **options)


def feed(d: EventDecoder, message: Message, lsn: int) -> list[Any]:
    return d.feed(encode_message(message), lsn)


def insert(value: bytes, xid: int | None = None) -> Insert:
    return Insert(1, TupleData(b"t", (value,)), xid)


def test_a_transaction_streamed_again_from_its_first_segment_is_emitted_once() -> None:
    d = decoder(proto_version=2, streaming="on")
    stream_relation = Relation(1, "public", "t", "d", RELATION.columns, 900)
    for _ in range(2):  # the second time after a reconnect
        d.reset()
        feed(d, StreamStart(900, True), 10)
        feed(d, stream_relation, 11)
        feed(d, insert(b"1", 900), 12)
        feed(d, StreamStop(), 13)
    out = feed(d, StreamCommit(900, 0, 20, 30, 0), 20)
    assert [(r.op, r.value["after"]["id"]) for r in out] == [("c", 1)]
    assert d.buffered_transactions == 0


def test_flushable_lsn_holds_back_at_an_unresolved_prepare() -> None:
    d = decoder(proto_version=3)
    feed(d, BeginPrepare(200, 250, 0, 700, "g1"), 100)
    feed(d, RELATION, 110)
    feed(d, insert(b"1"), 120)
    feed(d, Prepare(0, 200, 250, 0, 700, "g1"), 200)
    feed(d, Begin(400, 0, 701), 300)
    assert len(feed(d, insert(b"2"), 310)) == 1
    feed(d, Commit(0, 400, 450, 0), 450)
    assert d.last_commit_lsn == 450 and d.flushable_lsn == 100
    out = feed(d, CommitPrepared(0, 600, 650, 0, 700, "g1"), 650)
    assert [r.value["after"]["id"] for r in out] == [1]
    assert d.flushable_lsn == 650 and d.buffered_transactions == 0


def test_rolled_back_prepared_transactions_release_their_buffer() -> None:
    d = decoder(proto_version=3)
    feed(d, BeginPrepare(200, 250, 0, 700, "g1"), 100)
    feed(d, RELATION, 110)
    feed(d, insert(b"1"), 120)
    feed(d, Prepare(0, 200, 250, 0, 700, "g1"), 200)
    assert d.buffered_transactions == 1
    assert feed(d, RollbackPrepared(0, 250, 300, 0, 0, 700, "g1"), 300) == []
    assert d.buffered_transactions == 0 and d.flushable_lsn is None


@pytest.mark.parametrize("message", [StreamCommit(999, 0, 10, 20, 0),
                                     CommitPrepared(0, 600, 650, 0, 700, "g1")])
def test_a_commit_for_changes_never_seen_is_an_error(message: Message) -> None:
    d = decoder()
    feed(d, RELATION, 5)
    with pytest.raises(ProtocolError, match="none were seen"):
        feed(d, message, 10)


def test_message_schemas_are_shared_so_writers_do_not_grow() -> None:
    d = decoder()
    writer = JsonRecordWriter()
    for n in range(200):
        for record in feed(d, LogicalMessage(0, n, "pfx", b"payload"), 1000 + n):
            writer.record_line(record)
    assert len(writer._compiler.sources) < 10  # one writer per schema


def test_origin_reaches_the_source_block() -> None:
    path = Path(__file__).resolve().parents[1] / "protocol" / "captures" / "origin.jsonl"
    with open(path, encoding="utf-8") as fh:
        rows = list(iter_capture(fh))
    # Independently of the decoder: which changes sit in a transaction with an Origin message.
    reader, expected, origin = PgOutputReader(), [], None
    for row in rows:
        message = reader.read(row.data)
        if isinstance(message, Begin):
            origin = None
        elif isinstance(message, Origin):
            origin = (message.name, message.origin_lsn)
        elif isinstance(message, (Insert, Update, Delete)):
            expected.append(origin or (None, None))
    records = [r for r in decoder().feed_rows(rows) if r.kind == "change"]
    assert [(r.value["source"]["origin"], r.value["source"]["origin_lsn"])
            for r in records] == expected
    assert ("origin_x", 0xABCDEF) in expected and (None, None) in expected
