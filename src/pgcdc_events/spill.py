"""Bounded memory for buffered entries: a byte budget shared by lists that spill to disk.

A :class:`MemoryBudget` is a byte limit shared by every :class:`SpillList` created
with it. Beyond the limit, the list holding the most bytes writes its entries to an
anonymous temporary file (created 0600 in ``spill_dir``, or the system's temporary
directory) and reads them back, in order, when it is iterated. Entries are sized,
written and read back by an :class:`EntryCodec`; :class:`AttrsEntryCodec` serializes
pgoutput messages as their own bytes, plain scalars inline, and anything else as a
reference to an object kept in memory (never ``pickle``).

The event decoder buffers open transactions this way
(:class:`pgcdc_events.events.transactions.ChangeBuffer`), and the capture adapter
its pending units; anything else that must hold an unbounded stream can too::

    from pgcdc_events.spill import AttrsEntryCodec, MemoryBudget, SpillList

    budget = MemoryBudget(1 << 20)                    # 1 MiB across all lists
    rows: SpillList[bytes] = SpillList(AttrsEntryCodec(), budget)
    for i in range(100_000):
        rows.append(None, b"row %d" % i)              # tag None: never discarded
    assert rows.spilled and len(rows) == 100_000
    assert next(iter(rows)) == b"row 0"
    rows.close()                                      # deletes the spill file
"""

from __future__ import annotations

import os
import struct
import tempfile
import typing
import weakref
from collections.abc import Iterator
from typing import IO, Any, Generic, Protocol, TypeVar

import attrs

from pgcdc_events.errors import PgCdcError
from pgcdc_events.protocol.decoder import parse_message
from pgcdc_events.protocol.encoder import encode_message
from pgcdc_events.protocol.messages import (
    Delete,
    Insert,
    LogicalMessage,
    Message,
    Relation,
    Truncate,
    TupleData,
    Update,
)

__all__ = [
    "AttrsEntryCodec",
    "EntryCodec",
    "MemoryBudget",
    "SpillError",
    "SpillList",
    "message_size",
]

T = TypeVar("T")


class SpillError(PgCdcError, OSError):
    """A spill file could not be written or read back (disk full, I/O error)."""



# ---------------------------------------------------------------- memory accounting


class MemoryBudget:
    """A byte limit shared by every :class:`SpillList` created with it.

    Sizes are estimates of the Python objects held (see :meth:`EntryCodec.size`).
    When the running total passes ``limit``, the exact total is recomputed from
    the live buffers (dropped buffers no longer count) and, while it is still
    over, the buffer holding the most bytes spills everything it holds in memory.
    ``spill_dir`` is where the anonymous spill files go (default: the system's
    temporary directory).
    """

    def __init__(self, limit: int, *, spill_dir: str | os.PathLike[str] | None = None) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ValueError(f"memory limit must be a non-negative number of bytes, got {limit!r}")
        self.limit = limit
        self.spill_dir = None if spill_dir is None else os.fspath(spill_dir)
        self.used = 0
        #: High-water mark of the estimated bytes held in memory.
        self.peak = 0
        #: How many times a buffer spilled, and the bytes written to spill files in total.
        self.spills = 0
        self.spilled_bytes = 0
        self._buffers: weakref.WeakSet[SpillList[Any]] = weakref.WeakSet()

    def _register(self, buffer: SpillList[Any]) -> None:
        self._buffers.add(buffer)

    def _charge(self, size: int) -> None:
        self.used += size
        self.peak = max(self.peak, self.used)
        if self.used > self.limit:
            self._rebalance()

    def _rebalance(self) -> None:
        buffers = list(self._buffers)
        self.used = sum(b.memory_bytes for b in buffers)
        while self.used > self.limit and buffers:
            largest = max(buffers, key=lambda b: b.memory_bytes)
            if largest.memory_bytes == 0:
                break
            freed = largest.spill()
            self.used -= freed
            buffers.remove(largest)


# ---------------------------------------------------------------- codecs


class EntryCodec(Protocol[T]):
    """How a :class:`SpillList` sizes, writes and reads back its entries."""

    def size(self, entry: T) -> int:
        """Estimated bytes the entry occupies in memory."""
        ...

    def encode(self, entry: T) -> bytes:
        """The entry as bytes for the spill file."""
        ...

    def decode(self, data: bytes) -> T:
        """The entry back from :meth:`encode`'s bytes."""
        ...


_OBJECT_OVERHEAD = 64  # an attrs instance with __slots__, roughly
_BYTES_OVERHEAD = 33  # sys.getsizeof(b"")


