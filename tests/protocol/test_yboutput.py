"""YugabyteDB's ``yboutput`` on the wire: Relation identity ``c`` and omitted columns.

PostgreSQL 15 cannot produce these bytes, so they are built here, field by field, as
YugabyteDB's own writer builds them (yugabyte/yugabyte-db,
src/postgres/src/backend/replication/logical/proto.c):

* ``logicalrep_write_rel`` sends ``rel->rd_rel->relreplident`` as one byte; CHANGE is
  ``'c'`` (src/yb/yql/pggate/ybc_pg_typedefs.h, ``YBC_YB_REPLICA_IDENTITY_CHANGE 'c'``).
* ``logicalrep_write_tuple`` writes ``'u'`` for a column whose ``yb_is_omitted`` flag is
  set ("Treat omitted column as an unchanged toast column so that the client will ignore
  it"), before its NULL / TOAST / binary / text cases, so an omitted column is ``'u'`` in
  text and binary mode alike; a sent column is ``'t'`` + Int32 length + text, or, with
  ``binary``, ``'b'`` + Int32 length + the type's send bytes.
* ``pgoutput_change`` (src/postgres/src/backend/replication/pgoutput/pgoutput.c) passes
  ``yb_is_omitted`` only for UPDATE and only in yboutput mode; INSERT and DELETE pass NULL.
"""

from __future__ import annotations

import struct

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pgcdc_events.protocol import (
    KIND_UNCHANGED_TOAST,
    REPLICA_IDENTITY_CHANGE,
    STREAMABLE_TYPES,
    Message,
    PgOutputReader,
    ProtocolError,
    Relation,
    RelationColumn,
    StreamAbort,
    TupleData,
    Update,
    encode_message,
    parse_message,
)
from pgcdc_events.testing.protocol import messages, tuple_data

_RELID = 16385


def _cstr(text: str) -> bytes:
    return text.encode() + b"\0"


def _attr(flags: int, name: str, oid: int, typmod: int) -> bytes:
    # logicalrep_write_attrs: flags byte, name, Int32 type OID, Int32 typmod
    return bytes((flags,)) + _cstr(name) + struct.pack(">Ii", oid, typmod)


#: CREATE TABLE s2.a (pk SERIAL, aa integer, bb varchar(20), PRIMARY KEY(pk)) with
#: REPLICA IDENTITY CHANGE (YugabyteReplicaIdentityIT's table), as logicalrep_write_rel
#: sends it: Int32 OID, namespace, name, the identity byte, Int16 count, the attributes.
RELATION_BYTES = (
    b"R" + struct.pack(">I", _RELID) + _cstr("s2") + _cstr("a") + b"c" + struct.pack(">h", 3)
    + _attr(1, "pk", 23, -1) + _attr(0, "aa", 23, -1) + _attr(0, "bb", 1043, 24)
)


def _text(value: bytes) -> bytes:
    return b"t" + struct.pack(">i", len(value)) + value


def _binary(value: bytes) -> bytes:
    return b"b" + struct.pack(">i", len(value)) + value


#: ``UPDATE s2.a SET aa = 12345 WHERE pk = 1`` under CHANGE: the key and the changed
#: column are sent, ``bb`` is omitted ('u'). logicalrep_write_update: 'U', Int32 OID, 'N',
#: then the tuple (Int16 count, then one kind per column).
UPDATE_TEXT = (b"U" + struct.pack(">I", _RELID) + b"N" + struct.pack(">h", 3)
               + _text(b"1") + _text(b"12345") + b"u")
#: The same with the ``binary`` option: int4 send format is 4 big-endian bytes.
UPDATE_BINARY = (b"U" + struct.pack(">I", _RELID) + b"N" + struct.pack(">h", 3)
                 + _binary(struct.pack(">i", 1)) + _binary(struct.pack(">i", 12345)) + b"u")


def test_relation_with_replica_identity_change() -> None:
    relation = parse_message(RELATION_BYTES, yboutput=True)
    assert relation == Relation(_RELID, "s2", "a", REPLICA_IDENTITY_CHANGE, (
        RelationColumn(1, "pk", 23, -1), RelationColumn(0, "aa", 23, -1),
        RelationColumn(0, "bb", 1043, 24)))
    assert relation.columns[0].is_key  # type: ignore[union-attr]
    assert encode_message(relation, yboutput=True) == RELATION_BYTES


