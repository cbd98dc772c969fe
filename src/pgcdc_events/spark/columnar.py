"""Column-wise decoding of runs of row changes: the records of :class:`EventDecoder`, as Arrow.

A capture is mostly long runs of Insert (or Update, or Delete) messages of one table in
one transaction. :class:`RunDecoder` decodes chunks of a capture as
:class:`~pgcdc_events.events.chunks.ChunkDecoder` does, message by message through an
:class:`EventDecoder`, except for such runs: their TupleData is split for the whole run
at once, column by column (numpy over the messages' bytes, no Python loop per value), and
each column converted by the kernel of the vector form its type family declares
(:mod:`pgcdc_events.spark.vectorized`: integers, text, booleans, fixed-scale numerics,
timestamptz in UTC), else by the column's own converter called once per distinct value.
This module decides no conversion: which kernel, and with which parameters, is the type
family's declaration. The result is a :class:`ColumnarRun`: an Arrow batch holding one
row per record, the records the decoder would have given (:meth:`ColumnarRun.records`
rebuilds them).

A run of at least ``min_run`` messages that goes to the decoder anyway, and a column
whose kernel declines its values, are counted with their reason
(:class:`ColumnarStats`, :attr:`RunDecoder.stats`), so tests can prove the column-wise
path ran. In the test mode (``RunDecoder(verify=True)``, or the environment variable
``PGCDC_EVENTS_VERIFY_VECTORS=1``) every value a kernel converts is compared with the
column's scalar converter, and a difference raises :class:`VectorMismatchError`.

What stays with the decoder: its state (the table schema in force, the open transaction
and the last commit LSN come from it), the source block (the event layer's
:func:`~pgcdc_events.events.source.source_struct`) and every case this module does not
take, per run, never value by value:

- a message that is not in an ordinary transaction (streamed, prepared, snapshot block);
- an Update carrying an old tuple (key changes, ``skip.messages.without.change``),
  a binary-format or unchanged-TOAST value, a malformed message;
- a table with a column whose Connect schema is not a primitive or a fixed-precision
  ``Decimal`` (structs, arrays, ``float32``);
- ``provide.transaction.metadata``, an operation in ``skipped.operations``;
- a value its converter refuses (the failure-handling modes are the decoder's).

The run is then fed to the decoder message by message, which gives the same records.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from typing import Any, Final

import attrs
import numpy as np
import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information
import pyarrow.compute as pc  # type: ignore[import-untyped]

from pgcdc_events.errors import PgCdcError
from pgcdc_events.events.chunks import ChunkDecoder, ChunkError
from pgcdc_events.events.decoder import EventDecoder
from pgcdc_events.events.envelope import change_record, envelope_value, tombstone
from pgcdc_events.events.records import ChangeRecord, Header
from pgcdc_events.events.source import SOURCE_SCHEMA, sequence, source_struct
from pgcdc_events.events.tables import ColumnPlan, TableSchema
from pgcdc_events.events.transactions import TransactionContext
from pgcdc_events.protocol import wire
from pgcdc_events.spark import vectorized
from pgcdc_events.types.jsonvalue import DECIMAL_LOGICAL
from pgcdc_events.types.numeric import decimal_parameters
from pgcdc_events.types.schema import Schema, Struct

__all__ = ["MIN_RUN", "VERIFY_ENV", "ColumnarRun", "ColumnarStats", "ColumnarTable",
           "RunDecoder", "VectorMismatchError", "arrow_type", "decode_run", "split_tuples"]

_INSERT, _UPDATE, _DELETE = wire.INSERT[0], wire.UPDATE[0], wire.DELETE[0]
_NEW, _KEY, _OLD = wire.NEW_TUPLE[0], wire.KEY_TUPLE[0], wire.OLD_TUPLE[0]
_TEXT, _NULL = wire.KIND_TEXT, wire.KIND_NULL
_OPS: Final = {_INSERT: "c", _UPDATE: "u", _DELETE: "d"}
#: Arrow types of the Connect primitives a run may hold (``float32`` is left to the
#: decoder: its Python value is a double, which an Arrow float32 would round).
_PRIMITIVES: Final = {
    "int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64(),
    "float64": pa.float64(), "boolean": pa.bool_(), "string": pa.string(),
    "bytes": pa.binary(),
}
#: The fewest messages a run decoded column-wise has (shorter ones: the decoder's).
MIN_RUN: Final = 32
#: The environment variable that turns on the test mode of every :class:`RunDecoder`
#: (``1``): each kernel's values compared with the scalar converter's, one by one.
VERIFY_ENV: Final = "PGCDC_EVENTS_VERIFY_VECTORS"


def arrow_type(schema: Schema) -> Any:
    """The Arrow type holding a Connect schema's values exactly (``None``: none here)."""
    if schema.name == DECIMAL_LOGICAL:
        decimal = decimal_parameters(schema)
        return None if decimal is None else pa.decimal128(*decimal)
    return _PRIMITIVES.get(schema.type)


