"""Group the messages a slot hands out into complete units: the grain of delivery.

Every read of a slot (``pg_logical_slot_peek_binary_changes``) starts again at
the slot's confirmed position, so the same messages arrive again until the slot
is advanced past them, and a read may stop with a transaction half received: a
streamed transaction whose commit is still to come, or a prepared one still
waiting for COMMIT PREPARED. :class:`UnitAssembler` turns the rows of one read
into :class:`Unit` objects, each complete and contiguous:

- an ordinary transaction, Begin to Commit;
- a streamed transaction: all its stream blocks (and subtransaction aborts) in
  arrival order, then its Stream Commit, moved together to where it committed;
- a two-phase transaction: Begin Prepare to Prepare (or its streamed blocks and
  Stream Prepare), then Commit Prepared;
- a non-transactional logical message;
- a rolled-back prepared transaction, with no rows (so the position can move
  past it).

A unit's ``end_lsn`` is where the slot may be advanced once the unit is durable:
the end of its commit record (the ``end_lsn`` of Commit, Stream Commit or Commit
Prepared, the rollback's end LSN) or, for a non-transactional message, its row's
LSN, which is the end of its record too (the slot skips a transaction whose commit
record starts before its confirmed position: one byte further would skip a commit
that follows the message). Units come out in the order of ``end_lsn``, which is commit
order. A unit whose ``end_lsn`` is at or before the ``after`` position given to
the assembler is marked ``seen``: it was delivered before. Streamed transactions
that have not committed and prepared ones that are not resolved when a read ends
are dropped at :meth:`UnitAssembler.reset`; the next read hands them out again
from their first message, because the slot is never advanced past them
(:attr:`UnitAssembler.hold_lsn`).

Rows are held in :class:`~pgcdc_events.spill.SpillList` buffers
under a shared :class:`~pgcdc_events.spill.MemoryBudget`, so a
transaction of millions of changes spills to disk instead of filling memory.
With ``render=True`` they are held as their capture lines instead (what the capture
writes), rendered as they arrive: a reader that frames messages itself can then add
an Insert, Update or Delete to the open transaction with :meth:`UnitAssembler.take`,
from its first bytes alone (:func:`~pgcdc_events.protocol.wire.change_heads`).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from typing import Literal

import attrs

from pgcdc_events.errors import ProtocolError
from pgcdc_events.protocol import wire
from pgcdc_events.protocol.capture import CaptureRow, dump_capture_row, line_middle
from pgcdc_events.protocol.decoder import parse_message
from pgcdc_events.protocol.lsn import Lsn
from pgcdc_events.protocol.messages import (
    Begin,
    BeginPrepare,
    Commit,
    CommitPrepared,
    Delete,
    Insert,
    Message,
    Prepare,
    Relation,
    RollbackPrepared,
    StreamAbort,
    StreamCommit,
    StreamPrepare,
    Truncate,
    Type,
    Update,
)
from pgcdc_events.protocol.reader import PgOutputReader, Streaming
from pgcdc_events.protocol.transactions import (
    Prelude,
    Row,
    Step,
    TransactionResolver,
    outside_bytes,
)
from pgcdc_events.spill import MemoryBudget, SpillList

__all__ = ["CaptureRowCodec", "SchemaTracker", "Unit", "UnitAssembler", "UnitKind"]

UnitKind = Literal["transaction", "streamed", "prepared", "message", "rolled_back"]

_CHANGE_TYPES = frozenset(wire.INSERT + wire.UPDATE + wire.DELETE + wire.TRUNCATE
                          + wire.MESSAGE)
_ROW_CHANGES = frozenset(wire.INSERT + wire.UPDATE + wire.DELETE)
_RELATION, _TYPE = wire.RELATION[0], wire.TYPE[0]
_STREAM_START, _STREAM_STOP = wire.STREAM_START[0], wire.STREAM_STOP[0]
#: Rows a rendered unit keeps beside its lines, for :class:`SchemaTracker`.
_MARKS = frozenset(wire.STREAM_START + wire.STREAM_STOP + wire.RELATION + wire.TYPE)
_ROW_HEAD = struct.Struct(">Qq")
#: Capture lines joined into one entry of a rendered unit's spill list.
CHUNK_LINES = 2048


class CaptureRowCodec:
    """Spill format of a :class:`CaptureRow`: LSN, xid (-1 for none), then the message bytes."""

    def size(self, entry: CaptureRow) -> int:
        """Estimated bytes of the row object, its LSN and its data."""
        return 160 + len(entry.data)

    def encode(self, entry: CaptureRow) -> bytes:
        """The row as bytes."""
        xid = -1 if entry.xid is None else entry.xid
        return _ROW_HEAD.pack(entry.lsn, xid) + entry.data

    def decode(self, data: bytes) -> CaptureRow:
        """The row back from :meth:`encode`'s bytes."""
        lsn, xid = _ROW_HEAD.unpack_from(data)
        return CaptureRow(Lsn(lsn), None if xid < 0 else xid, data[_ROW_HEAD.size:])


