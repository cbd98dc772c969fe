"""The stateful pgoutput reader: every rule about message order lives here.

PostgreSQL's messages are not self-describing: whether a DML message starts with
an xid depends on being inside a Stream Start/Stop block, and a change names its
table only by the OID of an earlier Relation message. :class:`PgOutputReader`
keeps that state, parses each message with it, and rejects sequences a server
cannot send (a Commit without a Begin, a Stream Stop without a Stream Start, a
change to a relation never announced, a message type the protocol version does
not have).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal

from pgcdc_events.errors import ProtocolError
from pgcdc_events.protocol import wire
from pgcdc_events.protocol.decoder import insert_parts, message_parser, parse_message
from pgcdc_events.protocol.messages import (
    Delete,
    Insert,
    LogicalMessage,
    Message,
    Relation,
    Truncate,
    TupleData,
    Type,
    Update,
)

__all__ = ["PgOutputReader", "Streaming"]

Streaming = Literal["off", "on", "parallel"]

#: Message type bytes each protocol version may send.
_V1 = (wire.BEGIN + wire.COMMIT + wire.ORIGIN + wire.RELATION + wire.TYPE + wire.INSERT
       + wire.UPDATE + wire.DELETE + wire.TRUNCATE + wire.MESSAGE)
_STREAMING = wire.STREAM_START + wire.STREAM_STOP + wire.STREAM_COMMIT + wire.STREAM_ABORT
_TWO_PHASE = (wire.BEGIN_PREPARE + wire.PREPARE + wire.COMMIT_PREPARED
              + wire.ROLLBACK_PREPARED + wire.STREAM_PREPARE)
_TYPES_BY_VERSION = {
    1: frozenset(_V1),
    2: frozenset(_V1 + _STREAMING),
    3: frozenset(_V1 + _STREAMING + _TWO_PHASE),
    4: frozenset(_V1 + _STREAMING + _TWO_PHASE),
}
_STREAM_TYPES = frozenset(_STREAMING)
_DML = frozenset(wire.INSERT + wire.UPDATE + wire.DELETE + wire.TRUNCATE)
_R, _Y, _M, _C, _P, _O, _S, _E = (wire.RELATION[0], wire.TYPE[0], wire.MESSAGE[0],
                                  wire.COMMIT[0], wire.PREPARE[0], wire.ORIGIN[0],
                                  wire.STREAM_START[0], wire.STREAM_STOP[0])
_BEGINS = frozenset(wire.BEGIN + wire.BEGIN_PREPARE)
_ROW_CHANGES = frozenset(wire.INSERT + wire.UPDATE + wire.DELETE)
_I, _U, _D = wire.INSERT[0], wire.UPDATE[0], wire.DELETE[0]


class PgOutputReader:
    """Parse a sequence of pgoutput messages, tracking stream blocks, transactions and relations.

    ``proto_version`` and ``streaming`` are the options the replication stream was
    started with; when given, message types the version cannot send are rejected
    and Stream Abort is parsed in the form that ``streaming`` implies. When left
    as ``None`` every message type is accepted and the Stream Abort form is taken
    from its length. ``yboutput``: the stream comes from YugabyteDB's ``yboutput``
    plug-in (see :func:`parse_message`).

    A message that fails to parse or validate raises :class:`ProtocolError` and
    leaves the reader's state as it was.
    """

    def __init__(
        self,
        *,
        proto_version: int | None = None,
        streaming: Streaming | None = None,
        yboutput: bool = False,
    ) -> None:
        if proto_version is not None and proto_version not in _TYPES_BY_VERSION:
            raise ProtocolError("a protocol version between 1 and 4", detail=str(proto_version))
        if streaming not in (None, "off", "on", "parallel"):
            raise ProtocolError("streaming 'off', 'on' or 'parallel'", detail=repr(streaming))
        if streaming == "on" and proto_version is not None and proto_version < 2:
            raise ProtocolError("protocol version 2 or higher for streaming 'on'")
        if streaming == "parallel" and proto_version is not None and proto_version < 4:
            raise ProtocolError("protocol version 4 or higher for streaming 'parallel'")
        self.proto_version = proto_version
        self.streaming = streaming
        #: The stream comes from YugabyteDB's ``yboutput`` (Relation identity ``c`` accepted).
        self.yboutput = yboutput
        allowed = _TYPES_BY_VERSION.get(proto_version or 4, _TYPES_BY_VERSION[4])
        if streaming == "off":
            allowed = allowed - _STREAM_TYPES
        self._allowed = allowed
        self._abort_info = None if streaming is None else streaming == "parallel"
        self._row_parsers: dict[int, Any] = {
            t: message_parser(t, yboutput=yboutput) for t in _ROW_CHANGES}
        self._parse_insert = self._row_parsers[_I]
        self._relations: dict[int, Relation] = {}
        self._types: dict[int, Type] = {}
        self._relations_view = MappingProxyType(self._relations)
        self._types_view = MappingProxyType(self._types)
        self._txn: str | None = None  # "B" inside Begin..Commit, "b" inside Begin Prepare..Prepare
        self._stream_xid: int | None = None
        self.messages_read = 0

    # -- state -------------------------------------------------------------
    @property
    def relations(self) -> Mapping[int, Relation]:
        """The latest Relation message seen for each relation OID (read-only)."""
        return self._relations_view

    @property
    def types(self) -> Mapping[int, Type]:
        """The latest Type message seen for each type OID (read-only)."""
        return self._types_view

    @property
    def in_stream(self) -> bool:
        """Whether the reader is between a Stream Start and its Stream Stop."""
        return self._stream_xid is not None

    @property
    def stream_xid(self) -> int | None:
        """The xid of the open stream block, if any."""
        return self._stream_xid

    @property
    def in_transaction(self) -> bool:
        """Whether a Begin (or Begin Prepare) is open."""
        return self._txn is not None

    def reset(self, *, keep_relations: bool = True) -> None:
        """Forget transaction and stream state, e.g. after reconnecting to the server."""
        self._txn = None
        self._stream_xid = None
        if not keep_relations:
            self._relations.clear()
            self._types.clear()

    # -- reading -------------------------------------------------------------
    def read(self, data: bytes | bytearray | memoryview) -> Message:
        """Parse and validate the next message of the stream."""
        if type(data) is not bytes:
            data = bytes(data)
        kind = data[0] if data else -1
        if kind == _I and self._stream_xid is None and self._txn is not None:
            # the bulk of most streams: an Insert inside a transaction
            insert: Insert = self._parse_insert(data, False, None)
            relation = self._relations.get(insert.relation_id)
            if relation is None or len(insert.new.values) != len(relation.columns):
                self._check_width(kind, insert)  # names the OID, or the tuple and its width
            self.messages_read += 1
            return insert
        if kind in _ROW_CHANGES and self._stream_xid is None and self._txn is not None:
            # the bulk of a stream: an Insert, Update or Delete inside a transaction
            change: Insert | Update | Delete = self._row_parsers[kind](data, False, None)
            relation = self._relations.get(change.relation_id)
            if relation is None:
                relation = self._relation(kind, change.relation_id)  # raises, naming the OID
            width = len(relation.columns)
            # a Delete's tuple is its old one; an Update may carry an old one too
            new: TupleData = change.old if kind == _D else change.new  # type: ignore[union-attr,assignment]
            old: TupleData | None = change.old if kind == _U else None  # type: ignore[union-attr]
            if len(new.values) != width or (old is not None and len(old.values) != width):
                self._check_width(kind, change)  # names the tuple and its width
            self.messages_read += 1
            return change
        if data and data[0] not in self._allowed:
            t = chr(data[0])
            if data[0] in _TYPES_BY_VERSION[4]:
                raise ProtocolError(
                    "a message type this stream can send",
                    message_type=t,
                    offset=0,
                    detail=f"{t!r} is not sent with proto_version={self.proto_version}, "
                    f"streaming={self.streaming}",
                )
        message = parse_message(
            data, in_stream=self._stream_xid is not None, abort_info=self._abort_info,
            yboutput=self.yboutput,
        )
        self._apply(data[0], message)
        self.messages_read += 1
        return message

    def read_insert(self, data: bytes) -> tuple[int, bytes, tuple[bytes | None, ...]] | None:
        """:meth:`read` of an Insert inside a transaction (outside a stream block), the path
        most messages of a stream take, as its parts: the relation OID and the new tuple's
        kinds and values (:func:`~pgcdc_events.protocol.decoder.insert_parts`), validated
        as :meth:`read` validates the :class:`Insert` it builds of them, for a caller that
        converts the tuple at once. ``None``, reading nothing, for any other message (or
        ``data`` not ``bytes``): then call :meth:`read`."""
        if type(data) is not bytes or not data or data[0] != _I or self._stream_xid is not None \
                or self._txn is None:
            return None
        parts = insert_parts(data)
        relation = self._relations.get(parts[0])
        if relation is None or len(parts[2]) != len(relation.columns):
            # names the OID, or the tuple and its width
            self._check_width(_I, Insert(parts[0], TupleData(parts[1], parts[2])))
        self.messages_read += 1
        return parts

    def _error(self, t: int, expected: str, detail: str | None = None) -> ProtocolError:
        return ProtocolError(expected, message_type=chr(t), offset=0, detail=detail)

    def _apply(self, t: int, message: Message) -> None:  # noqa: C901
        if t in _DML:
            if self._txn is None and self._stream_xid is None:
                raise self._error(
                    t,
                    "a change inside a transaction or stream block",
                    "no Begin or Stream Start is open",
                )
            if isinstance(message, Truncate):
                for relid in message.relation_ids:
                    self._relation(t, relid)
            else:
                assert isinstance(message, (Insert, Update, Delete))
                self._check_width(t, message)
            return
        if t == _R:
            assert isinstance(message, Relation)
            self._relations[message.relation_id] = message
        elif t == _Y:
            assert isinstance(message, Type)
            self._types[message.type_oid] = message
        elif t == _M:
            assert isinstance(message, LogicalMessage)
            if message.transactional and self._txn is None and self._stream_xid is None:
                raise self._error(
                    t,
                    "a transactional message inside a transaction",
                    "no Begin or Stream Start is open",
                )
        elif t in _BEGINS:
            self._outside_all(t)
            self._txn = chr(t)
        elif t == _C:
            if self._txn != "B":
                raise self._error(
                    t,
                    "a Begin before this Commit",
                    "no transaction is open" if self._txn is None else "a Begin Prepare is open",
                )
            self._txn = None
        elif t == _P:
            if self._txn != "b":
                raise self._error(
                    t, "a Begin Prepare before this Prepare", "no prepared transaction is open"
                )
            self._txn = None
        elif t == _O:
            if self._txn is None and self._stream_xid is None:
                raise self._error(t, "an Origin inside a transaction or stream block")
        elif t == _S:
            self._outside_all(t)
            self._stream_xid = message.xid  # type: ignore[union-attr]
        elif t == _E:
            if self._stream_xid is None:
                raise self._error(
                    t, "a Stream Start before this Stream Stop", "no stream block is open"
                )
            self._stream_xid = None
        else:  # c, A, p, K, r: complete a transaction outside any block
            self._outside_all(t)

    def _outside_all(self, t: int) -> None:
        if self._stream_xid is not None:
            raise self._error(
                t,
                "no open stream block",
                f"Stream Start of xid {self._stream_xid} has no Stream Stop",
            )
        if self._txn is not None:
            kind = "Begin" if self._txn == "B" else "Begin Prepare"
            raise self._error(t, "no open transaction", f"a {kind} has not ended")

    def _relation(self, t: int, relid: int) -> Relation:
        relation = self._relations.get(relid)
        if relation is None:
            raise self._error(
                t, "a change to an announced relation", f"no Relation message for OID {relid}"
            )
        return relation

    def _check_width(self, t: int, message: Insert | Update | Delete) -> None:
        width = len(self._relation(t, message.relation_id).columns)
        tuples: tuple[TupleData | None, ...]
        if isinstance(message, Delete):
            tuples = (message.old,)
        elif isinstance(message, Update):
            tuples = (message.old, message.new)
        else:
            tuples = (message.new,)
        for tup in tuples:
            if tup is not None and len(tup.values) != width:
                raise self._error(
                    t,
                    f"{width} columns as the Relation announced",
                    f"the tuple has {len(tup.values)}",
                )