class _NotColumnarError(Exception):
    """This run goes to the decoder, message by message (``args[0]``: why)."""


class VectorMismatchError(PgCdcError):
    """Test mode: a kernel's value is not the scalar converter's (a bug in the kernel)."""


@attrs.define
class ColumnarStats:
    """What a :class:`RunDecoder` did.

    ``runs``/``messages``: runs (and their messages) decoded column-wise; ``fallbacks``:
    runs of at least ``min_run`` messages given to the decoder, by reason;
    ``kernels``/``kernel_fallbacks``: columns of runs converted by the kernel of their
    vector form, and columns whose kernel declined the run's values (the scalar converter
    took them), by form class name; ``scalar``: columns converted by the scalar converter
    because they have no vector form or their values are masked or truncated (a NOT NULL
    column's check that its value has a representation is made on the kernel's output).
    """

    runs: int = 0
    messages: int = 0
    fallbacks: Counter[str] = attrs.field(factory=Counter)
    kernels: Counter[str] = attrs.field(factory=Counter)
    kernel_fallbacks: Counter[str] = attrs.field(factory=Counter)
    scalar: int = 0


def _uint32(buf: Any, at: Any) -> Any:
    """The big-endian unsigned 32-bit integers at offsets ``at`` of ``buf`` (a view of
    ``buf`` as overlapping 4-byte integers, one a byte, read in one gather)."""
    view = np.ndarray(shape=(max(0, len(buf) - 3),), dtype=">u4", buffer=buf, strides=(1,))
    return view[at].astype(np.int64)


def split_tuples(buf: Any, starts: Any, limits: Any, columns: int
                 ) -> tuple[list[Any], list[Any], list[Any], Any]:
    """Split TupleData column by column for many messages at once.

    ``buf`` is a ``uint8`` array holding the messages, ``starts`` where each message's
    TupleData begins (its column count), ``limits`` where each message ends. Returns, for
    every column, the kind bytes, the value starts and the value lengths (0 unless the
    kind is ``t``), and where each tuple ends. Any message that is not a text-format tuple
    of ``columns`` columns, null or text values only, raises ``_NotColumnarError``.
    """
    count = len(starts)
    if count == 0 or bool(np.any(starts + 2 > limits)):
        raise _NotColumnarError("malformed message")
    width = (buf[starts].astype(np.int64) << 8) | buf[starts + 1]
    if bool(np.any(width != columns)):
        raise _NotColumnarError("column count")
    pos = starts + 2
    kinds: list[Any] = []
    value_starts: list[Any] = []
    lengths: list[Any] = []
    for _ in range(columns):
        if bool(np.any(pos >= limits)):
            raise _NotColumnarError("malformed message")
        kind = buf[pos]
        text = kind == _TEXT
        if not bool(np.all(text | (kind == _NULL))):
            # binary values, unchanged TOAST, damage: the decoder's
            raise _NotColumnarError("binary or unchanged-TOAST value")
        length = np.zeros(count, np.int64)
        if bool(text.any()):
            at = pos[text] + 1
            if bool(np.any(at + 4 > limits[text])):
                raise _NotColumnarError("malformed message")
            length[text] = _uint32(buf, at)
        kinds.append(kind)
        value_starts.append(pos + 5)
        lengths.append(length)
        pos = pos + 1 + np.where(text, 4 + length, 0)
        if bool(np.any(pos > limits)):
            raise _NotColumnarError("malformed message")
    return kinds, value_starts, lengths, pos


