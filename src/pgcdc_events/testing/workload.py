"""Workloads: transactions over tables, and everything a server and Debezium make of them.

A :class:`Workload` is a list of transactions (inserts, updates, deletes,
truncates and logical messages on :class:`~pgcdc_events.testing.tables.TableDef`
tables) in commit order, plus a :class:`Schedule` saying when each part of each
transaction reaches the replication stream (whole at commit, or in stream blocks
interleaved with others, or prepared first and committed later). From it come,
consistent with each other:

* :attr:`Workload.messages` — the pgoutput message objects with their LSNs;
* :meth:`Workload.capture` — the same as capture rows (the bytes a server sends);
* :meth:`Workload.records` — the Debezium records, made by running the real
  :class:`~pgcdc_events.events.EventDecoder` over those bytes;
* :attr:`Workload.expected` — the row events the stream carries, in order;
* :attr:`Workload.final_state` — the tables' rows after the last commit;
* :meth:`Workload.spark_rows` — the Spark layer's rows, when the ``spark`` extra is
  installed.

The hypothesis strategy :func:`pgcdc_events.testing.strategies.workloads` draws
valid workloads; :func:`render` also renders hand-built ones.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, Literal

import attrs

from pgcdc_events.errors import ConfigurationError
from pgcdc_events.events.config import EventConfig
from pgcdc_events.events.decoder import EventDecoder
from pgcdc_events.events.jsonconv import JsonRecordWriter
from pgcdc_events.events.records import ChangeRecord
from pgcdc_events.protocol.capture import CaptureRow
from pgcdc_events.protocol.encoder import encode_message
from pgcdc_events.protocol.lsn import Lsn, unix_us_to_pg_timestamp
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
    Prepare,
    RollbackPrepared,
    StreamAbort,
    StreamCommit,
    StreamPrepare,
    StreamStart,
    StreamStop,
    Truncate,
    TupleData,
    Update,
)
from pgcdc_events.protocol.reader import Streaming
from pgcdc_events.testing.pgtext import PgValue
from pgcdc_events.testing.tables import TOASTABLE, TableDef, catalog_for, quote_ident
from pgcdc_events.types.catalog import CatalogSnapshot

__all__ = [
    "DEFAULT_PROPERTIES",
    "TOAST_THRESHOLD",
    "UNCHANGED_TOAST",
    "Change",
    "ExpectedEvent",
    "LogicalMsg",
    "Row",
    "Schedule",
    "TableState",
    "Transaction",
    "TruncateTables",
    "Workload",
    "event_config",
    "is_toasted",
    "render",
]

Row = tuple[PgValue | None, ...]
"""One row: a value (or ``None`` for NULL) per column, in column order."""

#: Connector properties the outputs use unless told otherwise: Debezium's defaults,
#: except that truncates are not skipped (so that applying the events reproduces the
#: final state).
DEFAULT_PROPERTIES: Final[Mapping[str, str]] = {"topic.prefix": "pgcdc",
                                                "skipped.operations": "none"}
#: Byte length from which a value of a TOAST-able type is taken to be stored out of line.
TOAST_THRESHOLD: Final = 2000
#: Processing time the decoder's clock reports (2024-01-01T00:00:00Z), for reproducible output.
CLOCK_NS: Final = 1_704_067_200_000_000_000


class _Unchanged:
    """Marker for an unchanged TOASTed value the server did not send."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNCHANGED_TOAST"


UNCHANGED_TOAST: Final = _Unchanged()


def is_toasted(value: PgValue | None) -> bool:
    """Whether PostgreSQL would keep ``value`` out of line (and omit it when unchanged).

    Values of the :data:`~pgcdc_events.testing.tables.TOASTABLE` types stored in at least
    :data:`TOAST_THRESHOLD` bytes count as TOASTed, as in the columns of generated tables
    (``SET STORAGE EXTERNAL``: out of line, uncompressed).
    """
    if value is None:
        return False
    base = value.type.split("(")[0]
    if base not in TOASTABLE:
        return False
    stored = value.binary if base == "bytea" and value.binary is not None else value.text_bytes
    return len(stored) >= TOAST_THRESHOLD


# ---------------------------------------------------------------- operations
@attrs.frozen
class Change:
    """An INSERT (``old`` None), UPDATE or DELETE (``new`` None) of one row of ``table``.

    ``subtransaction`` is 0 for the transaction itself and ``n`` for its n-th savepoint.
    """

    table: TableDef
    old: Row | None
    new: Row | None
    subtransaction: int = 0

    @property
    def op(self) -> str:
        """``insert``, ``update`` or ``delete``."""
        if self.old is None:
            return "insert"
        return "delete" if self.new is None else "update"


