"""Column-wise decoding of runs of row changes: the records of :class:`EventDecoder`, as Arrow.

A capture is mostly long runs of Insert (or Update, or Delete) messages of one table in
one transaction. :class:`RunDecoder` decodes chunks of a capture as
:class:`~pgcdc_events.events.chunks.ChunkDecoder` does, message by message through an
:class:`EventDecoder`, except for such runs: their TupleData is split for the whole run
at once, column by column (numpy over the messages' bytes, no Python loop per value), and
each column converted by an Arrow cast where the cast gives exactly what the type
mapper's converter gives (``int2``/``int4``/``int8``, ``text``/``varchar``, ``bool``,
fixed-scale ``numeric`` in ``precise`` mode), else by the column's own converter called
once per distinct value. The result is a :class:`ColumnarRun`: an Arrow batch holding one
row per record, the records the decoder would have given (:meth:`ColumnarRun.records`
rebuilds them).

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
from pgcdc_events.types.jsonvalue import DECIMAL_LOGICAL
from pgcdc_events.types.numeric import decimal_parameters
from pgcdc_events.types.schema import Schema, Struct

__all__ = ["MIN_RUN", "ColumnarRun", "ColumnarTable", "RunDecoder", "arrow_type", "decode_run",
           "split_tuples"]

_INSERT, _UPDATE, _DELETE = b"IUD"
_NEW, _KEY, _OLD = b"NKO"
_TEXT, _NULL = b"tn"
_OPS: Final = {_INSERT: "c", _UPDATE: "u", _DELETE: "d"}
#: Arrow types of the Connect primitives a run may hold (``float32`` is left to the
#: decoder: its Python value is a double, which an Arrow float32 would round).
_PRIMITIVES: Final = {
    "int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64(),
    "float64": pa.float64(), "boolean": pa.bool_(), "string": pa.string(),
    "bytes": pa.binary(),
}
_INTEGERS: Final = {"int2": "int16", "int4": "int32", "int8": "int64"}
_STRINGS: Final = frozenset({"text", "varchar"})
_ZONED: Final = "io.debezium.time.ZonedTimestamp"
#: The fewest messages a run decoded column-wise has (shorter ones: the decoder's).
MIN_RUN: Final = 32


def arrow_type(schema: Schema) -> Any:
    """The Arrow type holding a Connect schema's values exactly (``None``: none here)."""
    if schema.name == DECIMAL_LOGICAL:
        decimal = decimal_parameters(schema)
        return None if decimal is None else pa.decimal128(*decimal)
    return _PRIMITIVES.get(schema.type)


class _NotColumnarError(Exception):
    """This run goes to the decoder, message by message."""


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
        raise _NotColumnarError
    width = (buf[starts].astype(np.int64) << 8) | buf[starts + 1]
    if bool(np.any(width != columns)):
        raise _NotColumnarError
    pos = starts + 2
    kinds: list[Any] = []
    value_starts: list[Any] = []
    lengths: list[Any] = []
    for _ in range(columns):
        if bool(np.any(pos >= limits)):
            raise _NotColumnarError
        kind = buf[pos]
        text = kind == _TEXT
        if not bool(np.all(text | (kind == _NULL))):
            raise _NotColumnarError  # binary values, unchanged TOAST, damage: the decoder's
        length = np.zeros(count, np.int64)
        if bool(text.any()):
            at = pos[text] + 1
            if bool(np.any(at + 4 > limits[text])):
                raise _NotColumnarError
            length[text] = _uint32(buf, at)
        kinds.append(kind)
        value_starts.append(pos + 5)
        lengths.append(length)
        pos = pos + 1 + np.where(text, 4 + length, 0)
        if bool(np.any(pos > limits)):
            raise _NotColumnarError
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
        raise _NotColumnarError
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
    """How one :class:`TableSchema` decodes column-wise (:attr:`ok`: whether it can)."""

    def __init__(self, table: TableSchema) -> None:
        self.table = table
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
        out = None
        if col.from_text is col.mapping.from_text:  # no mask, truncation or NOT NULL check
            out = _cast(col, raw, target)
        if out is None:  # the column's converter, once per distinct value
            encoded = pc.dictionary_encode(raw)
            try:
                values = [col.from_text(v) for v in encoded.dictionary.to_pylist()]
                out = pa.array(values, target).take(encoded.indices)
            except (PgCdcError, ValueError, ArithmeticError, TypeError, KeyError, IndexError,
                    pa.ArrowException):
                raise _NotColumnarError from None
        if col.null_value is not None and out.null_count > int(np.count_nonzero(kind != _TEXT)):
            raise _NotColumnarError  # a converter gave null: keep the decoder's rules for it
        if col.null_value is not None and out.null_count:
            out = pc.fill_null(out, pa.scalar(col.null_value, target))
        return out