def _gather(buf: Any, starts: Any, lengths: Any, present: Any) -> Any:
    """The values ``buf[start:start + length]`` as an Arrow binary array (null where not
    ``present``), gathered without a loop per value."""
    count = len(starts)
    sizes = np.where(present, lengths, 0)
    offsets = np.zeros(count + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    total = int(offsets[-1])
    if total >= 2**31 - 1:
        raise _NotColumnarError("2 GiB of values in a column")
    longest = int(sizes.max()) if count else 0
    safe = np.where(present, starts, 0)
    if longest > 0 and total * 2 + 8 * count >= longest * count and (
            int(safe.max()) + longest <= len(buf)):
        # values of about one length (most columns): rows of ``longest`` bytes copied at
        # once (a window view of the buffer), then the bytes past each value dropped
        rows = np.lib.stride_tricks.sliding_window_view(buf, longest)[safe]
        data = (rows.reshape(-1) if total == longest * count
                else rows[np.arange(longest) < sizes[:, None]])
    else:
        # 32-bit indexes where the buffer allows: half the memory traffic of the gather
        width = np.int32 if len(buf) < 2**31 - 1 else np.int64
        index = np.repeat((starts - offsets[:-1]).astype(width), sizes)
        index += np.arange(total, dtype=width)
        data = buf[index]
    nulls = count - int(np.count_nonzero(present))
    validity = None if nulls == 0 else pa.py_buffer(np.packbits(present, bitorder="little"))
    return pa.Array.from_buffers(pa.binary(), count, [
        validity, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)], null_count=nulls)


class ColumnarTable:
    """How one :class:`TableSchema` decodes column-wise (:attr:`ok`: whether it can).

    ``stats`` counts how its columns convert; ``verify``: the test mode (each kernel's
    values compared with the scalar converter's)."""

    def __init__(self, table: TableSchema, stats: ColumnarStats | None = None,
                 verify: bool = False) -> None:
        self.table = table
        self.stats = ColumnarStats() if stats is None else stats
        self.verify = verify
        self.types = [arrow_type(col.mapping.schema) for col in table.columns]
        self.ok = all(t is not None for t in self.types)
        if not self.ok:
            return
        fields = table.value_schema.fields or ()
        value_at = (table.value_positions if table.value_positions is not None
                    else tuple(range(len(table.columns))))
        self.value_type = pa.struct([pa.field(f.name, self.types[i])
                                     for f, i in zip(fields, value_at, strict=True)])
        self.value_at = value_at
        self.key_type = None
        if table.key_schema is not None:
            self.key_type = pa.struct([
                pa.field(f.name, self.types[i])
                for f, i in zip(table.key_schema.fields or (), table.key_positions, strict=True)])
        self.source_type = pa.struct([pa.field(f.name, arrow_type(f.schema))
                                      for f in SOURCE_SCHEMA.fields or ()])

    def convert(self, number: int, kind: Any, raw: Any) -> Any:
        """Column ``number`` (of the table's columns) of a run: its Connect values as an
        Arrow array, given the kind bytes and the raw values."""
        col = self.table.columns[number]
        target = self.types[number]
        out = self._kernel(col, raw, target)
        if out is None:  # the column's converter, once per distinct value
            encoded = pc.dictionary_encode(raw)
            try:
                values = [col.from_text(v) for v in encoded.dictionary.to_pylist()]
                out = pa.array(values, target).take(encoded.indices)
            except (PgCdcError, ValueError, ArithmeticError, TypeError, KeyError, IndexError,
                    pa.ArrowException):
                raise _NotColumnarError("a value its converter refuses") from None
        if col.null_value is not None and out.null_count > int(np.count_nonzero(kind != _TEXT)):
            # a converter gave null: keep the decoder's rules for it
            raise _NotColumnarError("a value its converter makes null")
        if col.null_value is not None and out.null_count:
            out = pc.fill_null(out, pa.scalar(col.null_value, target))
        return out

    def _kernel(self, col: ColumnPlan, raw: Any, target: Any) -> Any:
        """The values by the kernel of the column's vector form, or None (counted)."""
        form = col.mapping.vector
        stats = self.stats
        converter = col.mapping.from_text
        # the check of a NOT NULL column whose type may have values with no
        # representation (events.tables._required) is taken on the kernel's output below
        required = getattr(col.from_text, "required_of", None) is converter
        if form is None or (col.from_text is not converter and not required):
            stats.scalar += 1  # no form; or a mask or truncation on top
            return None
        name = type(form).__name__
        out = vectorized.convert(form, raw, target)
        if out is None:
            stats.kernel_fallbacks[name] += 1
            return None
        if required and out.null_count > raw.null_count:
            # a value with no representation: the decoder's rules (the column's error)
            raise _NotColumnarError("a value its converter makes null")
        stats.kernels[name] += 1
        if self.verify:
            wrong = vectorized.mismatch(raw, out, converter)
            if wrong is not None:
                index, value, reason = wrong
                shown = "NULL" if value is None else repr(value[:80])
                raise VectorMismatchError(
                    f"{self.table.qualified}.{col.name} ({col.mapping.pg_type.name}): the "
                    f"{name} kernel is wrong for value {index} of the run ({shown}): {reason}")
        return out


