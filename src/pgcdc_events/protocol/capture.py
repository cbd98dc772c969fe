"""The capture interchange format: JSON Lines of ``{"lsn", "xid", "data"}``.

One pgoutput message a line, exactly what
``SELECT lsn, xid, encode(data, 'hex') FROM pg_logical_slot_peek_binary_changes(...)``
returns: ``lsn`` in PostgreSQL's ``X/Y`` text form, ``xid`` an integer, ``data``
the message bytes in hex. The CLI, the tests and the Spark layer all read it.

Rows of an initial snapshot carry a fourth key, ``"snapshot": true``: the snapshot
is a block of pgoutput messages built from the rows the tables held (a Begin, the
Type and Relation messages of each table, one Insert a row with the values' text
output, a Commit), all at the LSN the snapshot is consistent with; decoders turn its
Inserts into read (``op: r``) events. A line without the key is a streamed message,
so captures written before snapshots existed read as before.

A capture that ran an incremental snapshot also holds *chunk lines*: one line for each
chunk the capture read from a table while it streamed, with the rows it read, at the
point of the stream where it read them (after the unit that made it read the chunk,
before the chunk's watermarks come back). Its ``data`` is not hex but a sentence, and its
rows are under the key ``"chunk"``::

    {"lsn": "0/16B3748", "xid": null, "data": "not pgoutput: ...", "chunk": {...}}

so a reader that predates chunk lines refuses the line, quoting that sentence, rather
than misread it. :func:`read_chunk_line` reads one (:class:`ChunkLine`);
:meth:`CaptureRow.from_line` refuses it with a :class:`CaptureError` naming the line.

The rows of an initial snapshot are written as *COPY block lines* (a capture written by
0.1.0 holds one Insert line a row, and reads as before): one line holds a block
of whole rows of one table, exactly as ``COPY (SELECT ...) TO STDOUT`` sent them (text
format, each row ending with a newline), in hex, with what turns them back into the
Insert messages of the old lines::

    {"lsn": "0/16B3748", "xid": 742, "data": "not pgoutput: ...", "relation": 16385,
     "columns": 3, "rows": 812, "copy": "310961...0a", "snapshot": true}

``relation`` is the table's relation id (its Relation message comes earlier in the
block), ``columns`` its column count, ``rows`` the number of rows (newlines) in ``copy``.
A block holds about :data:`COPY_BLOCK_SIZE` bytes of COPY text (more only for a single
row that is longer), so a reader streams the capture with bounded memory. Its ``data``
is a sentence (:data:`COPY_DATA`), not hex, so that a reader that predates block lines
refuses the line rather than misread it. :func:`rows_of_line` and :func:`iter_capture`
expand a block into its rows (the same :class:`CaptureRow` values, Insert messages in
text format, that the old lines gave: :func:`~pgcdc_events.protocol.copytext.
insert_messages`); :func:`read_copy_block` reads one (:class:`CopyBlock`);
:meth:`CaptureRow.from_line`, which gives one row, refuses it with a :class:`CaptureError`
naming the line. A block whose text is not what ``COPY TO`` writes (a cut row, an escape
it does not write, another number of values than ``columns``, odd hex) is refused with a
:class:`CaptureError` naming the line and the row.
"""

from __future__ import annotations

import json
import re
from binascii import Error as _HexError
from binascii import hexlify, unhexlify
from collections.abc import Iterable, Iterator
from typing import IO, Any, Final

import attrs

from pgcdc_events.errors import ProtocolError
from pgcdc_events.protocol.copydata import MAX_MESSAGE_SIZE
from pgcdc_events.protocol.copytext import CopyTextError, insert_messages
from pgcdc_events.protocol.lsn import Lsn