@attrs.frozen
class TruncateTables:
    """``TRUNCATE`` of one or more tables."""

    tables: tuple[TableDef, ...]
    cascade: bool = False
    restart_identity: bool = False
    subtransaction: int = 0


@attrs.frozen
class LogicalMsg:
    """``pg_logical_emit_message(transactional, prefix, content)``."""

    prefix: str
    content: bytes
    transactional: bool = True
    subtransaction: int = 0


Op = Change | TruncateTables | LogicalMsg
Outcome = Literal["commit", "abort"]


@attrs.frozen
class Transaction:
    """A transaction's operations in execution order and how it ends.

    ``outcome`` ``abort`` means ROLLBACK (or ROLLBACK PREPARED for a two-phase one).
    ``aborted_subtransactions`` were rolled back to their savepoint. ``streamed``
    transactions reach the stream in blocks (``block_ends``: the index after each
    block's last operation); ``two_phase`` ones are prepared before they finish.
    ``gid`` names a prepared transaction.
    """

    ops: tuple[Op, ...]
    outcome: Outcome = "commit"
    streamed: bool = False
    two_phase: bool = False
    aborted_subtransactions: frozenset[int] = frozenset()
    block_ends: tuple[int, ...] = ()
    gid: str = ""

    def visible_ops(self) -> tuple[Op, ...]:
        """The operations that take effect if the transaction commits."""
        return tuple(op for op in self.ops
                     if op.subtransaction not in self.aborted_subtransactions)


Item = Transaction | LogicalMsg
"""A transaction, or a non-transactional logical message."""


@attrs.frozen
class Schedule:
    """When each part of each item reaches the stream: ``(item index, part)`` in order.

    Parts: ``("end",)`` (a whole transaction at its commit, the commit or abort of a
    streamed one, COMMIT/ROLLBACK PREPARED of a two-phase one, or a non-transactional
    message), ``("block", k)`` (stream block ``k``) and ``("prepare",)``.
    """

    events: tuple[tuple[int, tuple[Any, ...]], ...]

    @classmethod
    def serial(cls, items: Sequence[Item]) -> Schedule:
        """Every item in order, its blocks and prepare right before its end."""
        out: list[tuple[int, tuple[Any, ...]]] = []
        for i, item in enumerate(items):
            if isinstance(item, Transaction):
                if item.streamed:
                    out += [(i, ("block", k)) for k in range(len(item.block_ends))]
                if item.two_phase:
                    out.append((i, ("prepare",)))
            out.append((i, ("end",)))
        return cls(tuple(out))


# ---------------------------------------------------------------- state
class TableState:
    """The rows of one table: keyed by primary key (by their text) when it has one."""

    def __init__(self, table: TableDef) -> None:
        self.table = table
        self.key_index = tuple(table.column_index(k) for k in table.primary_key)
        self.rows: dict[Any, Row] = {}
        self._serial = 0

    def key(self, row: Row) -> Any:
        """The row's primary-key text (a fresh token for tables without a key)."""
        if not self.key_index:
            self._serial += 1
            return ("#", self._serial)
        return tuple(None if row[i] is None else row[i].text  # type: ignore[union-attr]
                     for i in self.key_index)

    def find(self, row: Row) -> Any:
        """The key under which ``row`` is stored (``KeyError`` when absent)."""
        if self.key_index:
            key = self.key(row)
            if key in self.rows:
                return key
            raise KeyError(key)
        for key, stored in self.rows.items():
            if _same_row(stored, row):
                return key
        raise KeyError(row)

    def apply(self, change: Change) -> None:
        """Apply one change (an old row the state does not hold is ignored: hand-built
        workloads may change rows that existed before them)."""
        if change.old is not None:
            with contextlib.suppress(KeyError):
                del self.rows[self.find(change.old)]
        if change.new is not None:
            self.rows[self.key(change.new)] = change.new

    def copy(self) -> TableState:
        """An independent copy."""
        out = TableState(self.table)
        out.rows = dict(self.rows)
        out._serial = self._serial
        return out

    def sorted_rows(self) -> tuple[Row, ...]:
        """The rows, by key text for keyed tables, else by their texts."""
        if self.key_index:
            return tuple(self.rows[k] for k in sorted(self.rows, key=_sort_key))
        return tuple(sorted(self.rows.values(), key=_row_sort_key))


def _sort_key(key: Any) -> Any:
    return tuple("" if v is None else v for v in key)


def _row_sort_key(row: Row) -> Any:
    return tuple((v is not None, "" if v is None else v.text) for v in row)