@attrs.frozen
class ColumnarRun:
    """The records of a run of messages of one table, one row per record, in order.

    ``batch`` columns: ``position`` (the message's), ``index`` (the record's rank among
    the message's records), ``kind`` (``change`` or ``tombstone``), ``lsn``, ``key``
    (absent for a table without a key), the envelope's ``before``, ``after``, ``source``,
    ``op``, ``ts_ms``, ``ts_us``, ``ts_ns`` (its ``transaction`` block is null: runs are
    not decoded column-wise under ``provide.transaction.metadata``). Values are the
    Connect values in Arrow types (:func:`arrow_type`).
    """

    table: TableSchema
    batch: Any
    headers: tuple[Header, ...]

    @property
    def qualified(self) -> str:
        """The table (``schema.table``)."""
        return self.table.qualified

    def records(self) -> list[ChangeRecord]:
        """The run as :class:`ChangeRecord` objects: what the decoder gives for its messages."""
        table = self.table
        out: list[ChangeRecord] = []
        value_fields = [f.name for f in table.value_schema.fields or ()]
        key_fields = [f.name for f in (table.key_schema.fields or ())] if table.key_schema else []
        source_fields = [f.name for f in SOURCE_SCHEMA.fields or ()]

        def value(row: dict[str, Any] | None) -> Struct | None:
            return None if row is None else Struct(table.value_schema,
                                                   tuple(row[n] for n in value_fields))

        for row in self.batch.to_pylist():
            key = None
            if table.key_schema is not None:
                key = Struct(table.key_schema, tuple(row["key"][n] for n in key_fields))
            if row["kind"] == "tombstone":
                out.append(tombstone(table, key, self.headers, row["lsn"]))
                continue
            source = Struct(SOURCE_SCHEMA, tuple(row["source"][n] for n in source_fields))
            # one processing time for the run: ts_ms and ts_us are ts_ns's
            envelope = envelope_value(table.envelope_schema, value(row["before"]),
                                      value(row["after"]), source, None, row["op"],
                                      row["ts_ns"])
            out.append(change_record(table, key, envelope, self.headers, row["lsn"]))
        return out


