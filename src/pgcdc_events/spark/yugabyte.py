"""YugabyteDB records in Spark: ``PGCompatible`` over a DataFrame.

Records of ``plugin.name=yboutput`` (:mod:`pgcdc_events.events.yugabyte`) wrap every
column in a ``struct<value, set>`` cell. :func:`pg_compatible_columns` is the
``PGCompatible`` transform (:func:`pgcdc_events.events.yugabyte_transforms.pg_compatible`)
for DataFrames holding such records, whatever made them (:func:`yugabyte_dataframe` from
records, or ``spark.read.json`` of ``pgcdc-events decode -c plugin.name=yboutput``
output): every cell, at any depth, becomes its value, ``null`` when it was not sent.
See docs/yugabytedb.md for a whole pipeline.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.types import DataType, StructField, StructType

from pgcdc_events.events.records import ChangeRecord
from pgcdc_events.spark.errors import SparkDecodeError
from pgcdc_events.spark.schema import LITERAL, struct_type
from pgcdc_events.spark.values import ValueConverter

__all__ = ["is_cell_type", "pg_compatible_columns", "yugabyte_dataframe"]


def is_cell_type(data_type: DataType) -> bool:
    """Whether a Spark type is a yboutput cell: a struct of exactly ``value`` and ``set``
    (the test of ``PGCompatible.isValueSetStruct``)."""
    return isinstance(data_type, StructType) and data_type.fieldNames() == ["value", "set"]


def _unwrapped(column: Column, data_type: DataType) -> Column:
    if is_cell_type(data_type):
        return column.getField("value")
    if isinstance(data_type, StructType):
        inner = F.struct(*(_unwrapped(column.getField(f.name), f.dataType).alias(f.name)
                           for f in data_type.fields))
        return F.when(column.isNull(), F.lit(None)).otherwise(inner)
    return column


def pg_compatible_columns(frame: DataFrame) -> DataFrame:
    """``frame`` with every cell column (``struct<value, set>``, at any depth) replaced by its
    value; other columns unchanged, in the same order."""
    return frame.select(*(_unwrapped(F.col(f"`{f.name}`"), f.dataType).alias(f.name)
                          for f in frame.schema.fields))


def yugabyte_dataframe(spark: SparkSession, records: Iterable[ChangeRecord]) -> DataFrame:
    """One table's data records, one row each: a ``key`` column then the envelope's fields
    (``before``, ``after``, ``source``, ``op``, ``ts_ms``, ``transaction``), cells kept
    (see :func:`pg_compatible_columns`), in the *literal* flavour of
    :mod:`pgcdc_events.spark.schema` (Connect values as they are).

    Tombstones and records of another table (another value schema) are refused.
    """
    rows: list[tuple[Any, ...]] = []
    key_schema = value_schema = None
    keys = values = None
    for record in records:
        if record.value is None or record.value_schema is None or record.key_schema is None:
            raise SparkDecodeError(f"yugabyte_dataframe takes data records with a key; got a "
                                   f"tombstone or keyless record of {record.topic}")
        if value_schema is None:
            key_schema, value_schema = record.key_schema, record.value_schema
            keys, values = (ValueConverter(key_schema, LITERAL),
                            ValueConverter(value_schema, LITERAL))
        elif record.value_schema != value_schema or record.key_schema != key_schema:
            raise SparkDecodeError(f"yugabyte_dataframe takes one table's records; "
                                   f"{record.topic} has another schema")
        assert keys is not None and values is not None
        rows.append((keys.python(record.key), *values.python(record.value)))
    if value_schema is None or key_schema is None:
        raise SparkDecodeError("yugabyte_dataframe needs at least one data record")
    envelope = struct_type(value_schema, LITERAL)
    columns = [StructField("key", struct_type(key_schema, LITERAL), False), *envelope.fields]
    return spark.createDataFrame(rows, StructType(columns))
