"""COPY block lines in the capture format: what they expand to, and every way one can be wrong.

The blocks here are built by :func:`dump_copy_block` (the capture's own writer) from COPY
text; hostile ones are edited by hand, which PostgreSQL cannot produce. That the blocks
of a real snapshot decode to the connector's events is tests/adapters/
test_snapshot_blocks_golden.py's.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from pgcdc_events.protocol import (
    CaptureRow,
    Insert,
    Lsn,
    encode_message,
    insert_messages,
    iter_capture,
    rows_of_line,
)
from pgcdc_events.protocol.capture import (
    COPY_DATA,
    CaptureError,
    canonical_head,
    dump_copy_block,
    read_canonical,
    read_copy_block,
)
from pgcdc_events.protocol.copytext import CopyTextError, copy_text_rows
from pgcdc_events.protocol.messages import TupleData

AT = 0x1_0000_2A30
TEXT = b"1\ta\\tb\t\\N\n2\t\\\\N\t\n3\tx\\\\y\\n\t\xc3\xbc\n"
VALUES: list[list[bytes | None]] = [[b"1", b"a\tb", None], [b"2", b"\\N", b""],
                                    [b"3", b"x\\y\n", "ü".encode()]]


def _insert(relation_id: int, values: list[bytes | None]) -> bytes:
    kinds = bytes(b"n"[0] if v is None else b"t"[0] for v in values)
    return encode_message(Insert(relation_id, TupleData(kinds, tuple(values))))


def test_a_block_expands_to_the_inserts_the_old_lines_held() -> None:
    line = dump_copy_block(AT, 4_000_000_000, 16385, 3, TEXT)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    obj = json.loads(line)
    assert (obj["lsn"], obj["xid"], obj["relation"], obj["columns"], obj["rows"],
            obj["snapshot"], obj["data"]) == ("1/2A30", 4_000_000_000, 16385, 3, 3, True,
                                              COPY_DATA)
    assert bytes.fromhex(obj["copy"]) == TEXT
    expected = [CaptureRow(Lsn(AT), 4_000_000_000, _insert(16385, v), True) for v in VALUES]
    for given in (line, line.decode(), line.rstrip(b"\n")):
        assert rows_of_line(given, line_number=7) == expected
        assert list(iter_capture([given])) == expected
    assert copy_text_rows(TEXT, 3) == VALUES
    assert insert_messages(16385, 3, TEXT) == [r.data for r in expected]


def test_old_lines_and_blocks_in_one_capture() -> None:
    """A capture of old lines (one Insert a line) and block lines reads in order."""
    old = CaptureRow(Lsn(AT), 7, _insert(16385, VALUES[0]), True)
    lines = [json.dumps(old.to_json()), dump_copy_block(AT, 7, 16385, 3, TEXT[TEXT.index(b"\n")
                                                                              + 1:]).decode(), ""]
    rows = list(iter_capture(lines))
    assert [r.data for r in rows] == [_insert(16385, v) for v in VALUES]


def test_empty_and_zero_column_blocks() -> None:
    assert rows_of_line(dump_copy_block(AT, None, 5, 2, b"")) == []
    rows = rows_of_line(dump_copy_block(AT, None, 5, 0, b"\n\n"))
    assert [r.data for r in rows] == [_insert(5, [])] * 2 and rows[0].xid is None


def test_from_line_refuses_a_block_and_the_fast_path_passes_it_over() -> None:
    """:meth:`CaptureRow.from_line` gives one row: it refuses a block, naming the line and
    what reads it; :func:`read_canonical` leaves it to the general path;
    :func:`canonical_head` gives its first Insert's head (the planner of decode --workers
    reads it so)."""
    line = dump_copy_block(AT, 7, 16385, 3, TEXT)
    with pytest.raises(CaptureError, match=r"^line 4: .*COPY block line.*rows_of_line"):
        CaptureRow.from_line(line, line_number=4)
    assert read_canonical(line) is None
    assert canonical_head(line, 1) == b"I"
    assert canonical_head(line, 5) == b"I" + (16385).to_bytes(4, "big")
    assert read_copy_block(json.dumps(CaptureRow(Lsn(AT), 7, b"B", True).to_json())) is None


def _hostile(**fields: Any) -> str:
    obj: dict[str, Any] = json.loads(dump_copy_block(AT, 7, 16385, 3, TEXT))
    obj.update(fields)
    return json.dumps({k: v for k, v in obj.items() if v is not ...})


HOSTILE = [
    (_hostile(copy=TEXT[:-1].hex()), "the last row is cut"),
    (_hostile(copy=TEXT.hex()[:-1]), "'copy' as a hex string"),
    (_hostile(copy=TEXT.hex() + "zz"), "'copy' as a hex string"),
    (_hostile(copy=7), "'copy' as a hex string"),
    (_hostile(copy=(TEXT + b"4\t\\x41\tz\n").hex(), rows=4), r"row 4 column 2: an escape COPY"),
    (_hostile(copy=(TEXT + b"4\t\\\tz\n").hex(), rows=4), "row 4 column 2: a value ending"),
    (_hostile(copy=(TEXT + b"4\t\\N\\N\tz\n").hex(), rows=4), "row 4 column 2: an escape"),
    (_hostile(copy=(TEXT + b"4\tz\n").hex(), rows=4), "row 4 has 2 values, expected 3"),
    (_hostile(copy=(TEXT + b"4\tz\tz\tz\n").hex(), rows=4), "row 4 has 4 values, expected 3"),
    (_hostile(rows=2), "the 2 rows its 'rows' says"),
    (_hostile(columns=2), "row 1 has 3 values, expected 2"),
    (_hostile(columns=-1), "'columns' as a non-negative integer"),
    (_hostile(relation="16385"), "'relation' as a non-negative integer"),
    (_hostile(rows=True), "'rows' as a non-negative integer"),
    (_hostile(snapshot=...), '"snapshot": true'),
    (_hostile(snapshot=False), '"snapshot": true'),
    (_hostile(lsn="nope"), "'lsn' in X/Y form"),
    (_hostile(xid=-1), "'xid' as a non-negative integer or null"),
    (_hostile(extra=1), "only the keys of a block line"),
]


@pytest.mark.parametrize(("line", "words"), HOSTILE, ids=[w for _, w in HOSTILE])
def test_a_hostile_block_is_one_error_naming_the_line(line: str, words: str) -> None:
    good = dump_copy_block(AT, 7, 16385, 3, TEXT).decode()
    with pytest.raises(CaptureError) as info:
        list(iter_capture([good, "", line]))
    message = str(info.value)
    assert message.startswith("line 3: ") and "\n" not in message
    assert re.search(words, message), message
    with pytest.raises(CaptureError, match=r"^line 9: "):
        rows_of_line(line.encode(), line_number=9)


def test_an_insert_over_the_message_limit_is_refused() -> None:
    line = dump_copy_block(AT, 7, 16385, 1, b"x" * 100 + b"\n")
    assert len(rows_of_line(line, max_message_size=120)) == 1
    with pytest.raises(CaptureError, match=r"line 2: a message of at most 50 bytes"):
        list(iter_capture([b"", line], max_message_size=50))


def test_copy_text_errors_name_the_row() -> None:
    with pytest.raises(CopyTextError, match=r"row 12 column 1: an escape COPY TO does not "
                                            r"write \('\\0'\)"):
        copy_text_rows(b"\\0\n", first_row=12)
    with pytest.raises(CopyTextError, match="the text ends inside a row, 3 bytes after"):
        insert_messages(1, 1, b"a\nbcd")