def _same_row(a: Row, b: Row) -> bool:
    return all((x is None and y is None) or (x is not None and y is not None and x.text == y.text)
               for x, y in zip(a, b, strict=True))


# ---------------------------------------------------------------- expected events
@attrs.frozen
class ExpectedEvent:
    """One event the stream carries, as PostgreSQL sent it.

    ``op`` is ``c``, ``u``, ``d``, ``t`` or ``m``. ``before`` and ``after`` are the
    tuples as sent: ``before`` only holds the replica-identity columns unless the
    table is REPLICA IDENTITY FULL, and ``after`` holds :data:`UNCHANGED_TOAST` for
    unchanged out-of-line values. A key-changing update is a ``u`` here (Debezium
    splits it into a delete and a create).
    """

    op: str
    table: TableDef | None
    before: tuple[Any, ...] | None = None
    after: tuple[Any, ...] | None = None
    message: LogicalMsg | None = None
    xid: int | None = None
    lsn: int = 0


# ---------------------------------------------------------------- the workload
@attrs.frozen(repr=False)
class Workload:
    """Tables, transactions, a schedule and the stream options; outputs derived on demand.

    ``messages`` (with LSNs), ``expected`` and ``final_state`` are computed when the
    workload is built (see :func:`render`).
    """

    tables: tuple[TableDef, ...]
    items: tuple[Item, ...]
    schedule: Schedule
    proto_version: int = 1
    streaming: Streaming = "off"
    binary: bool = False
    messages: tuple[tuple[int, Message], ...] = attrs.field(default=(), repr=False)
    expected: tuple[ExpectedEvent, ...] = attrs.field(default=(), repr=False)
    final_state: dict[str, tuple[Row, ...]] = attrs.field(factory=dict, repr=False, eq=False)

    def __repr__(self) -> str:
        head = (f"Workload(proto_version={self.proto_version}, streaming={self.streaming!r}, "
                f"binary={self.binary}, {len(self.messages)} messages)")
        return head + "\n" + "\n".join("    " + line for line in self.script())

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """How hypothesis prints a falsifying workload: as :meth:`script`."""
        printer.text(repr(self))

    def script(self) -> list[str]:
        """The workload as SQL, one line per table and per transaction (long literals
        shortened; :meth:`statements` has them whole)."""
        return [_LONG_LITERAL.sub(_shorten, " ".join(group))
                for group in self._statement_groups()]

    def statements(self) -> list[str]:
        """The workload as SQL statements, one each: the DDL of the tables, then every item
        in commit order. Run on a server (with the extensions its types need) they produce
        this stream, the interleaving of stream blocks aside."""
        return [stmt.split("  -- ")[0] for group in self._statement_groups() for stmt in group]

    def _statement_groups(self) -> list[list[str]]:
        out: list[list[str]] = []
        for t in self.tables:
            ddl = t.create_sql()
            out.append([line + ";" for line in (ddl if t.schema != "public" else ddl[1:])])
        for item in self.items:
            if isinstance(item, LogicalMsg):
                out.append([_message_sql(item)])
                continue
            line = ["BEGIN;"]
            sub = 0
            for op in item.ops:
                if op.subtransaction != sub:
                    if sub:
                        line.append(f"ROLLBACK TO SAVEPOINT s{sub};"
                                    if sub in item.aborted_subtransactions
                                    else f"RELEASE SAVEPOINT s{sub};")
                    sub = op.subtransaction
                    if sub:
                        line.append(f"SAVEPOINT s{sub};")
                line.append(_op_sql(op))
            if sub:
                line.append(f"ROLLBACK TO SAVEPOINT s{sub};" if sub in
                            item.aborted_subtransactions else f"RELEASE SAVEPOINT s{sub};")
            if item.two_phase:
                gid = "'" + item.gid.replace("'", "''") + "'"
                line.append(f"PREPARE TRANSACTION {gid};")
                line.append(("COMMIT" if item.outcome == "commit" else "ROLLBACK")
                            + f" PREPARED {gid};")
            else:
                line.append("COMMIT;" if item.outcome == "commit" else "ROLLBACK;")
            if item.streamed:
                line[-1] += f"  -- streamed in {len(item.block_ends)} block(s)"
            out.append(line)
        return out

    @property
    def catalog(self) -> CatalogSnapshot:
        """The catalog snapshot of the tables (NOT NULL, keys, enum labels)."""
        return catalog_for(self.tables)

    def capture(self) -> list[CaptureRow]:
        """The stream as capture rows: what ``pg_logical_slot_get_binary_changes`` returns."""
        out = []
        for lsn, message in self.messages:
            xid = getattr(message, "xid", None)
            out.append(CaptureRow(Lsn(lsn), xid, encode_message(message)))
        return out

    def capture_lines(self) -> list[str]:
        """The capture as JSON Lines (without newlines)."""
        return [json.dumps(row.to_json()) for row in self.capture()]

    def decoder(self, config: EventConfig | Mapping[str, str] | None = None, *,
                catalog: bool = True) -> EventDecoder:
        """An event decoder set up as for this stream (options, catalog, a fixed clock)."""
        return EventDecoder(event_config(config), catalog=self.catalog if catalog else None,
                            proto_version=self.proto_version, streaming=self.streaming,
                            clock=lambda: CLOCK_NS, run_id="pgcdc-events-testing")

    def records(self, config: EventConfig | Mapping[str, str] | None = None, *,
                catalog: bool = True) -> list[ChangeRecord]:
        """The Debezium records: the real event decoder run over :meth:`capture`."""
        return self.decoder(config, catalog=catalog).feed_rows(self.capture())

    def json_records(self, config: EventConfig | Mapping[str, str] | None = None
                     ) -> list[dict[str, Any]]:
        """The records as ``decode`` writes them: ``{"topic", "key", "value", "headers"}``."""
        cfg = event_config(config)
        writer = JsonRecordWriter(cfg.json)
        return [json.loads(writer.record_line(r)) for r in self.records(cfg)]

    def connect_state(self, config: EventConfig | Mapping[str, str] | None = None
                      ) -> dict[str, list[Any]]:
        """:attr:`final_state` as Connect values under ``config``, in :func:`connect_rows`'s
        form (each row's Value struct as a dict), converted by the decoder's table schemas."""
        decoder = self.decoder(config)
        decoder.feed_rows(self.capture())
        out: dict[str, list[Any]] = {}
        for t in self.tables:
            rows = self.final_state.get(t.qualified, ())
            if not rows:
                continue
            schema = decoder.table(t.relation_id)
            if schema is None:
                continue
            out[t.qualified] = sorted(
                (schema.value(schema.row(self.tuple_data(row))).as_dict() for row in rows),
                key=_json)
        return out

    def tuple_data(self, row: Sequence[Any]) -> TupleData:
        """A row as this stream sends it (text or binary; :data:`UNCHANGED_TOAST` as 'u')."""
        renderer = _Renderer((), proto_version=self.proto_version, streaming=self.streaming,
                             binary=self.binary, start_lsn=0, start_time_us=0, first_xid=0)
        return renderer._tuple(row)

    def spark_rows(self, config: EventConfig | Mapping[str, str] | None = None, *,
                   flavour: Literal["literal", "semantic"] = "semantic"
                   ) -> dict[str, list[dict[str, Any]]]:
        """The events as the Spark layer's rows, per table (``schema.table``): what
        :func:`pgcdc_events.spark.decode_capture` puts in each table's DataFrame, computed in
        this process by the functions the Spark tasks run (no SparkSession needed). Needs the
        ``spark`` extra; raises :class:`ConfigurationError` without it."""
        try:
            from pgcdc_events.spark import local, schema  # noqa: PLC0415 - optional extra
        except ImportError as exc:
            raise ConfigurationError("spark_rows needs the spark extra "
                                     f"(pip install 'pgcdc-events[spark]'): {exc}") from None
        tables = local.decode_to_arrow(self.capture(), event_config(config), self.catalog,
                                       options=schema.SparkSchemaOptions(flavour),
                                       clock=lambda: CLOCK_NS)
        return {name: table.to_pylist() for name, table in tables.items()}


