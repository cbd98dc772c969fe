"""``read_canonical`` (decode's fast path) reads exactly what ``CaptureRow.from_line`` reads.

For every line of every committed protocol capture and golden recording, and for
lines generated from rows (``dump_capture_row``) and then altered (case, spacing, odd
digits, quotes, line ends, extra keys), the fast path either declines (None) or gives
the general parser's ``(lsn, data, snapshot)``; it never accepts a line the general
parser refuses.
"""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from pgcdc_events.errors import ProtocolError
from pgcdc_events.protocol import CaptureRow, Lsn, dump_capture_row
from pgcdc_events.protocol.capture import read_canonical
from support.golden import recordings

CAPTURES = Path(__file__).resolve().parent / "captures"


def _agree(line: bytes) -> bool:
    """Whether the fast path took ``line`` (asserting it agrees with the general path)."""
    fast = read_canonical(line)
    try:
        row = CaptureRow.from_line(line.decode("utf-8"))
    except (ProtocolError, UnicodeDecodeError):
        assert fast is None, line
        return False
    if fast is None:
        return False
    lsn, data, snapshot = fast
    assert (lsn, data, snapshot) == (row.lsn, row.data, row.snapshot), line
    assert type(lsn) is Lsn and str(lsn) == str(row.lsn)
    return True


def test_every_committed_capture_line_takes_the_fast_path() -> None:
    paths = sorted(CAPTURES.glob("*.jsonl"))
    paths += [r.path / "capture.jsonl" for r in recordings()]
    lines = [line for path in paths for line in path.read_bytes().splitlines(keepends=True)]
    assert len(lines) > 1000
    taken = sum(_agree(line) for line in lines)
    # every line that ends with its newline is canonical
    assert taken == sum(line.endswith(b"\n") for line in lines)


_ROWS = st.builds(CaptureRow, st.integers(0, 2**64 - 1).map(Lsn),
                  st.none() | st.integers(0, 2**32), st.binary(max_size=40), st.booleans())


@settings(max_examples=400, deadline=None)
@given(_ROWS, st.sampled_from(["", "upper", "odd", "space", "crlf", "noeol", "quote",
                               "extra", "lsn0", "xid0", "xidneg", "order", "escape", "bom"]))
def test_altered_lines_agree_with_the_general_parser(row: CaptureRow, change: str) -> None:
    line = dump_capture_row(row) + "\n"
    data = row.data.hex()
    if change == "upper" and data:
        line = line.replace(data, data.upper())
    elif change == "odd":
        line = line.replace('"data": "', '"data": "0')
    elif change == "space" and len(data) >= 4:
        line = line.replace(data, data[:2] + " " + data[2:])
    elif change == "crlf":
        line = line[:-1] + "\r\n"
    elif change == "noeol":
        line = line[:-1]
    elif change == "quote":
        line = line.replace('"data": "', '"data": "\\"')
    elif change == "extra":
        line = line[:-2] + ', "x": 1}\n'
    elif change == "lsn0":
        line = line.replace('"lsn": "', '"lsn": "0')
    elif change == "xid0" and row.xid is not None:
        line = line.replace('"xid": ', '"xid": 0')
    elif change == "xidneg" and row.xid is not None:
        line = line.replace('"xid": ', '"xid": -')
    elif change == "order":
        obj = json.loads(line)
        line = json.dumps(dict(reversed(obj.items()))) + "\n"
    elif change == "escape":
        line = line.replace('"data": "', '"data": "\\u0030')
    elif change == "bom":
        line = "\ufeff" + line
    taken = _agree(line.encode())
    if change in ("", "upper") or (change == "lsn0" and len(str(row.lsn).split("/")[0]) < 8):
        assert taken
