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
(:class:`~pgcdc_events.spark.columnar.RunDecoder` takes their flags); passed as stream
rows they would decode as creates.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Callable, Collection, Iterable, Iterator
from typing import Any, Generic, TypeVar

import attrs

from pgcdc_events.errors import PgCdcError
from pgcdc_events.events.decoder import EventDecoder
from pgcdc_events.events.records import ChangeRecord
from pgcdc_events.protocol import wire
from pgcdc_events.protocol.decoder import parse_message
from pgcdc_events.protocol.encoder import encode_message
from pgcdc_events.protocol.messages import (
    LogicalMessage,
    Message,
    Relation,
    StreamAbort,
    StreamStart,
    Type,
)
from pgcdc_events.protocol.transactions import (
    COMMITS,
    Prelude,
    Row,
    Step,
    TransactionResolver,
    outside_bytes,
)

__all__ = ["CONTROL_TYPES", "ChunkDecoder", "ChunkError", "ChunkPlan", "Cut", "CutPlanner",
           "control_messages", "plan_chunks", "prime"]

#: The type bytes of the messages :func:`plan_chunks` reads (all but I, U, D, T and M).
CONTROL_TYPES = frozenset(wire.BEGIN + wire.COMMIT + wire.RELATION + wire.TYPE + wire.ORIGIN
                          + wire.BEGIN_PREPARE + wire.PREPARE + wire.COMMIT_PREPARED
                          + wire.ROLLBACK_PREPARED + wire.STREAM_START + wire.STREAM_STOP
                          + wire.STREAM_COMMIT + wire.STREAM_ABORT + wire.STREAM_PREPARE)


@attrs.frozen
class Cut:
    """A chunk boundary: right after the commit at ``position``. ``transaction`` is what a
    decoder starting after it is fed besides the table schemas: the
    :attr:`Prelude.transaction <pgcdc_events.protocol.transactions.Prelude.transaction>`
    (the last transaction's Begin and Commit, or their stand-ins)."""

    position: int
    transaction: tuple[Row, Row]

    @property
    def commit_lsn(self) -> int:
        """The LSN of the commit the cut follows."""
        return self.transaction[1][0]


@attrs.frozen
class ChunkPlan:
    """Where a capture is cut, and the schema messages needed to start anywhere.

    ``schema`` holds ``(position, lsn, message)`` of every Relation and Type message in
    stream order; chunk ``i`` covers the positions after cut ``i - 1`` up to and including
    cut ``i`` (the last chunk: to the end).
    """

    schema: tuple[tuple[int, int, Relation | Type], ...]
    cuts: tuple[Cut, ...]

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

    def schema_prelude(self, before: int) -> Prelude:
        """A :class:`~pgcdc_events.protocol.transactions.Prelude` of the table schemas in
        force before ``before`` alone (no transaction)."""
        state = sorted(self.schema_state(before).values(),
                       key=lambda item: (not isinstance(item[2], Type), item[0]))
        return Prelude(tuple((lsn, _outside(message)) for _, lsn, message in state))

    def prelude(self, chunk: int) -> Prelude:
        """What a decoder is fed to start ``chunk`` in the state one decoder fed the whole
        capture has there (chunk 0: nothing)."""
        if chunk == 0:
            return Prelude()
        cut = self.cuts[chunk - 1]
        return attrs.evolve(self.schema_prelude(cut.position + 1), transaction=cut.transaction)


@functools.lru_cache(maxsize=4096)
def _outside(message: Relation | Type) -> bytes:
    """A schema message's bytes outside a stream block, once per message."""
    return outside_bytes(message)