def _cast(col: ColumnPlan, raw: Any, target: Any) -> Any:
    """The values by an Arrow cast that is exactly the type mapper's converter, or None."""
    name = col.mapping.pg_type.name
    schema = col.mapping.schema
    try:
        if _INTEGERS.get(name) == schema.type and schema.name is None:
            return pc.cast(raw, target)
        if name in _STRINGS and schema.type == "string" and schema.name is None:
            return raw.cast(pa.string())
        if name == "bool" and schema.type == "boolean":
            true = pc.equal(raw, pa.scalar(b"t", pa.binary()))
            false = pc.equal(raw, pa.scalar(b"f", pa.binary()))
            if pc.all(pc.or_(true, false)).as_py() is False:
                return None
            return true
        if name == "numeric" and schema.name == DECIMAL_LOGICAL:
            return pc.cast(raw, target)
        if name == "timestamptz" and schema.name == _ZONED and schema.type == "string":
            return _zoned_timestamps(col, raw)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None  # NaN, infinities, text that is not UTF-8: the converter decides
    return None


def _zoned_timestamps(col: ColumnPlan, raw: Any) -> Any:
    """``timestamptz`` text printed in UTC (``YYYY-MM-DD HH:MM:SS[.f]+00``) as
    ZonedTimestamp strings, by string slicing: the converter's fraction width is read from
    its output for a probe, and the result must equal the converter's for the run's first,
    middle and last values (else ``None``: the converter takes the column)."""
    probe = col.from_text(b"2000-01-01 00:00:00+00")
    if not (isinstance(probe, str) and probe.startswith("2000-01-01T00:00:00")
            and probe.endswith("Z")):
        return None
    width = max(0, len(probe) - len("2000-01-01T00:00:00Z") - 1)
    out = _zoned_fixed(raw, width)
    if out is None:
        out = _zoned_sliced(raw, width)
    if out is None:
        return None
    count = len(out)
    for i in {0, count // 2, count - 1}:
        value = raw[i].as_py()
        if value is not None and col.from_text(value) != out[i].as_py():
            return None
    return out


def _zoned_fixed(raw: Any, width: int) -> Any:
    """:func:`_zoned_timestamps` for values all of one length with no null and the
    converter's fraction width (or a converter keeping the fraction as it is): the bytes
    moved in one numpy copy (``" "`` becomes ``"T"``, ``"+00"`` becomes ``"Z"``); else
    ``None``."""
    count = len(raw)
    if count == 0 or raw.null_count:
        return None
    _, offsets, data = raw.buffers()
    offs = np.frombuffer(offsets, np.int32)[raw.offset:raw.offset + count + 1]
    size = int(offs[1] - offs[0])
    fraction = size - len("YYYY-MM-DD HH:MM:SS.+00")
    if (size < 22 or fraction == 0 or width not in (0, fraction)
            or int(offs[-1] - offs[0]) != size * count):
        return None
    if not bool(np.all(np.diff(offs) == size)):
        return None
    rows = np.frombuffer(data, np.uint8)[offs[0]:offs[-1]].reshape(count, size)
    tail = rows[:, size - 3:]
    if not (bool(np.all(rows[:, 4] == ord("-"))) and bool(np.all(rows[:, 10] == ord(" ")))
            and bool(np.all(tail[:, 0] == ord("+"))) and bool(np.all(tail[:, 1:] == ord("0")))
            and (fraction < 0 or bool(np.all(rows[:, 19] == ord("."))))):
        return None
    out = np.empty((count, size - 2), np.uint8)
    out[:, :size - 3] = rows[:, :size - 3]
    out[:, 10] = ord("T")
    out[:, size - 3] = ord("Z")
    starts = np.arange(count + 1, dtype=np.int32) * (size - 2)
    return pa.Array.from_buffers(pa.string(), count, [None, pa.py_buffer(starts),
                                                      pa.py_buffer(out)])


def _zoned_sliced(raw: Any, width: int) -> Any:
    """:func:`_zoned_timestamps` by Arrow string functions (any lengths)."""
    text = raw.cast(pa.string())
    utc = pc.and_(pc.ends_with(text, "+00"), pc.equal(pc.utf8_slice_codeunits(text, 4, 5), "-"))
    if pc.all(utc).as_py() is False:
        return None
    fraction = pc.utf8_slice_codeunits(text, 20, -3)  # "YYYY-MM-DD HH:MM:SS." is 20 long
    if width:
        fraction = pc.utf8_slice_codeunits(pc.utf8_rpad(fraction, width, "0"), 0, width)
        dot = "."
    else:
        dot = pc.if_else(pc.equal(pc.utf8_length(fraction), 0), "", ".")
    return pc.binary_join_element_wise(pc.utf8_slice_codeunits(text, 0, 10), "T",
                                       pc.utf8_slice_codeunits(text, 11, 19), dot, fraction,
                                       "Z", "")


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
        raise _NotColumnarError
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


def decode_run(table: ColumnarTable, decoder: EventDecoder, txn: TransactionContext, op: int,
               buf: Any, offsets: Any, positions: Any, lsns: Any) -> ColumnarRun:
    """The records of messages of one type (``op``: the type byte) and one table, all in
    the decoder's open transaction ``txn``. ``buf``/``offsets`` hold the messages (message
    ``i`` is ``buf[offsets[i]:offsets[i + 1]]``). Raises ``_NotColumnarError`` for a run the
    decoder must take."""
    config = decoder.config
    schema = table.table
    name = _OPS[op]
    if name in config.skipped_operations or config.provide_transaction_metadata:
        raise _NotColumnarError
    begins, limits = offsets[:-1], offsets[1:]
    count = len(begins)
    if bool(np.any(limits - begins < 6)):
        raise _NotColumnarError
    marker = buf[begins + 5]
    if op == _DELETE:
        if not bool(np.all((marker == _KEY) | (marker == _OLD))):
            raise _NotColumnarError
    elif not bool(np.all(marker == _NEW)):
        raise _NotColumnarError  # an Update with its old tuple: key change, before image
    kinds, starts, lengths, ends = split_tuples(buf, begins + 6, limits,
                                                len(schema.relation.columns))
    if bool(np.any(ends != limits)):
        raise _NotColumnarError
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
    :class:`ChunkError` naming the message's position.
    """

    def __init__(self, chunks: ChunkDecoder, *, columnar: bool = True,
                 min_run: int = MIN_RUN) -> None:
        self.chunks = chunks
        self.columnar = columnar
        self.min_run = min_run
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
            known = self._tables[id(table)] = (table, ColumnarTable(table))
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
        txn = decoder.open_transaction
        if txn is None:
            return None
        try:
            table = decoder.table(relid)
        except PgCdcError:
            return None  # the decoder names the error
        if table is None:
            return None
        plan = self._plan(table)
        if not plan.ok:
            return None
        try:
            return decode_run(plan, decoder, txn, op, buf, offsets, positions, lsns)
        except _NotColumnarError:
            return None