__all__ = [
    "CHUNK_DATA",
    "CHUNK_MARK",
    "COPY_BLOCK_SIZE",
    "COPY_DATA",
    "COPY_MARK",
    "LINE_CLOSE",
    "LINE_OPEN",
    "ROW_CHANGE_HEAD",
    "SNAPSHOT_MARK",
    "CaptureError",
    "CaptureRow",
    "ChunkLine",
    "CopyBlock",
    "canonical_head",
    "dump_capture_row",
    "dump_chunk_line",
    "dump_copy_block",
    "iter_capture",
    "line_middle",
    "read_canonical",
    "read_chunk_line",
    "read_copy_block",
    "rows_of_line",
    "write_capture",
]


class CaptureError(ProtocolError):
    """A capture line that is not valid interchange JSON; ``line`` is 1-based."""

    def __init__(self, expected: str, *, line: int, detail: str | None = None) -> None:
        self.line = line
        super().__init__(f"line {line}: {expected}", detail=detail)

    def __reduce__(self) -> tuple[Any, ...]:
        # ``expected`` already names the line: rebuild without adding it twice (pickling
        # carries the error from a worker process whole)
        return (_rebuild_capture_error, (self.expected, self.line, self.detail))


def _rebuild_capture_error(expected: str, line: int, detail: str | None) -> CaptureError:
    error = CaptureError.__new__(CaptureError)
    error.line = line
    ProtocolError.__init__(error, expected, detail=detail)
    return error


# The lines dump_capture_row writes (what capture, the recorder and the tools write), up
# to the data's hex: the one pattern of the fast path. Any other valid line goes through
# json.loads and CaptureRow.from_json, which names what is wrong with an invalid one.
_CANONICAL_HEAD_PATTERN: Final = (
    rb'\{"lsn": "([0-9A-F]{1,8})/([0-9A-F]{1,8})", "xid": (null|[1-9][0-9]{0,9}|0), '
    rb'"data": "')
_CANONICAL_HEAD = re.compile(_CANONICAL_HEAD_PATTERN).match
#: Matches the start of a canonical line (the head above) whose message is an Insert,
#: Update or Delete (``49``, ``55``, ``44``): a line for which ``canonical_head(line, 1)``
#: is ``b"I"``, ``b"U"`` or ``b"D"``, told by one call. What cuts a capture into chunks
#: (``decode --workers``) passes such lines on unread.
ROW_CHANGE_HEAD: Final = re.compile(_CANONICAL_HEAD_PATTERN + rb"(?:49|55|44)").match
_LINE_START = b'{"lsn": "'
_DATA_START = b'"data": "'
_STREAM_END = b'"}\n'
_SNAPSHOT_END = b'", "snapshot": true}\n'
_BARE_STREAM_END = b'"}'
_BARE_SNAPSHOT_END = b'", "snapshot": true}'
#: What marks the lines of an initial snapshot in their canonical form.
SNAPSHOT_MARK: Final = b'"snapshot": true'


def _canonical(line: bytes, limit: int = MAX_MESSAGE_SIZE
               ) -> tuple[re.Match[bytes], bytes, bool] | None:
    """The head match, data and snapshot flag of a canonical line (with or without its
    newline, ``\\r\\n`` too); None for any other line, and for a message over ``limit``
    bytes (the JSON path refuses it, naming it)."""
    match = _CANONICAL_HEAD(line)
    if match is None:
        return None
    if line.endswith(_STREAM_END):
        hexdata, snapshot = line[match.end():-len(_STREAM_END)], False
    elif line.endswith(_SNAPSHOT_END):
        hexdata, snapshot = line[match.end():-len(_SNAPSHOT_END)], True
    else:
        body = line.rstrip(b"\r\n")
        if body.endswith(_BARE_SNAPSHOT_END):
            hexdata, snapshot = body[match.end():-len(_BARE_SNAPSHOT_END)], True
        elif body.endswith(_BARE_STREAM_END):
            hexdata, snapshot = body[match.end():-len(_BARE_STREAM_END)], False
        else:
            return None
    if len(hexdata) > 2 * limit:
        return None
    try:  # hex digits only, in pairs: nothing else can sit in the data's JSON string
        data = unhexlify(hexdata)
    except _HexError:
        return None
    return match, data, snapshot