def event_config(config: EventConfig | Mapping[str, str] | None) -> EventConfig:
    """An :class:`EventConfig` from one, from connector properties (over the defaults), or the
    defaults (:data:`DEFAULT_PROPERTIES`)."""
    if isinstance(config, EventConfig):
        return config
    return EventConfig.from_properties({**DEFAULT_PROPERTIES, **(config or {})})


# ---------------------------------------------------------------- rendering
_LSN_STEP: Final = 0x38
_START_LSN: Final = 0x1_000_000
#: 2024-01-01T00:00:00Z in microseconds since the Unix epoch.
_START_TIME_US: Final = 1_704_067_200_000_000


class _Renderer:
    def __init__(self, items: Sequence[Item], *, proto_version: int, streaming: Streaming,
                 binary: bool, start_lsn: int, start_time_us: int, first_xid: int) -> None:
        self.items = items
        self.proto_version = proto_version
        self.streaming = streaming
        self.binary = binary
        self.lsn = start_lsn
        self.time_us = start_time_us
        self.next_xid = first_xid
        self.out: list[tuple[int, Message]] = []
        self.expected: list[ExpectedEvent] = []
        self.xids: dict[int, int] = {}
        self.subxids: dict[tuple[int, int], int] = {}
        self.schema_sent: set[int] = set()
        self.stream_sent: dict[int, set[int]] = {}
        self.prepared_at: dict[int, tuple[int, int, int]] = {}
        self.state: dict[int, TableState] = {}
        self.sent: dict[int, list[tuple[Op, int]]] = {}

    # -- counters ---------------------------------------------------------------
    def _next_lsn(self) -> int:
        self.lsn += _LSN_STEP
        return self.lsn

    def _next_time(self) -> int:
        self.time_us += 1000
        return unix_us_to_pg_timestamp(self.time_us)

    def _xid(self, index: int) -> int:
        if index not in self.xids:
            self.xids[index] = self.next_xid
            self.next_xid += 1
        return self.xids[index]

    def _subxid(self, index: int, sub: int) -> int:
        if sub == 0:
            return self._xid(index)
        key = (index, sub)
        if key not in self.subxids:
            self.subxids[key] = self.next_xid
            self.next_xid += 1
        return self.subxids[key]

    # -- tuples -----------------------------------------------------------------
    def _value(self, value: PgValue | None) -> tuple[int, bytes | None]:
        if value is None:
            return KIND_NULL, None
        if self.binary:
            if value.binary is None:
                raise ConfigurationError(
                    f"a {value.type} value has no binary form here; render with binary=False")
            return KIND_BINARY, value.binary
        return KIND_TEXT, value.text_bytes

    def _tuple(self, row: Sequence[Any]) -> TupleData:
        kinds = bytearray()
        values: list[bytes | None] = []
        for v in row:
            if v is UNCHANGED_TOAST:
                kinds.append(KIND_UNCHANGED_TOAST)
                values.append(None)
            else:
                kind, raw = self._value(v)
                kinds.append(kind)
                values.append(raw)
        return TupleData(bytes(kinds), tuple(values))

    @staticmethod
    def _identity_row(table: TableDef, row: Row) -> tuple[Any, ...]:
        if table.replica_identity == "f":
            return row
        ident = set(table.identity)
        return tuple(v if c.name in ident else None for c, v in zip(table.columns, row,
                                                                   strict=True))

    # -- relations -----------------------------------------------------------------
    def _schema(self, table: TableDef, stream_xid: int | None) -> None:
        if stream_xid is not None:
            sent = self.stream_sent.setdefault(stream_xid, set())
            if table.relation_id in sent:
                return
            sent.add(table.relation_id)
        elif table.relation_id in self.schema_sent:
            return
        else:
            self.schema_sent.add(table.relation_id)
        lsn = self.lsn
        for t in table.type_messages(stream_xid):
            self.out.append((lsn, t))
        self.out.append((lsn, table.relation(stream_xid)))

    # -- operations ---------------------------------------------------------------
    def _op(self, op: Op, index: int, stream_xid: int | None) -> tuple[Message, int]:
        xid = self._subxid(index, op.subtransaction) if stream_xid is not None else None
        lsn = self._next_lsn()
        self.sent.setdefault(index, []).append((op, lsn))
        if isinstance(op, LogicalMsg):
            return LogicalMessage(1, lsn, op.prefix, op.content, xid), lsn
        if isinstance(op, TruncateTables):
            for t in op.tables:
                self._schema(t, stream_xid)
            options = (Truncate.CASCADE if op.cascade else 0) | (
                Truncate.RESTART_IDENTITY if op.restart_identity else 0)
            return Truncate(options, tuple(t.relation_id for t in op.tables), xid), lsn
        table = op.table
        self._schema(table, stream_xid)
        rid = table.relation_id
        if op.old is None:
            assert op.new is not None
            return Insert(rid, self._tuple(op.new), xid), lsn
        if op.new is None:
            kind: Literal["K", "O"] = "O" if table.replica_identity == "f" else "K"
            return Delete(rid, kind, self._tuple(self._identity_row(table, op.old)), xid), lsn
        new = self._sent_new(table, op.old, op.new)
        if table.replica_identity == "f":
            return Update(rid, "O", self._tuple(op.old), self._tuple(new), xid), lsn
        ident = [table.column_index(c) for c in table.identity]
        if any(not _same_value(op.old[i], op.new[i]) for i in ident):
            old = self._tuple(self._identity_row(table, op.old))
            return Update(rid, "K", old, self._tuple(new), xid), lsn
        return Update(rid, None, None, self._tuple(new), xid), lsn

    @staticmethod
    def _sent_new(table: TableDef, old: Row, new: Row) -> tuple[Any, ...]:
        """The new tuple as sent: unchanged out-of-line values become 'u'."""
        return tuple(UNCHANGED_TOAST if is_toasted(n) and _same_value(o, n) else n
                     for o, n in zip(old, new, strict=True))

    def _expect(self, op: Op, xid: int, lsn: int) -> None:
        if isinstance(op, LogicalMsg):
            self.expected.append(ExpectedEvent("m", None, message=op, xid=xid, lsn=lsn))
        elif isinstance(op, TruncateTables):
            for t in op.tables:
                self.expected.append(ExpectedEvent("t", t, xid=xid, lsn=lsn))
        else:
            table = op.table
            if op.old is None:
                self.expected.append(ExpectedEvent("c", table, None, op.new, xid=xid, lsn=lsn))
            elif op.new is None:
                self.expected.append(ExpectedEvent(
                    "d", table, self._identity_row(table, op.old), None, xid=xid, lsn=lsn))
            else:
                new = self._sent_new(table, op.old, op.new)
                ident = [table.column_index(c) for c in table.identity]
                before: tuple[Any, ...] | None = None
                if table.replica_identity == "f":
                    before = op.old
                    new = tuple(o if n is UNCHANGED_TOAST else n
                                for o, n in zip(op.old, new, strict=True))
                elif any(not _same_value(op.old[i], op.new[i]) for i in ident):
                    before = self._identity_row(table, op.old)
                self.expected.append(ExpectedEvent("u", table, before, new, xid=xid, lsn=lsn))

    def _apply(self, txn: Transaction) -> None:
        for op in txn.visible_ops():
            if isinstance(op, Change):
                self._table_state(op.table).apply(op)
            elif isinstance(op, TruncateTables):
                for t in op.tables:
                    self._table_state(t).rows.clear()

    def _table_state(self, table: TableDef) -> TableState:
        if table.relation_id not in self.state:
            self.state[table.relation_id] = TableState(table)
        return self.state[table.relation_id]

    # -- schedule events --------------------------------------------------------------
    def run(self, schedule: Schedule) -> None:
        for index, part in schedule.events:
            item = self.items[index]
            if isinstance(item, LogicalMsg):
                lsn = self._next_lsn()
                self.out.append((lsn, LogicalMessage(0, lsn, item.prefix, item.content)))
                self.expected.append(ExpectedEvent("m", None, message=item, lsn=lsn))
                continue
            if part[0] == "block":
                self._block(index, item, part[1])
            elif part[0] == "prepare":
                self._prepare(index, item)
            else:
                self._end(index, item)

    def _whole_body(self, index: int, txn: Transaction) -> list[tuple[Op, int]]:
        ops = []
        for op in txn.visible_ops():
            message, lsn = self._op(op, index, None)
            self.out.append((lsn, message))
            ops.append((op, lsn))
        return ops

    def _block_ops(self, txn: Transaction, k: int) -> Sequence[Op]:
        start = txn.block_ends[k - 1] if k else 0
        return txn.ops[start:txn.block_ends[k]]

    def _block(self, index: int, txn: Transaction, k: int) -> None:
        xid = self._xid(index)
        ops = self._block_ops(txn, k)
        first = len(self.out)
        self.out.append((0, StreamStart(xid, k == 0)))
        for op in ops:
            message, lsn = self._op(op, index, xid)
            self.out.append((lsn, message))
        block_lsn = self.out[first + 1][0] if len(self.out) > first + 1 else self._next_lsn()
        self.out[first] = (block_lsn, self.out[first][1])
        self.out.append((self.lsn, StreamStop()))
        for sub in sorted(txn.aborted_subtransactions):
            subs = [i for i, op in enumerate(txn.ops) if op.subtransaction == sub]
            if subs and max(subs) == txn.block_ends[k] - 1:
                lsn = self._next_lsn()
                info: tuple[int | None, int | None] = (None, None)
                if self.streaming == "parallel":
                    info = (lsn, self._next_time())
                self.out.append((lsn, StreamAbort(xid, self._subxid(index, sub), *info)))

    def _prepare(self, index: int, txn: Transaction) -> None:
        xid = self._xid(index)
        if txn.streamed:
            prepare_lsn = self._next_lsn()
            end_lsn = self._next_lsn()
            when = self._next_time()
            self.out.append((end_lsn, StreamPrepare(0, prepare_lsn, end_lsn, when, xid,
                                                    txn.gid)))
        else:
            start = len(self.out)
            self.out.append((0, BeginPrepare(0, 0, 0, xid, txn.gid)))
            self._whole_body(index, txn)
            prepare_lsn = self._next_lsn()
            end_lsn = self._next_lsn()
            when = self._next_time()
            first = self.out[start + 1][0] if len(self.out) > start + 1 else prepare_lsn
            self.out[start] = (first, BeginPrepare(prepare_lsn, end_lsn, when, xid, txn.gid))
            self.out.append((end_lsn, Prepare(0, prepare_lsn, end_lsn, when, xid, txn.gid)))
        self.prepared_at[index] = (prepare_lsn, end_lsn, when)

    def _end(self, index: int, txn: Transaction) -> None:
        xid = self._xid(index)
        committed = txn.outcome == "commit"
        if txn.two_phase:
            _, prepare_end, prepared = self.prepared_at[index]
            lsn = self._next_lsn()
            end_lsn = self._next_lsn()
            when = self._next_time()
            if committed:
                self.out.append((end_lsn, CommitPrepared(0, lsn, end_lsn, when, xid, txn.gid)))
            else:
                self.out.append((end_lsn, RollbackPrepared(0, prepare_end, end_lsn, prepared,
                                                           when, xid, txn.gid)))
        elif txn.streamed:
            lsn = self._next_lsn()
            if committed:
                end_lsn = self._next_lsn()
                when = self._next_time()
                self.out.append((end_lsn, StreamCommit(xid, 0, lsn, end_lsn, when)))
            else:
                info: tuple[int | None, int | None] = (None, None)
                if self.streaming == "parallel":
                    info = (lsn, self._next_time())
                self.out.append((lsn, StreamAbort(xid, xid, *info)))
        else:
            if not committed:
                return  # a rolled-back transaction sent whole never reaches the stream
            start = len(self.out)
            self.out.append((0, Begin(0, 0, xid)))
            self._whole_body(index, txn)
            commit_lsn = self._next_lsn()
            end_lsn = self._next_lsn()
            when = self._next_time()
            first = self.out[start + 1][0] if len(self.out) > start + 1 else commit_lsn
            self.out[start] = (first, Begin(commit_lsn, when, xid))
            self.out.append((end_lsn, Commit(0, commit_lsn, end_lsn, when)))
        if committed:
            for sent in self.stream_sent.pop(xid, set()):
                self.schema_sent.add(sent)
            self._record_expected(index, txn)
            self._apply(txn)
        else:
            self.stream_sent.pop(xid, None)
            self.sent.pop(index, None)

    def _record_expected(self, index: int, txn: Transaction) -> None:
        """Expected events of a committed transaction, at the LSNs its changes were sent at."""
        xid = self._xid(index)
        for op, lsn in self.sent.pop(index, []):
            if op.subtransaction not in txn.aborted_subtransactions:
                self._expect(op, xid, lsn)


