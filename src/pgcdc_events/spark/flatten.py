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
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.types import StructType

from pgcdc_events.events.envelope import ENVELOPE_FIELDS, TRANSACTION_BLOCK_SCHEMA
from pgcdc_events.spark.errors import SparkDecodeError

__all__ = ["DeleteHandlingMode", "flatten"]

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