def message_size(message: Message) -> int:
    """Estimated bytes of a parsed pgoutput message object (its tuples dominate)."""
    size = _OBJECT_OVERHEAD
    kind = type(message)
    if kind is Insert:
        tuples: tuple[TupleData | None, ...] = (message.new,)  # type: ignore[union-attr]
    elif kind is Update or kind is Delete:
        tuples = (message.old, getattr(message, "new", None))  # type: ignore[union-attr]
    else:
        tuples = ()
        if isinstance(message, LogicalMessage):
            size += _BYTES_OVERHEAD + len(message.content) + len(message.prefix)
        elif isinstance(message, Truncate):
            size += 8 * len(message.relation_ids)
        elif isinstance(message, Relation):
            size += 120 * len(message.columns)
    for tup in tuples:
        if tup is not None:
            values = tup.values
            present = list(filter(None, values))
            size += (_OBJECT_OVERHEAD + 9 * len(values) + _BYTES_OVERHEAD
                     + _BYTES_OVERHEAD * len(present) + sum(map(len, present)))
    return size


#: The pgoutput message classes (``Message`` is their union).
_MESSAGE_TYPES: tuple[type, ...] = typing.get_args(Message)


_MESSAGE_TYPE_SET: frozenset[type] = frozenset(_MESSAGE_TYPES)


def _is_message(value: object) -> typing.TypeGuard[Message]:
    return type(value) in _MESSAGE_TYPE_SET


_LEN = struct.Struct(">I")
_HDR = struct.Struct(">B")


