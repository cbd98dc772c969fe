"""Decoding a capture in independent chunks of whole transactions, with one decoder's output.

A pgoutput stream is ordered and :class:`~pgcdc_events.events.EventDecoder` keeps state
from one message to the next. Between two transactions that state is small: the table
schemas (Relation and Type messages), the last commit LSN (``source.sequence``) and the
commit time of the last Begin. :func:`plan_chunks` reads the *control* messages of a
capture (everything but Insert, Update, Delete, Truncate and logical messages: few) and
cuts the stream after a transaction's commit (Commit, Stream Commit or Commit Prepared)
where no other streamed or prepared transaction is open;
a :class:`ChunkDecoder` primes a decoder with the state at a chunk's start (its
*prelude*: the Type and Relation messages in force, then the Begin and Commit of the
transaction before the cut, or a Begin and Commit standing for the streamed or prepared
transaction whose commit is the cut: the decoder keeps the same commit time and end LSN
from either) and feeds it the chunk's messages. Decoding every chunk and
concatenating the records in chunk order gives exactly the records of one decoder fed the
whole capture; each chunk can be decoded anywhere (a Spark task, a worker process).

The rule itself lives in :class:`CutPlanner`, fed one message at a time: :func:`plan_chunks`
is a loop over it, and ``pgcdc-events decode --workers`` feeds it capture lines as they
stream in (by type byte, unparsed), taking its preludes from it as well.

Streamed and two-phase transactions are never cut: a chunk holds a streamed transaction
from its first Stream Start to its Stream Commit, or abort, and everything in between.

Rows are ``(position, lsn, data)``. A capture's snapshot block (rows marked
``snapshot``, see :class:`~pgcdc_events.protocol.CaptureRow`) is never cut either: give
:func:`plan_chunks` the positions of its rows, whose Begin and Commit are then not cut
points, and feed those rows to the decoder as snapshot rows
(:class:`~pgcdc_events.events.columnar.RunDecoder` takes their flags); passed as stream
rows they would decode as creates.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Collection, Iterable, Iterator
from typing import Any, Generic, TypeVar

import attrs

from pgcdc_events.errors import PgCdcError
from pgcdc_events.events.decoder import EventDecoder
from pgcdc_events.events.records import ChangeRecord
from pgcdc_events.protocol.decoder import parse_message
from pgcdc_events.protocol.encoder import encode_message
from pgcdc_events.protocol.messages import (
    Begin,
    Commit,
    CommitPrepared,
    Message,
    Relation,
    StreamAbort,
    StreamCommit,
    StreamStart,
    StreamStop,
    Type,
)

__all__ = ["CONTROL_TYPES", "ChunkDecoder", "ChunkError", "ChunkPlan", "CutPlanner",
           "control_messages", "plan_chunks"]

#: The type bytes of the messages :func:`plan_chunks` reads (all but I, U, D, T and M).
CONTROL_TYPES = frozenset(b"BCRYObPKrSEcAp")


@attrs.frozen
class _Cut:
    """A chunk boundary: after the Commit at ``position``, with its transaction's Begin."""

    position: int
    begin: Begin
    begin_lsn: int
    commit: Commit
    commit_lsn: int


