"""Rotating capture files: a directory of whole-transaction files, each renamed into place
only once durable, for readers that pick up new files (Spark's file source).

:class:`RotatingOutput` is an :class:`~pgcdc_events.adapters.checkpoint.Output` for the
capture loop. Committed units go to a hidden temporary file of the directory
(``.capture-<seq>.tmp``: Spark's file source ignores names starting with ``.`` or ``_``);
when the file is due (``every`` seconds after its first unit, or ``size`` bytes) it is
*finalized*:

1. the temporary file is ``fsync``\\ ed;
2. the checkpoint (``_capture.checkpoint.json``, written as :class:`DurableOutput` writes
   its own: temporary file, ``fsync``, rename, ``fsync`` of the directory) records the
   file's last unit's end LSN and the number of files (its ``offset`` field);
3. the temporary file is renamed to ``capture-<seq>-<end LSN>.jsonl`` (ten decimal digits
   of sequence number, sixteen hex digits of LSN: the names sort by both), and the
   directory is ``fsync``\\ ed;
4. only then :meth:`RotatingOutput.settle` returns the new LSN, which the capture loop
   acknowledges to the slot.

A crash before 2 leaves a temporary file that the next run deletes (its units were never
acknowledged: the slot hands them out again); a crash between 2 and 3 leaves a complete,
``fsync``\\ ed temporary file that the checkpoint counts: the next run renames it into
place. Either way the files present are exactly the checkpoint's, and every unit is in
exactly one file. A unit never spans two files; files hold whole transactions.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

import attrs

from pgcdc_events.adapters.checkpoint import (
    Checkpoint,
    DurableOutput,
    _fsync_dir,
    _last_line,
    _now,
    _write_all,
)
from pgcdc_events.adapters.errors import CheckpointError
from pgcdc_events.errors import ConfigurationError

__all__ = ["FILE_PATTERN", "RotatingOutput", "capture_file_name", "parse_capture_file_name"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
#: A finalized capture file's name: sequence number (from 0) and its last unit's end LSN.
FILE_PATTERN: Final = re.compile(r"capture-(\d{10})-([0-9A-F]{16})\.jsonl")
_TEMP: Final = re.compile(r"\.capture-(\d{10})\.tmp")


def capture_file_name(seq: int, lsn: int) -> str:
    """The name of the ``seq``-th capture file, whose last unit ends at ``lsn``."""
    return f"capture-{seq:010d}-{lsn:016X}.jsonl"


def parse_capture_file_name(name: str) -> tuple[int, int] | None:
    """``(seq, end LSN)`` of a capture file's name (a path's last part), else ``None``."""
    match = FILE_PATTERN.fullmatch(name.rsplit("/", 1)[-1])
    return None if match is None else (int(match.group(1)), int(match.group(2), 16))


def _temp_name(seq: int) -> str:
    return f".capture-{seq:010d}.tmp"


class RotatingOutput(DurableOutput):
    """Capture units into rotating files of ``directory`` (see the module docstring).

    ``every`` (seconds) and ``size`` (bytes) say when a file is finalized; at least one
    must be given. :attr:`checkpoint` is the durable state: the last finalized file's end
    LSN (``lsn``), the number of files (``offset``), units and changes in them.
    """

    def __init__(self, directory: str | os.PathLike[str], *, slot: str,
                 publications: tuple[str, ...], every: float | None = None,
                 size: int | None = None, options: Mapping[str, Any] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if every is None and size is None:
            raise ConfigurationError("a rotating output needs a period or a size")
        if (every is not None and every < 0) or (size is not None and size < 1):
            raise ConfigurationError(f"rotation: a period >= 0 s and a size >= 1 byte, got "
                                     f"{every} s and {size} bytes")
        self.directory = Path(directory)
        # the checkpoint is _capture.checkpoint.json, the lock _capture.lock
        super().__init__(self.directory / "_capture", kind="capture", slot=slot,
                         publications=publications, options=options)
        self.every = every
        self.size = size
        self.clock = clock
        self._segment_fd: int | None = None
        self._segment_started: float | None = None
        self._committed_size = 0  # bytes of the current file that are whole committed units
        self._pending: tuple[int, int, int, Mapping[str, Any] | None] | None = None
        #: Files finalized by a run that died between its checkpoint and its rename.
        self.recovered: list[str] = []

    # -- opening and recovery -------------------------------------------------------------
    def _check_layout(self) -> None:
        """Refuse a directory that holds a single-file output (checked before locking)."""
        for name in ("capture.jsonl.checkpoint.json", "events.jsonl.checkpoint.json"):
            if (self.directory / name).exists():
                raise ConfigurationError(
                    f"{self.directory} holds a single-file output ({name}); rotating files "
                    "need a directory of their own")

    def _open(self) -> Checkpoint:
        if self.checkpoint_path.is_symlink():
            raise CheckpointError("the checkpoint is a symbolic link; refusing it",
                                  path=str(self.checkpoint_path))
        checkpoint = self._load()
        self._stored = checkpoint is not None
        if checkpoint is None:
            checkpoint = Checkpoint(None, 0, 0, 0, "capture", self._slot, self._publications,
                                    self.options, _now(), snapshot={"state": "pending"})
        files = checkpoint.offset
        present: dict[int, str] = {}
        for entry in os.scandir(self.directory):
            temp = _TEMP.fullmatch(entry.name)
            if temp is not None:
                seq = int(temp.group(1))
                if seq == files - 1 and checkpoint.lsn is not None:
                    # counted by the checkpoint, not renamed yet: complete and fsynced
                    final = capture_file_name(seq, checkpoint.lsn)
                    os.rename(self.directory / entry.name, self.directory / final)
                    self.recovered.append(final)
                    present[seq] = final
                else:  # never counted: its units come again from the slot
                    os.unlink(self.directory / entry.name)
                continue
            parsed = parse_capture_file_name(entry.name)
            if parsed is not None:
                present[parsed[0]] = entry.name
        _fsync_dir(self.directory)
        beyond = sorted(seq for seq in present if seq >= files)
        missing = [seq for seq in range(files) if seq not in present]
        if beyond or (files and missing):
            raise CheckpointError(
                f"the directory's capture files disagree with the checkpoint ({files} files): "
                + (f"files beyond it: {', '.join(present[s] for s in beyond)}" if beyond
                   else f"file number {missing[0]} is missing")
                + " (files were moved or deleted by hand?)", path=str(self.checkpoint_path))
        if files and checkpoint.lsn is not None:
            last = parse_capture_file_name(present[files - 1])
            if last is None or last[1] != checkpoint.lsn:
                raise CheckpointError(f"the last capture file {present[files - 1]} does not end "
                                      f"at the checkpoint's LSN", path=str(self.checkpoint_path))
        self._checkpoint = checkpoint
        return checkpoint

    def last_line(self) -> bytes | None:
        """The last line of the last finalized capture file (what the checkpoint ends with)."""
        checkpoint = self.checkpoint
        if not checkpoint.offset or checkpoint.lsn is None:
            return None
        path = self.directory / capture_file_name(checkpoint.offset - 1, checkpoint.lsn)
        try:
            size = path.stat().st_size
        except OSError:
            return None
        return _last_line(path, size)

    # -- writing ----------------------------------------------------------------------------
    def _segment(self) -> int:
        """The current temporary file (opened at its first write)."""
        if self._segment_fd is None:
            path = self.directory / _temp_name(self.checkpoint.offset)
            try:
                self._segment_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL
                                           | _NOFOLLOW, 0o600)
            except OSError as exc:
                raise CheckpointError(f"cannot create the capture file: {exc.strerror}",
                                      path=str(path)) from None
            self._committed_size = 0
        return self._segment_fd

    def _flush(self) -> None:
        if self._buffer:
            try:
                _write_all(self._segment(), self._buffer)
            except OSError as exc:
                raise CheckpointError(f"cannot write the capture file: {exc.strerror or exc}",
                                      path=str(self.directory)) from None
            self._buffer = bytearray()

    def commit(self, lsn: int, units: int, changes: int, *,
               snapshot: Mapping[str, Any] | None = None) -> Checkpoint:
        """The units written since the last commit join the current file; the file is
        finalized when due. Returns the durable checkpoint (which may not include them
        yet: :meth:`settle` says what may be acknowledged)."""
        self._flush()
        fd = self._segment_fd
        if fd is not None:
            self._committed_size = os.fstat(fd).st_size
        if self._pending is None:
            self._segment_started = self.clock()
            self._pending = (lsn, units, changes, snapshot)
        else:
            _, u, c, s = self._pending
            self._pending = (lsn, u + units, c + changes, snapshot if snapshot is not None else s)
        # a snapshot's end is made durable at once: the checkpoint must not say "running"
        # once the slot streams (a reconnection would take the snapshot again)
        self.settle(force=snapshot is not None)
        return self.checkpoint

    def full(self) -> bool:
        """Whether the current file holds ``size`` bytes or more, committed or not: the
        capture commits at the end of the unit that reached it, so that the file is
        finalized there (a file exceeds ``size`` by at most that one unit)."""
        if self.size is None:
            return False
        written = len(self._buffer)
        if self._segment_fd is not None:
            written += os.fstat(self._segment_fd).st_size
        return written >= self.size

    def due(self) -> bool:
        """Whether the current file holds committed units and is due to be finalized."""
        if self._pending is None:
            return False
        if self.size is not None and self._committed_size >= self.size:
            return True
        return (self.every is not None and self._segment_started is not None
                and self.clock() - self._segment_started >= self.every)

    def settle(self, *, force: bool = False) -> int | None:
        """Finalize the current file if it is due (or ``force``); the LSN up to which every
        unit is in a finalized file: what the slot may be acknowledged to."""
        if self._pending is not None and (force or self.due()):
            self._finalize()
        return self.checkpoint.lsn

    def _finalize(self) -> None:
        assert self._pending is not None
        lsn, units, changes, snapshot = self._pending
        previous = self.checkpoint
        seq = previous.offset
        temp = self.directory / _temp_name(seq)
        final = self.directory / capture_file_name(seq, lsn)
        fd = self._segment()  # (a commit of units without rows still makes a file)
        try:
            os.ftruncate(fd, self._committed_size)
            os.fsync(fd)
        except OSError as exc:
            raise CheckpointError(f"cannot fsync the capture file: {exc.strerror or exc}",
                                  path=str(temp)) from None
        os.close(fd)
        self._segment_fd = None
        if final.exists() or final.is_symlink():
            raise CheckpointError("a capture file of that name exists already", path=str(final))
        self._store(attrs.evolve(previous, lsn=lsn, offset=seq + 1,
                                 units=previous.units + units,
                                 changes=previous.changes + changes, updated=_now(),
                                 options=self.options or previous.options,
                                 server=self.server or previous.server,
                                 snapshot=previous.snapshot if snapshot is None
                                 else dict(snapshot)))
        try:
            os.rename(temp, final)
        except OSError as exc:
            raise CheckpointError(f"cannot rename the capture file into place: "
                                  f"{exc.strerror or exc}", path=str(temp)) from None
        _fsync_dir(self.directory)
        self._pending = None
        self._segment_started = None
        self._committed_size = 0

    def rollback(self) -> None:
        """Drop what was written since the last commit (the committed units stay)."""
        self._buffer = bytearray()
        if self._segment_fd is not None:
            try:
                os.ftruncate(self._segment_fd, self._committed_size)
            except OSError as exc:
                raise CheckpointError(f"cannot truncate the capture file: "
                                      f"{exc.strerror or exc}", path=str(self.directory)
                                      ) from None

    def close(self) -> None:
        """Finalize the committed units of the current file (the slot is acknowledged by the
        next run), drop anything uncommitted, release the directory."""
        try:
            with contextlib.suppress(CheckpointError):
                self.rollback()
                if self._pending is not None:
                    self._finalize()
        finally:
            if self._segment_fd is not None:
                os.close(self._segment_fd)
                self._segment_fd = None
                with contextlib.suppress(OSError):  # uncommitted: the slot has it
                    os.unlink(self.directory / _temp_name(self.checkpoint.offset))
            self._unlock()
