"""PySpark support: Connect schemas as Spark schemas, raw WAL decoded into DataFrames.

Installed with the ``spark`` extra. :func:`decode_capture` opens a capture
DataFrame (columns ``lsn``, ``xid``, ``data`` and an ordering column) and gives
one DataFrame of Debezium change events per table, equal to what the
pure-Python :class:`~pgcdc_events.events.EventDecoder` produces;
:func:`spark_type` and friends map Kafka Connect schemas to Spark types in the
*literal* or *semantic* flavour; :func:`flatten` is Debezium's
ExtractNewRecordState; :func:`latest_state` reduces events to a table's
current rows; :func:`decode_stream` decodes a live capture with Structured
Streaming (:mod:`pgcdc_events.spark.stream`, targets in :mod:`pgcdc_events.spark.apply`);
:func:`session` starts a SparkSession whose workers find this library.
See docs/spark.md.
"""

from __future__ import annotations

from pgcdc_events.spark._session import session
from pgcdc_events.spark.capture import (
    CAPTURE_TYPE,
    capture_dataframe,
    read_capture,
    write_capture_parquet,
)
from pgcdc_events.spark.decode import DecodedCapture, decode_capture
from pgcdc_events.spark.errors import SparkDecodeError
from pgcdc_events.spark.flatten import flatten
from pgcdc_events.spark.layout import TableLayout, catalog_table_schemas
from pgcdc_events.spark.schema import (
    SparkSchemaOptions,
    envelope_type,
    json_record_type,
    json_type,
    key_type,
    spark_type,
    struct_type,
)
from pgcdc_events.spark.state import latest_state
from pgcdc_events.spark.stream import (
    DecodedStream,
    decode_stream,
    read_capture_files,
    read_capture_stream,
)
from pgcdc_events.spark.udf import message_udf
from pgcdc_events.spark.values import ValueConverter

__all__ = [
    "CAPTURE_TYPE",
    "DecodedCapture",
    "DecodedStream",
    "SparkDecodeError",
    "SparkSchemaOptions",
    "TableLayout",
    "ValueConverter",
    "capture_dataframe",
    "catalog_table_schemas",
    "decode_capture",
    "decode_stream",
    "envelope_type",
    "flatten",
    "json_record_type",
    "json_type",
    "key_type",
    "latest_state",
    "message_udf",
    "read_capture",
    "read_capture_files",
    "read_capture_stream",
    "session",
    "spark_type",
    "struct_type",
    "write_capture_parquet",
]