def read_canonical(line: bytes, *, max_message_size: int = MAX_MESSAGE_SIZE
                   ) -> tuple[Lsn, bytes, bool] | None:
    """``(lsn, data, snapshot)`` of a capture line as :func:`dump_capture_row` writes it;
    None for any other line, which :meth:`CaptureRow.from_line` reads (the same row, when
    valid) or refuses with the error naming what is wrong (a message over
    ``max_message_size`` bytes too)."""
    canonical = _canonical(line, max_message_size)
    if canonical is None:
        return None
    match, data, snapshot = canonical
    hi, lo, _ = match.groups()
    return _lsn(Lsn, (int(hi, 16) << 32) | int(lo, 16)), data, snapshot


#: ``_lsn(Lsn, value)`` is ``Lsn(value)`` without its range check, for an LSN read from a
#: canonical line: two halves of at most eight hex digits each are always in range.
_lsn: Final = int.__new__


def canonical_head(line: bytes, size: int) -> bytes | None:
    """The first ``size`` bytes of a canonical line's message (its type byte, a
    Relation's or Type's OID...), read from the hex without decoding the rest; None for a
    line that is not canonical up to there (or whose message is shorter). A COPY block
    line (:func:`dump_copy_block`'s) gives its first Insert's head: ``I`` and the
    relation id."""
    if not line.startswith(_LINE_START):
        return None
    at = line.find(_DATA_START)
    if at < 0:
        return None
    at += len(_DATA_START)
    if line.startswith(_BLOCK_DATA, at):
        return _block_head(line, at, size)
    try:
        head = unhexlify(line[at:at + 2 * size])
    except _HexError:
        return None
    return head if len(head) == size else None


def _block_head(line: bytes, at: int, size: int) -> bytes | None:
    """``I`` and the relation id of a COPY block line as written (see canonical_head)."""
    start = line.find(_RELATION_KEY, at)
    if start < 0:
        return None
    start += len(_RELATION_KEY)
    end = line.find(b",", start)
    digits = line[start:end]
    if not (0 < len(digits) <= 10 and digits.isdigit()) or int(digits) > 0xFFFFFFFF:
        return None
    head = b"I" + int(digits).to_bytes(4, "big")
    return head[:size] if size <= len(head) else None