@attrs.frozen
class ChunkPlan:
    """Where a capture is cut, and the schema messages needed to start anywhere.

    ``schema`` holds ``(position, lsn, message)`` of every Relation and Type message in
    stream order; chunk ``i`` covers the positions after cut ``i - 1`` up to and including
    cut ``i`` (the last chunk: to the end).
    """

    schema: tuple[tuple[int, int, Relation | Type], ...]
    cuts: tuple[_Cut, ...]

    @property
    def chunks(self) -> int:
        """How many chunks the capture is cut into."""
        return len(self.cuts) + 1

    @property
    def boundaries(self) -> tuple[int, ...]:
        """The last position of every chunk but the last."""
        return tuple(c.position for c in self.cuts)

    def chunk_of(self, position: int) -> int:
        """The chunk holding ``position``."""
        return bisect.bisect_left(self.boundaries, position)

    def schema_state(self, before: int
                     ) -> dict[tuple[str, int], tuple[int, int, Relation | Type]]:
        """The Type and Relation messages in force before ``position``, by (kind, OID)."""
        state: dict[tuple[str, int], tuple[int, int, Relation | Type]] = {}
        for position, lsn, message in self.schema:
            if position >= before:
                break
            if isinstance(message, Type):
                state["Y", message.type_oid] = (position, lsn, message)
            else:
                state["R", message.relation_id] = (position, lsn, message)
        return state


def control_messages(rows: Iterable[tuple[int, int, bytes]]
                     ) -> Iterator[tuple[int, int, Message]]:
    """The control messages among capture rows ``(position, lsn, data)`` in stream order,
    parsed as the stream has them (inside or outside a stream block); rows of other types
    are skipped. A message the protocol layer refuses raises :class:`ChunkError`."""
    in_stream = False
    for position, lsn, data in rows:
        if not data or data[0] not in CONTROL_TYPES:
            continue
        try:
            message = parse_message(data, in_stream=in_stream)
        except PgCdcError as exc:
            raise ChunkError(exc, position) from None
        if isinstance(message, StreamStart):
            in_stream = True
        elif isinstance(message, StreamStop):
            in_stream = False
        yield position, lsn, message


_T = TypeVar("_T")

_BEGIN, _COMMIT, _RELATION, _TYPE, _MESSAGE = b"BCRYM"
_STREAM_START, _STREAM_ABORT, _STREAM_COMMIT, _STREAM_PREPARE = b"SAcp"
_BEGIN_PREPARE, _COMMIT_PREPARED, _ROLLBACK_PREPARED = b"bKr"