class AttrsEntryCodec:
    """Spills attrs instances whose fields are scalars, pgoutput messages or shared objects.

    A field holding a pgoutput message is written as the message's bytes; ``None``,
    ``bool``, ``int``, ``str`` and ``bytes`` inline; tuples element by element; any
    other object (a table schema, the entry's class) as the index of an object this
    codec keeps in memory. Nothing is ever evaluated or unpickled on the way back.
    """

    def __init__(self) -> None:
        self._objects: list[Any] = []
        self._index: dict[int, int] = {}
        self._fields: dict[type, tuple[str, ...] | None] = {}

    def _names(self, cls: type) -> tuple[str, ...] | None:
        """The field names of an attrs class (``None`` for anything else), cached."""
        try:
            return self._fields[cls]
        except KeyError:
            names = tuple(f.name for f in attrs.fields(cls)) if attrs.has(cls) else None
            self._fields[cls] = names
            return names

    def size(self, entry: Any) -> int:
        """Estimated bytes of the entry and the messages it holds."""
        size = _OBJECT_OVERHEAD
        for name in self._names(type(entry)) or ():
            value = getattr(entry, name)
            if type(value) in _MESSAGE_TYPE_SET:
                size += message_size(value)
            elif isinstance(value, (bytes, str)):
                size += _BYTES_OVERHEAD + len(value)
            elif isinstance(value, tuple):
                size += 40 + 8 * len(value)
            else:
                size += 8
        return size

    def _ref(self, obj: Any) -> int:
        key = id(obj)
        index = self._index.get(key)
        if index is None:
            index = len(self._objects)
            self._objects.append(obj)  # keeps obj alive, so its id stays unique
            self._index[key] = index
        return index

    def encode(self, entry: Any) -> bytes:
        """The entry as tagged fields (an entry that is not an attrs instance: a reference)."""
        out = bytearray()
        names = self._names(type(entry))
        if names is not None:
            out += b"A" + _LEN.pack(self._ref(type(entry))) + _LEN.pack(len(names))
            for name in names:
                self._value(out, getattr(entry, name))
        else:
            self._value(out, entry)
        return bytes(out)

    def _value(self, out: bytearray, value: Any) -> None:
        if value is None:
            out += b"N"
        elif value is True or value is False:
            out += b"1" if value else b"0"
        elif isinstance(value, int) and type(value) is int:
            raw = value.to_bytes((value.bit_length() + 8) // 8 or 1, "big", signed=True)
            out += b"I" + _HDR.pack(len(raw)) + raw
        elif _is_message(value):
            raw = encode_message(value)
            # A set xid on a DML-like message is the in-stream prefix; other types ignore it.
            in_stream = getattr(value, "xid", None) is not None
            out += (b"m" if in_stream else b"M") + _LEN.pack(len(raw)) + raw
        elif type(value) is bytes:
            out += b"B" + _LEN.pack(len(value)) + value
        elif type(value) is str:
            raw = value.encode("utf-8", "surrogatepass")
            out += b"S" + _LEN.pack(len(raw)) + raw
        elif type(value) is tuple:
            out += b"T" + _LEN.pack(len(value))
            for item in value:
                self._value(out, item)
        else:
            out += b"R" + _LEN.pack(self._ref(value))

    def decode(self, data: bytes) -> Any:
        """The entry back from :meth:`encode`'s bytes."""
        if data[:1] == b"A":
            cls = self._objects[_LEN.unpack_from(data, 1)[0]]
            (count,) = _LEN.unpack_from(data, 5)
            pos = 9
            values = []
            for _ in range(count):
                value, pos = self._read(data, pos)
                values.append(value)
            return cls(*values)
        return self._read(data, 0)[0]

    def _read(self, data: bytes, pos: int) -> tuple[Any, int]:
        kind = data[pos:pos + 1]
        pos += 1
        if kind == b"N":
            return None, pos
        if kind in (b"0", b"1"):
            return kind == b"1", pos
        if kind == b"I":
            size = data[pos]
            return int.from_bytes(data[pos + 1:pos + 1 + size], "big", signed=True), pos + 1 + size
        (size,) = _LEN.unpack_from(data, pos)
        pos += 4
        if kind in (b"M", b"m"):
            return parse_message(data[pos:pos + size], in_stream=kind == b"m"), pos + size
        if kind == b"B":
            return data[pos:pos + size], pos + size
        if kind == b"S":
            return data[pos:pos + size].decode("utf-8", "surrogatepass"), pos + size
        if kind == b"T":
            items = []
            for _ in range(size):
                item, pos = self._read(data, pos)
                items.append(item)
            return tuple(items), pos
        if kind == b"R":
            return self._objects[size], pos
        raise SpillError(f"spill file: unknown field tag {kind!r} at byte {pos - 5}")


# ---------------------------------------------------------------- the spilling list

_RECORD = struct.Struct(">IBq")  # payload length, has-tag flag, tag
_SLOT_OVERHEAD = 64  # the (tag, entry) tuple and its list slot
_READ_CHUNK = 1 << 20


class SpillList(Generic[T]):
    """Entries tagged by (sub)transaction id, in arrival order; spills to disk under a budget.

    Without a budget everything stays in memory. With one, :meth:`spill` (called by
    the budget) moves the entries held in memory to the end of an anonymous
    temporary file; iteration reads the file back, then the entries still in
    memory, so the order is always the order of :meth:`append`. :meth:`discard`
    drops a subtransaction's entries from memory at once and from the file by
    skipping them on reading and compacting the file when they make up half of it.
    """

    def __init__(self, codec: EntryCodec[T], budget: MemoryBudget | None = None) -> None:
        self._codec = codec
        self._budget = budget
        self._memory: list[tuple[int | None, T]] = []
        self.memory_bytes = 0
        self._file: IO[bytes] | None = None
        self._file_size = 0
        self._file_count = 0
        # Per tag: records and bytes in the file; tags discarded but still in the file.
        self._file_tags: dict[int | None, list[int]] = {}
        self._dead: set[int] = set()
        self._dead_bytes = 0
        self._registered = False

    # -- writing ---------------------------------------------------------------------
    def append(self, tag: int | None, entry: T) -> None:
        """Add one entry of (sub)transaction ``tag``."""
        if tag is not None and tag in self._dead:
            self._compact()  # a tag reused after its abort: forget the old entries for good
        self._memory.append((tag, entry))
        budget = self._budget
        if budget is not None:
            if not self._registered:
                budget._register(self)
                self._registered = True
            size = self._codec.size(entry) + _SLOT_OVERHEAD
            self.memory_bytes += size
            budget._charge(size)

    def spill(self) -> int:
        """Move every entry held in memory to the spill file; returns the bytes freed."""
        if not self._memory:
            return 0
        if self._file is None:
            self._file = self._open()
        encode = self._codec.encode
        chunk = bytearray()
        tags = self._file_tags
        written = 0
        for tag, entry in self._memory:
            payload = encode(entry)
            size = _RECORD.size + len(payload)
            chunk += _RECORD.pack(len(payload), tag is not None, tag or 0)
            chunk += payload
            stats = tags.get(tag)
            if stats is None:
                tags[tag] = [1, size]
            else:
                stats[0] += 1
                stats[1] += size
            written += size
            if len(chunk) >= _READ_CHUNK:
                self._write(chunk)
                chunk = bytearray()
        if chunk:
            self._write(chunk)
        self._file_count += len(self._memory)
        self._file_size += written
        freed = self.memory_bytes
        self._memory = []
        self.memory_bytes = 0
        if self._budget is not None:
            self._budget.spills += 1
            self._budget.spilled_bytes += written
        return freed

    def _open(self) -> IO[bytes]:
        directory = self._budget.spill_dir if self._budget is not None else None
        try:
            return tempfile.TemporaryFile(prefix="pgcdc-spill-", dir=directory)
        except OSError as exc:
            raise SpillError(f"cannot create a spill file in {directory or 'the temp dir'}: "
                             f"{exc}") from exc

    def _write(self, data: bytes | bytearray) -> None:
        assert self._file is not None
        try:
            self._file.write(data)
        except OSError as exc:
            raise SpillError(f"cannot write the spill file: {exc}") from exc

    # -- dropping ---------------------------------------------------------------------
    def discard(self, tag: int) -> int:
        """Drop every entry of an aborted subtransaction; returns how many were dropped."""
        dropped = 0
        if any(t == tag for t, _ in self._memory):
            kept = [(t, e) for t, e in self._memory if t != tag]
            size = self._codec.size
            freed = sum(size(e) + _SLOT_OVERHEAD for t, e in self._memory
                        if t == tag) if self._budget else 0
            dropped = len(self._memory) - len(kept)
            self._memory = kept
            self.memory_bytes -= freed
            if self._budget is not None:
                self._budget.used -= freed
        stats = self._file_tags.get(tag)
        if stats is not None and tag not in self._dead:
            self._dead.add(tag)
            self._dead_bytes += stats[1]
            dropped += stats[0]
            if self._dead_bytes * 2 >= self._file_size:
                self._compact()
        return dropped

    def _compact(self) -> None:
        """Rewrite the spill file without the entries of discarded tags."""
        if self._file is None or not self._dead:
            self._dead.clear()
            return
        old, dead = self._file, self._dead
        self._file = None
        self._file_size = self._file_count = self._dead_bytes = 0
        self._dead = set()
        tags = {t: s for t, s in self._file_tags.items() if t not in dead}
        self._file_tags = {}
        if tags:
            self._file = self._open()
            for tag, payload in self._records(old, dead):
                size = _RECORD.size + len(payload)
                self._write(_RECORD.pack(len(payload), tag is not None, tag or 0) + payload)
                self._file_size += size
                self._file_count += 1
            self._file_tags = tags
        old.close()

    def close(self) -> None:
        """Drop everything and delete the spill file."""
        if self._budget is not None:
            self._budget.used -= self.memory_bytes
        self._memory = []
        self.memory_bytes = 0
        if self._file is not None:
            self._file.close()
            self._file = None
        self._file_tags = {}
        self._file_size = self._file_count = self._dead_bytes = 0
        self._dead = set()

    # -- reading ---------------------------------------------------------------------
    def _records(self, fh: IO[bytes], dead: set[int]) -> Iterator[tuple[int | None, bytes]]:
        """The ``(tag, payload)`` records of a spill file, skipping dead tags.

        Each call reads with its own offset (``os.pread``), so iterations never
        disturb one another or the writer.
        """
        try:
            fh.flush()
        except OSError as exc:
            raise SpillError(f"cannot write the spill file: {exc}") from exc
        fd = fh.fileno()
        offset = 0
        buf = b""
        pos = 0
        while True:
            if len(buf) - pos < _RECORD.size:
                more = self._pread(fd, offset)
                if not more:
                    if len(buf) != pos:
                        raise SpillError("spill file: truncated record header")
                    return
                buf, pos = buf[pos:] + more, 0
                offset += len(more)
                continue
            length, has_tag, tag = _RECORD.unpack_from(buf, pos)
            end = pos + _RECORD.size + length
            while end > len(buf):
                more = self._pread(fd, offset, max(_READ_CHUNK, end - len(buf)))
                if not more:
                    raise SpillError("spill file: truncated record")
                buf, end, pos = buf[pos:] + more, end - pos, 0
                offset += len(more)
            tag_value = tag if has_tag else None
            if tag_value is None or tag_value not in dead:
                yield tag_value, buf[pos + _RECORD.size:end]
            pos = end

    @staticmethod
    def _pread(fd: int, offset: int, size: int = _READ_CHUNK) -> bytes:
        try:
            return os.pread(fd, size, offset)
        except OSError as exc:
            raise SpillError(f"cannot read the spill file back: {exc}") from exc

    def __iter__(self) -> Iterator[T]:
        memory = list(self._memory)  # a snapshot: appends during iteration are not seen
        if self._file is not None:
            decode = self._codec.decode
            for _, payload in self._records(self._file, set(self._dead)):
                yield decode(payload)
        for _, entry in memory:
            yield entry

    def __len__(self) -> int:
        dead = sum(self._file_tags[t][0] for t in self._dead if t in self._file_tags)
        return self._file_count - dead + len(self._memory)

    @property
    def spilled(self) -> bool:
        """Whether any entry currently lives in the spill file."""
        return self._file is not None and self._file_count > 0

    @property
    def file_bytes(self) -> int:
        """Bytes in the spill file (including discarded entries not yet compacted away)."""
        return self._file_size

    def __del__(self) -> None:
        if self._file is not None:
            self._file.close()