@attrs.frozen(slots=True)
class CaptureRow:
    """One captured message: its WAL position, transaction id and raw pgoutput bytes."""

    lsn: Lsn
    xid: int | None
    data: bytes
    #: Part of an initial snapshot (``"snapshot": true``), not of the stream.
    snapshot: bool = False

    @classmethod
    def from_json(cls, obj: Any, *, line: int = 0,
                  max_message_size: int = MAX_MESSAGE_SIZE) -> CaptureRow:
        """Build a row from a decoded JSON object, validating every field; a message of
        more than ``max_message_size`` bytes (:data:`~pgcdc_events.protocol.copydata.
        MAX_MESSAGE_SIZE` by default, more than PostgreSQL can send) is refused before it
        is decoded."""
        if not isinstance(obj, dict):
            raise CaptureError("a JSON object", line=line, detail=type(obj).__name__)
        if "copy" in obj:
            raise CaptureError(
                "a single pgoutput message, not a COPY block line (a block of initial "
                "snapshot rows): read the capture with iter_capture or rows_of_line",
                line=line)
        if "chunk" in obj:
            raise CaptureError(
                "a pgoutput message, not an incremental snapshot chunk line (the rows a "
                "capture read from a table while it streamed): this reader does not take "
                "incremental snapshots; decode the capture with pgcdc-events decode",
                line=line)
        lsn, xid, data = obj.get("lsn"), obj.get("xid"), obj.get("data")
        snapshot = obj.get("snapshot", False)
        if not isinstance(snapshot, bool):
            raise CaptureError("'snapshot' as true or false", line=line, detail=repr(snapshot))
        if isinstance(lsn, str):
            try:
                lsn_value = Lsn.parse(lsn)
            except ProtocolError as exc:
                raise CaptureError("'lsn' in X/Y form", line=line, detail=exc.detail) from None
        elif isinstance(lsn, int) and not isinstance(lsn, bool) and 0 <= lsn < 1 << 64:
            lsn_value = Lsn(lsn)
        else:
            raise CaptureError("'lsn' as an X/Y string or an integer", line=line, detail=repr(lsn))
        if isinstance(xid, str) and xid.isascii() and xid.isdigit():
            xid = int(xid)
        if xid is not None and (not isinstance(xid, int) or isinstance(xid, bool) or xid < 0):
            raise CaptureError(
                "'xid' as a non-negative integer or null", line=line, detail=repr(xid)
            )
        if not isinstance(data, str):
            raise CaptureError("'data' as a hex string", line=line, detail=repr(data)[:80])
        if len(data) > 2 * max_message_size:
            raise CaptureError(f"a message of at most {max_message_size:,} bytes "
                               "(max_message_size)", line=line,
                               detail=f"the message at LSN {lsn_value} has {len(data) // 2:,}"
                               " bytes")
        try:
            raw = bytes.fromhex(data)
        except ValueError:
            raise CaptureError("'data' as a hex string", line=line, detail=data[:80]) from None
        return cls(lsn_value, xid, raw, snapshot)

    @classmethod
    def from_line(cls, line: str | bytes, *, line_number: int = 0,
                  max_message_size: int = MAX_MESSAGE_SIZE) -> CaptureRow:
        """Parse one interchange line; errors name ``line_number`` (see :meth:`from_json`
        for ``max_message_size``)."""
        raw = line.encode("utf-8", "surrogateescape") if isinstance(line, str) else line
        canonical = _canonical(raw, max_message_size)
        if canonical is not None:
            match, data, snapshot = canonical
            hi, lo, xid = match.groups()
            return cls(Lsn((int(hi, 16) << 32) | int(lo, 16)),
                       None if xid == b"null" else int(xid), data, snapshot)
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise CaptureError("not valid JSON", line=line_number, detail=str(exc)) from None
        except RecursionError:  # a line of thousands of nested brackets
            raise CaptureError("not valid JSON", line=line_number,
                               detail="nested too deeply") from None
        return cls.from_json(obj, line=line_number, max_message_size=max_message_size)

    def to_json(self) -> dict[str, Any]:
        """The interchange object for this row (``"snapshot"`` only on snapshot rows)."""
        obj: dict[str, Any] = {"lsn": str(self.lsn), "xid": self.xid, "data": self.data.hex()}
        if self.snapshot:
            obj["snapshot"] = True
        return obj


def iter_capture(lines: Iterable[str | bytes], *, max_message_size: int = MAX_MESSAGE_SIZE
                 ) -> Iterator[CaptureRow]:
    """Parse capture JSON Lines lazily; blank lines are skipped, a COPY block line gives
    its rows (:func:`rows_of_line`), errors name the line (a message over
    ``max_message_size`` bytes is refused, see :meth:`CaptureRow.from_json`)."""
    from_line = CaptureRow.from_line
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if _is_block(line):
            yield from rows_of_line(line, line_number=number, max_message_size=max_message_size)
        else:
            yield from_line(line, line_number=number, max_message_size=max_message_size)


def rows_of_line(line: str | bytes, *, line_number: int = 0,
                 max_message_size: int = MAX_MESSAGE_SIZE) -> list[CaptureRow]:
    """The rows of one capture line: the rows of a COPY block line (:class:`CopyBlock`),
    else the one row :meth:`CaptureRow.from_line` reads; errors name ``line_number``."""
    block = read_copy_block(line, line_number=line_number)
    if block is None:
        return [CaptureRow.from_line(line, line_number=line_number,
                                     max_message_size=max_message_size)]
    return block.capture_rows(line_number=line_number, max_message_size=max_message_size)


