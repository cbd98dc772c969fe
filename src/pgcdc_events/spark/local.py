"""The Spark decoding pipeline run in one process over a capture held in memory.

:func:`decode_to_arrow` computes each change's context (stream block, transaction,
schema version) in one sequential pass, by the same rules the Spark jobs apply
with window functions and joins, then runs the very :class:`TableDecoder` the
Spark workers run on Arrow batches. It needs no SparkSession: the tests use it
to check every golden capture quickly, and the benchmark to time the
per-batch decoding alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information
import pyarrow.compute as pc  # type: ignore[import-untyped]

from pgcdc_events.errors import ProtocolError
from pgcdc_events.events.config import EventConfig
from pgcdc_events.events.special import MESSAGE_COLLECTION
from pgcdc_events.protocol.capture import CaptureRow
from pgcdc_events.protocol.decoder import parse_message
from pgcdc_events.protocol.lsn import PG_EPOCH_OFFSET_US
from pgcdc_events.protocol.messages import LogicalMessage
from pgcdc_events.spark._session import arrow_schema, arrow_type
from pgcdc_events.spark.batch import BLOCK_TYPE, POSITION_TYPE, SOURCE_TYPE, TableDecoder
from pgcdc_events.spark.registry import RelationRegistry
from pgcdc_events.spark.schema import SparkSchemaOptions
from pgcdc_events.types.catalog import CatalogSnapshot

__all__ = ["Context", "by_position", "decode_to_arrow", "envelope", "stream_context"]

_SOURCE_ARROW = arrow_type(SOURCE_TYPE)
_BLOCK_ARROW = arrow_type(BLOCK_TYPE)
_POSITION_ARROW = arrow_type(POSITION_TYPE)


@attrs.define
class _Txn:
    xid: int
    streamed: bool = False
    ordinary: tuple[int, int, int | None] | None = None  # position, commit µs, prev commit
    commit: tuple[int, int, int | None] | None = None
    origin: tuple[int, str, int] | None = None  # position, name, origin LSN
    aborts: list[tuple[int, int]] = attrs.field(factory=list)  # subxid, position

    @property
    def moment(self) -> tuple[int, int, int | None] | None:
        return self.ordinary or self.commit


@attrs.frozen
class Context:
    """Each change's decoder input, and what the transaction metadata needs."""

    registry: RelationRegistry
    changes: list[tuple[int, int, bytes, bool, int | None, Any, int]]  # + table index
    messages: list[tuple[int, int]]  # position, xid of transactional logical messages


def stream_context(rows: Sequence[CaptureRow], config: EventConfig,
                   catalog: CatalogSnapshot | None = None) -> Context:
    """The context of every change of a capture, by the Spark layer's rules, sequentially."""
    in_stream = False
    block_xid: int | None = None
    last_commit: int | None = None
    schema_messages: list[tuple[int, bool, bytes]] = []
    txns: dict[int, _Txn] = {}
    pending: list[tuple[int, CaptureRow, bool, int | None]] = []
    messages: list[tuple[int, int | None, int | None, str]] = []
    for position, row in enumerate(rows):
        data = row.data
        mtype = chr(data[0])
        if mtype in "IUDT":
            pending.append((position, row, in_stream, block_xid))
            continue
        message: Any = parse_message(data, in_stream=in_stream)
        if mtype in "RY":
            schema_messages.append((position, in_stream, data))
        elif mtype == "B":
            block_xid = message.xid
            txn = txns.setdefault(message.xid, _Txn(message.xid))
            txn.ordinary = (position, message.commit_time + PG_EPOCH_OFFSET_US, last_commit)
        elif mtype in "bS":
            block_xid = message.xid
            txn = txns.setdefault(message.xid, _Txn(message.xid))
            txn.streamed = txn.streamed or mtype == "S"
            in_stream = in_stream or mtype == "S"
        elif mtype in "CPE":
            block_xid = None
            in_stream = False if mtype == "E" else in_stream
        elif mtype == "O":
            if block_xid is not None:
                txns.setdefault(block_xid, _Txn(block_xid)).origin = (
                    position, message.name, message.origin_lsn)
        elif mtype == "A":
            if message.subxid != message.xid:
                txns.setdefault(message.xid, _Txn(message.xid)).aborts.append(
                    (message.subxid, position))
        elif mtype == "M":
            assert isinstance(message, LogicalMessage)
            if message.transactional:
                messages.append((position, block_xid, message.xid, message.prefix))
        if mtype in "CcK":
            if mtype != "C":
                txn = txns.setdefault(message.xid, _Txn(message.xid))
                if txn.commit is None:
                    txn.commit = (position, message.commit_time + PG_EPOCH_OFFSET_US, last_commit)
            last_commit = message.end_lsn
        elif mtype == "M" and not message.transactional:
            last_commit = row.lsn
    registry = RelationRegistry(schema_messages, config, catalog)
    tables = {t: i for i, t in enumerate(registry.tables)}
    changes = []
    for position, row, block_stream, block in pending:
        # The capture's xid when it names a transaction (pg_logical_slot_*_changes gives the
        # top-level one), else the enclosing block's (a subtransaction's xid, or none).
        xid = row.xid if row.xid is not None and row.xid in txns else block
        found = txns.get(xid) if xid is not None else None
        context = None
        streamed = block_stream
        if found is not None:
            moment = found.moment
            if moment is None:
                continue  # a streamed or prepared transaction that never commits
            streamed = found.streamed
            if streamed and any(s == int.from_bytes(row.data[1:5], "big") and p > position
                                for s, p in found.aborts):
                continue
            origin = found.origin
            context = {"xid": found.xid, "commit_us": moment[1], "prev_commit": moment[2],
                       "origin": origin[1] if origin else None,
                       "origin_lsn": origin[2] if origin else None, "order_pos": moment[0]}
        version_index, table = None, -2
        if row.data[:1] != b"T":
            at = 5 if streamed else 1
            version = registry.version_at(int.from_bytes(row.data[at:at + 4], "big"), position)
            if version is not None:
                version_index = version.index
                table = tables[version.table] if version.table is not None else -1
        changes.append((position, int(row.lsn), row.data, streamed, version_index, context,
                        table))
    kept = []
    for position, block, own, prefix in messages:
        xid = block if block is not None else own
        owner = txns.get(xid) if xid is not None else None
        if owner is None or owner.moment is None or not config.includes_message_prefix(prefix):
            continue
        if any(s == own and p > position for s, p in owner.aborts):
            continue
        kept.append((position, owner.xid))
    return Context(registry, changes, kept)


