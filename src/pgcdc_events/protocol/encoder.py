"""Encoding message objects back to pgoutput bytes.

``parse_message(encode_message(m), in_stream=m.xid is not None) == m`` for every
message, and re-encoding a parsed real message reproduces its bytes exactly.
The optional xid of DML-like messages and the abort LSN/time of Stream Abort
are written when set, so the encoder needs no stream state.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from pgcdc_events.errors import ProtocolError
from pgcdc_events.protocol import wire as w
from pgcdc_events.protocol.messages import (
    KIND_BINARY,
    KIND_NULL,
    KIND_TEXT,
    KIND_UNCHANGED_TOAST,
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

__all__ = ["encode_message", "encode_tuple"]

_pack = struct.pack


def _string(value: str) -> bytes:
    raw = value.encode("utf-8")
    if b"\0" in raw:
        raise ProtocolError("a string without NUL bytes", detail=repr(value))
    return raw + b"\0"


def _xid(xid: int | None) -> bytes:
    return b"" if xid is None else w.UINT32.pack(xid)


def encode_tuple(tup: TupleData) -> bytes:
    """Encode TupleData: Int16 column count, then kind byte (and Int32 length + bytes)."""
    if len(tup.kinds) != len(tup.values):
        raise ProtocolError(
            "as many kinds as values in TupleData",
            detail=f"{len(tup.kinds)} kinds, {len(tup.values)} values",
        )
    parts = [w.UINT16.pack(len(tup.values))]
    for kind, value in zip(tup.kinds, tup.values, strict=False):
        if kind in (KIND_TEXT, KIND_BINARY):
            if value is None:
                raise ProtocolError(f"a value for a column of kind {chr(kind)!r}")
            parts.append(w.COLUMN_KIND_LENGTH.pack(kind, len(value)))
            parts.append(value)
        elif kind in (KIND_NULL, KIND_UNCHANGED_TOAST):
            if value is not None:
                raise ProtocolError(f"no value for a column of kind {chr(kind)!r}")
            parts.append(bytes((kind,)))
        else:
            raise ProtocolError("a column kind n, u, t or b", detail=repr(bytes((kind,))))
    return b"".join(parts)


def _begin(m: Begin) -> bytes:
    return w.BEGIN + w.BEGIN_HEAD.pack(m.final_lsn, m.commit_time, m.xid)


def _commit(m: Commit) -> bytes:
    return w.COMMIT + w.COMMIT_HEAD.pack(m.flags, m.commit_lsn, m.end_lsn, m.commit_time)


def _origin(m: Origin) -> bytes:
    return w.ORIGIN + w.ORIGIN_HEAD.pack(m.origin_lsn) + _string(m.name)


def _relation(m: Relation) -> bytes:
    if m.replica_identity not in ("d", "n", "f", "i"):
        raise ProtocolError("a replica identity d, n, f or i", message_type="R",
                            detail=repr(m.replica_identity))
    return _relation_bytes(m)


def _yb_relation(m: Relation) -> bytes:
    """yboutput's Relation: replica identity ``c`` (CHANGE) is allowed too (see decoder)."""
    if m.replica_identity not in ("d", "n", "f", "i", "c"):
        raise ProtocolError("a replica identity d, n, f, i or c", message_type="R",
                            detail=repr(m.replica_identity))
    return _relation_bytes(m)


def _relation_bytes(m: Relation) -> bytes:
    parts = [
        w.RELATION,
        _xid(m.xid),
        w.UINT32.pack(m.relation_id),
        _string(m.namespace),
        _string(m.name),
        m.replica_identity.encode("ascii"),
        w.INT16.pack(len(m.columns)),
    ]
    for col in m.columns:
        parts += [
            _pack(">B", col.flags),
            _string(col.name),
            w.COLUMN_TYPE.pack(col.type_oid, col.type_modifier),
        ]
    return b"".join(parts)


def _type(m: Type) -> bytes:
    return w.TYPE + _xid(m.xid) + w.UINT32.pack(m.type_oid) + _string(m.namespace) + _string(m.name)


def _insert(m: Insert) -> bytes:
    return w.INSERT + _xid(m.xid) + w.UINT32.pack(m.relation_id) + w.NEW_TUPLE + encode_tuple(m.new)


def _update(m: Update) -> bytes:
    head = w.UPDATE + _xid(m.xid) + w.UINT32.pack(m.relation_id)
    if m.old_kind is None:
        if m.old is not None:
            raise ProtocolError("old_kind 'K' or 'O' when an old tuple is given")
        return head + w.NEW_TUPLE + encode_tuple(m.new)
    if m.old_kind not in ("K", "O") or m.old is None:
        raise ProtocolError(
            "old_kind 'K' or 'O' together with an old tuple", detail=repr(m.old_kind)
        )
    return head + m.old_kind.encode() + encode_tuple(m.old) + w.NEW_TUPLE + encode_tuple(m.new)


