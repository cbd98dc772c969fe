"""The capture line format: the canonical fast path and the general JSON path agree.

``CaptureRow.from_line`` reads the lines ``dump_capture_row`` writes with one regular
expression, and every other valid line with ``json.loads``. Both must give the same row,
and a line that only looks canonical must still be checked field by field.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pgcdc_events.protocol import CaptureError, CaptureRow, Lsn, dump_capture_row

ROWS = st.builds(
    CaptureRow,
    st.integers(0, 2**64 - 1).map(Lsn),
    st.one_of(st.none(), st.integers(0, 2**32 - 1), st.integers(2**32, 10**12)),
    st.binary(max_size=64),
)


@given(ROWS)
def test_canonical_lines_read_back(row: CaptureRow) -> None:
    line = dump_capture_row(row)
    assert CaptureRow.from_line(line) == row
    assert CaptureRow.from_line(line + "\n") == row
    # the general path (json.loads, then from_json) is the independent reading
    assert CaptureRow.from_json(json.loads(line)) == row


@given(ROWS, st.sampled_from(["spaces", "order", "lower", "upper-data", "string-xid", "bytes"]))
def test_other_valid_spellings_read_the_same(row: CaptureRow, spelling: str) -> None:
    obj = row.to_json()
    if spelling == "spaces":
        line: str | bytes = json.dumps(obj, separators=(",", ":"))
    elif spelling == "order":
        line = json.dumps({"data": obj["data"], "xid": obj["xid"], "lsn": obj["lsn"]})
    elif spelling == "lower":
        line = json.dumps({**obj, "lsn": obj["lsn"].lower()}, separators=(", ", ": "))
    elif spelling == "upper-data":
        line = json.dumps({**obj, "data": obj["data"].upper()}, separators=(", ", ": "))
    elif spelling == "string-xid":
        line = json.dumps({**obj, "xid": None if row.xid is None else str(row.xid)})
    else:
        line = dump_capture_row(row).encode("utf-8")
    assert CaptureRow.from_line(line) == row


@pytest.mark.parametrize("line, expected", [
    ('{"lsn": "0/1", "xid": -1, "data": "42"}', "'xid'"),
    ('{"lsn": "0/1", "xid": 01, "data": "42"}', "valid JSON"),
    ('{"lsn": "0/1", "xid": 1, "data": "4"}', "'data' as a hex string"),
    ('{"lsn": "123456789/1", "xid": 1, "data": "42"}', "'lsn' in X/Y form"),
    ('{"lsn": "0/1", "xid": 1, "data": "42"} x', "valid JSON"),
])
def test_near_canonical_errors_name_the_field(line: str, expected: str) -> None:
    with pytest.raises(CaptureError, match=expected) as info:
        CaptureRow.from_line(line, line_number=7)
    assert info.value.line == 7


@given(ROWS)
def test_the_line_writer_is_json_dumps(row: CaptureRow) -> None:
    """``dump_capture_row`` builds its line by hand; ``json.dumps`` is the reference."""
    assert dump_capture_row(row) == json.dumps(row.to_json(), separators=(", ", ": "))
