"""An append-only output file and its checkpoint: after any crash, exactly the committed units.

The checkpoint is a small JSON file beside the output (``<output>.checkpoint.json``)
that records the end LSN of the last unit in the output and the output's size
in bytes once that unit was written. :class:`DurableOutput` keeps the two in step:

1. units are appended to the output (buffered);
2. :meth:`~DurableOutput.commit` flushes and ``fsync``\\ s the output, then
   replaces the checkpoint atomically (write a temporary file, ``fsync``,
   ``rename``, ``fsync`` the directory);
3. only then may the caller advance the replication slot.

A crash before step 2 completes leaves bytes past the checkpoint's offset: they
are cut off when the output is opened again (:meth:`~DurableOutput.open`), and
the slot, never advanced past the checkpoint, hands those units out again. A
crash after step 2 but before the slot moved makes the slot hand out units at or
before the checkpoint's LSN again: the reader skips them. Either way the output
holds every unit exactly once.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import sys
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, Protocol

import attrs

from pgcdc_events.adapters.errors import CheckpointError, OutputLockedError
from pgcdc_events.errors import ConfigurationError, PgCdcError, ProtocolError
from pgcdc_events.protocol.lsn import Lsn

__all__ = ["Checkpoint", "DurableOutput", "Output", "StreamOutput", "output_paths"]

FORMAT = "pgcdc-events checkpoint 1"
_SNAPSHOT_STATES = ("pending", "running", "done", "skipped")
_FLUSH_BYTES = 1 << 20
#: What marks an incremental snapshot chunk line (protocol.capture.CHUNK_MARK).
_CHUNK_MARK = b'"chunk": {'


@attrs.frozen
class Checkpoint:
    """The durable state of one output: its last unit's end LSN and its size then.

    ``lsn`` is ``None`` until the first unit is committed. ``kind`` is
    ``"capture"`` (capture JSON Lines) or ``"events"`` (Debezium records);
    ``options`` records the decoding options the output was read with, ``server``
    the server it was read from (``system_identifier``, ``timeline``), so that an
    output is never continued against another server or a restored copy.
    """

    lsn: int | None
    offset: int
    units: int
    changes: int
    kind: str
    slot: str
    publications: tuple[str, ...]
    options: Mapping[str, Any] = attrs.field(factory=dict)
    updated: str = ""
    server: Mapping[str, Any] = attrs.field(factory=dict)
    #: The initial snapshot: ``{"state": "pending"}`` for an output never written,
    #: ``"running"`` while one is taken (a run that finds it restarts it),
    #: ``"done"`` (with its ``lsn``, ``xid``, ``tables``, ``rows``) or ``"skipped"``
    #: (``no_data``, and every checkpoint written before snapshots existed).
    snapshot: Mapping[str, Any] = attrs.field(factory=lambda: {"state": "skipped"})
    #: A later position of the server, recorded while nothing was pending (no change
    #: between ``lsn`` and it): the slot may be acknowledged up to it (``None``: none).
    idle: int | None = None
    #: The incremental snapshot's progress when the output was committed, in the
    #: connector's offset form (``IncrementalSnapshotContext.to_offset``; empty: none runs).
    incremental: Mapping[str, Any] = attrs.field(factory=dict)

    @property
    def position(self) -> int | None:
        """How far the output is complete: the later of :attr:`lsn` and :attr:`idle`."""
        if self.idle is None or (self.lsn is not None and self.lsn > self.idle):
            return self.lsn
        return self.idle

    @property
    def snapshot_state(self) -> str:
        """``pending``, ``running``, ``done`` or ``skipped`` (see :attr:`snapshot`)."""
        return str(self.snapshot.get("state", "skipped"))

    def to_json(self) -> dict[str, Any]:
        """The checkpoint as the JSON object written to disk."""
        return {
            "format": FORMAT,
            "lsn": None if self.lsn is None else str(Lsn(self.lsn)),
            "offset": self.offset,
            "units": self.units,
            "changes": self.changes,
            "kind": self.kind,
            "slot": self.slot,
            "publications": list(self.publications),
            "options": dict(self.options),
            "updated": self.updated,
            "server": dict(self.server),
            "snapshot": dict(self.snapshot),
        } | ({} if self.idle is None else {"idle": str(Lsn(self.idle))}) \
          | ({"incremental": dict(self.incremental)} if self.incremental else {})

    @classmethod
    def from_json(cls, obj: Any, *, path: str) -> Checkpoint:
        """Validate and load a checkpoint object; errors name the file and the field."""
        if not isinstance(obj, dict) or obj.get("format") != FORMAT:
            raise CheckpointError(f"not a checkpoint (expected \"format\": \"{FORMAT}\")",
                                  path=path)

        def field(name: str, kind: type | tuple[type, ...]) -> Any:
            value = obj.get(name)
            if not isinstance(value, kind) or isinstance(value, bool):
                raise CheckpointError(f"field {name!r} is missing or malformed: {value!r}",
                                      path=path)
            return value

        lsn_text = obj.get("lsn")
        lsn: int | None = None
        if lsn_text is not None:
            try:
                lsn = int(Lsn.parse(field("lsn", str)))
            except ProtocolError:
                raise CheckpointError(f"field 'lsn' is not an LSN: {lsn_text!r}",
                                      path=path) from None
        offset = field("offset", int)
        if offset < 0:
            raise CheckpointError(f"field 'offset' is negative: {offset}", path=path)
        publications = field("publications", list)
        if not all(isinstance(p, str) for p in publications):
            raise CheckpointError("field 'publications' must list strings", path=path)
        server = obj.get("server", {})
        if not isinstance(server, dict):
            raise CheckpointError(f"field 'server' is malformed: {server!r}", path=path)
        snapshot = obj.get("snapshot", {"state": "skipped"})
        if not isinstance(snapshot, dict) or snapshot.get("state") not in _SNAPSHOT_STATES:
            raise CheckpointError(f"field 'snapshot' is malformed: {snapshot!r}", path=path)
        if lsn is None and offset:
            raise CheckpointError(f"field 'offset' is {offset} but 'lsn' is null: nothing was "
                                  "ever committed to a checkpoint without an LSN", path=path)
        idle_text, idle = obj.get("idle"), None
        if idle_text is not None:
            try:
                idle = int(Lsn.parse(field("idle", str)))
            except ProtocolError:
                raise CheckpointError(f"field 'idle' is not an LSN: {idle_text!r}",
                                      path=path) from None
            if lsn is not None and idle < lsn:
                raise CheckpointError(f"field 'idle' ({idle_text}) is before 'lsn' "
                                      f"({lsn_text})", path=path)
        incremental = obj.get("incremental", {})
        if not isinstance(incremental, dict):
            raise CheckpointError(f"field 'incremental' is malformed: {incremental!r}",
                                  path=path)
        return cls(lsn, offset, field("units", int), field("changes", int), field("kind", str),
                   field("slot", str), tuple(publications), field("options", dict),
                   str(obj.get("updated", "")), server, snapshot, idle, incremental)


def output_paths(path: str | os.PathLike[str], kind: str) -> tuple[Path, Path]:
    """The output file and its checkpoint for ``--output PATH``.

    A directory (existing, or written with a trailing slash) holds ``capture.jsonl``
    or ``events.jsonl``; anything else is the output file itself. The checkpoint
    is ``<output>.checkpoint.json``.
    """
    text = os.fspath(path)
    target = Path(text)
    if target.is_dir() or text.endswith(("/", os.sep)):
        target = target / ("capture.jsonl" if kind == "capture" else "events.jsonl")
    return target, target.with_name(target.name + ".checkpoint.json")


class Output(Protocol):
    """Where the capture loop writes units: :class:`DurableOutput` or :class:`StreamOutput`."""

    @property
    def checkpoint(self) -> Checkpoint:
        """The last committed state."""
        ...

    def write(self, data: bytes) -> None:
        """Append bytes (not durable until :meth:`commit`)."""
        ...

    def commit(self, lsn: int, units: int, changes: int, *,
               snapshot: Mapping[str, Any] | None = None) -> Checkpoint:
        """Make everything written durable up to the unit ending at ``lsn`` (and record
        ``snapshot`` as the snapshot's state, when given)."""
        ...

    def mark_snapshot(self, snapshot: Mapping[str, Any], *, store: bool = True) -> None:
        """Record the snapshot's state, durably now unless ``store`` is false (then with
        the next checkpoint written)."""
        ...

    def record_idle(self, lsn: int) -> None:
        """Record ``lsn``, a position of the server past every unit committed, with nothing
        pending in between (:attr:`Checkpoint.idle`), durably."""
        ...

    def bind(self, options: Mapping[str, Any], server: Mapping[str, Any]) -> None:
        """Record the decoding options and the server once the slot was found readable."""
        ...

    def rollback(self) -> None:
        """Forget everything written since the last commit."""
        ...

    def close(self) -> None:
        """Release the output."""
        ...


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
#: What copy_file_range fails with where it cannot copy between two files.
_NO_COPY = frozenset({errno.EXDEV, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOSYS,
                      errno.EBADF, errno.ENOTSUP})


def _refuse_symlink(path: Path, what: str) -> None:
    """Refuse a path that is a symbolic link: writing through it would write elsewhere."""
    if path.is_symlink():
        raise CheckpointError(f"{what} is a symbolic link (to {os.readlink(path)!r}); refusing "
                              "to write through it: give the real path", path=str(path))


def _refuse_foreign(st: os.stat_result, what: str, path: Path) -> None:
    """Refuse a file another user owns or others may write: its contents (rows received,
    a checkpoint trusted) would be someone else's to read or change."""
    uid = os.geteuid()
    if st.st_uid != uid:
        raise CheckpointError(
            f"{what} belongs to another user (uid {st.st_uid}; this process runs as uid {uid}); "
            "refusing to use a file someone else created (in a shared directory it could be "
            "read or changed by them): remove it, or choose another path", path=str(path))
    if st.st_mode & 0o022:
        raise CheckpointError(
            f"{what} is writable by {'group and others' if st.st_mode & 0o002 else 'its group'}"
            f" (mode {st.st_mode & 0o777:04o}); refusing to use it: chmod 600 it, or choose "
            "another path", path=str(path))


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory handles
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class DurableOutput:
    """An output file plus its checkpoint; see the module docstring for the protocol.

    ``slot``, ``publications``, ``kind`` and ``options`` describe what is
    written; reopening an output with a different slot, publication list or kind
    is refused. While open, the output is locked (``flock`` on ``<output>.lock``):
    a second writer gets :class:`OutputLockedError`. The checkpoint is first
    written by :meth:`bind` (once the slot was found readable) or :meth:`commit`:
    a run that fails before leaves nothing that ties the output to its settings.
    """

    def __init__(self, path: str | os.PathLike[str], *, kind: str, slot: str,
                 publications: tuple[str, ...], options: Mapping[str, Any] | None = None
                 ) -> None:
        self.path, self.checkpoint_path = output_paths(path, kind)
        self._kind = kind
        self._slot = slot
        self._publications = tuple(publications)
        #: The decoding options recorded in the next checkpoint (set once they are known).
        self.options: dict[str, Any] = dict(options or {})
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self.server: dict[str, Any] = {}
        self._fd: int | None = None
        #: A descriptor of the output without O_APPEND (append_file), and whether to try.
        self._copy_to: int | None = None
        self._copy = True
        self._lock_fd: int | None = None
        self._created = False
        self._stored = False
        self._buffer = bytearray()
        self._incremental: dict[str, Any] | None = None
        self._checkpoint: Checkpoint | None = None
        #: Bytes cut from the output's end when it was opened (an uncommitted tail).
        self.truncated = 0

    @property
    def checkpoint(self) -> Checkpoint:
        """The last committed checkpoint (after :meth:`open`)."""
        if self._checkpoint is None:
            raise CheckpointError("the output is not open", path=str(self.path))
        return self._checkpoint

    # -- opening and recovery ---------------------------------------------------------------
    def open(self) -> Checkpoint:
        """Load the checkpoint, cut any uncommitted tail off the output, open it for appending.

        Files are created 0600 (directories 0700); an output or checkpoint that is a
        symbolic link is refused.
        """
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._check_layout()
        self._lock()
        try:
            return self._open()
        except BaseException:
            self._unlock()
            raise

    def _check_layout(self) -> None:
        """Refuse a directory of rotating capture files: a single file written into it would
        be read as one of them, and the rotating capture would refuse to run after it."""
        directory = self.path.parent
        if (directory / "_capture.checkpoint.json").exists():
            raise ConfigurationError(
                f"{directory} holds rotating capture files (_capture.checkpoint.json); a "
                "single-file output needs a path of its own: continue that directory with "
                "--rotate-every or --rotate-size, or choose another --output")

    def _lock(self) -> None:
        """Take the output's lock for the life of this object (until :meth:`close`)."""
        path = str(self.lock_path)
        _refuse_symlink(self.lock_path, "the lock file")
        writable = True
        try:
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | _NOFOLLOW, 0o600)
        except PermissionError:
            # A lock file this user may not write (left by another user): a lock needs only
            # a descriptor, so a stale one must not block. Its holder, if any, still does.
            writable = False
            try:
                fd = os.open(self.lock_path, os.O_RDONLY | _NOFOLLOW)
            except OSError as exc:
                raise CheckpointError(
                    f"cannot open the lock file: {exc.strerror} (it belongs to uid "
                    f"{_owner(self.lock_path)}): remove it, or choose another output",
                    path=path) from None
        except OSError as exc:
            raise CheckpointError(f"cannot open the lock file: {exc.strerror}", path=path) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "?"
            finally:
                os.close(fd)
            raise OutputLockedError(
                f"another capture (PID {holder}) is writing to {self.path}; refusing a second "
                "writer (two writers would lose and repeat changes)", path=str(self.path),
                holder=holder) from None
        except OSError as exc:
            os.close(fd)
            raise CheckpointError(f"cannot lock the output: {exc.strerror}", path=path) from None
        if writable:
            with contextlib.suppress(OSError):  # who holds it, for the next one's message
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        self._lock_fd = fd

    def _unlock(self) -> None:
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            os.close(fd)  # releases the flock (the file stays: unlinking it would race)

    def _open(self) -> Checkpoint:
        _refuse_symlink(self.checkpoint_path, "the checkpoint")
        checkpoint = self._load()
        self._stored = checkpoint is not None
        out = str(self.path)
        _refuse_symlink(self.path, "the output")
        self._created = not self.path.exists()
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | _NOFOLLOW, 0o600)
        except OSError as exc:
            raise CheckpointError(f"cannot open the output: {exc.strerror}", path=out) from None
        try:
            st = os.fstat(fd)
            _refuse_foreign(st, "the output", self.path)
            size = st.st_size
            if checkpoint is None:
                if size:
                    raise CheckpointError(
                        f"the output holds {size} bytes but has no checkpoint "
                        f"({self.checkpoint_path.name}); refusing to append to a file of unknown "
                        "origin: choose a new output", path=out)
                checkpoint = Checkpoint(None, 0, 0, 0, self._kind, self._slot,
                                        self._publications, self.options, _now(),
                                        snapshot={"state": "pending"})
            elif size < checkpoint.offset:
                raise CheckpointError(
                    f"the output has {size} bytes but its checkpoint says {checkpoint.offset} "
                    "were committed: it was truncated or replaced after the checkpoint",
                    path=out)
            elif size > checkpoint.offset:
                _check_tail(self.path, checkpoint, size)
                os.ftruncate(fd, checkpoint.offset)
                os.fsync(fd)
                self.truncated = size - checkpoint.offset
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self._checkpoint = checkpoint
        return checkpoint

    def _load(self) -> Checkpoint | None:
        path = str(self.checkpoint_path)
        try:
            fd = os.open(self.checkpoint_path, os.O_RDONLY | _NOFOLLOW)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise CheckpointError(f"cannot read the checkpoint: {exc.strerror or exc}",
                                  path=path) from None
        try:
            with os.fdopen(fd, "rb") as fh:
                _refuse_foreign(os.fstat(fh.fileno()), "the checkpoint", self.checkpoint_path)
                text = fh.read().decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CheckpointError(f"cannot read the checkpoint: {exc}", path=path) from None
        try:
            obj = json.loads(text)
        except ValueError as exc:
            raise CheckpointError(f"the checkpoint is not valid JSON: {exc}", path=path) from None
        except RecursionError:
            raise CheckpointError("the checkpoint is not valid JSON: nested too deeply",
                                  path=path) from None
        checkpoint = Checkpoint.from_json(obj, path=path)
        if checkpoint.kind != self._kind:
            raise ConfigurationError(
                f"{self.path} holds {checkpoint.kind} output; it cannot be continued as "
                f"{self._kind} output (--decode)")
        if checkpoint.slot != self._slot:
            raise ConfigurationError(
                f"--slot {self._slot!r}: {self.path} was captured from slot "
                f"{checkpoint.slot!r}; continuing it from another slot would lose or repeat "
                "changes")
        if sorted(set(checkpoint.publications)) != sorted(set(self._publications)):
            raise ConfigurationError(
                f"--publication {', '.join(self._publications)}: {self.path} was captured with "
                f"publication(s) {', '.join(checkpoint.publications)}; continuing it with "
                "another list would change which changes it holds: choose a new output")
        return checkpoint

    def bind(self, options: Mapping[str, Any], server: Mapping[str, Any]) -> None:
        """Record the options and the server, and write the checkpoint if it is not on disk
        yet: from here the output belongs to this slot, publication list and server."""
        self.options = dict(options)
        self.server = dict(server)
        if not self._stored:
            self._store(attrs.evolve(self.checkpoint, options=self.options, server=self.server,
                                     updated=_now()))

    def _store(self, checkpoint: Checkpoint) -> None:
        tmp = self.checkpoint_path.with_name(self.checkpoint_path.name + ".tmp")
        data = (json.dumps(checkpoint.to_json(), indent=1) + "\n").encode("utf-8")
        try:
            # A temporary left by a crash (or planted: a symbolic link) is removed, never
            # followed: unlink() drops the link itself, and O_EXCL | O_NOFOLLOW refuse
            # anything that appears in between.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
            try:
                _write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.checkpoint_path)
            # From here the file on disk is this checkpoint: keep memory in step before
            # anything else can raise (a second Ctrl-C, a failing directory fsync), or a
            # rollback would cut a committed unit that the checkpoint counts.
            self._checkpoint = checkpoint
            self._stored = True
            _fsync_dir(self.checkpoint_path.parent)
        except OSError as exc:
            raise CheckpointError(f"cannot write the checkpoint: {exc.strerror or exc}",
                                  path=str(self.checkpoint_path)) from None

    def last_line(self) -> bytes | None:
        """The last committed line of the output (without its newline), ``None`` when the
        output holds none: what the checkpoint's last unit ended with. Incremental
        snapshot chunk lines written after that unit are passed over."""
        end = self.checkpoint.offset
        while True:
            line = _last_line(self.path, end)
            if line is None or not (line.startswith(b"{") and _CHUNK_MARK in line):
                return line
            end -= len(line) + 1

    # -- writing ---------------------------------------------------------------------------
    def write(self, data: bytes) -> None:
        """Append bytes; they reach the disk at :meth:`commit` (or in 1 MiB chunks before)."""
        self._buffer += data
        if len(self._buffer) >= _FLUSH_BYTES:
            self._flush()

    def _flush(self) -> None:
        if self._fd is None:
            raise CheckpointError("the output is not open", path=str(self.path))
        if self._buffer:
            try:
                _write_all(self._fd, self._buffer)
            except OSError as exc:
                raise CheckpointError(f"cannot write the output: {exc.strerror or exc}",
                                      path=str(self.path)) from None
            self._buffer = bytearray()

    def mark_snapshot(self, snapshot: Mapping[str, Any], *, store: bool = True) -> None:
        """Store the checkpoint with the snapshot's new state (nothing else changes):
        written before the slot is created for a snapshot, so that a crash in between
        leaves an output that says a snapshot was under way. ``store=False`` keeps it
        for the next checkpoint written (:meth:`bind`, :meth:`commit`)."""
        checkpoint = attrs.evolve(self.checkpoint, snapshot=dict(snapshot), updated=_now())
        if store:
            self._store(attrs.evolve(checkpoint, options=self.options or checkpoint.options,
                                     server=self.server or checkpoint.server))
        else:
            self._checkpoint = checkpoint

    def stage_incremental(self, state: Mapping[str, Any]) -> None:
        """The incremental snapshot's progress, to record with the next :meth:`commit`
        (dropped by :meth:`rollback`)."""
        self._incremental = dict(state)

    def commit(self, lsn: int, units: int, changes: int, *,
               snapshot: Mapping[str, Any] | None = None) -> Checkpoint:
        """``fsync`` the output, then record ``lsn`` and the output's size in the checkpoint.

        ``units`` and ``changes`` are added to the checkpoint's running totals;
        ``snapshot`` replaces the snapshot's state in the same atomic write, and the
        progress given to :meth:`stage_incremental` the incremental snapshot's.
        """
        self._flush()
        assert self._fd is not None
        previous = self.checkpoint
        try:
            os.fsync(self._fd)
            offset = os.fstat(self._fd).st_size
        except OSError as exc:
            raise CheckpointError(f"cannot fsync the output: {exc.strerror or exc}",
                                  path=str(self.path)) from None
        checkpoint = attrs.evolve(previous, lsn=lsn, offset=offset,
                                  units=previous.units + units,
                                  changes=previous.changes + changes, updated=_now(),
                                  options=self.options or previous.options,
                                  server=self.server or previous.server,
                                  snapshot=previous.snapshot if snapshot is None
                                  else dict(snapshot),
                                  idle=previous.idle if previous.idle is not None
                                  and previous.idle > lsn else None,
                                  incremental=previous.incremental
                                  if self._incremental is None else self._incremental)
        self._store(checkpoint)
        self._checkpoint = checkpoint
        self._incremental = None
        return checkpoint

    def record_idle(self, lsn: int) -> None:
        """Record the server's idle position ``lsn`` in the checkpoint (atomically, with
        nothing uncommitted written: call it after :meth:`commit`)."""
        checkpoint = attrs.evolve(self.checkpoint, idle=lsn, updated=_now())
        self._store(checkpoint)
        self._checkpoint = checkpoint

    def rollback(self) -> None:
        """Drop what was written since the last commit (buffer and file tail)."""
        self._buffer = bytearray()
        self._incremental = None
        if self._fd is not None and self._checkpoint is not None:
            try:
                os.ftruncate(self._fd, self._checkpoint.offset)
            except OSError as exc:
                raise CheckpointError(f"cannot truncate the output: {exc.strerror or exc}",
                                      path=str(self.path)) from None

    def close(self) -> None:
        """Close the output, dropping anything not committed."""
        if self._copy_to is not None:
            os.close(self._copy_to)
            self._copy_to = None
        if self._fd is not None:
            with contextlib.suppress(CheckpointError):
                self.rollback()
            os.close(self._fd)
            self._fd = None
            if self._created and not self._stored:  # a first run that never got going
                with contextlib.suppress(OSError):
                    os.unlink(self.path)
        self._unlock()

    def _copy_fd(self) -> int | None:
        """A descriptor of the output without ``O_APPEND`` for ``copy_file_range`` (opened
        once; ``None`` where the kernel cannot copy)."""
        if not self._copy or not hasattr(os, "copy_file_range"):
            return None
        if self._copy_to is None:
            assert self._fd is not None
            try:
                fd = os.open(self.path, os.O_WRONLY | _NOFOLLOW | os.O_CLOEXEC)
            except OSError:
                self._copy = False
                return None
            mine, other = os.fstat(self._fd), os.fstat(fd)
            if (mine.st_dev, mine.st_ino) != (other.st_dev, other.st_ino):  # (replaced)
                os.close(fd)
                self._copy = False
                return None
            self._copy_to = fd
        return self._copy_to

    def append_file(self, path: str | os.PathLike[str], size: int) -> None:
        """Append the ``size`` bytes of the file at ``path`` (records decoded elsewhere:
        ``capture --decode``'s decoding processes), then remove it; not durable until
        :meth:`commit`. The kernel copies them (``copy_file_range``) where it can."""
        self._flush()
        assert self._fd is not None
        try:
            src = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            raise CheckpointError(f"cannot read decoded records: {exc.strerror or exc}",
                                  path=str(path)) from None
        try:
            os.unlink(path)
            done = 0
            # copy_file_range refuses a destination opened O_APPEND: a second descriptor
            # of the output, written at explicit offsets from its end
            copy_fd = self._copy_fd()
            end = os.fstat(self._fd).st_size
            while done < size:
                copied = 0
                if copy_fd is not None:
                    try:
                        copied = os.copy_file_range(src, copy_fd, size - done, done,
                                                    end + done)
                    except OSError as exc:
                        if exc.errno not in _NO_COPY:
                            raise
                    if not copied:  # not between these files: read and write, for good
                        self._copy = False
                        copy_fd = None
                if not copied:
                    block = os.pread(src, min(size - done, 1 << 20), done)
                    if not block:
                        raise OSError(errno.EIO, f"{size - done} bytes missing")
                    _write_all(self._fd, block)
                    copied = len(block)
                done += copied
        except OSError as exc:
            raise CheckpointError(f"cannot write the output: {exc.strerror or exc}",
                                  path=str(self.path)) from None
        finally:
            os.close(src)


