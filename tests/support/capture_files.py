"""Capture files as ``capture --rotate-every`` leaves them, for the Spark stream tests."""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path

from pgcdc_events.adapters.rotating import capture_file_name
from pgcdc_events.protocol.capture import CaptureRow, dump_capture_row


def write_files(directory: Path, rows: list[CaptureRow], cuts: list[int], first: int = 0
                ) -> int:
    """Capture files of ``rows`` cut at the ``cuts`` (row indexes), named as the rotating
    writer names them (written hidden, then renamed), numbered from ``first``; returns
    the next number. Each file's modification time is at least 2 ms after the previous
    file's (this call's or an earlier one's): Spark's file source orders a trigger's files
    by modification time in milliseconds, and files written within the same millisecond
    came in the directory listing's order (ext4's, not the names'), so a test's segments
    could reach the stream out of order by chance; the rotating writer's files are seconds
    apart."""
    directory.mkdir(parents=True, exist_ok=True)
    seq = first
    for lo, hi in itertools.pairwise([0, *sorted(set(cuts)), len(rows)]):
        if lo == hi:
            continue
        temp = directory / f".capture-{seq:010d}.tmp"
        temp.write_text("".join(dump_capture_row(r) + "\n" for r in rows[lo:hi]))
        final = directory / capture_file_name(seq, int(rows[hi - 1].lsn))
        os.rename(temp, final)
        stamp(final)
        seq += 1
    return seq


_last_stamp = 0


def stamp(path: Path) -> None:
    """Give ``path`` a modification time at least 2 ms after the last one given."""
    global _last_stamp  # noqa: PLW0603 - one clock for every file the tests write
    stamp = max(time.time_ns(), _last_stamp + 2_000_000)
    os.utime(path, ns=(stamp, stamp))
    _last_stamp = stamp
