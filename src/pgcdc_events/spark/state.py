"""A table's current state from its change events: the last event per key in commit order.

Deletes remove their key's row; a truncate removes every row before it. The
result has the table's columns (those of ``after``), ready for any Spark sink
or a ``MERGE`` into a lakehouse table. Columns whose value Debezium marks as an
unchanged TOASTed placeholder (``unavailable.value.placeholder``, under
``REPLICA IDENTITY DEFAULT``) keep the placeholder, as Debezium's own events do.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F  # noqa: N812

from pgcdc_events.spark.errors import SparkDecodeError

__all__ = ["latest_state"]


def latest_state(events: DataFrame) -> DataFrame:
    """The rows of a table after all its events (a :meth:`DecodedCapture.table` DataFrame).

    Needs the events' ``key`` (tables without a primary key need
    ``message.key.columns``). Spark operations only: one aggregation by key.
    Truncates apply only if they were decoded: Debezium's default
    ``skipped.operations=t`` drops them; use ``skipped.operations=none``.
    """
    if "key" not in events.columns:
        raise SparkDecodeError("the table has no key, so its events cannot be reduced per row; "
                               "give it one with message.key.columns")
    changes = events.filter(F.col("_kind") != "tombstone")
    last_truncate = changes.filter(F.col("op") == "t").agg(
        F.max("_position").alias("_truncated"))
    kept = (changes.filter(F.col("op") != "t").crossJoin(F.broadcast(last_truncate))
            .filter(F.col("_truncated").isNull() | (F.col("_position") > F.col("_truncated"))))
    latest = kept.groupBy("key").agg(
        F.max_by(F.struct("op", "after"), F.col("_position")).alias("_last"))
    return latest.filter(F.col("_last.op") != "d").select("_last.after.*")