_LONG_LITERAL: Final = re.compile(r"'(?:[^']|'')*'")


def _shorten(match: re.Match[str]) -> str:
    text = match.group()
    return text if len(text) <= 60 else f"{text[:30]}...({len(text)} chars)...{text[-12:]}"


def _sql_value(value: PgValue | None) -> str:
    return "NULL" if value is None else value.sql()


def _where(table: TableDef, row: Row) -> str:
    names = table.identity or tuple(c.name for c in table.columns)
    return " AND ".join(
        f"{quote_ident(n)} {'IS NULL' if row[table.column_index(n)] is None else '= ' + _sql_value(row[table.column_index(n)])}"  # noqa: E501
        for n in names)


def _op_sql(op: Op) -> str:
    if isinstance(op, LogicalMsg):
        return _message_sql(op)
    if isinstance(op, TruncateTables):
        return ("TRUNCATE " + ", ".join(t.sql_name for t in op.tables)
                + (" RESTART IDENTITY" if op.restart_identity else "")
                + (" CASCADE" if op.cascade else "") + ";")
    table = op.table
    if op.old is None:
        assert op.new is not None
        return (f"INSERT INTO {table.sql_name} VALUES ("
                + ", ".join(_sql_value(v) for v in op.new) + ");")
    if op.new is None:
        return f"DELETE FROM {table.sql_name} WHERE {_where(table, op.old)};"
    sets = ", ".join(f"{quote_ident(c.name)} = {_sql_value(n)}"
                     for c, o, n in zip(table.columns, op.old, op.new, strict=True)
                     if not _same_value(o, n)) or (
        f"{quote_ident(table.columns[0].name)} = {quote_ident(table.columns[0].name)}")
    return f"UPDATE {table.sql_name} SET {sets} WHERE {_where(table, op.old)};"