def dump_capture_row(row: CaptureRow) -> str:
    """One interchange line for ``row``, without the newline: exactly
    ``json.dumps(row.to_json(), separators=(", ", ": "))``, built directly (the canonical
    form that :meth:`CaptureRow.from_line` reads on its fast path)."""
    xid = row.xid
    if xid is not None and type(xid) is not int:  # a bool or an int subclass: json decides
        return json.dumps(row.to_json(), separators=(", ", ": "))
    lsn = int(row.lsn)
    end = _SNAPSHOT_CLOSE if row.snapshot else LINE_CLOSE
    return (f'{LINE_OPEN}{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}{line_middle(xid)}'
            f'{row.data.hex()}{end}')


#: A canonical line of a streamed message is ``LINE_OPEN``, the LSN as ``X/Y`` text,
#: :func:`line_middle` of its xid, the data in lower-case hex, ``LINE_CLOSE`` (what
#: :func:`dump_capture_row` writes; the streaming capture builds lines from these pieces).
LINE_OPEN: Final = '{"lsn": "'
LINE_CLOSE: Final = '"}'
_SNAPSHOT_CLOSE: Final = '", "snapshot": true}'


def line_middle(xid: int | None) -> str:
    """The part of a canonical line between the LSN and the hex data, for ``xid``."""
    return f'", "xid": {"null" if xid is None else xid}, "data": "'


def write_capture(rows: Iterable[CaptureRow], fh: IO[str]) -> int:
    """Write rows as capture JSON Lines; returns the number written."""
    count = 0
    for row in rows:
        fh.write(dump_capture_row(row))
        fh.write("\n")
        count += 1
    return count


#: What marks a chunk line (:class:`ChunkLine`): the key its rows are under.
CHUNK_MARK: Final = b'"chunk": {'
#: The ``data`` of a chunk line: not hex, so that a reader that predates chunk lines
#: refuses the line quoting it.
CHUNK_DATA: Final = ("not pgoutput: an incremental snapshot chunk, read by pgcdc-events "
                     "decode (a later version than this one)")


@attrs.frozen
class ChunkLine:
    """A chunk line: the rows of one chunk of an incremental snapshot, as the capture read
    them, at ``lsn`` (the end of the last unit written before it).

    ``chunk`` is the JSON object as written: ``id`` (the chunk's id, whose watermarks are
    ``<id>-open`` and ``<id>-close``), ``table`` (the table as the catalog snapshot
    describes it), ``key`` (the columns the chunk is ordered by), ``signal`` (the
    signalling table, ``schema.table``), ``strategy`` (the watermarking strategy) and
    ``rows`` (each row's values as text in column order, ``null`` for NULL).

    A read-only snapshot's chunk (``read.only=true``) also has ``low`` and ``high``, its
    two watermarks (``pg_current_snapshot()`` before and after the read, as text), and
    may have ``start`` (``true``: the first chunk since the capture started again, its
    window made afresh) and ``again`` (the transaction id of the commit or idle poll
    that closed the previous window and read this chunk: the window may close at once).
    An *idle line* has only ``id`` (the chunk whose window closed), ``signal`` and
    ``idle``: the transaction id of an idle poll that closed a read-only window there.
    The event layer reads them (:class:`pgcdc_events.events.incremental.RecordedChunks`).
    """

    lsn: Lsn
    chunk: dict[str, Any]


def dump_chunk_line(lsn: int, chunk: dict[str, Any]) -> str:
    """One chunk line for ``chunk`` at ``lsn``, without the newline (JSON with the same
    separators as the capture's other lines; non-ASCII kept as ``\\u`` escapes)."""
    head = {"lsn": str(Lsn(lsn)), "xid": None, "data": CHUNK_DATA}
    text = json.dumps(head, separators=(", ", ": "))
    return f'{text[:-1]}, "chunk": {json.dumps(chunk, separators=(",", ":"))}}}'