def _delete(m: Delete) -> bytes:
    if m.old_kind not in ("K", "O"):
        raise ProtocolError("old_kind 'K' or 'O'", detail=repr(m.old_kind))
    return (
        w.DELETE + _xid(m.xid) + w.UINT32.pack(m.relation_id) + m.old_kind.encode()
        + encode_tuple(m.old)
    )


def _truncate(m: Truncate) -> bytes:
    n = len(m.relation_ids)
    return (w.TRUNCATE + _xid(m.xid) + w.TRUNCATE_HEAD.pack(n, m.options)
            + _pack(f">{n}I", *m.relation_ids))


def _message(m: LogicalMessage) -> bytes:
    return (
        w.MESSAGE
        + _xid(m.xid)
        + w.MESSAGE_HEAD.pack(m.flags, m.lsn)
        + _string(m.prefix)
        + w.INT32.pack(len(m.content))
        + m.content
    )


def _stream_start(m: StreamStart) -> bytes:
    return w.STREAM_START + w.STREAM_START_HEAD.pack(m.xid, 1 if m.first_segment else 0)


def _stream_stop(m: StreamStop) -> bytes:
    return w.STREAM_STOP


def _stream_commit(m: StreamCommit) -> bytes:
    return w.STREAM_COMMIT + w.STREAM_COMMIT_HEAD.pack(
        m.xid, m.flags, m.commit_lsn, m.end_lsn, m.commit_time)


def _stream_abort(m: StreamAbort) -> bytes:
    if m.abort_lsn is None and m.abort_time is None:
        return w.STREAM_ABORT + w.STREAM_ABORT_HEAD.pack(m.xid, m.subxid)
    if m.abort_lsn is None or m.abort_time is None:
        raise ProtocolError("both abort_lsn and abort_time, or neither")
    return w.STREAM_ABORT + w.STREAM_ABORT_INFO_HEAD.pack(
        m.xid, m.subxid, m.abort_lsn, m.abort_time)


def _begin_prepare(m: BeginPrepare) -> bytes:
    return (w.BEGIN_PREPARE
            + w.BEGIN_PREPARE_HEAD.pack(m.prepare_lsn, m.end_lsn, m.prepare_time, m.xid)
            + _string(m.gid))


def _prepare_like(tag: bytes) -> Callable[[Any], bytes]:
    def encode(m: Any) -> bytes:
        lsn = m.commit_lsn if tag == w.COMMIT_PREPARED else m.prepare_lsn
        ts = m.commit_time if tag == w.COMMIT_PREPARED else m.prepare_time
        return tag + w.PREPARE_HEAD.pack(m.flags, lsn, m.end_lsn, ts, m.xid) + _string(m.gid)

    return encode


def _rollback_prepared(m: RollbackPrepared) -> bytes:
    return (
        w.ROLLBACK_PREPARED
        + w.ROLLBACK_PREPARED_HEAD.pack(
            m.flags,
            m.prepare_end_lsn,
            m.rollback_end_lsn,
            m.prepare_time,
            m.rollback_time,
            m.xid,
        )
        + _string(m.gid)
    )


_ENCODERS: dict[type, Callable[[Any], bytes]] = {
    Begin: _begin,
    Commit: _commit,
    Origin: _origin,
    Relation: _relation,
    Type: _type,
    Insert: _insert,
    Update: _update,
    Delete: _delete,
    Truncate: _truncate,
    LogicalMessage: _message,
    StreamStart: _stream_start,
    StreamStop: _stream_stop,
    StreamCommit: _stream_commit,
    StreamAbort: _stream_abort,
    BeginPrepare: _begin_prepare,
    Prepare: _prepare_like(w.PREPARE),
    StreamPrepare: _prepare_like(w.STREAM_PREPARE),
    CommitPrepared: _prepare_like(w.COMMIT_PREPARED),
    RollbackPrepared: _rollback_prepared,
}


#: yboutput's encoders: pgoutput's, with a Relation that may carry REPLICA IDENTITY CHANGE.
_YB_ENCODERS: dict[type, Callable[[Any], bytes]] = {**_ENCODERS, Relation: _yb_relation}


def encode_message(message: Message, *, yboutput: bool = False) -> bytes:
    """The pgoutput bytes of ``message``; raises :class:`ProtocolError` on unencodable fields.

    ``yboutput``: encode as YugabyteDB's ``yboutput`` plug-in does (a Relation may carry
    replica identity ``c``); parse such bytes with ``parse_message(..., yboutput=True)``.
    """
    encoder = (_YB_ENCODERS if yboutput else _ENCODERS).get(type(message))
    if encoder is None:
        raise ProtocolError("a pgoutput message object", detail=type(message).__name__)
    try:
        return encoder(message)
    except (struct.error, UnicodeEncodeError, TypeError, AttributeError) as exc:
        raise ProtocolError(
            f"{type(message).__name__} fields within their wire types",
            message_type=message.TYPE.decode(),
            detail=str(exc),
        ) from None
