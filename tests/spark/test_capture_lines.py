"""One set of rules for capture lines wherever they are read: the Spark reader
(``parse_capture_lines``, Spark SQL in the tasks) refuses exactly the lines
``CaptureRow.from_line`` refuses, with the same words, and reads the others to the same
row (an odd count of hex digits used to be read by Spark as a byte short)."""

from __future__ import annotations

import pytest

from pgcdc_events.protocol import CaptureError, CaptureRow

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession

from pgcdc_events.spark.capture import parse_capture_lines

VALID = [
    '{"lsn": "0/16B3748", "xid": 731, "data": "42000000"}',
    '{"lsn": "0/16B3748", "xid": null, "data": "42ABCDEF"}',      # upper-case hex
    '{"lsn": 23, "xid": "7", "data": "43"}',                      # integer LSN, xid text
    '{"data": "4400", "xid": 1, "lsn": "1/0", "snapshot": true}',  # any key order
]
INVALID = {
    "odd hex": ('{"lsn": "0/1", "xid": 1, "data": "abc"}', "'data' as a hex string"),
    "not hex": ('{"lsn": "0/1", "xid": 1, "data": "zz"}', "'data' as a hex string"),
    "no data": ('{"lsn": "0/1", "xid": 1}', "'data' as a hex string"),
    "lsn form": ('{"lsn": "0/1/2", "xid": 1, "data": "42"}', "'lsn' in X/Y form"),
    "lsn digits": ('{"lsn": "G/1", "xid": 1, "data": "42"}', "'lsn' in X/Y form"),
    "no lsn": ('{"xid": 1, "data": "42"}', "'lsn'"),
    "negative xid": ('{"lsn": "0/1", "xid": -1, "data": "42"}',
                     "'xid' as a non-negative integer or null"),
    "boolean xid": ('{"lsn": "0/1", "xid": true, "data": "42"}',
                    "'xid' as a non-negative integer or null"),
    "not json": ("lsn=0/1 data=42", "not valid JSON"),
}


def _spark_rows(spark: SparkSession, line: str) -> list[tuple[int, int | None, bytes, bool]]:
    frame = spark.createDataFrame([(0, line)], "position long, value string")
    rows = parse_capture_lines(frame, where="lines.jsonl").collect()
    return [(r["lsn"], r["xid"], bytes(r["data"]), r["snapshot"]) for r in rows]


@pytest.mark.parametrize("line", VALID)
def test_valid_lines_read_alike(spark: SparkSession, line: str) -> None:
    row = CaptureRow.from_line(line)
    ((lsn, xid, data, snapshot),) = _spark_rows(spark, line)
    assert (data, xid, snapshot) == (row.data, row.xid, row.snapshot)
    assert lsn in (str(row.lsn), str(int(row.lsn)))  # the text form is normalized later


@pytest.mark.parametrize("case", sorted(INVALID))
def test_invalid_lines_are_refused_alike(spark: SparkSession, case: str) -> None:
    line, expected = INVALID[case]
    with pytest.raises(CaptureError) as python_error:
        CaptureRow.from_line(line, line_number=1)
    assert expected in str(python_error.value)
    with pytest.raises(Exception) as spark_error:
        _spark_rows(spark, line)
    message = str(spark_error.value)
    assert f"lines.jsonl: capture line: {expected}" in message, message[:2000]