def read_chunk_line(line: str | bytes, *, line_number: int = 0) -> ChunkLine | None:
    """The chunk line ``line`` holds; ``None`` when it is not one (no :data:`CHUNK_MARK`).
    A chunk line that does not parse is a :class:`CaptureError` naming the line."""
    raw = line.encode("utf-8", "surrogateescape") if isinstance(line, str) else line
    if CHUNK_MARK not in raw:
        return None
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return None  # not JSON: CaptureRow.from_line says so
    if not isinstance(obj, dict) or "chunk" not in obj:
        return None
    chunk = obj["chunk"]
    idle = isinstance(chunk, dict) and "idle" in chunk
    if not isinstance(chunk, dict) or not isinstance(chunk.get("id"), str) or (not idle and (
            not isinstance(chunk.get("rows"), list) or not isinstance(chunk.get("table"), dict))):
        raise CaptureError("an incremental snapshot chunk line with its id, table and rows",
                           line=line_number, detail=repr(chunk)[:80])
    lsn = obj.get("lsn")
    try:
        value = Lsn.parse(lsn) if isinstance(lsn, str) else None
    except ProtocolError:
        value = None
    if value is None:
        raise CaptureError("'lsn' in X/Y form", line=line_number, detail=repr(lsn))
    return ChunkLine(value, chunk)


# -- COPY block lines: an initial snapshot's rows as COPY text ------------------------------

#: What marks a COPY block line (:class:`CopyBlock`): the key its COPY text is under.
COPY_MARK: Final = b'"copy": "'
_COPY_KEY: Final = b'"copy"'
_COPY_KEY_TEXT: Final = _COPY_KEY.decode()
#: The ``data`` of a COPY block line: not hex, so that a reader that predates block lines
#: refuses the line quoting it.
COPY_DATA: Final = ("not pgoutput: initial snapshot rows as COPY text under \"copy\", "
                    "read by pgcdc-events (a later version than this one)")
#: The bytes of COPY text a block line holds (about: the block ends at a row's end).
COPY_BLOCK_SIZE: Final = 1 << 17
_COPY_KEYS: Final = frozenset({"lsn", "xid", "data", "relation", "columns", "rows", "copy",
                               "snapshot"})


@attrs.frozen
class CopyBlock:
    """A COPY block line: ``rows`` whole rows of the table of relation ``relation_id``
    (``columns`` columns) as COPY text (``text``, each row ending with a newline), all at
    ``lsn`` in the snapshot transaction ``xid``."""

    lsn: Lsn
    xid: int | None
    relation_id: int
    columns: int
    rows: int
    text: bytes

    def messages(self, *, line_number: int = 0) -> list[bytes]:
        """The rows as Insert messages (text format), one a row: what a capture written
        before block lines held, a line a row. Errors name ``line_number`` and the row."""
        try:
            return insert_messages(self.relation_id, self.columns, self.text)
        except CopyTextError as exc:
            raise CaptureError(f"a COPY block of whole rows as COPY TO writes them: {exc}",
                               line=line_number) from None

    def capture_rows(self, *, line_number: int = 0,
                     max_message_size: int = MAX_MESSAGE_SIZE) -> list[CaptureRow]:
        """The rows as capture rows marked ``snapshot`` (see :meth:`messages`); an Insert
        over ``max_message_size`` bytes is refused, as on a line of its own."""
        messages = self.messages(line_number=line_number)
        if messages and max(map(len, messages)) > max_message_size:
            size = max(map(len, messages))
            raise CaptureError(f"a message of at most {max_message_size:,} bytes "
                               "(max_message_size)", line=line_number,
                               detail=f"a row of the COPY block at LSN {self.lsn} is an "
                               f"Insert of {size:,} bytes")
        lsn, xid = self.lsn, self.xid
        return [CaptureRow(lsn, xid, message, True) for message in messages]