def _message_sql(msg: LogicalMsg) -> str:
    prefix = "'" + msg.prefix.replace("'", "''") + "'"
    return (f"SELECT pg_logical_emit_message({'true' if msg.transactional else 'false'}, "
            f"{prefix}, '\\x{msg.content.hex()}'::bytea);")


def _same_value(a: PgValue | None, b: PgValue | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and a.text == b.text)


def render(tables: Iterable[TableDef], items: Sequence[Item], schedule: Schedule | None = None,
           *, proto_version: int | None = None, streaming: Streaming = "off",
           binary: bool = False, start_lsn: int = _START_LSN,
           start_time_us: int = _START_TIME_US, first_xid: int = 1000) -> Workload:
    """Render transactions into the stream a server would send, with the expected events and
    final state. ``proto_version`` defaults to the lowest the features used need."""
    items = tuple(items)
    schedule = schedule or Schedule.serial(items)
    txns = [i for i in items if isinstance(i, Transaction)]
    if any(t.streamed for t in txns) and streaming == "off":
        streaming = "on"
    needed = 1
    if streaming != "off":
        needed = 2
    if any(t.two_phase for t in txns):
        needed = max(needed, 3)
    if streaming == "parallel":
        needed = 4
    version = proto_version if proto_version is not None else needed
    if version < needed:
        raise ConfigurationError(f"the workload needs protocol version {needed} or higher")
    r = _Renderer(items, proto_version=version, streaming=streaming, binary=binary,
                  start_lsn=start_lsn, start_time_us=start_time_us, first_xid=first_xid)
    r.run(schedule)
    tables = tuple(tables)
    state = {t.qualified: (r.state[t.relation_id].sorted_rows() if t.relation_id in r.state
                           else ()) for t in tables}
    return Workload(tables, items, schedule, version, streaming, binary, tuple(r.out),
                    tuple(r.expected), state)