def test_pgoutput_mode_refuses_identity_change() -> None:
    """PostgreSQL never sends 'c': the pgoutput path keeps refusing it, at its offset."""
    offset = RELATION_BYTES.index(b"\0a\0") + 3
    with pytest.raises(ProtocolError, match="replica identity d, n, f or i") as info:
        parse_message(RELATION_BYTES)
    assert info.value.offset == offset and info.value.message_type == "R"
    relation = parse_message(RELATION_BYTES, yboutput=True)
    with pytest.raises(ProtocolError, match="replica identity"):
        encode_message(relation)


def test_yboutput_mode_still_refuses_unknown_identities() -> None:
    bad = RELATION_BYTES.replace(b"\0c\0", b"\0x\0", 1)
    with pytest.raises(ProtocolError, match="d, n, f, i or c"):
        parse_message(bad, yboutput=True)
    with pytest.raises(ProtocolError, match="d, n, f, i or c"):
        encode_message(attrs.evolve(parse_message(RELATION_BYTES, yboutput=True),
                                    replica_identity="x"), yboutput=True)


@pytest.mark.parametrize("data", [UPDATE_TEXT, UPDATE_BINARY], ids=["text", "binary"])
def test_change_update_marks_omitted_columns_u(data: bytes) -> None:
    update = parse_message(data, yboutput=True)
    assert isinstance(update, Update)
    assert update.old_kind is None and update.old is None
    assert update.new.kinds[2] == KIND_UNCHANGED_TOAST and update.new.values[2] is None
    assert update.new.is_unchanged_toast(2)
    if data is UPDATE_BINARY:
        assert update.new.values[:2] == (struct.pack(">i", 1), struct.pack(">i", 12345))
        assert update.new.is_binary(0)
    else:
        assert update.new.values[:2] == (b"1", b"12345")
    # The tuple format is pgoutput's: both modes read it, identically.
    assert parse_message(data) == update
    assert encode_message(update, yboutput=True) == data == encode_message(update)


def test_reader_in_yboutput_mode() -> None:
    reader = PgOutputReader(yboutput=True)
    reader.read(b"B" + struct.pack(">QqI", 100, 0, 7))
    relation = reader.read(RELATION_BYTES)
    assert reader.relations[_RELID] == relation
    assert reader.read(UPDATE_TEXT) == parse_message(UPDATE_TEXT)
    with pytest.raises(ProtocolError, match="replica identity"):
        PgOutputReader().read(RELATION_BYTES)


def _parse_back(message: Message, data: bytes, yboutput: bool) -> Message:
    in_stream = data[0] in STREAMABLE_TYPES and getattr(message, "xid", None) is not None
    abort_info = isinstance(message, StreamAbort) and message.abort_lsn is not None
    return parse_message(data, in_stream=in_stream, abort_info=abort_info, yboutput=yboutput)


@given(messages(yboutput=True))
def test_yboutput_messages_round_trip(message: Message) -> None:
    """decode(encode(m)) == m and encode(decode(b)) == b, in yboutput mode."""
    data = encode_message(message, yboutput=True)
    back = _parse_back(message, data, True)
    assert back == message
    assert encode_message(back, yboutput=True) == data
    if not (isinstance(message, Relation) and message.replica_identity == "c"):
        # Everything but a CHANGE Relation is plain pgoutput: both modes agree.
        assert encode_message(message) == data
        assert _parse_back(message, data, False) == message


@given(st.integers(0, 2**32 - 1), st.one_of(st.none(), tuple_data()), tuple_data(),
       st.one_of(st.none(), st.integers(0, 2**32 - 1)))
def test_change_updates_with_omitted_columns_round_trip(
        relid: int, old: TupleData | None, new: TupleData, xid: int | None) -> None:
    """Updates whose new tuple omits every other column ('u') round-trip, text and binary."""
    omitted = TupleData(bytes(KIND_UNCHANGED_TOAST if i % 2 else k
                              for i, k in enumerate(new.kinds)),
                        tuple(None if i % 2 else v for i, v in enumerate(new.values)))
    update = Update(relid, None if old is None else "K", old, omitted, xid)
    data = encode_message(update, yboutput=True)
    assert _parse_back(update, data, True) == update
    assert encode_message(_parse_back(update, data, True), yboutput=True) == data