def prime(decoder: EventDecoder, prelude: Prelude, held: dict[bytes, bytes]) -> EventDecoder:
    """Feed ``decoder`` the rows of ``prelude``, dropping their records: the one way a
    decoder is brought to the state at a cut. ``held`` maps the schema messages the
    decoder holds already (by type byte and OID: their first five bytes) to their bytes;
    those are not fed again, and it is updated with what is fed."""
    for lsn, data in prelude.schema:
        key = data[:5]
        if held.get(key) == data:
            continue
        held[key] = data
        decoder.feed(data, lsn)
    tail = list(prelude.transaction or ())
    if prelude.message is not None:
        tail.append(prelude.message)
    for lsn, data in tail:
        for _ in decoder.iter_feed(data, lsn):
            pass
    return decoder


def control_messages(rows: Iterable[tuple[int, int, bytes]]
                     ) -> Iterator[tuple[int, int, Message]]:
    """The control messages among capture rows ``(position, lsn, data)`` in stream order,
    parsed as the stream has them (inside or outside a stream block); rows of other types
    are skipped. A message the protocol layer refuses raises :class:`ChunkError`."""
    resolver: TransactionResolver[None] = TransactionResolver()
    for position, lsn, data in rows:
        if not data or data[0] not in CONTROL_TYPES:
            continue
        try:
            message = parse_message(data, in_stream=resolver.in_stream)
        except PgCdcError as exc:
            raise ChunkError(exc, position) from None
        resolver.feed_message(message, lsn)
        yield position, lsn, message


_T = TypeVar("_T")
_SCHEMA = frozenset(wire.RELATION + wire.TYPE)


class CutPlanner(Generic[_T]):
    """Where a capture may be cut, and what a decoder needs to start after the cut: fed
    the capture's messages one at a time, by type byte (``wire``), in stream order.

    The one cut rule of :func:`plan_chunks`, ``decode --workers`` and Spark: a cut falls
    after a transaction's commit (a Commit after its Begin, a Stream Commit or a Commit
    Prepared) or after a non-transactional logical message (which the decoder takes as a
    commit of its own), when no other transaction is open
    (:attr:`TransactionResolver.idle <pgcdc_events.protocol.transactions.TransactionResolver.idle>`)
    and the chunk holds at least ``min_messages`` positions; a snapshot block's Begin and
    Commit are never cuts. The transaction rules are the protocol layer's
    :class:`~pgcdc_events.protocol.transactions.TransactionResolver`'s: only Begin,
    Commit, Relation, Type, non-transactional Message and the streamed and two-phase
    messages need feeding (their ``xid``; a Relation's or Type's OID as ``oid``); changes
    never. ``item`` is whatever the caller keeps of a message (a parsed message, a capture
    line): :meth:`prelude` makes the :class:`~pgcdc_events.protocol.transactions.Prelude`
    a fresh decoder is fed to hold the state one decoder holds after the last cut.

    ``start`` is the position before the first chunk (default: the first fed position's
    predecessor).
    """

    def __init__(self, min_messages: int = 4000, start: int | None = None) -> None:
        self.min_messages = min_messages
        self.last_cut = start
        self.resolver: TransactionResolver[_T] = TransactionResolver()

    def feed(self, position: int, kind: int, item: _T, *, xid: int = 0,
             subxid: int | None = None, oid: object = None, snapshot: bool = False,
             first_segment: bool = False, transactional: bool = False) -> bool:
        """Take one message; True when a cut may fall right after it (the cut is then made:
        the next chunk starts after ``position``). A Stream Abort's ``subxid`` other than
        its ``xid`` aborts a subtransaction only; a logical message is fed as
        non-transactional unless ``transactional``."""
        if self.last_cut is None:
            self.last_cut = position - 1
        resolver = self.resolver
        if snapshot and kind not in _SCHEMA:
            return False
        opened = resolver.current is not None
        step = resolver.feed(kind, xid, subxid=subxid, oid=oid, first_segment=first_segment,
                             transactional=transactional, item=item)
        if (step in COMMITS and (step is not Step.COMMIT or opened) and resolver.idle
                and position - self.last_cut >= self.min_messages):
            self.last_cut = position
            return True
        return False

    def cut(self, position: int) -> None:
        """The caller decoded everything up to ``position`` itself (with every message
        fed): the next chunk starts after it."""
        self.last_cut = position

    def prelude(self, row_of: Callable[[_T], Row]) -> Prelude:
        """What a fresh decoder is fed to start after the last cut (see
        :meth:`TransactionResolver.prelude
        <pgcdc_events.protocol.transactions.TransactionResolver.prelude>`): ``row_of``
        gives an item's LSN and bytes."""
        return self.resolver.prelude(row_of)