def connect_rows(records: Iterable[ChangeRecord], *, placeholder: Callable[[Any], bool]
                 | None = None) -> dict[str, list[Any]]:
    """Apply change records to empty tables; the rows each table ends with (as plain values).

    A reference consumer: creates and updates replace the row under its key (tables
    without a key are multisets matched on ``before``), deletes remove it, truncates
    empty the table; a value ``placeholder`` recognises (unchanged TOAST) keeps the
    previous one, also across a key change (Debezium's delete and create, linked by the
    ``__debezium.newkey``/``oldkey`` headers). Rows are ``Struct.as_dict()`` dicts ordered
    by their JSON text; empty tables are left out.
    """
    tables: dict[str, dict[str, Any]] = {}
    moved: dict[str, Any] = {}  # rows deleted by a key-changing update, by their old key
    for record in records:
        value = record.value
        if record.kind not in ("change", "truncate") or value is None:
            continue
        source = value["source"]
        name = f"{source['schema']}.{source['table']}"
        rows = tables.setdefault(name, {})
        op = value["op"]
        if op == "t":
            rows.clear()
            continue
        before, after = value["before"], value["after"]
        key = _json(record.key.as_dict()) if record.key is not None else None
        old_slot = key if key is not None else (
            _find_row(rows, before.as_dict()) if before is not None else None)
        previous = rows.pop(old_slot, None) if old_slot is not None else None
        headers = {h.name: h.value for h in record.headers}
        if "__debezium.newkey" in headers and key is not None:
            moved[key] = previous
        if "__debezium.oldkey" in headers:
            previous = moved.pop(_json(headers["__debezium.oldkey"].as_dict()), previous)
        if after is not None:
            row = after.as_dict()
            if placeholder is not None and previous is not None:
                row = {k: previous[k] if placeholder(v) else v for k, v in row.items()}
            slot = key if key is not None else f"{_json(row)}#{len(rows)}#{id(record)}"
            rows[slot] = row
    return {name: sorted(rows.values(), key=_json) for name, rows in tables.items() if rows}


def _find_row(rows: dict[str, Any], row: dict[str, Any]) -> str | None:
    text = _json(row)
    for slot, stored in rows.items():
        if _json(stored) == text:
            return slot
    return None


def _json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, default=_plain_default, ensure_ascii=False)


def _plain_default(obj: Any) -> Any:
    if isinstance(obj, bytes):
        return "b64:" + obj.hex()
    if isinstance(obj, float) and not math.isfinite(obj):
        return repr(obj)
    return str(obj)