_CODEC = CaptureRowCodec()


class _TextCodec:
    """Spill format of a block of capture lines (ASCII: LSNs, integers and hex)."""

    def size(self, entry: str) -> int:
        return 50 + len(entry)

    def encode(self, entry: str) -> bytes:
        return entry.encode("ascii")

    def decode(self, data: bytes) -> str:
        return data.decode("ascii")


_TEXT = _TextCodec()


@attrs.define(eq=False)
class Unit:
    """One complete unit of delivery; iterate it for its rows in order.

    ``changes`` counts its Insert, Update, Delete, Truncate and logical messages;
    ``seen`` says it ends at or before the position it was read after. ``schema``
    holds the Relation and Type messages its changes rely on that the server sent
    earlier in the read, outside the unit (see :class:`SchemaTracker`). ``partial``
    marks a seen two-phase transaction of which only the COMMIT PREPARED came again.

    A unit assembled with ``render=True`` holds its rows as capture lines:
    :meth:`text` yields them in blocks (``rendered`` is true), ``marks`` holds its
    Stream Start/Stop, Relation and Type rows, and iterating still yields the rows.
    """

    kind: UnitKind
    xid: int | None
    first_lsn: int
    end_lsn: int
    changes: int
    seen: bool
    _rows: SpillList[CaptureRow]
    schema: tuple[CaptureRow, ...] = ()
    partial: bool = False
    _text: SpillList[str] | None = None
    marks: tuple[CaptureRow, ...] = ()
    _count: int = 0

    @property
    def rendered(self) -> bool:
        """Whether the rows are held as capture lines (see :meth:`text`)."""
        return self._text is not None

    def text(self) -> Iterator[str]:
        """The rows' capture lines, each ending in a newline, in blocks (rendered units)."""
        if self._text is None:
            for row in self._rows:
                yield dump_capture_row(row) + "\n"
        else:
            yield from self._text

    def __iter__(self) -> Iterator[CaptureRow]:
        if self._text is None:
            return iter(self._rows)
        return (CaptureRow.from_line(line) for block in self._text
                for line in block.splitlines())

    def __len__(self) -> int:
        return len(self._rows) if self._text is None else self._count

    def close(self) -> None:
        """Release the rows (and their spill file)."""
        self._rows.close()
        if self._text is not None:
            self._text.close()


class _Open:
    """A unit still being received."""

    __slots__ = ("announced", "changes", "count", "first_lsn", "heads", "hold", "kind",
                 "lines", "marks", "middle", "partial", "rows", "schema", "text", "xid")

    def __init__(self, kind: UnitKind, xid: int | None, first_lsn: int,
                 budget: MemoryBudget | None, render: bool = False) -> None:
        self.kind: UnitKind = kind
        self.xid = xid
        self.first_lsn = first_lsn
        self.rows: SpillList[CaptureRow] = SpillList(_CODEC, budget)
        # Rendered: capture lines not yet joined into a block of ``text``; the line's
        # part between LSN and data for this unit's xid; the change heads seen so far.
        self.text: SpillList[str] | None = SpillList(_TEXT, budget) if render else None
        self.lines: list[str] = []
        self.middle = line_middle(xid)
        self.heads: set[bytes] = set()
        self.marks: list[CaptureRow] = []
        self.count = 0
        self.changes = 0
        self.hold: int | None = None  # the PREPARE's LSN while waiting for its outcome
        # Relations and types announced so far, inside the unit or in its schema rows.
        self.announced: set[tuple[int, int]] = set()
        self.schema: list[CaptureRow] = []
        self.partial = False

    def add(self, row: CaptureRow) -> None:
        if self.text is None:
            self.rows.append(None, row)
        else:
            self.lines.append(dump_capture_row(row) + "\n")
            self.count += 1
            if row.data and row.data[0] in _MARKS:
                self.marks.append(row)
            if len(self.lines) >= CHUNK_LINES:
                self.flush()
        if row.data and row.data[0] in _CHANGE_TYPES:
            self.changes += 1

    def flush(self) -> None:
        """Move the pending lines into ``text`` as one block (it may spill)."""
        if self.lines and self.text is not None:
            self.text.append(None, "".join(self.lines))
            self.lines.clear()

    def close(self) -> None:
        self.rows.close()
        if self.text is not None:
            self.text.close()