def decode_to_arrow(rows: Sequence[CaptureRow], config: EventConfig,
                    catalog: CatalogSnapshot | None = None, *,
                    options: SparkSchemaOptions | None = None, tombstones: bool = False,
                    clock: Callable[[], int] = time.time_ns, batch_size: int = 10_000,
                    ) -> dict[str, Any]:
    """Every table's events as an Arrow table, decoded in this process (no Spark)."""
    options = options or SparkSchemaOptions("semantic")
    config = config.with_catalog(catalog)
    context = stream_context(rows, config, catalog)
    registry = context.registry
    out: dict[str, Any] = {}
    contexts = {c[5]["xid"]: c[5] for c in context.changes if c[5] is not None}
    for index, table in enumerate(registry.tables):
        decoder = TableDecoder(registry, table, options, tombstones=tombstones, clock=clock)
        mine = [c for c in context.changes if c[6] in (index, -2) or c[2][:1] == b"T"]
        batches = [envelope(decoder.decode(_batch(mine[i:i + batch_size])), contexts, decoder)
                   for i in range(0, len(mine), batch_size)]
        schema = arrow_schema(decoder.layout.output_type())
        out[table] = (by_position(pa.Table.from_batches(batches, schema=schema)) if batches
                      else schema.empty_table())
    if config.provide_transaction_metadata:
        out = _with_orders(out, context)
    return out


def by_position(table: Any) -> Any:
    """An events table in the decoder's order (``_position``: commit order)."""
    if table.num_rows < 2:
        return table
    position = table.column("_position").combine_chunks()
    keys = pa.table({name: pc.struct_field(position, [i])
                     for i, name in enumerate(("commit", "message", "index"))})
    order = pc.sort_indices(keys, sort_keys=[("commit", "ascending"), ("message", "ascending"),
                                             ("index", "ascending")])
    return table.take(order)


def _batch(changes: Sequence[tuple[int, int, bytes, bool, int | None, Any, int]]) -> Any:
    for change in changes:
        if change[5] is None:
            raise ProtocolError("changes inside a transaction", offset=0,
                                detail=f"a change at position {change[0]} with no Begin, Begin "
                                       "Prepare or Stream Start before it")
    return pa.RecordBatch.from_pydict({
        "position": pa.array([c[0] for c in changes], pa.int64()),
        "lsn": pa.array([c[1] for c in changes], pa.int64()),
        "data": pa.array([c[2] for c in changes], pa.binary()),
        "in_stream": pa.array([c[3] for c in changes], pa.bool_()),
        "version": pa.array([c[4] for c in changes], pa.int32()),
        "xid": pa.array([c[5]["xid"] for c in changes], pa.int64()),
    })