def _source(table: ColumnarTable, txn: TransactionContext, decoder: EventDecoder,
            lsns: Any) -> Any:
    """The source blocks of a run's records: the event layer's block for the transaction,
    with each message's ``lsn`` and ``sequence``."""
    config = decoder.config
    block = source_struct(version=config.version, name=config.topic_prefix, ts_us=txn.commit_us,
                          snapshot=None, db=config.database, sequence=None,
                          schema=table.table.schema_name, table=table.table.table_name,
                          tx_id=txn.xid, lsn=None, origin=txn.origin, origin_lsn=txn.origin_lsn)
    count = len(lsns)
    lsn_array = pa.array(lsns, pa.int64())
    probe = sequence(decoder.last_commit_lsn, 0)
    if not probe.endswith('"0"]'):
        raise _NotColumnarError("source sequence")
    head, tail = probe[:-3], '"]'
    children = []
    for field in table.source_type:
        if field.name == "lsn":
            children.append(lsn_array)
        elif field.name == "sequence":
            children.append(pc.binary_join_element_wise(
                head, pc.cast(lsn_array, pa.string()), tail, ""))
        elif block[field.name] is None:
            children.append(pa.nulls(count, field.type))
        else:
            children.append(pa.repeat(pa.scalar(block[field.name], field.type), count))
    return pa.StructArray.from_arrays(children, fields=list(table.source_type))


def _tuples(buf: Any, offsets: Any, op: int, columns: int) -> tuple[list[Any], list[Any],
                                                                    list[Any]]:
    """:func:`split_tuples` of the run's messages, once their heads are checked: a Delete's
    key or old tuple, an Insert's or Update's new tuple alone, nothing after the tuple."""
    begins, limits = offsets[:-1], offsets[1:]
    if bool(np.any(limits - begins < 6)):
        raise _NotColumnarError("malformed message")
    marker = buf[begins + 5]
    if op == _DELETE:
        if not bool(np.all((marker == _KEY) | (marker == _OLD))):
            raise _NotColumnarError("malformed message")
    elif not bool(np.all(marker == _NEW)):
        # an Update with its old tuple: key change, before image
        raise _NotColumnarError("old tuple")
    kinds, starts, lengths, ends = split_tuples(buf, begins + 6, limits, columns)
    if bool(np.any(ends != limits)):
        raise _NotColumnarError("malformed message")
    return kinds, starts, lengths


