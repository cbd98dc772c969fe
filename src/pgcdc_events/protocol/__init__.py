"""The sans-I/O pgoutput protocol layer: bytes in, immutable message objects out.

Use :class:`PgOutputReader` to parse a stream of messages (it tracks stream
blocks and relations), :func:`parse_message` / :func:`encode_message` for single
messages, :func:`parse_copy_data` for the replication connection's CopyData
frames, and :func:`iter_capture` for the capture JSON Lines format.
"""

from __future__ import annotations

from pgcdc_events.errors import ProtocolError
from pgcdc_events.protocol.capture import (
    CaptureError,
    CaptureRow,
    dump_capture_row,
    iter_capture,
    rows_of_line,
    write_capture,
)
from pgcdc_events.protocol.copydata import (
    MAX_MESSAGE_SIZE,
    PrimaryKeepalive,
    StandbyStatusUpdate,
    XLogData,
    encode_copy_data,
    parse_copy_data,
)
from pgcdc_events.protocol.copytext import CopyTextError, copy_text_rows, insert_messages
from pgcdc_events.protocol.decoder import STREAMABLE_TYPES, parse_message
from pgcdc_events.protocol.encoder import encode_message, encode_tuple
from pgcdc_events.protocol.lsn import (
    PG_EPOCH_OFFSET_US,
    Lsn,
    pg_timestamp_to_datetime,
    pg_timestamp_to_unix_us,
    unix_us_to_pg_timestamp,
)
from pgcdc_events.protocol.messages import (
    KIND_BINARY,
    KIND_NULL,
    KIND_TEXT,
    KIND_UNCHANGED_TOAST,
    REPLICA_IDENTITY_CHANGE,
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
from pgcdc_events.protocol.reader import PgOutputReader, Streaming
from pgcdc_events.protocol.transactions import COMMITS, Prelude, Step, TransactionResolver

__all__ = [
    "COMMITS",
    "KIND_BINARY",
    "KIND_NULL",
    "KIND_TEXT",
    "KIND_UNCHANGED_TOAST",
    "MAX_MESSAGE_SIZE",
    "PG_EPOCH_OFFSET_US",
    "REPLICA_IDENTITY_CHANGE",
    "STREAMABLE_TYPES",
    "Begin",
    "BeginPrepare",
    "CaptureError",
    "CaptureRow",
    "Commit",
    "CommitPrepared",
    "CopyTextError",
    "Delete",
    "Insert",
    "LogicalMessage",
    "Lsn",
    "Message",
    "Origin",
    "PgOutputReader",
    "Prelude",
    "Prepare",
    "PrimaryKeepalive",
    "ProtocolError",
    "Relation",
    "RelationColumn",
    "RollbackPrepared",
    "StandbyStatusUpdate",
    "Step",
    "StreamAbort",
    "StreamCommit",
    "StreamPrepare",
    "StreamStart",
    "StreamStop",
    "Streaming",
    "TransactionResolver",
    "Truncate",
    "TupleData",
    "Type",
    "Update",
    "XLogData",
    "copy_text_rows",
    "dump_capture_row",
    "encode_copy_data",
    "encode_message",
    "encode_tuple",
    "insert_messages",
    "iter_capture",
    "parse_copy_data",
    "parse_message",
    "pg_timestamp_to_datetime",
    "pg_timestamp_to_unix_us",
    "rows_of_line",
    "unix_us_to_pg_timestamp",
    "write_capture",
]