def envelope(core: Any, contexts: dict[int, dict[str, Any]], decoder: TableDecoder) -> Any:
    """Events from the decoder's records: ``source``, ``ts_*`` and ``_position`` built around
    them from each transaction's context (what the Spark job does with a join)."""
    layout, config = decoder.layout, decoder.config
    n = core.num_rows
    kind = core.column("_kind" if "_kind" in core.column_names else "kind")
    tombstone = pc.equal(kind, "tombstone")
    hidden = tombstone if pc.any(tombstone).as_py() else None
    txns = [contexts[x] for x in core.column("xid").to_pylist()]
    commit_us = pa.array([t["commit_us"] for t in txns], pa.int64())
    prev = pa.array([t["prev_commit"] for t in txns], pa.int64())
    lsn = core.column("lsn")
    quoted = pc.binary_join_element_wise('"', prev.cast(pa.string()), '"', "")
    first = pc.if_else(prev.is_null(), "null", quoted)
    sequence = pc.binary_join_element_wise("[", first, ',"', lsn.cast(pa.string()), '"]', "")

    def const(value: Any, dtype: Any) -> Any:
        return pa.array([value] * n, dtype) if value is not None else pa.nulls(n, dtype)

    source = pa.StructArray.from_arrays([
        const(config.version, pa.string()), const("postgresql", pa.string()),
        const(config.topic_prefix, pa.string()), _floor_div(commit_us, 1000),
        pa.nulls(n, pa.string()), const(config.database, pa.string()), sequence, commit_us,
        pc.multiply(commit_us, 1000), const(layout.schema_name, pa.string()),
        const(layout.table_name, pa.string()), core.column("xid"), lsn, pa.nulls(n, pa.int64()),
        pa.array([t["origin"] for t in txns], pa.string()),
        pa.array([t["origin_lsn"] for t in txns], pa.int64()),
    ], fields=list(_SOURCE_ARROW), mask=hidden)
    now = core.column("ts_ns")
    columns = {
        "before": core.column("before"), "after": core.column("after"), "source": source,
        "transaction": pa.nulls(n, _BLOCK_ARROW), "op": core.column("op"),
        "ts_ms": _masked(_floor_div(now, 1_000_000), hidden),
        "ts_us": _masked(_floor_div(now, 1000), hidden), "ts_ns": _masked(now, hidden),
        "_kind": kind,
        "_position": pa.StructArray.from_arrays(
            [pa.array([t["order_pos"] for t in txns], pa.int64()), core.column("position"),
             core.column("index")], fields=list(_POSITION_ARROW)),
        "_version": core.column("version"), "_lsn": lsn,
    }
    if layout.key_arrow is not None:
        columns["key"] = core.column("key")
        columns["_related_key"] = core.column("related_key")
    schema = arrow_schema(layout.output_type())
    return pa.RecordBatch.from_arrays([columns[f.name] for f in schema], schema=schema)


def _floor_div(values: Any, divisor: int) -> Any:
    """Integer floor division of an int64 array (Arrow's truncates toward zero)."""
    quotient = pc.divide(values, divisor)
    inexact_negative = pc.and_(pc.less(values, 0),
                               pc.not_equal(pc.multiply(quotient, divisor), values))
    return pc.if_else(inexact_negative, pc.subtract(quotient, 1), quotient)


def _masked(values: Any, hidden: Any) -> Any:
    return values if hidden is None else pc.if_else(hidden, pa.nulls(1, values.type)[0], values)


def _with_orders(tables: dict[str, Any], context: Context) -> dict[str, Any]:
    """Fill the ``transaction`` blocks: order of each record in its transaction, overall and
    per table (logical messages count under ``message``)."""
    records: list[tuple[int, int, int, str]] = []  # xid, position, index, collection
    for name, table in tables.items():
        kinds = table.column("_kind").to_pylist()
        positions = table.column("_position").to_pylist()
        xids = pc.struct_field(table.column("source"), [11]).to_pylist()
        records += [(x, p["message"], p["index"], name)
                    for k, p, x in zip(kinds, positions, xids, strict=True) if k != "tombstone"]
    records += [(xid, position, 0, MESSAGE_COLLECTION) for position, xid in context.messages]
    records.sort()
    orders: dict[tuple[int, int], tuple[int, int]] = {}
    total: dict[int, int] = {}
    per: dict[tuple[int, str], int] = {}
    for xid, position, index, collection in records:
        total[xid] = total.get(xid, 0) + 1
        per[(xid, collection)] = per.get((xid, collection), 0) + 1
        orders[(position, index)] = (total[xid], per[(xid, collection)])
    out = {}
    for name, table in tables.items():
        blocks = []
        for kind, p, source, lsn in zip(table.column("_kind").to_pylist(),
                                        table.column("_position").to_pylist(),
                                        table.column("source").to_pylist(),
                                        table.column("_lsn").to_pylist(), strict=True):
            order = orders.get((p["message"], p["index"]))
            blocks.append(None if kind == "tombstone" or order is None else
                          {"id": f"{source['txId']}:{lsn}", "total_order": order[0],
                           "data_collection_order": order[1]})
        column = table.schema.get_field_index("transaction")
        out[name] = table.set_column(column, "transaction",
                                     pa.array(blocks, table.schema.field(column).type))
    return out
