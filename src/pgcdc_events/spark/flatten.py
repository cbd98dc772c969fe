"""Debezium's "new record state" flattening (``ExtractNewRecordState``) for event DataFrames.

What most Spark sinks want: one row per change with the row's columns at the
top level — ``after`` for creates and updates, ``before`` for rewritten
deletes — plus chosen metadata. ``delete_handling_mode`` follows the SMT's
``delete.handling.mode``:

- ``drop`` (the SMT's default): delete events are dropped;
- ``none``: a delete stays as a record with a null value: a row whose columns
  are all null (keep the key with ``include_key`` to know which row it was);
- ``rewrite``: a delete becomes its ``before`` columns, and every row gets
  ``__deleted``, ``"true"`` for deletes and ``"false"`` otherwise (a string, as
  the SMT writes it).

``drop_tombstones`` (the SMT's ``drop.tombstones``, default true) drops
tombstones and truncate events; kept, they are rows of nulls (the SMT passes
them on unflattened). ``add_fields`` is the SMT's ``add.fields``: ``op``,
``ts_ms`` (the envelope's), ``id``/``total_order``/``data_collection_order``
(the transaction block's), ``struct.field`` (e.g. ``source.ts_ms``) or any
other name (a ``source`` field: ``lsn``, ``table``, ``txId``...), optionally
``field:new_name``; each becomes a column named ``__`` (``add_fields_prefix``)
plus the field name, ``struct_field`` for qualified ones (``__source_ts_ms``).

What the apply targets (Delta, PostgreSQL, AUTO CDC) consume is a narrower flattening:
the table's columns, ``__op`` and ``__sequence``
(:func:`~pgcdc_events.spark.autocdc.changes_from_events`). :class:`ChangesFlattener` makes
those rows straight from the decoder's output, in the Spark task
(:meth:`DecodedCapture.changes <pgcdc_events.spark.decode.DecodedCapture.changes>`): a
column-wise run's row image is converted by the table's value converters
(:meth:`TableLayout.run_image <pgcdc_events.spark.layout.TableLayout.run_image>`) and
given its operation and sequence, with no event struct made for it and none sent to the
JVM; any other record goes through the table's events
(:meth:`TableLayout.batches <pgcdc_events.spark.layout.TableLayout.batches>`) and
``changes_from_events``. :class:`FlatStats` counts the rows each way.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Final, Literal

import attrs
import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information
import pyarrow.compute as pc  # type: ignore[import-untyped]
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.types import StringType, StructField, StructType

from pgcdc_events.events.envelope import ENVELOPE_FIELDS, TRANSACTION_BLOCK_SCHEMA
from pgcdc_events.spark._session import arrow_schema
from pgcdc_events.spark.autocdc import (
    OP,
    SEQUENCE,
    changes_from_events,
    format_sequences,
    sequence_column,
    sequence_value,
)
from pgcdc_events.spark.errors import SparkDecodeError
from pgcdc_events.spark.layout import RUN_KIND, TableLayout, load_payload

__all__ = ["ChangesFlattener", "DeleteHandlingMode", "FlatStats", "changes_type", "flatten"]

DeleteHandlingMode = Literal["none", "drop", "rewrite"]
# the envelope's own scalar fields (not the row images, source or transaction structs),
# and the transaction block's: both as events/envelope.py defines them
_ENVELOPE_FIELDS: Final = tuple(f for f in ENVELOPE_FIELDS
                                if f not in ("before", "after", "source", "transaction"))
_TRANSACTION_FIELDS: Final = tuple(f.name for f in TRANSACTION_BLOCK_SCHEMA.fields or ())


def _field_reference(spec: str, prefix: str, events: DataFrame) -> tuple[str, Column]:
    """The column name and expression of one ``add.fields`` entry."""
    field, _, new_name = spec.strip().partition(":")
    struct, _, simple = field.rpartition(".")
    if not struct:
        if simple in _ENVELOPE_FIELDS:
            struct = ""
        elif simple in _TRANSACTION_FIELDS:
            struct = "transaction"
        else:
            struct = "source"
    name = prefix + (new_name or (f"{struct}_{simple}" if "." in field else simple))
    path = f"{struct}.{simple}" if struct else simple
    try:
        events.select(F.col(path))
    except Exception:
        raise SparkDecodeError(f"add.fields: the events have no field {path!r}") from None
    return name, F.col(path)


def flatten(events: DataFrame, *, delete_handling_mode: DeleteHandlingMode = "drop",
            drop_tombstones: bool = True, add_fields: Sequence[str] | str = (),
            add_fields_prefix: str = "__", include_key: bool = False) -> DataFrame:
    """The flattened rows of a table's events (a :meth:`DecodedCapture.table` DataFrame)."""
    if delete_handling_mode not in ("none", "drop", "rewrite"):
        raise SparkDecodeError(f"delete.handling.mode must be none, drop or rewrite, not "
                               f"{delete_handling_mode!r}")
    if isinstance(add_fields, str):
        add_fields = [f for f in add_fields.split(",") if f.strip()]
    after = events.schema["after"].dataType
    assert isinstance(after, StructType)
    op, kind = F.col("op"), F.col("_kind")
    is_delete = (op == "d") & (kind == "change")
    passthrough = (kind == "tombstone") | (op == "t")  # kept as null-valued rows
    rows = events
    if drop_tombstones:
        rows = rows.filter(~passthrough)
    if delete_handling_mode == "drop":
        rows = rows.filter(~is_delete)
    null_value = passthrough | (is_delete if delete_handling_mode == "none" else F.lit(False))
    source = F.when(is_delete, F.col("before")).otherwise(F.col("after"))
    columns: list[Column] = [
        F.when(~null_value, source[name]).alias(name) for name in after.fieldNames()]
    for spec in add_fields:
        name, column = _field_reference(spec, add_fields_prefix, events)
        if name in after.fieldNames():
            raise SparkDecodeError(f"add.fields: {name!r} collides with a column of the table")
        columns.append(F.when(~null_value, column).alias(name))
    if delete_handling_mode == "rewrite":
        deleted = F.when(is_delete, F.lit("true")).otherwise(F.lit("false"))
        columns.append(F.when(~null_value, deleted).alias("__deleted"))
    if include_key and "key" in events.columns:
        columns.append(F.col("key").alias("__key"))
    return rows.select(*columns)


