"""The divergences the Spark layer's copies of the event rules had (issue 12), each pinned.

Before the Spark layer called the event layer, its copies had drifted: a bad binary value
under ``event.converting.failure.handling.mode=warn`` crashed with a raw
``struct.error`` (``EventDecoder`` nulls the value and counts it);
``skip.messages.without.change=true`` was ignored (Spark emitted the ``u`` events the
decoder drops); the UDF path ignored both failure modes; ``message_udf`` crashed on Begin
rows. Each case is decoded by Spark and must give the event layer's records, whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812

from pgcdc_events.events import EventConfig
from pgcdc_events.protocol import CaptureRow, Insert, PgOutputReader, TupleData
from pgcdc_events.protocol.encoder import encode_message
from pgcdc_events.spark import capture_dataframe, decode_capture
from pgcdc_events.spark.udf import message_udf
from pgcdc_events.testing import Transaction, op_insert, op_update, render, table
from support.spark_records import CLOCK_NS, RUN_ID, decoder_lines

T = table("public.t", {"id": "int4", "n": "int4", "v": "text"}, primary_key="id",
          replica_identity="full")


def _bad_binary_capture() -> list[CaptureRow]:
    """Two inserts in binary format; the first one's int4 ``n`` has 3 bytes (a value PG15
    cannot send: built by hand)."""
    w = render([T], [Transaction((op_insert(T, {"id": 1, "n": 5, "v": "a"}),
                                  op_insert(T, {"id": 2, "n": 6, "v": "b"})))], binary=True)
    rows = w.capture()
    reader = PgOutputReader()
    out = []
    done = False
    for row in rows:
        message = reader.read(row.data)
        if isinstance(message, Insert) and not done:
            values = list(message.new.values)
            values[1] = b"\x00\x00\x05"
            message = attrs.evolve(message, new=TupleData(message.new.kinds, tuple(values)))
            row = CaptureRow(row.lsn, row.xid, encode_message(message))
            done = True
        out.append(row)
    assert done
    return out


def _config(**props: str) -> EventConfig:
    return EventConfig.from_properties({"topic.prefix": "p", **props})


def _spark_lines(spark: SparkSession, rows: Sequence[CaptureRow], config: EventConfig
                 ) -> list[str]:
    decoded = decode_capture(capture_dataframe(spark, rows), config, tombstones=True,
                             clock=lambda: CLOCK_NS, run_id=RUN_ID, lines=True)
    try:
        return [r["line"] for r in decoded.records.orderBy("position", "index").collect()]
    finally:
        decoded.unpersist()


def test_warn_mode_nulls_a_bad_binary_value(spark: SparkSession) -> None:
    rows = _bad_binary_capture()
    config = _config(**{"event.converting.failure.handling.mode": "warn"})
    want = decoder_lines(rows, config)
    assert '"n":null' in want[0] and '"n":6' in want[1]  # the decoder nulls it
    assert _spark_lines(spark, rows, config) == want


def test_processing_skip_drops_the_change(spark: SparkSession) -> None:
    rows = _bad_binary_capture()
    config = _config(**{"event.processing.failure.handling.mode": "skip"})
    want = decoder_lines(rows, config)
    assert len(want) == 1 and '"id":2' in want[0]
    assert _spark_lines(spark, rows, config) == want


def test_skip_messages_without_change(spark: SparkSession) -> None:
    w = render([T], [Transaction((op_insert(T, {"id": 1, "n": 5, "v": "a"}),
                                  op_update(T, {"id": 1, "n": 5, "v": "a"}, v="a"),
                                  op_update(T, {"id": 1, "n": 5, "v": "a"}, v="b")))])
    rows = w.capture()
    config = _config(**{"skip.messages.without.change": "true"})
    want = decoder_lines(rows, config)
    assert [line.count('"op":"u"') for line in want] == [0, 1]  # the unchanged update dropped
    assert _spark_lines(spark, rows, config) == want


def _udf_rows(spark: SparkSession, rows: Sequence[CaptureRow], config: EventConfig
              ) -> list[Any]:
    decoded = decode_capture(capture_dataframe(spark, rows), config)
    decode = message_udf(decoded, "public.t")
    frame = spark.createDataFrame([(i, bytes(r.data), False) for i, r in enumerate(rows)],
                                  "position long, data binary, in_stream boolean")
    out = frame.select("position", F.explode(decode("data", "position", "in_stream")).alias("r"))
    return [(r["position"], r["r"]["op"], r["r"]["after"] and r["r"]["after"].asDict())
            for r in out.orderBy("position").collect()]


def test_udf_follows_the_failure_modes(spark: SparkSession) -> None:
    rows = _bad_binary_capture()
    warned = _udf_rows(spark, rows, _config(**{"event.converting.failure.handling.mode": "warn"}))
    assert [(op, after) for _, op, after in warned] == [
        ("c", {"id": 1, "n": None, "v": "a"}), ("c", {"id": 2, "n": 6, "v": "b"})]
    skipped = _udf_rows(spark, rows, _config(**{"event.processing.failure.handling.mode": "skip"}))
    assert [(op, after) for _, op, after in skipped] == [("c", {"id": 2, "n": 6, "v": "b"})]


def test_udf_takes_every_message_of_a_capture(spark: SparkSession) -> None:
    """Begin, Relation and Commit rows give no records (they used to raise AttributeError)."""
    w = render([T], [Transaction((op_insert(T, {"id": 1, "n": 5, "v": "a"}),))])
    rows = w.capture()
    assert {r.data[:1] for r in rows} >= {b"B", b"R", b"I", b"C"}
    got = _udf_rows(spark, rows, _config())
    assert [(op, after) for _, op, after in got] == [("c", {"id": 1, "n": 5, "v": "a"})]