class UnitAssembler:
    """Rows of one slot read in, complete :class:`Unit` objects out (sans I/O).

    ``proto_version`` and ``streaming`` are the options the slot is read with
    (see :class:`~pgcdc_events.protocol.PgOutputReader`, which validates every
    message but the tuples of Insert, Update and Delete: those are read from their
    heads, relation and width, and their values are checked where they are decoded);
    ``budget`` bounds the rows held in memory; ``after`` is the position at or before
    which units count as ``seen``; ``render`` holds rows as capture lines (see
    :class:`Unit`). Call :meth:`reset` before each read.
    """

    def __init__(self, *, proto_version: int | None = None, streaming: Streaming | None = None,
                 budget: MemoryBudget | None = None, after: int | None = None,
                 render: bool = False) -> None:
        self._reader = PgOutputReader(proto_version=proto_version, streaming=streaming)
        #: Which transactions are open (the protocol layer's rules); the units hold rows.
        self._tx: TransactionResolver[None] = TransactionResolver()
        self._budget = budget
        self.render = render
        #: The first bytes of an Insert, Update or Delete (outside a stream block) of
        #: every relation announced so far, to its OID (:func:`wire.change_heads`).
        self.heads: dict[bytes, int] = {}
        self._heads_of: dict[int, frozenset[bytes]] = {}
        self.after = after
        self._current: _Open | None = None
        self._streams: dict[int, _Open] = {}
        self._prepared: dict[int, _Open] = {}
        self._preamble: list[CaptureRow] = []
        self._block: _Open | None = None
        # The latest Relation/Type row sent outside stream blocks in this read, by OID.
        self._schema_rows: dict[tuple[int, int], CaptureRow] = {}
        #: Rows fed since the last :meth:`reset`.
        self.rows_read = 0

    def reset(self, after: int | None = None) -> None:
        """Start a new read: drop every incomplete unit (it will be handed out again)."""
        for unit in (self._current, *self._streams.values(), *self._prepared.values()):
            if unit is not None:
                unit.close()
        self._current = None
        self._streams = {}
        self._prepared = {}
        self._preamble = []
        self._block = None
        self._schema_rows = {}
        self._reader.reset()
        self._tx.reset(keep_held=False)
        self.after = after
        self.rows_read = 0

    @property
    def hold_lsn(self) -> int | None:
        """The slot must not be advanced past this (the earliest unresolved PREPARE), if any."""
        holds = [u.hold for u in self._prepared.values() if u.hold is not None]
        return min(holds) if holds else None

    @property
    def incomplete(self) -> int:
        """Units received in part: open, streamed but not committed, prepared but unresolved."""
        return (self._current is not None) + len(self._streams) + len(self._prepared)

    # -- feeding ---------------------------------------------------------------------------
    def feed(self, row: CaptureRow) -> Unit | None:
        """Take the next row of the read; returns the unit it completes, if any."""
        data = row.data
        if data and data[0] in _ROW_CHANGES:
            unit = self._block if self._block is not None else self._current
            if unit is not None:
                relid = self._change_head(data)
                if relid is not None:  # Insert, Update, Delete read from their heads alone
                    self.rows_read += 1
                    if unit is self._current:
                        self._needs(unit, (relid,))
                    unit.add(row)
                    return None
        message = self._reader.read(data)
        self.rows_read += 1
        if isinstance(message, Relation):
            self._learn(message)
        in_block = self._block
        step = self._tx.feed_message(message, int(row.lsn))
        if step is Step.STREAM_OPEN or step is Step.STREAM_CONTINUE:
            xid = self._tx.block
            assert xid is not None
            block = self._streams.get(xid)
            if block is None:
                block = self._streams[xid] = self._open("streamed", xid, row)
            block.add(row)
            self._block = block
            return None
        if in_block is not None:  # inside a stream block, up to its Stream Stop
            in_block.add(row)
            if step is Step.STREAM_STOP:
                self._block = None
            return None
        if isinstance(message, (Relation, Type)):
            self._schema_message(message, row)
        if self._current is not None:
            return self._inside(self._current, step, message, row)
        return self._outside(step, message, row)

    def _inside(self, current: _Open, step: Step, message: Message, row: CaptureRow
                ) -> Unit | None:
        """A message of the open transaction (ordinary, or being prepared)."""
        if isinstance(message, Truncate):
            self._needs(current, message.relation_ids)
        elif isinstance(message, (Insert, Update, Delete)):
            self._needs(current, (message.relation_id,))
        current.add(row)
        if step is Step.COMMIT:
            self._current = None
            assert isinstance(message, Commit)
            return self._complete(current, message.end_lsn)
        if step is Step.PREPARE:  # wait for COMMIT/ROLLBACK PREPARED
            self._current = None
            assert isinstance(message, Prepare)
            self._prepared[message.xid] = current
        return None

    def _outside(self, step: Step, message: Message, row: CaptureRow) -> Unit | None:
        """A message outside any transaction or stream block, by what it did (``step``)."""
        if step is Step.BEGIN:
            assert isinstance(message, Begin)
            self._current = self._open("transaction", message.xid, row)
            self._current.add(row)
        elif step is Step.BEGIN_PREPARE:
            assert isinstance(message, BeginPrepare)
            self._current = self._open("prepared", message.xid, row)
            self._current.hold = message.prepare_lsn
            self._current.add(row)
        elif step is Step.STREAM_COMMIT:
            assert isinstance(message, StreamCommit)
            unit = self._take_stream(message.xid, "c", "Stream Commit")
            unit.add(row)
            return self._complete(unit, message.end_lsn)
        elif step is Step.STREAM_ABORT:
            assert isinstance(message, StreamAbort)
            aborted = self._streams.pop(message.xid, None)
            if aborted is not None:
                aborted.close()
        elif step is Step.SUBXACT_ABORT:
            assert isinstance(message, StreamAbort)
            if message.xid in self._streams:
                self._streams[message.xid].add(row)  # the decoder drops the subtransaction
        elif step is Step.STREAM_PREPARE:
            assert isinstance(message, StreamPrepare)
            unit = self._take_stream(message.xid, "p", "Stream Prepare")
            unit.add(row)
            unit.kind, unit.hold = "prepared", message.prepare_lsn
            self._prepared[message.xid] = unit
        elif step is Step.COMMIT_PREPARED:
            assert isinstance(message, CommitPrepared)
            return self._commit_prepared(message, row)
        elif step is Step.ROLLBACK_PREPARED:
            assert isinstance(message, RollbackPrepared)
            rolled_back = self._prepared.pop(message.xid, None)
            if rolled_back is not None:
                rolled_back.close()
            empty = self._open("rolled_back", message.xid, row)
            return self._complete(empty, message.rollback_end_lsn)
        elif step is Step.MESSAGE:  # non-transactional: a unit of its own
            unit = self._open("message", None, row)
            unit.add(row)
            # Its row's LSN is the end of its WAL record: the next record (maybe the commit
            # of the transaction that emitted it) starts there, so the slot may go no further.
            return self._complete(unit, int(row.lsn))
        else:  # Relation/Type outside a transaction: keep them with the next unit
            self._preamble.append(row)
        return None

    def _commit_prepared(self, message: CommitPrepared, row: CaptureRow) -> Unit:
        pending = self._prepared.pop(message.xid, None)
        if pending is None and self.after is not None and message.end_lsn <= self.after:
            # Delivered before: the slot was held back by a later PREPARE, past this
            # transaction's PREPARE but not its COMMIT PREPARED, which comes again alone.
            pending = self._open("prepared", message.xid, row)
            pending.partial = True
        if pending is None:
            raise ProtocolError(
                "the prepared transaction before its Commit Prepared", message_type="K",
                offset=0, detail=f"xid {message.xid} ({message.gid!r}) was prepared before "
                "this read started: the slot was advanced past its PREPARE elsewhere")
        pending.add(row)
        pending.hold = None
        return self._complete(pending, message.end_lsn)

    def _open(self, kind: UnitKind, xid: int | None, row: CaptureRow) -> _Open:
        unit = _Open(kind, xid, int(row.lsn), self._budget, self.render)
        for early in self._preamble:
            unit.add(early)
            unit.announced.add(_schema_key(parse_message(early.data)))
        self._preamble = []
        return unit

    # -- Relation and Type messages ----------------------------------------------------------
    def _schema_message(self, message: Relation | Type, row: CaptureRow) -> None:
        """A Relation or Type outside stream blocks: the version later changes rely on."""
        key = _schema_key(message)
        self._schema_rows[key] = row
        if self._current is not None:
            self._current.announced.add(key)

    def _change_head(self, data: bytes) -> int | None:
        """The relation OID of an Insert, Update or Delete inside an open transaction or
        stream block, read from the message's head: the relation must have been announced
        and the first tuple must have its width (:attr:`heads`). The tuples themselves are
        checked where they are decoded; the capture hands the bytes on unchanged. ``None``
        when the head is not what it should be: the caller then parses the whole message,
        which raises the precise :class:`ProtocolError`."""
        if self._block is None:
            return self.heads.get(data[:wire.CHANGE_HEAD_SIZE])
        # in a stream block, the xid comes right after the type byte
        return self.heads.get(data[:1] + data[5:4 + wire.CHANGE_HEAD_SIZE])

    def _learn(self, relation: Relation) -> None:
        """A Relation message was read: the heads its changes start with from now on."""
        relid = relation.relation_id
        for head in self._heads_of.pop(relid, ()):
            del self.heads[head]
        heads = self._heads_of[relid] = wire.change_heads(relid, len(relation.columns))
        self.heads.update(dict.fromkeys(heads, relid))

    # -- the fast path of a reader that frames messages itself ------------------------------
    def open_transaction(self) -> _Open | None:
        """The transaction an Insert, Update or Delete goes to, when one is open and no
        stream block is: hand such a change to :meth:`take` (or :meth:`feed`)."""
        return self._current if self._block is None else None

    def take(self, unit: _Open, head: bytes) -> None:
        """The first change with ``head`` (a key of :attr:`heads`) in ``unit`` (from
        :meth:`open_transaction`): record the schema rows it relies on. The caller adds
        the change's line to ``unit.lines`` itself (with ``unit.middle``), counts it in
        ``unit.changes``, ``unit.count`` and :attr:`rows_read`, and calls
        ``unit.flush()`` once ``unit.lines`` holds :data:`CHUNK_LINES` lines."""
        unit.heads.add(head)
        self._needs(unit, (self.heads[head],))

    def _needs(self, unit: _Open, relids: tuple[int, ...]) -> None:
        """Record the schema rows the changes to ``relids`` rely on that ``unit`` has not
        announced."""
        for relid in relids:
            key = (_RELATION, relid)
            if key in unit.announced:
                continue
            unit.announced.add(key)
            row = self._schema_rows.get(key)
            relation = self._reader.relations.get(relid)
            if relation is None:
                continue
            for column in relation.columns:  # the Type messages its columns rely on
                type_key = (_TYPE, column.type_oid)
                if type_key not in unit.announced:
                    unit.announced.add(type_key)
                    type_row = self._schema_rows.get(type_key)
                    if type_row is None and column.type_oid in self._reader.types:
                        type_row = _row_of(self._reader.types[column.type_oid], unit.first_lsn)
                    if type_row is not None:
                        unit.schema.append(type_row)
            # Sent only in a stream block of this read: the version the reader knows.
            unit.schema.append(row if row is not None else _row_of(relation, unit.first_lsn))

    def _take_stream(self, xid: int, message_type: str, what: str) -> _Open:
        unit = self._streams.pop(xid, None)
        if unit is None:
            raise ProtocolError(f"stream blocks before this {what}", message_type=message_type,
                                offset=0, detail=f"xid {xid} streamed nothing in this read")
        return unit

    def _complete(self, unit: _Open, end_lsn: int) -> Unit:
        seen = self.after is not None and end_lsn <= self.after
        unit.flush()
        return Unit(unit.kind, unit.xid, unit.first_lsn, end_lsn, unit.changes, seen, unit.rows,
                    tuple(unit.schema), unit.partial, unit.text, tuple(unit.marks),
                    unit.count)


