"""Which transaction each message belongs to, and when transactions end: the one home of
pgoutput's transaction rules.

pgoutput interleaves four kinds of work in one stream, and every consumer of the stream
must tell them apart the same way:

- an *ordinary* transaction: Begin, its changes, Commit;
- a *streamed* transaction (``streaming`` on, protocol 2+): stream blocks (Stream Start
  ... Stream Stop) of its changes, interleaved with other transactions; a Stream Abort
  of a subtransaction drops that subtransaction's changes, one of the transaction itself
  drops it whole; it ends with Stream Commit, or with Stream Prepare;
- a *two-phase* transaction (``two_phase``, protocol 3+): Begin Prepare, its changes,
  Prepare (or streamed blocks and Stream Prepare), then later Commit Prepared or Rollback
  Prepared;
- a *non-transactional* logical message, which Debezium treats as a transaction of its own.

:class:`TransactionResolver` is fed the messages in stream order (parsed, by their type
byte and a few head fields, or as raw bytes read from their heads) and answers, for each,
with a :class:`Step`: what the message did to the transactions. Its attributes answer the
questions every consumer asks: which transaction the message belongs to (:attr:`owner`),
which transactions are open (:attr:`current`, :attr:`block`, :attr:`streams`,
:attr:`prepared`), and whether the stream may be cut right here (:attr:`idle`). Fed items
(a parsed message, a capture line: whatever the caller keeps), it also keeps what a decoder
starting after the last message needs, as a :class:`Prelude`.

The event decoder, the chunk planner (Spark and ``decode --workers``), the capture's unit
assembler and its stream reader all consume this class and keep no transaction rule of
their own. It is sans-I/O and does not validate message order: that is
:class:`~pgcdc_events.protocol.PgOutputReader`'s job, and a consumer that needs it parses
with one.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from typing import Any, Final, Generic, TypeVar

import attrs

from pgcdc_events.errors import ProtocolError
from pgcdc_events.protocol import wire
from pgcdc_events.protocol.decoder import parse_message
from pgcdc_events.protocol.encoder import encode_message
from pgcdc_events.protocol.messages import (
    Begin,
    Commit,
    CommitPrepared,
    LogicalMessage,
    Message,
    Relation,
    StreamAbort,
    StreamCommit,
    StreamStart,
    Type,
)

__all__ = ["COMMITS", "Prelude", "Row", "Step", "TransactionResolver", "outside_bytes",
           "outside_form"]


class Step(enum.IntEnum):
    """What one message did to the transactions of the stream."""

    #: Nothing: a Relation, Type or Stream Stop (Stream Stop only ends a block).
    NONE = 0
    #: A change (or Origin, or transactional message) of :attr:`TransactionResolver.owner`.
    CHANGE = 1
    #: An ordinary transaction opens.
    BEGIN = 2
    #: The ordinary transaction commits: a unit is complete.
    COMMIT = 3
    #: A two-phase transaction opens (Begin Prepare).
    BEGIN_PREPARE = 4
    #: It is prepared (Prepare): held until Commit Prepared or Rollback Prepared.
    PREPARE = 5
    #: A stream block opens a streamed transaction, or starts it over (its first segment
    #: again, after a reconnect): whatever was held for it is void.
    STREAM_OPEN = 6
    #: A stream block of a streamed transaction already open.
    STREAM_CONTINUE = 7
    #: The stream block ends.
    STREAM_STOP = 8
    #: The streamed transaction is aborted whole.
    STREAM_ABORT = 9
    #: A subtransaction of the streamed transaction is aborted (its changes are void).
    SUBXACT_ABORT = 10
    #: The streamed transaction commits: a unit is complete.
    STREAM_COMMIT = 11
    #: The streamed transaction is prepared: held until Commit or Rollback Prepared.
    STREAM_PREPARE = 12
    #: A prepared transaction commits: a unit is complete.
    COMMIT_PREPARED = 13
    #: A prepared transaction is rolled back: it ends with nothing to deliver.
    ROLLBACK_PREPARED = 14
    #: A non-transactional logical message: a unit of its own, complete.
    MESSAGE = 15


#: The steps after which a transaction's changes are to be delivered (a commit, as the
#: connector sees it: a non-transactional message counts as one).
COMMITS: Final = frozenset({Step.COMMIT, Step.STREAM_COMMIT, Step.COMMIT_PREPARED,
                            Step.MESSAGE})

_B, _C, _BP, _P, _K, _RB = (wire.BEGIN[0], wire.COMMIT[0], wire.BEGIN_PREPARE[0],
                            wire.PREPARE[0], wire.COMMIT_PREPARED[0],
                            wire.ROLLBACK_PREPARED[0])
_S, _E, _SC, _SA, _SP = (wire.STREAM_START[0], wire.STREAM_STOP[0], wire.STREAM_COMMIT[0],
                         wire.STREAM_ABORT[0], wire.STREAM_PREPARE[0])
_R, _Y, _M = wire.RELATION[0], wire.TYPE[0], wire.MESSAGE[0]
_u32 = wire.UINT32.unpack_from

_T = TypeVar("_T")


def outside_form(data: bytes, *, in_stream: bool) -> bytes:
    """A Relation or Type message's bytes as sent outside a stream block (no xid), which
    a decoder starting anywhere takes; ``data`` unchanged when it has that form already."""
    if not in_stream:
        return bytes(data)
    message = parse_message(data, in_stream=True)
    if not isinstance(message, (Relation, Type)):
        raise ProtocolError("a Relation or Type message", message_type=chr(data[0]), offset=0)
    return outside_bytes(message)


def outside_bytes(message: Relation | Type) -> bytes:
    """A parsed Relation or Type message's bytes as sent outside a stream block."""
    if message.xid is None:
        return bytes(encode_message(message))
    return bytes(encode_message(attrs.evolve(message, xid=None)))


