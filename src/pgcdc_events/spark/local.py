"""The Spark layer's decoding run in one process over a capture held in memory.

:func:`decode_to_arrow` runs the very functions the Spark tasks run — the chunked
:class:`~pgcdc_events.events.EventDecoder` pass
(:class:`~pgcdc_events.spark.decode.RecordsFunction`) and each table's projection
(:class:`~pgcdc_events.spark.decode.EventsFunction`) — on
Arrow batches, with no SparkSession: the tests use it to check every golden capture
quickly (with chunks cut small), the benchmark to time the per-batch work alone.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information
import pyarrow.compute as pc  # type: ignore[import-untyped]

from pgcdc_events.events.chunks import control_messages as parse_control
from pgcdc_events.events.chunks import plan_chunks
from pgcdc_events.events.config import EventConfig
from pgcdc_events.events.tables import TableSchema
from pgcdc_events.protocol.capture import CaptureRow
from pgcdc_events.spark.columnar import MIN_RUN
from pgcdc_events.spark.decode import (
    _RECORDS_ARROW,
    EventsFunction,
    RecordsFunction,
    _Decode,
    by_position,
    capture_tables,
)
from pgcdc_events.spark.layout import RUN_KIND, TableLayout
from pgcdc_events.spark.schema import SparkSchemaOptions
from pgcdc_events.types.catalog import CatalogSnapshot

__all__ = ["by_position", "decode_to_arrow", "records_to_arrow"]


def records_to_arrow(rows: Sequence[CaptureRow], config: EventConfig,
                     catalog: CatalogSnapshot | None = None, *,
                     clock: Callable[[], int] = time.time_ns, run_id: str | None = None,
                     lines: bool = False, chunk_messages: int = 20_000,
                     batch_size: int = 10_000, columnar: bool = True, min_run: int = MIN_RUN
                     ) -> tuple[Any, dict[str, list[TableSchema]]]:
    """The decoding pass in this process: the records table (``RECORDS_TYPE``) and the
    tables' schema versions (``columnar``/``min_run``: see :class:`RecordsFunction`)."""
    config = config.with_catalog(catalog)
    numbered = [(i, int(r.lsn), bytes(r.data)) for i, r in enumerate(rows)]
    snapshot = [bool(r.snapshot) for r in rows]
    plan = plan_chunks(parse_control(numbered), min_messages=chunk_messages,
                       snapshot=frozenset(i for i, flag in enumerate(snapshot) if flag))
    chunks = [plan.chunk_of(i) for i, _, _ in numbered]
    batches = [pa.RecordBatch.from_pydict({
        "_chunk": pa.array(chunks[i:i + batch_size], pa.int32()),
        "position": pa.array([n[0] for n in numbered[i:i + batch_size]], pa.int64()),
        "lsn": pa.array([n[1] for n in numbered[i:i + batch_size]], pa.int64()),
        "data": pa.array([n[2] for n in numbered[i:i + batch_size]], pa.binary()),
        "snapshot": pa.array(snapshot[i:i + batch_size], pa.bool_()),
    }) for i in range(0, len(numbered), batch_size)]
    make = _Decode(config, catalog, clock, run_id or str(uuid.uuid4()))
    # The chunks in reverse order, through one function call, as a Spark task may get
    # them (any order): each one's prelude must stand on its own. Then the decoder's order.
    order = pc.sort_indices(pa.table({"c": pa.array(chunks, pa.int64()),
                                      "p": pa.array([n[0] for n in numbered], pa.int64())}),
                            sort_keys=[("c", "descending"), ("p", "ascending")])
    shuffled = pa.Table.from_batches(batches).take(order).to_batches(max_chunksize=batch_size)
    records = pa.Table.from_batches(list(RecordsFunction(
        plan, make, payload=True, lines=lines, columnar=columnar, min_run=min_run,
    )(iter(shuffled))),
                                    schema=_RECORDS_ARROW)
    records = records.take(pc.sort_indices(records, sort_keys=[("position", "ascending"),
                                                               ("index", "ascending")]))
    return records, capture_tables(plan.schema, config, catalog)


def decode_to_arrow(rows: Sequence[CaptureRow], config: EventConfig,
                    catalog: CatalogSnapshot | None = None, *,
                    options: SparkSchemaOptions | None = None, tombstones: bool = False,
                    clock: Callable[[], int] = time.time_ns, chunk_messages: int = 20_000,
                    batch_size: int = 10_000, columnar: bool = True, min_run: int = MIN_RUN
                    ) -> dict[str, Any]:
    """Every table's events as an Arrow table in the decoder's order, decoded in this
    process by the functions the Spark tasks run (no Spark). ``columnar=False`` decodes
    every message with the ``EventDecoder`` (no run column-wise), ``min_run`` is the
    shortest run decoded column-wise."""
    options = options or SparkSchemaOptions("semantic")
    records, versions = records_to_arrow(rows, config, catalog, clock=clock,
                                         chunk_messages=chunk_messages, batch_size=batch_size,
                                         columnar=columnar, min_run=min_run)
    out: dict[str, Any] = {}
    for name, schemas in versions.items():
        layout = TableLayout(name, schemas, options)
        kinds = ["change", "truncate", RUN_KIND] + (["tombstone"] if tombstones else [])
        mask = pc.and_(pc.equal(records.column("table"), name),
                       pc.is_in(records.column("kind"), value_set=pa.array(kinds)))
        mine = records.filter(mask).select(["position", "index", "kind", "lsn", "payload"])
        batches = list(EventsFunction(layout, tombstones)(
            iter(mine.to_batches(max_chunksize=batch_size))))
        schema = batches[0].schema if batches else None
        table = (pa.Table.from_batches(batches, schema=schema) if batches else
                 pa.Table.from_batches([], schema=layout.batch([]).schema))
        out[name] = by_position(table)
    return out