def _schema_key(message: Message) -> tuple[int, int]:
    if isinstance(message, Relation):
        return (_RELATION, message.relation_id)
    if isinstance(message, Type):
        return (_TYPE, message.type_oid)
    return (0, 0)


def _row_of(message: Relation | Type, lsn: int) -> CaptureRow:
    """A schema message as a row outside any stream block (no xid prefix)."""
    return CaptureRow(Lsn(lsn), None, outside_bytes(message))


class SchemaTracker:
    """The Relation and Type messages a consumer of units has been given, by OID.

    Units are delivered in commit order, not in the order the server sent them, and
    units already delivered are skipped after a restart; a change may thus rely on a
    Relation the server sent in a unit that comes later, or not at all, in what the
    consumer sees. :meth:`rows` yields a unit's rows preceded by the schema rows it
    relies on whose version the consumer has not seen (a repeated Relation message
    is harmless: readers just take the latest one).

    What the consumer has been given is a decoder's schema state at a cut: it is kept as
    the protocol layer keeps it (a :class:`~pgcdc_events.protocol.transactions.
    TransactionResolver` fed the messages, in their form outside stream blocks), read as
    a :class:`~pgcdc_events.protocol.transactions.Prelude` (:meth:`prelude`), and a
    tracker may start from one (``prelude``: what the output holds already).
    """

    def __init__(self, prelude: Prelude | None = None) -> None:
        self._given: TransactionResolver[Row] = TransactionResolver()
        for lsn, data in prelude.schema if prelude is not None else ():
            message = parse_message(data)
            if not isinstance(message, (Relation, Type)):
                raise ProtocolError("a Relation or Type message in a prelude's schema",
                                    message_type=chr(data[0]) if data else "", offset=0)
            self._give(message, (lsn, outside_bytes(message)))

    def prelude(self) -> Prelude:
        """The Type and Relation messages handed on so far, the latest of each OID (Types
        first), in their form outside stream blocks: a decoder fed them holds the schema
        state of a decoder fed all that was handed on."""
        return self._given.prelude(_as_row)

    def _give(self, message: Relation | Type, row: Row) -> None:
        """Remember ``row`` (its bytes in the form outside stream blocks) as the version of
        ``message``'s OID the consumer holds."""
        self._given.feed_message(message, row[0], item=row)

    def _holds(self, message: Relation | Type, data: bytes) -> bool:
        """Whether the consumer holds this version (``data``, outside-stream form)."""
        given = self._given
        entry = (given.relations.get(message.relation_id) if isinstance(message, Relation)
                 else given.types.get(message.type_oid))
        return entry is not None and entry[0][1] == data

    def rows(self, unit: Unit) -> Iterator[CaptureRow]:
        """The rows to hand on for ``unit``, schema rows first where needed."""
        yield from self._missing(unit)
        yield from self._remember(unit.marks if unit.rendered else unit)

    def text(self, unit: Unit) -> Iterator[str]:
        """What :meth:`rows` hands on, as capture lines (each ending in a newline), in
        blocks: a rendered unit's lines as they are."""
        if not unit.rendered:
            for row in self.rows(unit):
                yield dump_capture_row(row) + "\n"
            return
        lines = [dump_capture_row(row) + "\n" for row in self._missing(unit)]
        for _ in self._remember(unit.marks):
            pass
        if lines:
            yield "".join(lines)
        yield from unit.text()

    def _missing(self, unit: Unit) -> Iterator[CaptureRow]:
        """The schema rows ``unit`` relies on whose version was not handed on yet."""
        for row in unit.schema:
            message = parse_message(row.data)
            if isinstance(message, (Relation, Type)) and not self._holds(message, row.data):
                self._give(message, (int(row.lsn), row.data))
                yield row

    def _remember(self, rows: Iterable[CaptureRow]) -> Iterator[CaptureRow]:
        """``rows``, remembering the Relation and Type versions among them."""
        blocks: TransactionResolver[None] = TransactionResolver()
        for row in rows:
            t = row.data[0]
            if t in (_STREAM_START, _STREAM_STOP):
                blocks.feed_head(row.data)
            elif t in (_RELATION, _TYPE):  # remember the version, in its out-of-stream form
                message = parse_message(row.data, in_stream=blocks.in_stream)
                if isinstance(message, (Relation, Type)):
                    self._give(message, (int(row.lsn), outside_bytes(message)
                                         if blocks.in_stream else row.data))
            yield row

    def forget(self) -> None:
        """Forget everything (the consumer starts over)."""
        self._given = TransactionResolver()


def _as_row(row: Row) -> Row:
    return row