def decode_run(table: ColumnarTable, decoder: EventDecoder, txn: TransactionContext, op: int,
               buf: Any, offsets: Any, positions: Any, lsns: Any) -> ColumnarRun:
    """The records of messages of one type (``op``: the type byte) and one table, all in
    the decoder's open transaction ``txn``. ``buf``/``offsets`` hold the messages (message
    ``i`` is ``buf[offsets[i]:offsets[i + 1]]``). Raises ``_NotColumnarError`` for a run the
    decoder must take."""
    config = decoder.config
    schema = table.table
    name = _OPS[op]
    if name in config.skipped_operations:
        raise _NotColumnarError("skipped operation")
    if config.provide_transaction_metadata:
        raise _NotColumnarError("transaction metadata")
    count = len(offsets) - 1
    kinds, starts, lengths = _tuples(buf, offsets, op, len(schema.relation.columns))
    values = []
    for number, col in enumerate(schema.columns):
        kind = kinds[col.position]
        present = kind == _TEXT
        raw = _gather(buf, starts[col.position], lengths[col.position], present)
        values.append(table.convert(number, kind, raw))
    row = pa.StructArray.from_arrays([values[i] for i in table.value_at],
                                     fields=list(table.value_type))
    key = None
    if table.key_type is not None:
        key = pa.StructArray.from_arrays([values[i] for i in schema.key_positions],
                                         fields=list(table.key_type))
    nothing = pa.nulls(count, table.value_type)
    now = decoder.clock()
    columns: dict[str, Any] = {
        "position": pa.array(positions, pa.int64()),
        "index": pa.array(np.zeros(count, np.int32), pa.int32()),
        "kind": pa.repeat(pa.scalar("change"), count),
        "lsn": pa.array(lsns, pa.int64()),
    }
    if key is not None:
        columns["key"] = key
    columns.update({
        "before": row if op == _DELETE else nothing,
        "after": nothing if op == _DELETE else row,
        "source": _source(table, txn, decoder, lsns),
        "op": pa.repeat(pa.scalar(name), count),
        "ts_ms": pa.array(np.full(count, now // 1_000_000, np.int64)),
        "ts_us": pa.array(np.full(count, now // 1000, np.int64)),
        "ts_ns": pa.array(np.full(count, now, np.int64)),
    })
    batch = pa.RecordBatch.from_pydict(columns)
    if op == _DELETE and config.tombstones_on_delete:
        tombstones = {name: pa.nulls(count, array.type) for name, array in columns.items()}
        tombstones.update(position=columns["position"], lsn=columns["lsn"],
                          index=pa.array(np.ones(count, np.int32), pa.int32()),
                          kind=pa.repeat(pa.scalar("tombstone"), count))
        if key is not None:
            tombstones["key"] = key
        both = pa.Table.from_batches([batch, pa.RecordBatch.from_pydict(
            tombstones, schema=batch.schema)])
        order = np.stack([np.arange(count), np.arange(count) + count], axis=1).ravel()
        batch = both.take(order).combine_chunks().to_batches()[0]
    table.stats.runs += 1
    table.stats.messages += count
    metrics = decoder.metrics
    metrics.events_seen += count
    metrics.last_event_commit_us = txn.commit_us
    metrics.last_lsn = int(lsns[-1])
    return ColumnarRun(schema, batch, decoder.context_headers)


def binary_buffers(data: Any) -> tuple[Any, Any]:
    """An Arrow binary array's value offsets (``int64``, one more than the values) and data
    bytes (``uint8``), as numpy arrays, without copying the data."""
    data = data.cast(pa.binary()) if data.type != pa.binary() else data
    _, offsets, values = data.buffers()
    offs = np.frombuffer(offsets, np.int32)[data.offset:data.offset + len(data) + 1]
    buf = (np.frombuffer(values, np.uint8) if values is not None and values.size
           else np.zeros(1, np.uint8))
    return offs.astype(np.int64), buf


class RunDecoder:
    """Decodes the chunks of a planned capture (:class:`ChunkDecoder`), column-wise where
    it can.

    Feed it rows ``(chunk, position, lsn, data)`` in chunk and position order, in as many
    Arrow batches as they come (:meth:`feed`), then call :meth:`finish`. Each gives, in the
    decoder's order, ``(position, index, record)`` tuples for records the decoder produced
    and :class:`ColumnarRun` objects for runs of at least ``min_run`` messages decoded
    column-wise; ``columnar=False`` decodes everything message by message. Errors are
    :class:`ChunkError` naming the message's position. :attr:`stats` counts the runs
    decoded column-wise and the fallbacks; ``verify`` (default: the environment variable
    :data:`VERIFY_ENV` is ``1``) is the test mode, which compares every value a kernel
    converts with the column's scalar converter (:class:`VectorMismatchError`).
    """

    def __init__(self, chunks: ChunkDecoder, *, columnar: bool = True,
                 min_run: int = MIN_RUN, verify: bool | None = None) -> None:
        self.chunks = chunks
        self.columnar = columnar
        self.min_run = min_run
        self.verify = os.environ.get(VERIFY_ENV) == "1" if verify is None else verify
        self.stats = ColumnarStats()
        self.chunk: int | None = None
        self.decoder: EventDecoder | None = None
        self._tables: dict[int, tuple[TableSchema, ColumnarTable]] = {}

    def _switch(self, chunk: int) -> EventDecoder:
        if self.chunk is not None:
            self.chunks.end(self.chunk)
        self.decoder = self.chunks.start(chunk)
        self.chunk = chunk
        return self.decoder

    def finish(self) -> None:
        """The last chunk's rows were all fed."""
        if self.chunk is not None:
            self.chunks.end(self.chunk)
        self.chunk = None
        self.decoder = None

    def _plan(self, table: TableSchema) -> ColumnarTable:
        known = self._tables.get(id(table))
        if known is None or known[0] is not table:
            known = self._tables[id(table)] = (table, ColumnarTable(table, self.stats,
                                                                    self.verify))
        return known[1]

    def feed(self, chunks: Any, positions: Any, lsns: Any, data: Any, snapshot: Any = None
             ) -> Iterator[tuple[int, int, ChangeRecord] | ColumnarRun]:
        """The records of rows (numpy-convertible ``chunks``, ``positions``, ``lsns`` and an
        Arrow binary array ``data``); ``snapshot`` (booleans, default none) marks the rows
        of a capture's snapshot block, fed to the decoder as such (read events)."""
        count = len(data)
        if count == 0:
            return
        flags = (np.zeros(count, np.bool_) if snapshot is None
                 else np.asarray(snapshot, np.bool_))
        chunk_ids = np.asarray(chunks, np.int64)
        pos_array = np.asarray(positions, np.int64)
        lsn_array = np.asarray(lsns, np.int64)
        offsets, buf = binary_buffers(data)
        begins, sizes = offsets[:-1], np.diff(offsets)
        safe = np.minimum(begins, len(buf) - 1)
        first = np.where(sizes > 0, buf[safe], 0)
        dml = ((first == _INSERT) | (first == _UPDATE) | (first == _DELETE)) & (sizes >= 6)
        relid = np.zeros(count, np.int64)
        if self.columnar and bool(dml.any()):
            at = begins[dml]
            relid[dml] = _uint32(buf, at + 1)
        key = np.where(dml & ~flags, (first.astype(np.int64) << 32) | relid,
                       -1 - np.arange(count))
        if not self.columnar:
            key = -1 - np.arange(count)
        cuts = np.flatnonzero((key[1:] != key[:-1]) | (chunk_ids[1:] != chunk_ids[:-1])) + 1
        bounds = np.concatenate([[0], cuts, [count]])
        for s, e in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
            chunk = int(chunk_ids[s])
            decoder = self.decoder if chunk == self.chunk and self.decoder is not None \
                else self._switch(chunk)
            if dml[s] and not flags[s] and e - s >= self.min_run:
                run = self._run(decoder, int(first[s]), int(relid[s]), buf, offsets[s:e + 1],
                                pos_array[s:e], lsn_array[s:e])
                if run is not None:
                    yield run
                    continue
            for i, raw in enumerate(data.slice(s, e - s).to_pylist()):
                position = int(pos_array[s + i])
                try:
                    for index, record in enumerate(decoder.iter_feed(
                            raw, int(lsn_array[s + i]), snapshot=bool(flags[s + i]))):
                        yield position, index, record
                except PgCdcError as exc:
                    raise ChunkError(exc, position) from None

    def _run(self, decoder: EventDecoder, op: int, relid: int, buf: Any, offsets: Any,
             positions: Any, lsns: Any) -> ColumnarRun | None:
        try:
            return self._decode_run(decoder, op, relid, buf, offsets, positions, lsns)
        except _NotColumnarError as exc:
            self.stats.fallbacks[str(exc.args[0])] += 1
            return None

    def _decode_run(self, decoder: EventDecoder, op: int, relid: int, buf: Any, offsets: Any,
                    positions: Any, lsns: Any) -> ColumnarRun:
        txn = decoder.open_transaction
        if txn is None:
            raise _NotColumnarError("not in an ordinary transaction")
        try:
            table = decoder.table(relid)
        except PgCdcError:
            table = None  # the decoder names the error
        if table is None:
            raise _NotColumnarError("unknown table")
        plan = self._plan(table)
        if not plan.ok:
            raise _NotColumnarError("a column with no Arrow type")
        return decode_run(plan, decoder, txn, op, buf, offsets, positions, lsns)
