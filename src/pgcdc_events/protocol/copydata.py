"""The CopyData frames around pgoutput messages on a ``START_REPLICATION ... LOGICAL`` connection.

The server sends XLogData (``w``: a WAL position and one pgoutput message) and
Primary keepalive (``k``) frames; the client answers with Standby status updates
(``r``) whose *flush* position becomes the slot's ``confirmed_flush_lsn``. These
helpers only turn frames into objects and back; reading the socket is yours.
"""

from __future__ import annotations

import struct
import time
from typing import Final

import attrs

from pgcdc_events.errors import ProtocolError
from pgcdc_events.protocol.lsn import Lsn, unix_us_to_pg_timestamp

__all__ = [
    "MAX_MESSAGE_SIZE",
    "XLOG_DATA_HEAD",
    "PrimaryKeepalive",
    "StandbyStatusUpdate",
    "XLogData",
    "encode_copy_data",
    "parse_copy_data",
]

#: XLogData after its ``w``: start LSN, WAL end, send time (the message bytes follow).
XLOG_DATA_HEAD = struct.Struct(">QQq")
_XLOG = XLOG_DATA_HEAD
_XLOG_END: Final = 1 + XLOG_DATA_HEAD.size

#: The largest pgoutput message accepted by default, in bytes: PostgreSQL's MaxAllocSize
#: (1 GB - 1). The walsender builds each XLogData frame, its head and the plug-in's
#: message, in one buffer that cannot grow past it, so no message it sends is larger; a
#: larger one (a capture line, a frame) is refused before its bytes are decoded.
MAX_MESSAGE_SIZE: Final = 0x3FFF_FFFF
_KEEPALIVE = struct.Struct(">QqB")
_STATUS = struct.Struct(">QQQqB")


@attrs.frozen(slots=True)
class XLogData:
    """``w``: one pgoutput message and where it sits in the WAL.

    For logical replication ``data_start`` and ``wal_end`` are the same LSN, and
    it is ``0`` for Relation and Type messages (and a Begin followed by Origin).
    ``send_time`` is µs since 2000-01-01 UTC.
    """

    TYPE = b"w"
    data_start: int
    wal_end: int
    send_time: int
    payload: bytes


@attrs.frozen(slots=True)
class PrimaryKeepalive:
    """``k``: the server's last sent WAL position; answer at once when ``reply_requested``."""

    TYPE = b"k"
    wal_end: int
    send_time: int
    reply_requested: bool


@attrs.frozen(slots=True)
class StandbyStatusUpdate:
    """``r``: the client's progress. For logical slots, ``flushed_lsn`` is what the slot keeps."""

    TYPE = b"r"
    written_lsn: int
    flushed_lsn: int
    applied_lsn: int
    client_time: int
    reply_requested: bool = False

    @classmethod
    def now(cls, lsn: int, *, reply_requested: bool = False) -> StandbyStatusUpdate:
        """A status update reporting ``lsn`` written, flushed and applied, stamped with now."""
        clock = unix_us_to_pg_timestamp(time.time_ns() // 1000)
        return cls(lsn, lsn, lsn, clock, reply_requested)


CopyData = XLogData | PrimaryKeepalive | StandbyStatusUpdate


def parse_copy_data(data: bytes | bytearray | memoryview, *,
                    max_message_size: int = MAX_MESSAGE_SIZE) -> XLogData | PrimaryKeepalive:
    """Parse one CopyData payload sent by the server during logical replication.

    An XLogData whose message is larger than ``max_message_size`` bytes is refused
    (:data:`MAX_MESSAGE_SIZE`: no walsender sends one), naming its LSN and size.
    """
    if not data:
        raise ProtocolError("a CopyData frame type byte", offset=0, detail="empty frame")
    tag = data[0]
    if tag == 0x77:  # 'w'
        if len(data) < _XLOG_END:
            raise ProtocolError(
                "XLogData's start LSN, WAL end and send time (24 bytes)",
                message_type="w",
                offset=1,
                detail=f"{len(data) - 1} bytes",
            )
        start, end, sent = _XLOG.unpack_from(data, 1)
        if len(data) - _XLOG_END > max_message_size:
            raise ProtocolError(
                f"a message of at most {max_message_size:,} bytes (max_message_size)",
                message_type="w",
                offset=_XLOG_END,
                detail=f"the message at LSN {Lsn(start)} has {len(data) - _XLOG_END:,} bytes",
            )
        if not isinstance(data, bytes):
            data = bytes(data)
        return XLogData(start, end, sent, data[_XLOG_END:])
    if not isinstance(data, bytes):
        data = bytes(data)
    if tag == 0x6B:  # 'k'
        if len(data) != 18:
            raise ProtocolError(
                "a keepalive of 17 bytes after the type",
                message_type="k",
                offset=min(len(data), 18),
                detail=f"{len(data) - 1} bytes",
            )
        end, sent, reply = _KEEPALIVE.unpack_from(data, 1)
        if reply > 1:
            raise ProtocolError(
                "a reply-requested flag of 0 or 1", message_type="k", offset=17, detail=str(reply)
            )
        return PrimaryKeepalive(end, sent, bool(reply))
    raise ProtocolError(
        "a CopyData frame 'w' or 'k'",
        message_type=chr(tag),
        offset=0,
        detail=f"unknown frame type {data[:1]!r}",
    )


def encode_copy_data(frame: CopyData) -> bytes:
    """The CopyData payload of ``frame`` (the status update is what a client sends)."""
    try:
        if isinstance(frame, XLogData):
            return (
                b"w" + _XLOG.pack(frame.data_start, frame.wal_end, frame.send_time) + frame.payload
            )
        if isinstance(frame, PrimaryKeepalive):
            return b"k" + _KEEPALIVE.pack(frame.wal_end, frame.send_time, frame.reply_requested)
        if isinstance(frame, StandbyStatusUpdate):
            return b"r" + _STATUS.pack(
                frame.written_lsn,
                frame.flushed_lsn,
                frame.applied_lsn,
                frame.client_time,
                frame.reply_requested,
            )
    except struct.error as exc:
        raise ProtocolError("frame fields within their wire types", detail=str(exc)) from None
    raise ProtocolError("a CopyData frame object", detail=type(frame).__name__)
