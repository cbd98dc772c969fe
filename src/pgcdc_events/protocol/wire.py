"""pgoutput's wire layout, in one place: type bytes, column kinds and fixed-size heads.

Everything that reads or writes pgoutput bytes takes the layout from here: the parser
(:mod:`~pgcdc_events.protocol.decoder`), the encoder
(:mod:`~pgcdc_events.protocol.encoder`), the message classes' ``TYPE`` bytes, and
the capture adapter, which reads only the head of a message to know which
transaction it belongs to (:func:`carried_xid`) and, for Insert, Update and Delete,
which relation it changes (:func:`change_heads`).

Each ``*_HEAD`` layout is the fixed part of a message right after its type byte,
as PostgreSQL 15 writes it in ``src/backend/replication/logical/proto.c``
(``logicalrep_write_begin`` and its siblings); all integers are big-endian.
Variable parts (strings, tuples, relation lists) follow the head and are read by
the parser.
"""

from __future__ import annotations

import struct
from typing import Final

__all__ = [
    "BEGIN",
    "BEGIN_HEAD",
    "BEGIN_PREPARE",
    "BEGIN_PREPARE_HEAD",
    "CHANGE_HEAD_SIZE",
    "COLUMN_KIND_LENGTH",
    "COLUMN_TYPE",
    "COMMIT",
    "COMMIT_HEAD",
    "COMMIT_PREPARED",
    "DELETE",
    "INSERT",
    "INT16",
    "INT32",
    "KEY_TUPLE",
    "KIND_BINARY",
    "KIND_NULL",
    "KIND_TEXT",
    "KIND_UNCHANGED_TOAST",
    "MESSAGE",
    "MESSAGE_HEAD",
    "NEW_TUPLE",
    "OLD_TUPLE",
    "ORIGIN",
    "ORIGIN_HEAD",
    "PREPARE",
    "PREPARE_HEAD",
    "RELATION",
    "ROLLBACK_PREPARED",
    "ROLLBACK_PREPARED_HEAD",
    "STREAM_ABORT",
    "STREAM_ABORT_HEAD",
    "STREAM_ABORT_INFO_HEAD",
    "STREAM_COMMIT",
    "STREAM_COMMIT_HEAD",
    "STREAM_PREPARE",
    "STREAM_START",
    "STREAM_START_HEAD",
    "STREAM_STOP",
    "TRUNCATE",
    "TRUNCATE_HEAD",
    "TYPE",
    "UINT16",
    "UINT32",
    "UPDATE",
    "carried_xid",
    "change_heads",
]

# ------------------------------------------------------------------ type bytes

BEGIN: Final = b"B"
COMMIT: Final = b"C"
ORIGIN: Final = b"O"
RELATION: Final = b"R"
TYPE: Final = b"Y"
INSERT: Final = b"I"
UPDATE: Final = b"U"
DELETE: Final = b"D"
TRUNCATE: Final = b"T"
MESSAGE: Final = b"M"
STREAM_START: Final = b"S"
STREAM_STOP: Final = b"E"
STREAM_COMMIT: Final = b"c"
STREAM_ABORT: Final = b"A"
BEGIN_PREPARE: Final = b"b"
PREPARE: Final = b"P"
COMMIT_PREPARED: Final = b"K"
ROLLBACK_PREPARED: Final = b"r"
STREAM_PREPARE: Final = b"p"

#: The byte before a tuple in Insert, Update and Delete: the new row, the old row's
#: replica identity key (REPLICA IDENTITY DEFAULT or USING INDEX), the whole old row
#: (REPLICA IDENTITY FULL).
NEW_TUPLE: Final = b"N"
KEY_TUPLE: Final = b"K"
OLD_TUPLE: Final = b"O"

#: The byte before each column of TupleData (``TupleData.kinds`` holds these).
KIND_NULL: Final = ord("n")
KIND_UNCHANGED_TOAST: Final = ord("u")
KIND_TEXT: Final = ord("t")
KIND_BINARY: Final = ord("b")

# ------------------------------------------------------------------ layouts

INT16: Final = struct.Struct(">h")
UINT16: Final = struct.Struct(">H")
INT32: Final = struct.Struct(">i")
UINT32: Final = struct.Struct(">I")
UINT64: Final = struct.Struct(">Q")

