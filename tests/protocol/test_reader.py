"""The reader rejects message sequences a server cannot send."""

from __future__ import annotations

import struct

import pytest

from pgcdc_events.protocol import (
    Begin,
    Commit,
    Delete,
    Insert,
    PgOutputReader,
    ProtocolError,
    Relation,
    RelationColumn,
    StreamStart,
    StreamStop,
    Truncate,
    TupleData,
    Update,
    encode_message,
)

BEGIN = encode_message(Begin(100, 1, 5))
COMMIT = encode_message(Commit(0, 100, 120, 1))
REL = encode_message(
    Relation(16384, "public", "t", "d", (RelationColumn(1, "id", 23, -1),
                                         RelationColumn(0, "v", 25, -1)))
)
INSERT = encode_message(Insert(16384, TupleData.from_text(("1", "a"))))


def test_a_normal_transaction() -> None:
    reader = PgOutputReader(proto_version=1)
    for data in (BEGIN, REL, INSERT, COMMIT):
        reader.read(data)
    assert reader.relations[16384].name == "t"
    assert not reader.in_transaction and reader.messages_read == 4


def test_commit_without_begin() -> None:
    with pytest.raises(ProtocolError, match="a Begin before this Commit") as info:
        PgOutputReader().read(COMMIT)
    assert info.value.message_type == "C"


def test_begin_inside_a_transaction() -> None:
    reader = PgOutputReader()
    reader.read(BEGIN)
    with pytest.raises(ProtocolError, match="a Begin has not ended"):
        reader.read(BEGIN)


def test_change_outside_a_transaction() -> None:
    reader = PgOutputReader()
    reader.read(REL)
    with pytest.raises(ProtocolError, match="inside a transaction or stream block"):
        reader.read(INSERT)


def test_change_to_an_unannounced_relation() -> None:
    reader = PgOutputReader()
    reader.read(BEGIN)
    with pytest.raises(ProtocolError, match="no Relation message for OID 16384"):
        reader.read(INSERT)
    with pytest.raises(ProtocolError, match="OID 77"):
        reader.read(encode_message(Truncate(0, (77,))))


def test_tuple_width_must_match_the_relation() -> None:
    reader = PgOutputReader()
    for data in (BEGIN, REL):
        reader.read(data)
    with pytest.raises(ProtocolError, match="2 columns as the Relation announced"):
        reader.read(encode_message(Insert(16384, TupleData.from_text(("1",)))))


def test_stream_stop_without_start() -> None:
    with pytest.raises(ProtocolError, match="Stream Start before this Stream Stop"):
        PgOutputReader().read(encode_message(StreamStop()))


def test_stream_block_sets_the_xid_expectation() -> None:
    reader = PgOutputReader(proto_version=2, streaming="on")
    reader.read(encode_message(StreamStart(42, True)))
    assert reader.in_stream and reader.stream_xid == 42
    message = reader.read(encode_message(Relation(16384, "public", "t", "d", (), 43)))
    assert message.xid == 43  # type: ignore[union-attr]
    with pytest.raises(ProtocolError, match="Stream Start of xid 42 has no Stream Stop"):
        reader.read(encode_message(StreamStart(44, False)))
    reader.read(encode_message(StreamStop()))
    assert not reader.in_stream


def test_version_gates() -> None:
    with pytest.raises(ProtocolError, match="not sent with proto_version=1"):
        PgOutputReader(proto_version=1).read(encode_message(StreamStart(1, True)))
    with pytest.raises(ProtocolError, match="streaming=off"):
        PgOutputReader(proto_version=2, streaming="off").read(encode_message(StreamStart(1, True)))
    with pytest.raises(ProtocolError, match="between 1 and 4"):
        PgOutputReader(proto_version=5)


def test_reset_forgets_the_open_transaction() -> None:
    reader = PgOutputReader()
    reader.read(BEGIN)
    reader.read(REL)
    reader.reset()
    assert not reader.in_transaction and 16384 in reader.relations
    reader.reset(keep_relations=False)
    assert not reader.relations


def test_unchecked_bytes_of_a_bad_message_type_are_rejected() -> None:
    with pytest.raises(ProtocolError, match="unknown type"):
        PgOutputReader().read(b"\x00" + struct.pack(">I", 1))


@pytest.mark.parametrize("change", [
    Update(16384, "K", TupleData.from_text(("1",)), TupleData.from_text(("1", "a"))),
    Update(16384, None, None, TupleData.from_text(("1", "a", "x"))),
    Delete(16384, "O", TupleData.from_text(("1", "a", "x"))),
])
def test_every_tuple_of_a_change_has_the_relations_width(change: Update | Delete) -> None:
    reader = PgOutputReader()
    for data in (BEGIN, REL):
        reader.read(data)
    with pytest.raises(ProtocolError, match="2 columns as the Relation announced") as info:
        reader.read(encode_message(change))
    assert info.value.message_type == encode_message(change)[:1].decode()
    reader.read(INSERT)  # the failed message left the reader as it was
    assert reader.messages_read == 3


def test_the_reader_returns_what_parse_message_returns_on_real_streams() -> None:
    """The reader reads changes inside transactions on a path of its own; the stateless
    parser is the independent reading of the same bytes."""
    from pathlib import Path  # noqa: PLC0415

    from pgcdc_events.protocol import iter_capture, parse_message  # noqa: PLC0415

    captures = Path(__file__).resolve().parent / "captures"
    checked = 0
    for path in sorted(captures.glob("*.jsonl")):
        reader = PgOutputReader()
        with path.open() as fh:
            for row in iter_capture(fh):
                in_stream = reader.in_stream
                assert reader.read(row.data) == parse_message(row.data, in_stream=in_stream)
                checked += 1
    assert checked > 700