class StreamOutput:
    """Units written to a stream (standard output) as they complete; nothing is durable.

    The position lives in memory only: a restarted process starts from the
    slot's position again.
    """

    def __init__(self, stream: IO[bytes] | None = None, *, kind: str = "events",
                 slot: str = "", publications: tuple[str, ...] = ()) -> None:
        self._stream = stream if stream is not None else sys.stdout.buffer
        self._buffer = bytearray()
        self._incremental: dict[str, Any] | None = None
        self._checkpoint = Checkpoint(None, 0, 0, 0, kind, slot, publications, {}, _now(),
                                      snapshot={"state": "pending"})

    @property
    def checkpoint(self) -> Checkpoint:
        """The in-memory position of the last unit flushed."""
        return self._checkpoint

    def write(self, data: bytes) -> None:
        """Buffer bytes until the unit is committed."""
        self._buffer += data

    def bind(self, options: Mapping[str, Any], server: Mapping[str, Any]) -> None:
        """Nothing to record."""

    def mark_snapshot(self, snapshot: Mapping[str, Any], *, store: bool = True) -> None:
        """Keep the snapshot's state in memory."""
        self._checkpoint = attrs.evolve(self._checkpoint, snapshot=dict(snapshot))

    def stage_incremental(self, state: Mapping[str, Any]) -> None:
        """The incremental snapshot's progress, kept with the next :meth:`commit`."""
        self._incremental = dict(state)

    def commit(self, lsn: int, units: int, changes: int, *,
               snapshot: Mapping[str, Any] | None = None) -> Checkpoint:
        """Flush the buffered bytes to the stream."""
        self._stream.write(self._buffer)
        self._stream.flush()
        previous = self._checkpoint
        self._checkpoint = attrs.evolve(previous, lsn=lsn,
                                        offset=previous.offset + len(self._buffer),
                                        units=previous.units + units,
                                        changes=previous.changes + changes,
                                        snapshot=previous.snapshot if snapshot is None
                                        else dict(snapshot),
                                        incremental=previous.incremental
                                        if self._incremental is None else self._incremental)
        self._buffer = bytearray()
        self._incremental = None
        return self._checkpoint

    def record_idle(self, lsn: int) -> None:
        """Remember the server's idle position (nothing is written)."""
        self._checkpoint = attrs.evolve(self._checkpoint, idle=lsn)

    def rollback(self) -> None:
        """Drop the bytes not flushed yet."""
        self._buffer = bytearray()
        self._incremental = None

    def close(self) -> None:
        """Drop the bytes not flushed yet (the stream stays open)."""
        self._buffer = bytearray()