#: Begin: final LSN, commit time (µs since 2000-01-01), xid.
BEGIN_HEAD: Final = struct.Struct(">QqI")
#: Commit: flags, commit LSN, end LSN, commit time.
COMMIT_HEAD: Final = struct.Struct(">BQQq")
#: Origin: the origin's commit LSN (its name follows).
ORIGIN_HEAD: Final = UINT64
#: A Relation column after its flags byte and name: type OID, type modifier.
COLUMN_TYPE: Final = struct.Struct(">Ii")
#: A TupleData column of kind t or b: kind byte, value length.
COLUMN_KIND_LENGTH: Final = struct.Struct(">Bi")
#: Truncate (after the optional xid): relation count, options (the OIDs follow).
TRUNCATE_HEAD: Final = struct.Struct(">iB")
#: Logical message (after the optional xid): flags, LSN (prefix, length, content follow).
MESSAGE_HEAD: Final = struct.Struct(">BQ")
#: Stream Start: xid, first-segment flag.
STREAM_START_HEAD: Final = struct.Struct(">IB")
#: Stream Commit: xid, flags, commit LSN, end LSN, commit time.
STREAM_COMMIT_HEAD: Final = struct.Struct(">IBQQq")
#: Stream Abort: xid, subtransaction xid.
STREAM_ABORT_HEAD: Final = struct.Struct(">II")
#: Stream Abort of a stream started with ``streaming 'parallel'``: also abort LSN and time.
STREAM_ABORT_INFO_HEAD: Final = struct.Struct(">IIQq")
#: Begin Prepare: prepare LSN, end LSN, prepare time, xid (the GID follows).
BEGIN_PREPARE_HEAD: Final = struct.Struct(">QQqI")
#: Prepare, Commit Prepared and Stream Prepare: flags, two LSNs, a time, xid (GID follows).
PREPARE_HEAD: Final = struct.Struct(">BQQqI")
#: Rollback Prepared: flags, prepare end LSN, rollback end LSN, prepare time, rollback
#: time, xid (the GID follows).
ROLLBACK_PREPARED_HEAD: Final = struct.Struct(">BQQqqI")

# Where the xid sits in the messages that carry one in their head, counted from the
# type byte: last in the head for the prepare family and Begin, first for the stream
# family.
_XID_AT: Final[dict[int, int]] = {
    BEGIN[0]: 1 + BEGIN_HEAD.size - 4,
    BEGIN_PREPARE[0]: 1 + BEGIN_PREPARE_HEAD.size - 4,
    PREPARE[0]: 1 + PREPARE_HEAD.size - 4,
    COMMIT_PREPARED[0]: 1 + PREPARE_HEAD.size - 4,
    STREAM_PREPARE[0]: 1 + PREPARE_HEAD.size - 4,
    ROLLBACK_PREPARED[0]: 1 + ROLLBACK_PREPARED_HEAD.size - 4,
    STREAM_START[0]: 1,
    STREAM_COMMIT[0]: 1,
    STREAM_ABORT[0]: 1,
}
_unpack_u32 = UINT32.unpack_from


def carried_xid(data: bytes) -> int | None:
    """The transaction id a message carries in its fixed head, read without parsing the
    rest: Begin, Begin Prepare, Prepare, Commit Prepared, Rollback Prepared, Stream
    Prepare, Stream Start, Stream Commit and Stream Abort. ``None`` for every other
    message (their xid, if any, comes from the surrounding transaction or stream block)
    and for a message too short to hold its head (the parser reports that one).

    >>> carried_xid(bytes.fromhex("42" "0000000001000000" "0000000000000000" "000002d8"))
    728
    """
    at = _XID_AT.get(data[0]) if data else None
    if at is None or len(data) < at + 4:
        return None
    return int(_unpack_u32(data, at)[0])


#: Bytes of :func:`change_heads`: type byte, relation OID, first tuple's kind, column count.
CHANGE_HEAD_SIZE: Final = 1 + 4 + 1 + 2


def change_heads(relation_id: int, columns: int) -> frozenset[bytes]:
    """Every way an Insert, Update or Delete of a relation with ``columns`` columns can
    begin outside a stream block: its first :data:`CHANGE_HEAD_SIZE` bytes (type byte,
    relation OID, the first tuple's kind byte and column count). An Insert's tuple is
    new (``N``); an Update starts with the old key or row (``K``, ``O``) or the new row;
    a Delete with the old key or row. The capture matches a change's first bytes against
    these to know its relation and that its head is sound without reading the tuples.

    >>> sorted(change_heads(16385, 2))[0].hex()
    '44000040014b0002'
    """
    if not (0 <= relation_id < 1 << 32 and 0 <= columns < 1 << 16):
        raise ValueError(f"relation {relation_id} with {columns} columns")
    relid = UINT32.pack(relation_id)
    width = UINT16.pack(columns)
    return frozenset(kind + relid + tuple_kind + width for kind, tuple_kinds in (
        (INSERT, (NEW_TUPLE,)), (UPDATE, (KEY_TUPLE, OLD_TUPLE, NEW_TUPLE)),
        (DELETE, (KEY_TUPLE, OLD_TUPLE))) for tuple_kind in tuple_kinds)