class CutPlanner(Generic[_T]):
    """Where a capture may be cut, and what a decoder needs to start after the cut: fed
    the capture's messages one at a time, by type byte (``wire``), in stream order.

    The one rule of :func:`plan_chunks` and of ``decode --workers``: a cut falls after a
    transaction's commit (a Commit after its Begin, a Stream Commit or a Commit Prepared)
    or after a non-transactional logical message (which the decoder takes as a commit of
    its own), when no streamed or prepared transaction is open and the chunk holds at
    least ``min_messages`` positions; a snapshot block's Begin and Commit are never cuts.
    Only Begin, Commit, Relation, Type, non-transactional Message and the streamed and
    two-phase messages need feeding (their ``xid``; a Relation's or Type's OID as ``oid``);
    changes never. ``item`` is whatever the caller keeps of a message (a parsed message, a
    capture line): :meth:`prelude` gives back the items a fresh decoder is fed to hold
    the state one decoder holds after the last cut.

    ``start`` is the position before the first chunk (default: the first fed position's
    predecessor).
    """

    def __init__(self, min_messages: int = 4000, start: int | None = None) -> None:
        self.min_messages = min_messages
        self.last_cut = start
        self.types: dict[object, _T] = {}
        self.relations: dict[object, _T] = {}
        self.begin: _T | None = None
        #: the Begin (None for a streamed or prepared transaction) and commit of the last
        #: committed transaction, and a non-transactional message after it
        self.transaction: tuple[_T | None, _T] | None = None
        self.message: _T | None = None
        self.streams: set[int] = set()
        self.prepared: set[int] = set()

    def feed(self, position: int, kind: int, item: _T, *, xid: int = 0,
             subxid: int | None = None, oid: object = None, snapshot: bool = False) -> bool:
        """Take one message; True when a cut may fall right after it (the cut is then made:
        the next chunk starts after ``position``). A Stream Abort's ``subxid`` other than
        its ``xid`` aborts a subtransaction only."""
        if self.last_cut is None:
            self.last_cut = position - 1
        if kind == _RELATION:
            self.relations[oid] = item
            return False
        if kind == _TYPE:
            self.types[oid] = item
            return False
        if snapshot:
            return False
        commit = False
        if kind == _BEGIN:
            self.begin = item
        elif kind == _COMMIT:
            if self.begin is not None:
                self.transaction, self.message, commit = (self.begin, item), None, True
            self.begin = None
        elif kind == _MESSAGE:
            if self.begin is None and not self.streams and not self.prepared:
                self.message, commit = item, True  # non-transactional: its own commit
        elif kind == _STREAM_START:
            self.streams.add(xid)
        elif kind == _STREAM_ABORT:
            if subxid is None or subxid == xid:
                self.streams.discard(xid)
        elif kind in (_STREAM_COMMIT, _COMMIT_PREPARED):
            self.streams.discard(xid)
            self.prepared.discard(xid)
            if self.begin is None:
                # ends its transaction as a Commit would: the decoder holds its commit
                # time and end LSN
                self.transaction, self.message, commit = (None, item), None, True
        elif kind == _STREAM_PREPARE:
            self.streams.discard(xid)
            self.prepared.add(xid)
        elif kind == _BEGIN_PREPARE:
            self.prepared.add(xid)
        elif kind == _ROLLBACK_PREPARED:
            self.prepared.discard(xid)
        if (commit and not self.streams and not self.prepared
                and position - self.last_cut >= self.min_messages):
            self.last_cut = position
            return True
        return False

    def cut(self, position: int) -> None:
        """The caller decoded everything up to ``position`` itself (with every message
        fed): the next chunk starts after it."""
        self.last_cut = position

    def prelude(self) -> list[_T]:
        """What a fresh decoder is fed to start after the last cut: the Type and Relation
        in force for every OID, then the last transaction's Begin and commit and a
        non-transactional message after it. A streamed or prepared transaction's commit
        comes without a Begin: a caller that feeds those turns it into what its decoder
        takes (:func:`plan_chunks`: a Begin and Commit with its commit time and LSNs)."""
        tail = [] if self.transaction is None else [i for i in self.transaction if i is not None]
        if self.message is not None:
            tail.append(self.message)
        return [*self.types.values(), *self.relations.values(), *tail]


def plan_chunks(control: Iterable[tuple[int, int, Message]], *, min_messages: int = 4000,
                snapshot: Collection[int] = ()) -> ChunkPlan:
    """Cut a capture, given its control messages ``(position, lsn, parsed message)`` in
    stream order, into chunks of at least ``min_messages`` positions (the last may be
    shorter), each ending with the commit of a transaction (a Commit, Stream Commit or
    Commit Prepared) when no other streamed or prepared transaction is open (the rule of
    :class:`CutPlanner`). ``snapshot`` holds the positions of the capture's snapshot
    rows: their Begin and Commit are the snapshot block's, never a cut."""
    schema: list[tuple[int, int, Relation | Type]] = []
    cuts: list[_Cut] = []
    planner: CutPlanner[tuple[int, Message]] = CutPlanner(min_messages)
    for position, lsn, message in control:
        if isinstance(message, (Relation, Type)):
            schema.append((position, lsn, message))
        oid = (message.type_oid if isinstance(message, Type)
               else message.relation_id if isinstance(message, Relation) else None)
        xid = getattr(message, "xid", None)
        if not planner.feed(position, message.TYPE[0], (lsn, message),
                            xid=xid if isinstance(xid, int) else 0,
                            subxid=message.subxid if isinstance(message, StreamAbort) else None,
                            oid=oid, snapshot=position in snapshot):
            continue
        assert planner.transaction is not None
        begin, (commit_lsn, end) = planner.transaction
        if begin is not None:
            assert isinstance(begin[1], Begin) and isinstance(end, Commit)
            cuts.append(_Cut(position, begin[1], begin[0], end, commit_lsn))
        else:
            assert isinstance(end, (StreamCommit, CommitPrepared))
            cuts.append(_Cut(position, Begin(end.commit_lsn, end.commit_time, end.xid),
                             commit_lsn, Commit(0, end.commit_lsn, end.end_lsn,
                                                end.commit_time), commit_lsn))
    return ChunkPlan(tuple(schema), tuple(cuts))


