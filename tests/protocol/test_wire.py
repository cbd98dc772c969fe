"""protocol.wire: the head-only xid read agrees with the full parser, everywhere.

``carried_xid`` reads a message's xid from the fixed head alone (the capture adapter uses
it to tag rows without parsing them). It is checked against an independent path: the
xid the full parser finds, on every message of the committed real captures and on
generated messages of every type.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given

from pgcdc_events.protocol import PgOutputReader, encode_message, iter_capture, wire
from pgcdc_events.protocol.messages import (
    Begin,
    BeginPrepare,
    CommitPrepared,
    Delete,
    Insert,
    Message,
    Prepare,
    RollbackPrepared,
    StreamAbort,
    StreamCommit,
    StreamPrepare,
    StreamStart,
    StreamStop,
    Update,
)
from pgcdc_events.testing.protocol import messages

CAPTURES = Path(__file__).resolve().parent / "captures"
GOLDEN = Path(__file__).resolve().parent.parent / "golden"
CARRIERS = (Begin, BeginPrepare, Prepare, CommitPrepared, RollbackPrepared, StreamPrepare,
            StreamStart, StreamCommit, StreamAbort)


def expected_xid(message: Message) -> int | None:
    return message.xid if isinstance(message, CARRIERS) else None


def test_carried_xid_matches_the_parser_on_every_real_message() -> None:
    seen: set[bytes] = set()
    checked = 0
    for path in sorted(CAPTURES.glob("*.jsonl")) + sorted(GOLDEN.glob("*/*/capture.jsonl")):
        reader = PgOutputReader()
        with path.open() as fh:
            for row in iter_capture(fh):
                message = reader.read(row.data)
                assert wire.carried_xid(row.data) == expected_xid(message), (path.name, message)
                assert row.data[:1] == type(message).TYPE
                seen.add(row.data[:1])
                checked += 1
    assert checked > 4000
    # the real captures hold every message type that carries an xid but Stream Prepare
    # and Rollback Prepared (PostgreSQL 15 sends them only under conditions the
    # generated messages below cover)
    assert {wire.BEGIN, wire.BEGIN_PREPARE, wire.PREPARE, wire.COMMIT_PREPARED,
            wire.STREAM_START, wire.STREAM_COMMIT, wire.STREAM_ABORT} <= seen


@given(messages())
def test_carried_xid_matches_generated_messages(message: Message) -> None:
    data = encode_message(message)
    assert wire.carried_xid(data) == expected_xid(message)
    # one byte short of its head: no xid, and no exception
    if expected_xid(message) is not None:
        head = {Begin: wire.BEGIN_HEAD, BeginPrepare: wire.BEGIN_PREPARE_HEAD,
                RollbackPrepared: wire.ROLLBACK_PREPARED_HEAD}.get(type(message))
        size = 1 + (head.size if head is not None else
                    wire.PREPARE_HEAD.size if not isinstance(
                        message, (StreamStart, StreamCommit, StreamAbort)) else 4)
        assert wire.carried_xid(data[:size - 1]) is None
        assert wire.carried_xid(data[:size]) == expected_xid(message)


def test_every_message_class_takes_its_type_byte_from_wire() -> None:
    names = {"Begin": "BEGIN", "Commit": "COMMIT", "Origin": "ORIGIN", "Relation": "RELATION",
             "Type": "TYPE", "Insert": "INSERT", "Update": "UPDATE", "Delete": "DELETE",
             "Truncate": "TRUNCATE", "LogicalMessage": "MESSAGE", "StreamStart": "STREAM_START",
             "StreamStop": "STREAM_STOP", "StreamCommit": "STREAM_COMMIT",
             "StreamAbort": "STREAM_ABORT", "BeginPrepare": "BEGIN_PREPARE",
             "Prepare": "PREPARE", "CommitPrepared": "COMMIT_PREPARED",
             "RollbackPrepared": "ROLLBACK_PREPARED", "StreamPrepare": "STREAM_PREPARE"}
    from pgcdc_events.protocol import messages as module  # noqa: PLC0415

    for cls_name, const in names.items():
        assert getattr(wire, const) == getattr(module, cls_name).TYPE
    assert len(set(names.values())) == len({getattr(wire, c) for c in names.values()})


def test_change_heads_are_the_first_bytes_of_every_real_change() -> None:
    """Every Insert, Update and Delete outside stream blocks in the real captures begins
    with one of ``change_heads`` of its relation (OID, column count), and no change begins
    with a head of another relation, another width or another tuple kind."""
    checked = 0
    kinds: set[bytes] = set()
    for path in sorted(CAPTURES.glob("*.jsonl")) + sorted(GOLDEN.glob("*/*/capture.jsonl")):
        reader = PgOutputReader()
        in_stream = False
        with path.open() as fh:
            for row in iter_capture(fh):
                message = reader.read(row.data)
                if isinstance(message, StreamStart):
                    in_stream = True
                elif isinstance(message, StreamStop):
                    in_stream = False
                if in_stream or not isinstance(message, (Insert, Update, Delete)):
                    continue
                columns = len(reader.relations[message.relation_id].columns)
                heads = wire.change_heads(message.relation_id, columns)
                head = row.data[:wire.CHANGE_HEAD_SIZE]
                assert head in heads, (path.name, message)
                kinds.add(row.data[:1] + row.data[5:6])
                # a neighbour relation, one column more or less: not a head of those
                for relid, width in ((message.relation_id + 1, columns),
                                     (message.relation_id, columns + 1),
                                     (message.relation_id, max(columns - 1, 0))):
                    assert head not in wire.change_heads(relid, width)
                checked += 1
    assert checked > 1000
    # the captures hold each tuple kind a change can start with
    assert kinds == {b"IN", b"UN", b"UK", b"UO", b"DK", b"DO"}
    # and what cannot start a change: an Insert of an old tuple, a Delete of a new one
    heads = wire.change_heads(16385, 3)
    assert len(heads) == 6
    assert not {b"I\x00\x00\x40\x01K\x00\x03", b"I\x00\x00\x40\x01O\x00\x03",
                b"D\x00\x00\x40\x01N\x00\x03", b"T\x00\x00\x40\x01N\x00\x03"} & heads