def plan_chunks(control: Iterable[tuple[int, int, Message]], *, min_messages: int = 4000,
                snapshot: Collection[int] = ()) -> ChunkPlan:
    """Cut a capture, given its control messages ``(position, lsn, parsed message)`` in
    stream order, into chunks of at least ``min_messages`` positions (the last may be
    shorter), each ending with the commit of a transaction (a Commit, Stream Commit or
    Commit Prepared) when no other streamed or prepared transaction is open (the rule of
    :class:`CutPlanner`). ``snapshot`` holds the positions of the capture's snapshot
    rows: their Begin and Commit are the snapshot block's, never a cut."""
    schema: list[tuple[int, int, Relation | Type]] = []
    cuts: list[Cut] = []
    planner: CutPlanner[tuple[int, Message]] = CutPlanner(min_messages)
    for position, lsn, message in control:
        kind = message.TYPE[0]
        if isinstance(message, (Relation, Type)):
            schema.append((position, lsn, message))
            continue  # the plan keeps them itself, for every position
        xid = getattr(message, "xid", None)
        if planner.feed(position, kind, (lsn, message),
                        xid=xid if isinstance(xid, int) else 0,
                        subxid=message.subxid if isinstance(message, StreamAbort) else None,
                        first_segment=isinstance(message, StreamStart) and message.first_segment,
                        transactional=isinstance(message, LogicalMessage)
                        and message.transactional,
                        snapshot=position in snapshot):
            transaction = planner.prelude(_row).transaction
            assert transaction is not None
            cuts.append(Cut(position, transaction))
    return ChunkPlan(tuple(schema), tuple(cuts))


def _row(item: tuple[int, Message]) -> Row:
    return item[0], bytes(encode_message(item[1]))


class ChunkDecoder:
    """Decodes chunks of a planned capture with one decoder, primed at each chunk's start.

    ``make_decoder`` builds the decoder (once); chunks may come in any order. The schema
    messages a prelude needs are fed only when the decoder does not already hold them.
    """

    def __init__(self, plan: ChunkPlan, make_decoder: Callable[[], EventDecoder]) -> None:
        self.plan = plan
        self.make_decoder = make_decoder
        self.decoder: EventDecoder | None = None
        self._held: dict[bytes, bytes] = {}  # the schema messages the decoder holds (prime)

    def start(self, chunk: int) -> EventDecoder:
        """The decoder, in the state one decoder fed the capture has at ``chunk``'s start."""
        if chunk == 0:
            self.decoder = None  # the stream's start: nothing committed before it
        return prime(self._reset(), self.plan.prelude(chunk), self._held)

    def schema_at(self, position: int) -> EventDecoder:
        """The decoder, outside any transaction, holding the table schemas in force at
        ``position`` (the Relation and Type messages before it)."""
        return prime(self._reset(), self.plan.schema_prelude(position), self._held)

    def _reset(self) -> EventDecoder:
        if self.decoder is None:
            self.decoder = self.make_decoder()
            self._held = {}
        self.decoder.reset()
        return self.decoder

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
            self._held = {data[:5]: data for _, data in self.plan.schema_prelude(end).schema}


class ChunkError(PgCdcError, ValueError):
    """A message of a chunk that the decoder refused: the decoder's error and the message's
    position (the capture's ordering value)."""

    def __init__(self, error: PgCdcError | str, position: int) -> None:
        self.position = position
        self.cause = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        super().__init__(f"position {position}: {self.cause}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (ChunkError, (self.cause, self.position))
