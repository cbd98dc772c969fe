"""COPY text format parsed as it arrives: escapes, NULL against the text \\N, rows split
anywhere across writes (the snapshot reads every table this way)."""

from __future__ import annotations

import pytest

from pgcdc_events.adapters.errors import SnapshotError
from pgcdc_events.adapters.snapshot import CopyTextRows

# What COPY TO STDOUT writes for: (1, 'a<TAB>b', NULL), (2, '\N' as text, ''), (3, 'x\y<LF>', 'ü')
DATA = (b"1\ta\\tb\t\\N\n"
        b"2\t\\\\N\t\n"
        b"3\tx\\\\y\\n\t\xc3\xbc\n")
ROWS = [[b"1", b"a\tb", None], [b"2", b"\\N", b""], [b"3", b"x\\y\n", "ü".encode()]]


@pytest.mark.parametrize("cut", [None, 1, 2, 3, 5, 7, 13])
def test_rows_whatever_the_chunks(cut: int | None) -> None:
    rows: list[list[bytes | None]] = []
    parser = CopyTextRows(rows.append)
    chunks = [DATA] if cut is None else [DATA[i:i + cut] for i in range(0, len(DATA), cut)]
    for chunk in chunks:
        assert parser.write(chunk) == len(chunk)
    parser.close()
    assert rows == ROWS and parser.rows == 3


def test_data_cut_inside_a_row_is_an_error() -> None:
    parser = CopyTextRows(lambda row: None)
    parser.write(b"1\tpartial")
    with pytest.raises(SnapshotError, match="ended inside a row"):
        parser.close()