class ChunkDecoder:
    """Decodes chunks of a planned capture with one decoder, primed at each chunk's start.

    ``make_decoder`` builds the decoder (once); chunks may come in any order. The schema
    messages a prelude needs are fed only when the decoder does not already hold them.
    """

    def __init__(self, plan: ChunkPlan, make_decoder: Callable[[], EventDecoder]) -> None:
        self.plan = plan
        self.make_decoder = make_decoder
        self.decoder: EventDecoder | None = None
        self._held: dict[tuple[str, int], int] = {}  # (kind, OID) -> position fed

    def start(self, chunk: int) -> EventDecoder:
        """The decoder, in the state one decoder fed the capture has at ``chunk``'s start."""
        plan = self.plan
        if chunk == 0:
            self.decoder = None  # the stream's start: nothing committed before it
        decoder = self.schema_at(plan.cuts[chunk - 1].position + 1 if chunk > 0 else -(2**63))
        if chunk > 0:
            cut = plan.cuts[chunk - 1]
            decoder.feed(encode_message(cut.begin), cut.begin_lsn)
            decoder.feed(encode_message(cut.commit), cut.commit_lsn)
        return decoder

    def schema_at(self, position: int) -> EventDecoder:
        """The decoder, outside any transaction, holding the table schemas in force at
        ``position`` (the Relation and Type messages before it)."""
        if self.decoder is None:
            self.decoder = self.make_decoder()
            self._held = {}
        decoder = self.decoder
        decoder.reset()
        state = self.plan.schema_state(position)
        changed = sorted((item for key, item in state.items()
                          if self._held.get(key) != item[0]),
                         key=lambda item: (not isinstance(item[2], Type), item[0]))
        for _, lsn, message in changed:
            # as bytes, so that the decoder's reader knows the relations too; a schema
            # message sent inside a stream block is fed in its outside form
            decoder.feed(encode_message(attrs.evolve(message, xid=None)), lsn)
        self._held = {key: item[0] for key, item in state.items()}
        return decoder

    def decode(self, chunk: int, rows: Iterable[tuple[int, int, bytes]]
               ) -> Iterator[tuple[int, int, ChangeRecord]]:
        """The records of ``chunk`` given its rows ``(position, lsn, data)`` in stream order,
        as ``(position, index, record)``: the position of the message that produced the
        record and the record's rank among that message's. Errors name the position."""
        decoder = self.start(chunk)
        for position, lsn, data in rows:
            try:
                for index, record in enumerate(decoder.iter_feed(data, lsn)):
                    yield position, index, record
            except PgCdcError as exc:
                raise ChunkError(exc, position) from None
        self.end(chunk)

    def end(self, chunk: int) -> None:
        """``chunk``'s rows were all fed to :meth:`start`'s decoder: its schema messages
        are now the decoder's."""
        end = self.plan.cuts[chunk].position + 1 if chunk < len(self.plan.cuts) else None
        if end is None:
            self.decoder = None  # the capture's end: possibly mid-transaction
        else:
            self._held = {key: item[0] for key, item in self.plan.schema_state(end).items()}


class ChunkError(PgCdcError, ValueError):
    """A message of a chunk that the decoder refused: the decoder's error and the message's
    position (the capture's ordering value)."""

    def __init__(self, error: PgCdcError | str, position: int) -> None:
        self.position = position
        self.cause = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        super().__init__(f"position {position}: {self.cause}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (ChunkError, (self.cause, self.position))