Row = tuple[int, bytes]
"""A message as a decoder is fed it: its LSN and its bytes."""


@attrs.frozen
class Prelude:
    """What a decoder needs to start right after a cut, in the state one decoder fed the
    whole stream has there: the messages it is fed, its records dropped.

    ``schema``: the Type and Relation message in force for every OID (Types first), in
    their form outside stream blocks; ``transaction``: the Begin and Commit of the last
    transaction committed before the cut (a streamed or prepared transaction's commit
    stands as a Begin and Commit with its xid, commit time and LSNs: the decoder keeps
    the same commit time and end LSN from either), or ``None`` at the stream's start;
    ``message``: a non-transactional logical message after that transaction, which the
    connector counts as a commit of its own. Each is ``(lsn, bytes)``.
    """

    schema: tuple[Row, ...] = ()
    transaction: tuple[Row, Row] | None = None
    message: Row | None = None

    def rows(self) -> list[Row]:
        """The messages in the order a decoder is fed them."""
        out = list(self.schema)
        if self.transaction is not None:
            out += self.transaction
        if self.message is not None:
            out.append(self.message)
        return out

    def to_json(self) -> dict[str, Any]:
        """The one serialized form: LSNs as integers, bytes as hex."""
        return {"schema": [[lsn, data.hex()] for lsn, data in self.schema],
                "transaction": None if self.transaction is None else
                [[lsn, data.hex()] for lsn, data in self.transaction],
                "message": None if self.message is None else
                [self.message[0], self.message[1].hex()]}

    @classmethod
    def from_json(cls, obj: Any) -> Prelude:
        """:meth:`to_json`'s output back; a malformed one raises :class:`ProtocolError`."""
        def row(item: Any) -> Row:
            lsn, data = item
            if not isinstance(lsn, int) or not isinstance(data, str):
                raise TypeError(f"{item!r} is not [lsn, hex]")
            return lsn, bytes.fromhex(data)
        try:
            transaction = obj["transaction"]
            message = obj["message"]
            return cls(schema=tuple(row(s) for s in obj["schema"]),
                       transaction=None if transaction is None else
                       (row(transaction[0]), row(transaction[1])),
                       message=None if message is None else row(message))
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise ProtocolError("a prelude as Prelude.to_json writes it",
                                detail=str(exc)) from None

    @staticmethod
    def stand_in(commit: StreamCommit | CommitPrepared, lsn: int) -> tuple[Row, Row]:
        """The Begin and Commit that stand for a streamed or prepared transaction's commit
        at ``lsn`` in a prelude."""
        return ((lsn, bytes(encode_message(Begin(commit.commit_lsn, commit.commit_time,
                                                 commit.xid)))),
                (lsn, bytes(encode_message(Commit(0, commit.commit_lsn, commit.end_lsn,
                                                  commit.commit_time)))))


