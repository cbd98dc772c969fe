"""Decoded records as Kafka JsonConverter lines: exactly what ``pgcdc-events decode`` writes.

The lines are rendered by the event layer's
:class:`~pgcdc_events.events.JsonRecordWriter` in the Spark tasks, from the records the
decoder produced (``decode_capture(..., lines=True)``). Only the processing time
(``ts_ms``/``ts_us``/``ts_ns``) and the ``__debezium.context.runId`` header differ
between two runs by definition.
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from pgcdc_events.spark.decode import DecodedCapture

__all__ = ["json_records"]


def json_records(decoded: DecodedCapture, table: str) -> DataFrame:
    """``table``'s records as JsonConverter lines (column ``value``), in the decoder's order,
    in one partition. Needs a capture decoded with ``lines=True``."""
    return decoded.json_lines(table)
