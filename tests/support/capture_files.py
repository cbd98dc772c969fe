"""Capture files as ``capture --rotate-every`` leaves them, for the Spark stream tests."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

from pgcdc_events.adapters.rotating import capture_file_name
from pgcdc_events.protocol.capture import CaptureRow, dump_capture_row


def write_files(directory: Path, rows: list[CaptureRow], cuts: list[int], first: int = 0
                ) -> int:
    """Capture files of ``rows`` cut at the ``cuts`` (row indexes), named as the rotating
    writer names them (written hidden, then renamed), numbered from ``first``; returns
    the next number."""
    directory.mkdir(parents=True, exist_ok=True)
    seq = first
    for lo, hi in itertools.pairwise([0, *sorted(set(cuts)), len(rows)]):
        if lo == hi:
            continue
        temp = directory / f".capture-{seq:010d}.tmp"
        temp.write_text("".join(dump_capture_row(r) + "\n" for r in rows[lo:hi]))
        os.rename(temp, directory / capture_file_name(seq, int(rows[hi - 1].lsn)))
        seq += 1
    return seq