class TransactionResolver(Generic[_T]):
    """Fed a stream's messages in order, tells what each did to its transactions.

    Feed every message, or at least every message that is not an Insert, Update, Delete,
    Truncate or Origin (those change no transaction: a consumer that skips them reads
    :attr:`owner` as it was). Three ways, the same rules:

    - :meth:`feed` with the type byte and the head fields (``xid``, a Stream Abort's
      ``subxid``, a Stream Start's ``first_segment``, a logical message's
      ``transactional``);
    - :meth:`feed_message` with a parsed message;
    - :meth:`feed_head` with a message's bytes, read from its head alone.

    ``item`` (any of them) is what the caller keeps of the message; the resolver holds
    the items a :class:`Prelude` is made of (see :meth:`prelude`). ``lsn`` is kept as
    where a streamed or prepared transaction began (:attr:`streams`, :attr:`prepared`).
    """

    __slots__ = ("block", "current", "item_in_stream", "last_message", "last_transaction",
                 "open_begin", "owner", "prepared", "preparing", "relations", "streams",
                 "types")

    def __init__(self) -> None:
        #: xid of the open Begin or Begin Prepare (its changes come outside stream blocks).
        self.current: int | None = None
        #: Whether :attr:`current` is a two-phase transaction (Begin Prepare).
        self.preparing = False
        #: xid of the open stream block.
        self.block: int | None = None
        #: Streamed transactions not committed, aborted or prepared: xid -> LSN of their
        #: first segment.
        self.streams: dict[int, int] = {}
        #: Prepared transactions not yet committed or rolled back (and the one being
        #: prepared): xid -> LSN where it began (Begin Prepare, or its first segment).
        self.prepared: dict[int, int] = {}
        #: The transaction the last message fed belongs to, as PostgreSQL's SQL interface
        #: reports it (``xid`` beside each message): a Stream Abort's is the aborted
        #: subtransaction's; a non-transactional message's is 0 outside any transaction
        #: (PostgreSQL reports the emitting transaction's xid when it had one, which the
        #: message does not carry); ``None`` where no transaction is open.
        self.owner: int | None = None
        # the prelude's items: schema by (kind, OID), the last transaction, a message after it
        self.types: dict[object, tuple[_T, bool]] = {}
        self.relations: dict[object, tuple[_T, bool]] = {}
        self.open_begin: _T | None = None
        #: (Begin item or None for a streamed or prepared one, commit item)
        self.last_transaction: tuple[_T | None, _T] | None = None
        self.last_message: _T | None = None
        self.item_in_stream = False

    # -- questions ------------------------------------------------------------------------
    @property
    def idle(self) -> bool:
        """Whether nothing is open: no transaction, stream block, streamed transaction or
        unresolved prepared one. The stream may be cut after a commit that leaves it idle."""
        return (self.current is None and self.block is None and not self.streams
                and not self.prepared)

    @property
    def in_stream(self) -> bool:
        """Whether a stream block is open (changes then carry their xid)."""
        return self.block is not None

    @property
    def held_since(self) -> int | None:
        """The earliest LSN where a transaction still held (streamed or prepared) began:
        a slot acknowledged past it would not send that transaction again."""
        return min((*self.streams.values(), *self.prepared.values()), default=None)

    # -- feeding --------------------------------------------------------------------------
    def feed(self, kind: int, xid: int | None = None, *, lsn: int = 0, subxid: int | None = None,
             first_segment: bool = False, transactional: bool = True, oid: object = None,
             item: _T | None = None) -> Step:
        """One message by its type byte ``kind`` and head fields (see the class docstring);
        ``oid``: a Relation's or Type's OID, kept with ``item`` for the prelude."""
        if kind == _B:
            self.current, self.preparing, self.owner = xid, False, xid
            self.open_begin = item
            return Step.BEGIN
        if kind == _C:
            self.owner = self.block if self.block is not None else self.current
            self.current = None
            if item is not None and self.open_begin is not None:
                self.last_transaction, self.last_message = (self.open_begin, item), None
            self.open_begin = None
            return Step.COMMIT
        if kind in _SCHEMA:
            if item is not None:
                (self.relations if kind == _R else self.types)[oid] = (
                    item, self.block is not None)
            self.owner = self.block if self.block is not None else self.current
            return Step.NONE
        if kind == _M:
            if transactional or self.block is not None:
                self.owner = self.block if self.block is not None else self.current
                return Step.CHANGE
            self.owner = self.current if self.current is not None else 0
            if self.current is None and self.idle_outside():
                self.last_message = item
            return Step.MESSAGE
        if kind == _S:
            assert xid is not None
            self.block = self.owner = xid
            if first_segment or xid not in self.streams:
                self.streams[xid] = lsn
                return Step.STREAM_OPEN
            return Step.STREAM_CONTINUE
        if kind == _E:
            self.owner, self.block = self.block, None
            return Step.STREAM_STOP
        if kind == _SA:
            assert xid is not None
            # PostgreSQL reports the aborted (sub)transaction's own xid beside it
            self.owner = xid if subxid is None else subxid
            if subxid is None or subxid == xid:
                self.streams.pop(xid, None)
                return Step.STREAM_ABORT
            return Step.SUBXACT_ABORT
        if kind in _COMMITTING:
            assert xid is not None
            self.owner = xid
            self.streams.pop(xid, None)
            self.prepared.pop(xid, None)
            if item is not None and self.current is None:
                self.last_transaction, self.last_message = (None, item), None
            return Step.STREAM_COMMIT if kind == _SC else Step.COMMIT_PREPARED
        if kind == _SP:
            assert xid is not None
            self.owner = xid
            self.prepared[xid] = self.streams.pop(xid, lsn)
            return Step.STREAM_PREPARE
        if kind == _BP:
            assert xid is not None
            self.current, self.preparing, self.owner = xid, True, xid
            self.prepared[xid] = lsn
            self.open_begin = None
            return Step.BEGIN_PREPARE
        if kind == _P:
            self.owner = self.block if self.block is not None else self.current
            self.current, self.preparing = None, False
            return Step.PREPARE
        if kind == _RB:
            assert xid is not None
            self.owner = xid
            self.prepared.pop(xid, None)
            return Step.ROLLBACK_PREPARED
        # Insert, Update, Delete, Truncate, Origin
        self.owner = self.block if self.block is not None else self.current
        return Step.CHANGE

    def idle_outside(self) -> bool:
        """Whether no stream block, streamed transaction or prepared one is open (an
        ordinary transaction may be)."""
        return self.block is None and not self.streams and not self.prepared

    def feed_message(self, message: Message, lsn: int = 0, item: _T | None = None) -> Step:
        """:meth:`feed` for a parsed message."""
        kind = message.TYPE[0]
        if kind == _M:
            assert isinstance(message, LogicalMessage)
            return self.feed(kind, message.xid, transactional=message.transactional,
                             item=item)
        if kind == _S:
            assert isinstance(message, StreamStart)
            return self.feed(kind, message.xid, lsn=lsn, first_segment=message.first_segment,
                             item=item)
        if kind == _SA:
            assert isinstance(message, StreamAbort)
            return self.feed(kind, message.xid, subxid=message.subxid, item=item)
        oid = (message.relation_id if isinstance(message, Relation)
               else message.type_oid if isinstance(message, Type) else None)
        xid = getattr(message, "xid", None)
        return self.feed(kind, xid if isinstance(xid, int) else None, lsn=lsn, oid=oid,
                         item=item)

    def feed_head(self, data: bytes, lsn: int = 0, item: _T | None = None) -> Step | None:
        """:meth:`feed` for a message's bytes, read from its head without parsing the rest;
        ``None`` (nothing fed) for a message too short for its head: the parser names it."""
        if not data:
            return None
        kind = data[0]
        if kind in _CHANGES:
            self.owner = self.block if self.block is not None else self.current
            return Step.CHANGE
        if kind == _M:
            at = 5 if self.block is not None else 1
            if len(data) <= at:
                return None
            return self.feed(kind, transactional=bool(data[at] & 1), item=item)
        if kind in _NO_XID:
            return self.feed(kind, item=item)
        xid = wire.carried_xid(data)
        if xid is None and kind in _CARRY:
            return None
        if kind == _S:
            return self.feed(kind, xid, lsn=lsn, first_segment=len(data) > 5 and data[5] == 1,
                             item=item)
        if kind == _SA:
            subxid = _u32(data, 5)[0] if len(data) >= 9 else None
            return self.feed(kind, xid, subxid=subxid, item=item)
        return self.feed(kind, xid, lsn=lsn, item=item)

    def reset(self, *, keep_held: bool = True) -> None:
        """Forget the open transaction and stream block (a reconnect: the server sends them
        again). ``keep_held``: keep the streamed and prepared transactions (a decoder keeps
        their changes; the server sends a streamed one again from its first segment and a
        prepared one from its Begin Prepare), else forget them too (a reader that will be
        sent them again whole)."""
        self.current, self.preparing, self.block, self.open_begin = None, False, None, None
        if not keep_held:
            self.streams.clear()
            self.prepared.clear()

    # -- the prelude ----------------------------------------------------------------------
    def prelude(self, row_of: Callable[[_T], Row]) -> Prelude:
        """What a decoder needs to start after the last message fed (see :class:`Prelude`),
        from the items kept: ``row_of`` gives an item's LSN and message bytes."""
        schema = [self._schema_row(row_of, entry)
                  for entry in (*self.types.values(), *self.relations.values())]
        transaction: tuple[Row, Row] | None = None
        if self.last_transaction is not None:
            begin, end = self.last_transaction
            commit = row_of(end)
            if begin is not None:
                transaction = (row_of(begin), commit)
            else:
                message = parse_message(commit[1])
                assert isinstance(message, (StreamCommit, CommitPrepared))
                transaction = Prelude.stand_in(message, commit[0])
        message_row = None if self.last_message is None else row_of(self.last_message)
        return Prelude(tuple(schema), transaction, message_row)

    @staticmethod
    def _schema_row(row_of: Callable[[_T], Row], entry: tuple[_T, bool]) -> Row:
        item, in_stream = entry
        lsn, data = row_of(item)
        return lsn, outside_form(data, in_stream=in_stream)

    def schema_items(self) -> Iterable[_T]:
        """The Type and Relation items in force, Types first."""
        return (entry[0] for entry in (*self.types.values(), *self.relations.values()))


_SCHEMA: Final = frozenset({_R, _Y})
#: Insert, Update, Delete, Truncate, Origin: a change of the open transaction.
_CHANGES: Final = frozenset(wire.INSERT + wire.UPDATE + wire.DELETE + wire.TRUNCATE
                            + wire.ORIGIN)
_COMMITTING: Final = frozenset({_SC, _K})
#: Types whose head carries no xid (their transaction is the open one).
_NO_XID: Final = frozenset({_E, _C, _P, _R, _Y})
#: Types whose xid :func:`wire.carried_xid` reads from the head.
_CARRY: Final = frozenset({_B, _BP, _K, _RB, _SP, _S, _SC, _SA})