def _owner(path: Path) -> str:
    try:
        return str(path.lstat().st_uid)
    except OSError:
        return "?"


def _unit_end(line: bytes) -> int | None:
    """The end LSN of the unit a capture line closes (a commit, or a non-transactional
    logical message), else ``None``."""
    from pgcdc_events.protocol.capture import CaptureRow  # noqa: PLC0415 - recovery only
    from pgcdc_events.protocol.decoder import parse_message  # noqa: PLC0415
    from pgcdc_events.protocol.messages import (  # noqa: PLC0415
        Commit,
        CommitPrepared,
        LogicalMessage,
        StreamCommit,
    )

    try:
        row = CaptureRow.from_line(line)
        message = parse_message(row.data)
    except PgCdcError:
        return None
    if row.snapshot:  # a snapshot block's Commit (a blocking snapshot's, after a unit)
        return None
    if isinstance(message, (Commit, StreamCommit, CommitPrepared)):
        return int(message.end_lsn)
    if isinstance(message, LogicalMessage) and not message.transactional:
        return int(row.lsn)
    return None


#: The hex of the message types that close a unit: Commit, Stream Commit, Commit Prepared
#: and Message (``C``, ``c``, ``K``, ``M``).
_CLOSING = (b'"data": "43', b'"data": "63', b'"data": "4b', b'"data": "4d')


