"""Stateless parsing of one pgoutput message from its bytes.

:func:`parse_message` is the whole API. It needs two facts the bytes do not
carry: whether the message sits inside a Stream Start/Stop block (then DML-like
messages start with an xid) and, for Stream Abort, whether the stream was
started with ``streaming 'parallel'`` (then it carries the abort LSN and time).
:class:`~pgcdc_events.protocol.reader.PgOutputReader` tracks both for you.

Every failure raises :class:`~pgcdc_events.errors.ProtocolError` naming the
type byte, the offset and what was expected; lengths are checked against the
bytes present before anything is sliced or allocated.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Final

from pgcdc_events._frozen import builder, factory
from pgcdc_events.errors import ProtocolError
from pgcdc_events.protocol import wire
from pgcdc_events.protocol.messages import (
    Begin,
    BeginPrepare,
    Commit,
    CommitPrepared,
    Delete,
    Insert,
    LogicalMessage,
    Message,
    Origin,
    Prepare,
    Relation,
    RelationColumn,
    RollbackPrepared,
    StreamAbort,
    StreamCommit,
    StreamPrepare,
    StreamStart,
    StreamStop,
    Truncate,
    TupleData,
    Type,
    Update,
)
from pgcdc_events.protocol.wire import (
    BEGIN_HEAD,
    BEGIN_PREPARE_HEAD,
    COLUMN_KIND_LENGTH,
    COLUMN_TYPE,
    COMMIT_HEAD,
    INT16,
    INT32,
    MESSAGE_HEAD,
    PREPARE_HEAD,
    ROLLBACK_PREPARED_HEAD,
    STREAM_ABORT_HEAD,
    STREAM_ABORT_INFO_HEAD,
    STREAM_COMMIT_HEAD,
    STREAM_START_HEAD,
    TRUNCATE_HEAD,
    UINT32,
    UINT64,
)

__all__ = ["MAX_RELATION_COLUMNS", "MAX_TUPLE_COLUMNS", "insert_parts", "message_parser",
           "parse_message"]

_u32 = UINT32.unpack_from
_NEW = wire.NEW_TUPLE[0]
_ALL_TEXT_KIND = bytes((wire.KIND_TEXT,))
_KEY = wire.KEY_TUPLE[0]
_KEY_OLD = wire.KEY_TUPLE + wire.OLD_TUPLE
_KEY_OLD_NEW = _KEY_OLD + wire.NEW_TUPLE
_kind_len = COLUMN_KIND_LENGTH.unpack_from
#: An Insert's relation OID, the byte before its tuple ('N') and the tuple's column count.
_insert_head = struct.Struct(">IBH").unpack_from

_ALL_TEXT: dict[int, bytes] = {}
#: PostgreSQL's MaxTupleAttributeNumber: no tuple it sends has more columns.
MAX_TUPLE_COLUMNS: Final = 1664
#: PostgreSQL's MaxHeapAttributeNumber: no table, so no Relation message, has more columns.
MAX_RELATION_COLUMNS: Final = 1600
_MAX_CACHED_WIDTH = MAX_TUPLE_COLUMNS
_make_tuple = factory(TupleData)
_TUPLE_BUILDER: Final = builder(TupleData, 2)
_INSERT_BUILDER: Final = builder(Insert, 3)
_make_update = factory(Update)
_make_delete = factory(Delete)


def _fail(data: bytes, offset: int, expected: str, detail: str | None = None) -> ProtocolError:
    mtype = chr(data[0]) if data else None
    return ProtocolError(expected, message_type=mtype, offset=offset, detail=detail)


def _need(data: bytes, pos: int, size: int, what: str) -> None:
    if pos + size > len(data):
        raise _fail(
            data, pos, what, f"needs {size} bytes, {max(len(data) - pos, 0)} left (truncated?)"
        )


def _end(data: bytes, pos: int) -> None:
    if pos != len(data):
        raise _fail(data, pos, "end of message", f"{len(data) - pos} trailing bytes")


def _string(data: bytes, pos: int, what: str) -> tuple[str, int]:
    end = data.find(b"\0", pos)
    if end < 0:
        raise _fail(data, pos, f"{what} (a NUL-terminated string)", "no terminating NUL")
    try:
        return data[pos:end].decode("utf-8"), end + 1
    except UnicodeDecodeError as exc:
        raise _fail(data, pos + exc.start, f"{what} in UTF-8", str(exc.reason)) from None


def _xid(data: bytes, in_stream: bool) -> tuple[int | None, int]:
    if not in_stream:
        return None, 1
    _need(data, 1, 4, "the streamed transaction's xid")
    return _u32(data, 1)[0], 5


def _tuple(data: bytes, pos: int) -> tuple[TupleData, int]:
    """Parse TupleData at ``pos``: Int16 column count, then per column a kind byte and value.

    A tuple whose columns are all text or NULL (kinds ``t`` and ``n``) and lie within the
    message takes a parser generated for its width (one unrolled step per column);
    anything else (another kind, a truncated or malformed tuple) is parsed again by
    :func:`_tuple_general`, which checks every step and names what is wrong.
    """
    try:
        ncols = (data[pos] << 8) | data[pos + 1]
        kinds, values, end = _PARSERS_BY_WIDTH[ncols](data, pos + 2)
        tup = _TUPLE_BUILDER()  # as _make_tuple builds it, spelled out
        tup.kinds = kinds
        tup.values = values
        tup.__class__ = TupleData
        return tup, end
    except KeyError:
        if ncols <= _MAX_UNROLLED:
            _PARSERS_BY_WIDTH[ncols] = _width_parser(ncols)
            return _tuple(data, pos)
    except (_OtherKindError, IndexError, struct.error):
        pass
    return _tuple_general(data, pos)


class _OtherKindError(Exception):
    """A tuple has a column of kind ``u`` or ``b``, a byte that is no kind, or runs past
    the end of the message."""


#: Widths up to this get an unrolled parser (wider tuples: the general loop).
_MAX_UNROLLED = 128
_Parts = tuple[bytes, tuple["bytes | None", ...], int]
_PARSERS_BY_WIDTH: dict[int, Callable[[bytes, int], _Parts]] = {}


def _width_parser(ncols: int) -> Callable[[bytes, int], _Parts]:
    """``parse(data, pos)`` for ``ncols`` columns of kinds ``t`` and ``n`` from ``pos``
    (after the count): the tuple's kinds and values (a :class:`TupleData`'s fields) and
    its end. ``_OtherKindError`` at a column of another kind
    or when the values run past the end (a slice past the end comes out short, it does
    not fail), ``IndexError`` or ``struct.error`` where the bytes run out."""
    text = _ALL_TEXT.setdefault(ncols, _ALL_TEXT_KIND * ncols)
    # a text column in the fewest steps: its value from s (after kind and length) to the
    # new pos (about 1.7k instructions fewer a six-column tuple than in six steps)
    steps = "".join(
        f"    if data[pos] == {wire.KIND_TEXT}:\n"
        f"        s = pos + 5\n"
        f"        pos = s + u32(data, pos + 1)[0]\n"
        f"        v{i} = data[s:pos]\n"
        f"    elif data[pos] == {wire.KIND_NULL}:\n"
        f"        pos += 1\n"
        f"        v{i} = None\n"
        f"        if kinds is None:\n"
        f"            kinds = bytearray(text)\n"
        f"        kinds[{i}] = {wire.KIND_NULL}\n"
        f"    else:\n"
        f"        raise other\n" for i in range(ncols))
    values = "".join(f"v{i}, " for i in range(ncols))
    source = (f"def parse(data, pos):\n    kinds = None\n{steps}"
              f"    if pos > len(data):\n        raise other\n"
              f"    return text if kinds is None else bytes(kinds), ({values}), pos\n")
    # the source holds nothing but column numbers and kind bytes
    namespace: dict[str, object] = {"u32": _u32, "other": _OtherKindError, "text": text}
    exec(compile(source, f"<pgcdc tuple parser {ncols}>", "exec"), namespace)
    return namespace["parse"]  # type: ignore[return-value]


def _tuple_general(data: bytes, pos: int) -> tuple[TupleData, int]:  # noqa: C901
    """Parse TupleData at ``pos``: Int16 column count, then per column a kind byte and value.

    Every kind, every check, every error: the path of any tuple :func:`_tuple`'s all-text
    parsers do not take."""
    n = len(data)
    if pos + 2 > n:
        raise _fail(data, pos, "the tuple's column count (Int16)", "truncated")
    ncols = (data[pos] << 8) | data[pos + 1]
    if ncols & 0x8000:
        raise _fail(data, pos, "a non-negative column count", str(ncols - 0x10000))
    if ncols > MAX_TUPLE_COLUMNS:
        raise _fail(data, pos, f"at most {MAX_TUPLE_COLUMNS} columns in a tuple "
                    "(PostgreSQL's MaxTupleAttributeNumber)", f"the count is {ncols}")
    if pos + 2 + ncols > n:  # each column takes at least its kind byte: check before allocating
        raise _fail(data, pos, f"{ncols} columns", f"{n - pos - 2} bytes left (truncated?)")
    pos += 2
    values: list[bytes | None] = [None] * ncols
    kinds: bytearray | None = None
    kind_len = _kind_len
    for i in range(ncols):
        if pos + 5 <= n:
            kind, size = kind_len(data, pos)
        elif pos < n:
            kind, size = data[pos], -1
        else:
            raise _fail(data, pos, f"the kind of column {i + 1} of {ncols}", "truncated")
        if kind != 116:  # not 't': the tuple needs its own kinds
            if kinds is None:
                kinds = bytearray(_ALL_TEXT_KIND * ncols)
            kinds[i] = kind
        if kind in {116, 98}:  # "t", "b": Int32 length, then the value
            if size < 0:
                raise _fail(
                    data,
                    pos + 1,
                    f"the length of column {i + 1} (Int32 >= 0)",
                    "truncated" if pos + 5 > n else str(size),
                )
            pos += 5
            end = pos + size
            if end > n:
                raise _fail(
                    data, pos, f"{size} bytes of column {i + 1}", f"{n - pos} left (truncated?)"
                )
            values[i] = data[pos:end]
            pos = end
        elif kind in {110, 117}:  # 'n', 'u'
            pos += 1
        else:
            raise _fail(
                data,
                pos,
                f"a column kind n, u, t or b for column {i + 1}",
                f"got {bytes([kind])!r}",
            )
    if kinds is None:
        all_text = _ALL_TEXT.get(ncols)
        if all_text is None:
            all_text = _ALL_TEXT_KIND * ncols
            if ncols <= _MAX_CACHED_WIDTH:
                _ALL_TEXT[ncols] = all_text
        return _make_tuple(all_text, tuple(values)), pos
    return _make_tuple(bytes(kinds), tuple(values)), pos


def _begin(data: bytes, in_stream: bool, abort_info: bool | None) -> Begin:
    _need(data, 1, 20, "Begin's final LSN, commit time and xid")
    final_lsn, ts, xid = BEGIN_HEAD.unpack_from(data, 1)
    _end(data, 21)
    return Begin(final_lsn, ts, xid)


def _commit(data: bytes, in_stream: bool, abort_info: bool | None) -> Commit:
    _need(data, 1, 25, "Commit's flags, commit LSN, end LSN and commit time")
    flags, commit_lsn, end_lsn, ts = COMMIT_HEAD.unpack_from(data, 1)
    _end(data, 26)
    return Commit(flags, commit_lsn, end_lsn, ts)


def _origin(data: bytes, in_stream: bool, abort_info: bool | None) -> Origin:
    _need(data, 1, 8, "the origin's commit LSN")
    (lsn,) = UINT64.unpack_from(data, 1)
    name, pos = _string(data, 9, "the origin name")
    _end(data, pos)
    return Origin(lsn, name)


def _relation(data: bytes, in_stream: bool, abort_info: bool | None) -> Relation:
    return _relation_with(data, in_stream, "dnfi", "a replica identity d, n, f or i")


def _yb_relation(data: bytes, in_stream: bool, abort_info: bool | None) -> Relation:
    """A Relation from YugabyteDB's ``yboutput``: its replica identity may also be ``c``.

    ``c`` is YB_REPLICA_IDENTITY_CHANGE: yugabyte/yugabyte-db
    src/yb/yql/pggate/ybc_pg_typedefs.h (``#define YBC_YB_REPLICA_IDENTITY_CHANGE 'c'``),
    sent as is by logicalrep_write_rel (src/postgres/src/backend/replication/logical/proto.c,
    ``pq_sendbyte(out, rel->rd_rel->relreplident)``).
    """
    return _relation_with(data, in_stream, "dnfic", "a replica identity d, n, f, i or c")


def _relation_with(data: bytes, in_stream: bool, idents: str, expected: str) -> Relation:
    xid, pos = _xid(data, in_stream)
    _need(data, pos, 4, "the relation OID")
    (relid,) = _u32(data, pos)
    namespace, pos = _string(data, pos + 4, "the namespace")
    name, pos = _string(data, pos, "the relation name")
    _need(data, pos, 3, "the replica identity and column count")
    ident = chr(data[pos])
    if ident not in idents:
        raise _fail(data, pos, expected, repr(ident))
    (ncols,) = INT16.unpack_from(data, pos + 1)
    if ncols < 0:
        raise _fail(data, pos + 1, "a non-negative column count", str(ncols))
    if ncols > MAX_RELATION_COLUMNS:
        raise _fail(data, pos + 1, f"at most {MAX_RELATION_COLUMNS} columns in a relation "
                    "(PostgreSQL's MaxHeapAttributeNumber)", f"the count is {ncols}")
    pos += 3
    # Each column needs at least 10 bytes; refuse counts the data cannot hold.
    if pos + 10 * ncols > len(data):
        raise _fail(data, pos, f"{ncols} column descriptions", "not enough bytes for them")
    columns = []
    for i in range(ncols):
        _need(data, pos, 1, f"the flags of column {i + 1}")
        flags = data[pos]
        col_name, pos = _string(data, pos + 1, f"the name of column {i + 1}")
        _need(data, pos, 8, f"the type OID and modifier of column {i + 1}")
        oid, typmod = COLUMN_TYPE.unpack_from(data, pos)
        pos += 8
        columns.append(RelationColumn(flags, col_name, oid, typmod))
    _end(data, pos)
    return Relation(relid, namespace, name, ident, tuple(columns), xid)


def _type(data: bytes, in_stream: bool, abort_info: bool | None) -> Type:
    xid, pos = _xid(data, in_stream)
    _need(data, pos, 4, "the type OID")
    (oid,) = _u32(data, pos)
    namespace, pos = _string(data, pos + 4, "the type's namespace")
    name, pos = _string(data, pos, "the type name")
    _end(data, pos)
    return Type(oid, namespace, name, xid)


def insert_parts(data: bytes, pos: int = 1) -> tuple[int, bytes, tuple[bytes | None, ...]]:
    """The relation OID, the new tuple's kinds and values (a :class:`TupleData`'s fields)
    of an Insert whose OID is at ``pos`` (after the type byte, or after the xid inside a
    stream block): what :func:`parse_message` builds an :class:`Insert` of, without the
    objects, for a caller that converts the tuple at once (the event decoder)."""
    try:  # the head and _tuple's first step, spelled out on the path most messages take
        relation_id, new, ncols = _insert_head(data, pos)
        if new == _NEW:
            kinds, values, end = _PARSERS_BY_WIDTH[ncols](data, pos + 7)
            if end == len(data):
                return relation_id, kinds, values
    except (KeyError, _OtherKindError, IndexError, struct.error):
        pass
    # each step checked, naming what is wrong (and the first tuple of a width)
    if pos + 5 > len(data) or data[pos + 4] != _NEW:
        _need(data, pos, 5, "the relation OID and 'N'")
        raise _fail(data, pos + 4, "'N' before the new tuple", repr(bytes([data[pos + 4]])))
    tup, end = _tuple(data, pos + 5)
    _end(data, end)
    return _u32(data, pos)[0], tup.kinds, tup.values


def _insert(data: bytes, in_stream: bool, abort_info: bool | None) -> Insert:
    if in_stream:
        xid, pos = _xid(data, True)
    else:
        xid, pos = None, 1
    relation_id, kinds, values = insert_parts(data, pos)
    # built as _make_tuple and factory(Insert) build them, spelled out
    new = _TUPLE_BUILDER()
    new.kinds = kinds
    new.values = values
    new.__class__ = TupleData
    insert = _INSERT_BUILDER()
    insert.relation_id = relation_id
    insert.new = new
    insert.xid = xid
    insert.__class__ = Insert
    return insert  # type: ignore[no-any-return]  # the builder made it an Insert


def _old_kind(data: bytes, pos: int, allowed: bytes, what: str) -> int:
    _need(data, pos, 1, what)
    kind = data[pos]
    if kind not in allowed:
        raise _fail(data, pos, what, repr(bytes([kind])))
    return kind


def _update(data: bytes, in_stream: bool, abort_info: bool | None) -> Update:
    if not in_stream and len(data) > 7:  # the steps below on a well-formed one, spelled out
        kind = data[5]
        if kind == _NEW:
            new, end = _tuple(data, 6)
            if end == len(data):
                return _make_update(_u32(data, 1)[0], None, None, new, None)
        elif kind in _KEY_OLD:
            before, end = _tuple(data, 6)
            if end < len(data) and data[end] == _NEW:
                new, end = _tuple(data, end + 1)
                if end == len(data):
                    return _make_update(_u32(data, 1)[0], chr(kind), before, new, None)
    xid, pos = _xid(data, in_stream)
    _need(data, pos, 4, "the relation OID")
    (relid,) = _u32(data, pos)
    kind = _old_kind(data, pos + 4, _KEY_OLD_NEW, "'K', 'O' or 'N'")
    pos += 5
    old_kind: str | None = None
    old = None
    if kind != _NEW:
        old_kind = chr(kind)
        old, pos = _tuple(data, pos)
        _old_kind(data, pos, wire.NEW_TUPLE, "'N' before the new tuple")
        pos += 1
    new, pos = _tuple(data, pos)
    _end(data, pos)
    return _make_update(relid, old_kind, old, new, xid)


def _delete(data: bytes, in_stream: bool, abort_info: bool | None) -> Delete:
    if not in_stream and len(data) > 7 and data[5] in _KEY_OLD:  # spelled out, as _update
        before, end = _tuple(data, 6)
        if end == len(data):
            return _make_delete(_u32(data, 1)[0], "K" if data[5] == _KEY else "O", before, None)
    xid, pos = _xid(data, in_stream)
    _need(data, pos, 4, "the relation OID")
    (relid,) = _u32(data, pos)
    kind = _old_kind(data, pos + 4, _KEY_OLD, "'K' or 'O' before the old tuple")
    old, pos = _tuple(data, pos + 5)
    _end(data, pos)
    return _make_delete(relid, "K" if kind == _KEY else "O", old, xid)


def _truncate(data: bytes, in_stream: bool, abort_info: bool | None) -> Truncate:
    xid, pos = _xid(data, in_stream)
    _need(data, pos, 5, "the relation count and options")
    nrels, options = TRUNCATE_HEAD.unpack_from(data, pos)
    pos += 5
    if nrels < 0 or pos + 4 * nrels != len(data):
        raise _fail(
            data,
            pos,
            f"{nrels} relation OIDs (4 bytes each) to end the message",
            f"{len(data) - pos} bytes left",
        )
    relids = struct.unpack_from(f">{nrels}I", data, pos)
    return Truncate(options, relids, xid)


def _message(data: bytes, in_stream: bool, abort_info: bool | None) -> LogicalMessage:
    xid, pos = _xid(data, in_stream)
    _need(data, pos, 9, "the message flags and LSN")
    flags, lsn = MESSAGE_HEAD.unpack_from(data, pos)
    prefix, pos = _string(data, pos + 9, "the message prefix")
    _need(data, pos, 4, "the content length")
    (size,) = INT32.unpack_from(data, pos)
    pos += 4
    if size < 0 or pos + size != len(data):
        raise _fail(
            data,
            pos - 4,
            "a content length that ends the message",
            f"length {size}, {len(data) - pos} bytes left",
        )
    return LogicalMessage(flags, lsn, prefix, data[pos:], xid)


def _stream_start(data: bytes, in_stream: bool, abort_info: bool | None) -> StreamStart:
    _need(data, 1, 5, "the xid and first-segment flag")
    xid, first = STREAM_START_HEAD.unpack_from(data, 1)
    if first > 1:
        raise _fail(data, 5, "a first-segment flag of 0 or 1", str(first))
    _end(data, 6)
    return StreamStart(xid, bool(first))


def _stream_stop(data: bytes, in_stream: bool, abort_info: bool | None) -> StreamStop:
    _end(data, 1)
    return StreamStop()


def _stream_commit(data: bytes, in_stream: bool, abort_info: bool | None) -> StreamCommit:
    _need(data, 1, 29, "the xid, flags, commit LSN, end LSN and commit time")
    xid, flags, commit_lsn, end_lsn, ts = STREAM_COMMIT_HEAD.unpack_from(data, 1)
    _end(data, 30)
    return StreamCommit(xid, flags, commit_lsn, end_lsn, ts)


def _stream_abort(data: bytes, in_stream: bool, abort_info: bool | None) -> StreamAbort:
    size = len(data)
    if abort_info is None:
        abort_info = size == 25
    if abort_info:
        if size != 25:
            raise _fail(
                data,
                min(size, 25),
                "Stream Abort with abort LSN and time "
                "(streaming 'parallel'): 24 bytes after the type",
                f"{size - 1} bytes",
            )
        xid, subxid, lsn, ts = STREAM_ABORT_INFO_HEAD.unpack_from(data, 1)
        return StreamAbort(xid, subxid, lsn, ts)
    if size != 9:
        raise _fail(
            data,
            min(size, 9),
            "Stream Abort without abort LSN and time (streaming 'on'): 8 bytes after the type",
            f"{size - 1} bytes",
        )
    xid, subxid = STREAM_ABORT_HEAD.unpack_from(data, 1)
    return StreamAbort(xid, subxid)


def _begin_prepare(data: bytes, in_stream: bool, abort_info: bool | None) -> BeginPrepare:
    _need(data, 1, 28, "the prepare LSN, end LSN, prepare time and xid")
    lsn, end_lsn, ts, xid = BEGIN_PREPARE_HEAD.unpack_from(data, 1)
    gid, pos = _string(data, 29, "the GID")
    _end(data, pos)
    return BeginPrepare(lsn, end_lsn, ts, xid, gid)


def _prepare_fields(data: bytes) -> tuple[int, int, int, int, int, str]:
    _need(data, 1, 29, "the flags, LSNs, time and xid")
    flags, lsn, end_lsn, ts, xid = PREPARE_HEAD.unpack_from(data, 1)
    gid, pos = _string(data, 30, "the GID")
    _end(data, pos)
    return flags, lsn, end_lsn, ts, xid, gid


def _prepare(data: bytes, in_stream: bool, abort_info: bool | None) -> Prepare:
    return Prepare(*_prepare_fields(data))


def _stream_prepare(data: bytes, in_stream: bool, abort_info: bool | None) -> StreamPrepare:
    return StreamPrepare(*_prepare_fields(data))


def _commit_prepared(data: bytes, in_stream: bool, abort_info: bool | None) -> CommitPrepared:
    return CommitPrepared(*_prepare_fields(data))


def _rollback_prepared(data: bytes, in_stream: bool, abort_info: bool | None) -> RollbackPrepared:
    _need(data, 1, 37, "the flags, LSNs, times and xid")
    flags, prep_end, rb_end, prep_ts, rb_ts, xid = ROLLBACK_PREPARED_HEAD.unpack_from(data, 1)
    gid, pos = _string(data, 38, "the GID")
    _end(data, pos)
    return RollbackPrepared(flags, prep_end, rb_end, prep_ts, rb_ts, xid, gid)


_Parser = Callable[[bytes, bool, "bool | None"], Message]

_PARSERS: list[_Parser | None] = [None] * 256
for _byte, _fn in {
    wire.BEGIN: _begin,
    wire.COMMIT: _commit,
    wire.ORIGIN: _origin,
    wire.RELATION: _relation,
    wire.TYPE: _type,
    wire.INSERT: _insert,
    wire.UPDATE: _update,
    wire.DELETE: _delete,
    wire.TRUNCATE: _truncate,
    wire.MESSAGE: _message,
    wire.STREAM_START: _stream_start,
    wire.STREAM_STOP: _stream_stop,
    wire.STREAM_COMMIT: _stream_commit,
    wire.STREAM_ABORT: _stream_abort,
    wire.BEGIN_PREPARE: _begin_prepare,
    wire.PREPARE: _prepare,
    wire.COMMIT_PREPARED: _commit_prepared,
    wire.ROLLBACK_PREPARED: _rollback_prepared,
    wire.STREAM_PREPARE: _stream_prepare,
}.items():
    _PARSERS[_byte[0]] = _fn  # type: ignore[assignment]

#: yboutput's parsers: pgoutput's, with the Relation that accepts REPLICA IDENTITY CHANGE.
#: Its tuple data needs no parser of its own: a column yboutput does not send (not changed
#: under CHANGE) is written as ``'u'``, the unchanged-TOAST kind (proto.c,
#: logicalrep_write_tuple: "Treat omitted column as an unchanged toast column").
_YB_PARSERS: list[_Parser | None] = list(_PARSERS)
_YB_PARSERS[wire.RELATION[0]] = _yb_relation

#: Type bytes whose body starts with an xid inside a Stream Start/Stop block.
STREAMABLE_TYPES = frozenset(
    wire.RELATION + wire.TYPE + wire.INSERT + wire.UPDATE + wire.DELETE + wire.TRUNCATE
    + wire.MESSAGE)


def message_parser(
    type_byte: int, *, yboutput: bool = False
) -> Callable[[bytes, bool, bool | None], Message] | None:
    """The parser :func:`parse_message` uses for messages of type ``type_byte`` (``None``
    for a byte pgoutput does not send), called as ``parser(data, in_stream, abort_info)``
    with ``data`` a non-empty ``bytes`` starting with that byte. For callers that parse
    many messages of one type (the stream reader); :func:`parse_message` is the API."""
    return (_YB_PARSERS if yboutput else _PARSERS)[type_byte]


def parse_message(
    data: bytes | bytearray | memoryview,
    *,
    in_stream: bool = False,
    abort_info: bool | None = None,
    yboutput: bool = False,
) -> Message:
    """Parse one pgoutput message (the payload of an XLogData, or one row of the SQL interface).

    ``in_stream``: the message sits between Stream Start and Stream Stop, so a
    Relation, Type, Insert, Update, Delete, Truncate or Message starts with the
    (sub)transaction's xid. ``abort_info``: Stream Abort carries the abort LSN
    and time (``streaming 'parallel'``, protocol 4); ``None`` infers it from the length.
    ``yboutput``: the bytes come from YugabyteDB's ``yboutput`` plug-in, whose Relation
    messages may carry replica identity ``c`` (CHANGE); see :attr:`Relation.replica_identity`.
    """
    if not isinstance(data, bytes):
        data = bytes(data)
    if not data:
        raise ProtocolError("a message type byte", offset=0, detail="empty message")
    parser = _PARSERS[data[0]]
    if yboutput:
        parser = _YB_PARSERS[data[0]]
    if parser is None:
        raise _fail(data, 0, "a pgoutput message type byte", f"unknown type {data[:1]!r}")
    return parser(data, in_stream, abort_info)