# -- the apply targets' changes, straight from the decoder ---------------------------------


def _run_sequences(run: Any) -> Any:
    """The ``__sequence`` of a run's changes. A run is one transaction's: its
    ``source.sequence`` is one last commit LSN then each change's LSN (how
    :mod:`~pgcdc_events.spark.columnar` builds it), so the first and last changes' are
    parsed, and the LSNs put after that head, unless they do not share it."""
    sequences, lsns = run.column("source").field("sequence"), run.column("lsn")
    ends = [sequence_value(sequences[i].as_py(), lsns[i].as_py())
            for i in (0, len(sequences) - 1)]
    heads = {None if e is None else e.partition("/")[0] for e in ends}
    head = heads.pop()
    if heads or head is None or lsns.null_count:
        return sequence_column(sequences, lsns)
    return format_sequences(int(head, 16), lsns.to_numpy(zero_copy_only=False))


def changes_type(layout: TableLayout) -> StructType:
    """The Spark schema of a table's flattened changes: its columns (every schema
    version's, as in its events' ``after``), ``__op`` and ``__sequence``."""
    return StructType([*layout.value_type.fields, StructField(OP, StringType(), True),
                       StructField(SEQUENCE, StringType(), True)])


@attrs.define
class FlatStats:
    """Rows of flattened changes made from column-wise runs directly (``runs``: the fast
    path) and from the events of single records (``records``)."""

    runs: int = 0
    records: int = 0


class ChangesFlattener:
    """A table's records, as :meth:`TableLayout.batches` takes them (``(position, index,
    kind, lsn, payload)``), to flattened changes (:func:`changes_type`) in Arrow batches.
    Tombstones are dropped; a truncate is a row of nulls with ``__op`` ``t``. ``strict``
    refuses a change with a column the layout does not have, as
    :meth:`TableLayout.batch` does (a stream's layout, from its catalog)."""

    def __init__(self, layout: TableLayout, stats: FlatStats | None = None, *,
                 strict: bool = False) -> None:
        self.layout = layout
        self.strict = strict  # refuse a column the layout does not have (a stream's)
        self.schema = arrow_schema(changes_type(layout))
        self.stats = FlatStats() if stats is None else stats

    def batches(self, rows: Iterable[tuple[int, int, str, int, Any]]) -> Iterator[Any]:
        """The flattened changes of ``rows``, in their order."""
        pending: list[tuple[int, int, str, int, Any]] = []
        for row in rows:
            if row[2] != RUN_KIND:
                if row[2] != "tombstone":
                    pending.append(row)
                continue
            if pending:
                yield from self._records(pending)
                pending = []
            out = self.run(load_payload(RUN_KIND, row[4]))
            if out.num_rows:
                yield out
        if pending:
            yield from self._records(pending)

    def run(self, run: Any) -> Any:
        """A column-wise run's batch (:class:`~pgcdc_events.spark.columnar.ColumnarRun`)
        as flattened changes: its row image converted, no event made."""
        changes = run.filter(pc.equal(run.column("kind"), "change"))
        count = changes.num_rows
        if not count:
            return pa.RecordBatch.from_pylist([], schema=self.schema)
        op = changes.column("op")
        # a run is one operation: a delete's row is its before image
        image = changes.column("before" if op[0].as_py() == "d" else "after")
        values = self.layout.run_image(image, strict=self.strict)
        columns = [*values.flatten(), op, _run_sequences(changes)]
        self.stats.runs += count
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)

    def _records(self, rows: list[tuple[int, int, str, int, Any]]) -> Iterator[Any]:
        for events in self.layout.batches(rows, tombstones=False, strict=self.strict):
            changes = changes_from_events(pa.Table.from_batches([events]))
            if changes.num_rows:
                self.stats.records += changes.num_rows
                yield from changes.cast(self.schema).to_batches()