def _check_tail(path: Path, checkpoint: Checkpoint, size: int) -> None:
    """Refuse to cut the bytes past the checkpoint's ``offset`` unless they are an uncommitted
    tail: the offset must end a line, and (capture output) no unit in the tail may end at or
    before the checkpoint's LSN (such a unit was committed: the offset was made smaller)."""
    out = str(path)
    offset, lsn = checkpoint.offset, checkpoint.lsn
    try:
        with open(path, "rb") as fh:
            if offset:
                fh.seek(offset - 1)
                if fh.read(1) != b"\n":
                    raise CheckpointError(
                        f"the checkpoint's offset {offset} is not at the end of a line of the "
                        f"output ({size} bytes): the checkpoint was edited or belongs to another "
                        "output; refusing to cut the output there", path=out)
            if checkpoint.kind != "capture" or lsn is None:
                return
            fh.seek(offset)
            position = offset
            for line in fh:
                end = _unit_end(line) if line.startswith(b"{") and any(
                    mark in line[:80].lower() for mark in _CLOSING) else None
                if end is not None and end <= lsn:
                    raise CheckpointError(
                        f"the output holds a transaction ending at {Lsn(end)} at byte "
                        f"{position}, past the checkpoint's offset {offset}, although the "
                        f"checkpoint's LSN {Lsn(lsn)} says it was committed: the offset is "
                        "wrong (an edited checkpoint?); refusing to cut committed changes: "
                        "restore the checkpoint, or start a new output", path=out)
                position += len(line)
    except OSError as exc:
        raise CheckpointError(f"cannot read the output: {exc.strerror or exc}",
                              path=out) from None


def _last_line(path: Path, end: int, *, chunk: int = 1 << 16) -> bytes | None:
    """The last line of ``path`` ending at byte ``end`` (newline excluded), read backwards in
    chunks; ``None`` when there is none (or the file cannot be read)."""
    if end <= 0:
        return None
    try:
        with open(path, "rb") as fh:
            tail = b""
            position = end
            while position > 0:
                step = min(chunk, position)
                position -= step
                fh.seek(position)
                tail = fh.read(step) + tail
                cut = tail.rfind(b"\n", 0, len(tail) - 1)
                if cut >= 0:
                    return tail[cut + 1:].rstrip(b"\n")
            return tail.rstrip(b"\n") or None
    except OSError:
        return None


def _write_all(fd: int, data: bytes | bytearray) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