def dump_copy_block(lsn: int, xid: int | None, relation_id: int, columns: int,
                    text: bytes, *, rows: int | None = None) -> bytes:
    """One COPY block line for ``text`` (whole rows of COPY text), with its newline: the
    text converted to hex in one call, the rows counted in one (no work a row) unless the
    caller gives their count (``rows``: the newlines in ``text``)."""
    if rows is None:
        rows = text.count(_NEWLINE)
    head = (f'{LINE_OPEN}{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}", "xid": '
            f'{"null" if xid is None else xid}, "data": "{_COPY_DATA_JSON}", "relation": '
            f'{relation_id}, "columns": {columns}, "rows": {rows}, "copy": "')
    return b"".join((head.encode("ascii"), hexlify(text), b'", "snapshot": true}\n'))


_COPY_DATA_JSON: Final = json.dumps(COPY_DATA)[1:-1]
_BLOCK_DATA: Final = f'{_COPY_DATA_JSON}", "relation": '.encode("ascii")
_RELATION_KEY: Final = b'"relation": '


def _is_block(line: str | bytes) -> bool:
    """Whether ``line`` may be a COPY block line: it holds the key ``"copy"`` (as
    :data:`COPY_MARK` starts, or written otherwise: the line says what is wrong with it)."""
    if isinstance(line, str):
        return _COPY_KEY_TEXT in line
    return _COPY_KEY in line

_NEWLINE: Final = b"\n"


def read_copy_block(line: str | bytes, *, line_number: int = 0) -> CopyBlock | None:
    """The COPY block line ``line`` holds; ``None`` when it is not one (no
    key ``"copy"``). A block line that does not parse is a :class:`CaptureError` naming
    the line (its rows are checked when they are expanded: :meth:`CopyBlock.messages`)."""
    if not _is_block(line):
        return None
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return None  # not JSON: CaptureRow.from_line says so
    if not isinstance(obj, dict) or "copy" not in obj:
        return None

    def refuse(expected: str, value: Any) -> CaptureError:
        return CaptureError(f"a COPY block line with {expected}", line=line_number,
                            detail=repr(value)[:80])
    unknown = sorted(set(obj) - _COPY_KEYS)
    if unknown:
        raise refuse("only the keys of a block line", unknown)
    if obj.get("snapshot") is not True:
        raise refuse('"snapshot": true', obj.get("snapshot"))
    lsn = obj.get("lsn")
    try:
        lsn_value = Lsn.parse(lsn) if isinstance(lsn, str) else None
    except ProtocolError:
        lsn_value = None
    if lsn_value is None:
        raise CaptureError("'lsn' in X/Y form", line=line_number, detail=repr(lsn))
    xid = obj.get("xid")
    if xid is not None and (type(xid) is not int or xid < 0):
        raise refuse("'xid' as a non-negative integer or null", xid)
    numbers = []
    for key, top in (("relation", 0xFFFFFFFF), ("columns", 0xFFFF), ("rows", None)):
        value = obj.get(key)
        if type(value) is not int or value < 0 or (top is not None and value > top):
            raise refuse(f"'{key}' as a non-negative integer", value)
        numbers.append(value)
    relation_id, columns, rows = numbers
    return CopyBlock(lsn_value, xid, relation_id, columns, rows,
                     _block_text(obj["copy"], rows, line_number))


def _block_text(hexed: Any, rows: int, line_number: int) -> bytes:
    """The COPY text of a block line's ``copy``: hex of whole rows, ``rows`` of them."""
    try:
        if not isinstance(hexed, str):
            raise ValueError
        text = bytes.fromhex(hexed)
    except ValueError:
        raise CaptureError("a COPY block line with 'copy' as a hex string", line=line_number,
                           detail=repr(hexed)[:80]) from None
    if text and not text.endswith(_NEWLINE):
        cut = len(text) - text.rfind(_NEWLINE) - 1
        raise CaptureError("a COPY block of whole rows (its text ending with a newline)",
                           line=line_number, detail=f"the last row is cut, {cut} bytes after "
                           "the last newline")
    found = text.count(_NEWLINE)
    if found != rows:
        raise CaptureError(f"a COPY block of the {rows:,} rows its 'rows' says",
                           line=line_number, detail=f"it holds {found:,}")
    return text
