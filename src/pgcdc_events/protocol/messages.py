"""Immutable objects for every pgoutput message of protocol versions 1 to 4.

Field names follow PostgreSQL's "Logical Replication Message Formats" page.
LSNs are plain ``int`` (wrap them in :class:`~pgcdc_events.protocol.Lsn` to
print them); times are microseconds since 2000-01-01 UTC, as on the wire
(see :func:`~pgcdc_events.protocol.pg_timestamp_to_datetime`). ``xid`` on the
DML-like messages is the (sub)transaction id that PostgreSQL writes only inside
a Stream Start/Stop block; it is ``None`` everywhere else.
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar, Literal

import attrs

from pgcdc_events.protocol import wire
from pgcdc_events.protocol.lsn import pg_timestamp_to_datetime

__all__ = [
    "KIND_BINARY",
    "KIND_NULL",
    "KIND_TEXT",
    "KIND_UNCHANGED_TOAST",
    "REPLICA_IDENTITY_CHANGE",
    "Begin",
    "BeginPrepare",
    "Commit",
    "CommitPrepared",
    "Delete",
    "Insert",
    "LogicalMessage",
    "Message",
    "Origin",
    "Prepare",
    "Relation",
    "RelationColumn",
    "RollbackPrepared",
    "StreamAbort",
    "StreamCommit",
    "StreamPrepare",
    "StreamStart",
    "StreamStop",
    "Truncate",
    "TupleData",
    "Type",
    "Update",
]

#: Column kinds in :attr:`TupleData.kinds` (the byte PostgreSQL writes before each column).
KIND_NULL = wire.KIND_NULL
KIND_UNCHANGED_TOAST = wire.KIND_UNCHANGED_TOAST
KIND_TEXT = wire.KIND_TEXT
KIND_BINARY = wire.KIND_BINARY

#: YugabyteDB's replica identity CHANGE in a Relation message (``yboutput`` only): an
#: UPDATE carries the changed columns and the primary key; every other column is sent
#: as kind ``u`` (:data:`KIND_UNCHANGED_TOAST`). Source: yugabyte/yugabyte-db
#: src/yb/yql/pggate/ybc_pg_typedefs.h, ``YBC_YB_REPLICA_IDENTITY_CHANGE 'c'``.
REPLICA_IDENTITY_CHANGE = "c"



@attrs.frozen
class TupleData:
    """The columns of one row as sent: a kind byte and, for text/binary, the raw value.

    ``kinds[i]`` is one of ``n`` (NULL), ``u`` (unchanged TOASTed value, not sent; from
    YugabyteDB's ``yboutput`` also a column omitted under REPLICA IDENTITY CHANGE),
    ``t`` (text output of the type) or ``b`` (the type's binary send format);
    ``values[i]`` holds the bytes for ``t`` and ``b`` and ``None`` otherwise.
    """

    kinds: bytes
    values: tuple[bytes | None, ...]

    def __len__(self) -> int:
        return len(self.values)

    def is_null(self, index: int) -> bool:
        """Whether column ``index`` is SQL NULL."""
        return self.kinds[index] == KIND_NULL

    def is_unchanged_toast(self, index: int) -> bool:
        """Whether column ``index`` is an unchanged TOASTed value whose data was not sent."""
        return self.kinds[index] == KIND_UNCHANGED_TOAST

    def is_binary(self, index: int) -> bool:
        """Whether column ``index`` carries the type's binary send format."""
        return self.kinds[index] == KIND_BINARY

    @classmethod
    def from_text(cls, values: tuple[str | bytes | None, ...]) -> TupleData:
        """Build text-format tuple data; ``None`` is NULL, ``str`` is encoded as UTF-8."""
        kinds = bytes(KIND_NULL if v is None else KIND_TEXT for v in values)
        raw = tuple(v.encode() if isinstance(v, str) else v for v in values)
        return cls(kinds, raw)


@attrs.frozen
class Begin:
    """Start of a transaction that is sent whole (``B``)."""

    TYPE: ClassVar[bytes] = wire.BEGIN
    final_lsn: int
    commit_time: int
    xid: int

    @property
    def commit_datetime(self) -> datetime:
        """Commit time as an aware UTC datetime."""
        return pg_timestamp_to_datetime(self.commit_time)


@attrs.frozen
class Commit:
    """End of a transaction (``C``); ``end_lsn`` is where the next transaction may start."""

    TYPE: ClassVar[bytes] = wire.COMMIT
    flags: int
    commit_lsn: int
    end_lsn: int
    commit_time: int

    @property
    def commit_datetime(self) -> datetime:
        """Commit time as an aware UTC datetime."""
        return pg_timestamp_to_datetime(self.commit_time)


@attrs.frozen
class Origin:
    """Replication origin of the current transaction (``O``)."""

    TYPE: ClassVar[bytes] = wire.ORIGIN
    origin_lsn: int
    name: str


@attrs.frozen
class RelationColumn:
    """One published column of a :class:`Relation`."""

    flags: int
    name: str
    type_oid: int
    type_modifier: int

    @property
    def is_key(self) -> bool:
        """Whether the column is part of the replica identity (every column under FULL)."""
        return bool(self.flags & 1)


@attrs.frozen
class Relation:
    """Description of a table, sent before its first change and after each schema change (``R``).

    ``namespace`` is kept as sent: PostgreSQL sends an empty string for
    ``pg_catalog``. ``replica_identity`` is ``'d'`` (default), ``'n'`` (nothing), ``'f'`` (full) or
    ``'i'`` (index); from YugabyteDB's ``yboutput`` also ``'c'`` (CHANGE, see
    :data:`REPLICA_IDENTITY_CHANGE`).
    """

    TYPE: ClassVar[bytes] = wire.RELATION
    relation_id: int
    namespace: str
    name: str
    replica_identity: str
    columns: tuple[RelationColumn, ...]
    xid: int | None = None


@attrs.frozen
class Type:
    """A non-built-in data type used by a following Relation (``Y``).

    PostgreSQL sends the column's type OID with the namespace and name of its base
    type, so a domain arrives under its base type's name.
    """

    TYPE: ClassVar[bytes] = wire.TYPE
    type_oid: int
    namespace: str
    name: str
    xid: int | None = None


@attrs.frozen
class Insert:
    """A new row (``I``)."""

    TYPE: ClassVar[bytes] = wire.INSERT
    relation_id: int
    new: TupleData
    xid: int | None = None


@attrs.frozen
class Update:
    """A changed row (``U``).

    ``old_kind`` is ``'K'`` when ``old`` holds the old replica-identity key (sent
    only when a key column changed), ``'O'`` when it holds the whole old row
    (REPLICA IDENTITY FULL), and ``None`` when no old data was sent.
    """

    TYPE: ClassVar[bytes] = wire.UPDATE
    relation_id: int
    old_kind: Literal["K", "O"] | None
    old: TupleData | None
    new: TupleData
    xid: int | None = None


@attrs.frozen
class Delete:
    """A deleted row (``D``): the old key (``'K'``) or the whole old row (``'O'``)."""

    TYPE: ClassVar[bytes] = wire.DELETE
    relation_id: int
    old_kind: Literal["K", "O"]
    old: TupleData
    xid: int | None = None


@attrs.frozen
class Truncate:
    """``TRUNCATE`` of one or more tables (``T``)."""

    TYPE: ClassVar[bytes] = wire.TRUNCATE
    CASCADE: ClassVar[int] = 1
    RESTART_IDENTITY: ClassVar[int] = 2
    options: int
    relation_ids: tuple[int, ...]
    xid: int | None = None

    @property
    def cascade(self) -> bool:
        """Whether ``CASCADE`` was given."""
        return bool(self.options & self.CASCADE)

    @property
    def restart_identity(self) -> bool:
        """Whether ``RESTART IDENTITY`` was given."""
        return bool(self.options & self.RESTART_IDENTITY)


@attrs.frozen
class LogicalMessage:
    """A message written with ``pg_logical_emit_message`` (``M``)."""

    TYPE: ClassVar[bytes] = wire.MESSAGE
    flags: int
    lsn: int
    prefix: str
    content: bytes
    xid: int | None = None

    @property
    def transactional(self) -> bool:
        """Whether the message belongs to a transaction (flag bit 1)."""
        return bool(self.flags & 1)


@attrs.frozen
class StreamStart:
    """Start of a block of changes of an in-progress transaction (``S``, protocol 2+)."""

    TYPE: ClassVar[bytes] = wire.STREAM_START
    xid: int
    first_segment: bool


@attrs.frozen
class StreamStop:
    """End of a block of streamed changes (``E``, protocol 2+)."""

    TYPE: ClassVar[bytes] = wire.STREAM_STOP


@attrs.frozen
class StreamCommit:
    """Commit of a streamed transaction (``c``, protocol 2+)."""

    TYPE: ClassVar[bytes] = wire.STREAM_COMMIT
    xid: int
    flags: int
    commit_lsn: int
    end_lsn: int
    commit_time: int

    @property
    def commit_datetime(self) -> datetime:
        """Commit time as an aware UTC datetime."""
        return pg_timestamp_to_datetime(self.commit_time)


@attrs.frozen
class StreamAbort:
    """Abort of a streamed transaction or, when ``subxid != xid``, one of its subtransactions.

    ``abort_lsn`` and ``abort_time`` are sent only by protocol 4 with
    ``streaming 'parallel'``; they are ``None`` otherwise (``A``).
    """

    TYPE: ClassVar[bytes] = wire.STREAM_ABORT
    xid: int
    subxid: int
    abort_lsn: int | None = None
    abort_time: int | None = None

    @property
    def is_subtransaction(self) -> bool:
        """Whether only a subtransaction is aborted."""
        return self.subxid != self.xid


@attrs.frozen
class BeginPrepare:
    """Start of a two-phase transaction being prepared (``b``, protocol 3+)."""

    TYPE: ClassVar[bytes] = wire.BEGIN_PREPARE
    prepare_lsn: int
    end_lsn: int
    prepare_time: int
    xid: int
    gid: str


@attrs.frozen
class Prepare:
    """``PREPARE TRANSACTION`` of the transaction started by :class:`BeginPrepare` (``P``)."""

    TYPE: ClassVar[bytes] = wire.PREPARE
    flags: int
    prepare_lsn: int
    end_lsn: int
    prepare_time: int
    xid: int
    gid: str


@attrs.frozen
class CommitPrepared:
    """``COMMIT PREPARED`` (``K``, protocol 3+); may arrive long after the prepare."""

    TYPE: ClassVar[bytes] = wire.COMMIT_PREPARED
    flags: int
    commit_lsn: int
    end_lsn: int
    commit_time: int
    xid: int
    gid: str


@attrs.frozen
class RollbackPrepared:
    """``ROLLBACK PREPARED`` (``r``, protocol 3+)."""

    TYPE: ClassVar[bytes] = wire.ROLLBACK_PREPARED
    flags: int
    prepare_end_lsn: int
    rollback_end_lsn: int
    prepare_time: int
    rollback_time: int
    xid: int
    gid: str


@attrs.frozen
class StreamPrepare:
    """Prepare of a streamed transaction (``p``, protocol 3+); same fields as :class:`Prepare`."""

    TYPE: ClassVar[bytes] = wire.STREAM_PREPARE
    flags: int
    prepare_lsn: int
    end_lsn: int
    prepare_time: int
    xid: int
    gid: str


Message = (
    Begin
    | Commit
    | Origin
    | Relation
    | Type
    | Insert
    | Update
    | Delete
    | Truncate
    | LogicalMessage
    | StreamStart
    | StreamStop
    | StreamCommit
    | StreamAbort
    | BeginPrepare
    | Prepare
    | CommitPrepared
    | RollbackPrepared
    | StreamPrepare
)
"""Any pgoutput message object."""
