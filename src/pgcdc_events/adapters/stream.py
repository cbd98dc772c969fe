"""Read a logical slot over the streaming replication protocol, holding it for the whole run.

:class:`StreamReader` is a :class:`~pgcdc_events.adapters.pg8000.SlotReader` whose
reads come from one ``START_REPLICATION SLOT ... LOGICAL`` connection instead of
SQL peeks. While it runs the slot is *active*: the server refuses every other
reader (``replication slot "x" is active for PID n``), so nothing can take changes
behind its back.

pg8000 has no public API for the CopyBoth sub-protocol (its message table has no
``CopyBothResponse``), so the reader opens the socket itself
(:meth:`~pgcdc_events.adapters.connection.ConnectionSettings.connect`: TLS as
``sslmode`` says), lets pg8000 do the startup and authentication through its
public ``sock`` argument, and from ``START_REPLICATION`` on speaks the protocol
directly: message framing here, CopyData payloads with
:mod:`pgcdc_events.protocol.copydata`. No private pg8000 attribute is used.

The slot's checks, creation and status still go through an ordinary SQL
connection (values bound), opened beside the replication one.

Acknowledgements: :meth:`StreamReader.advance` sends a standby status update
whose *flush* position is the end of the last unit the caller made durable
(never past a unit not yet delivered, never past an unresolved PREPARE);
keepalives that ask for a reply, and the periodic updates, report only the
position received (write), with no flush position, which moves no slot (see
``StreamReader._status``). Nothing is acknowledged before the caller says it is on
disk.

Idle acknowledgement: a keepalive received while nothing is pending (no transaction
open, streamed or prepared, no message waiting for its LSN) carries the server's
position, past every transaction committed before it (:meth:`StreamReader.idle_position`).
Once the caller has made every unit read durable and recorded that position, it may
acknowledge it (:meth:`StreamReader.advance`), as PostgreSQL's own subscriber does: a
slot on a quiet database then follows the server's WAL instead of holding it.
"""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import Any

from pgcdc_events.adapters.connection import ConnectionSettings, parse_conninfo
from pgcdc_events.adapters.errors import (
    RETRY_HINT,
    ConnectionLostError,
    SlotError,
    SlotMovedError,
)
from pgcdc_events.adapters.names import check_slot_name
from pgcdc_events.adapters.pg8000 import (
    BatchInfo,
    DecodingOptions,
    SlotInfo,
    SlotReader,
    translate_error,
)
from pgcdc_events.adapters.units import CHUNK_LINES, Unit, UnitAssembler
from pgcdc_events.errors import PgCdcError, ProtocolError
from pgcdc_events.protocol import wire
from pgcdc_events.protocol.capture import LINE_CLOSE, LINE_OPEN, CaptureRow
from pgcdc_events.protocol.copydata import (
    MAX_MESSAGE_SIZE,
    XLOG_DATA_HEAD,
    PrimaryKeepalive,
    StandbyStatusUpdate,
    encode_copy_data,
    parse_copy_data,
)
from pgcdc_events.protocol.lsn import Lsn, unix_us_to_pg_timestamp
from pgcdc_events.protocol.transactions import TransactionResolver

__all__ = ["StreamReader", "XidTracker"]

_HEADER = struct.Struct("!cI")
_U32 = wire.UINT32.unpack_from
_xlog_head = XLOG_DATA_HEAD.unpack_from
_XLOG_DATA_END = 1 + XLOG_DATA_HEAD.size
#: Where a message starts in a CopyData frame of XLogData: tag, length, 'w', the head.
_XLOG_DATA_FRAME = 5 + _XLOG_DATA_END
_COPY_DATA, _XLOG_DATA = b"d"[0], b"w"[0]
#: Bytes asked of the socket at once.
_RECV_BYTES = 1 << 18
#: Seconds between unprompted status updates (the server's wal_sender_timeout is 60 s).
STATUS_INTERVAL = 10.0
#: How long a read waits for the server to confirm it has sent everything (caught up).
_CATCH_UP_POLL = 0.05


def _literal(value: str) -> str:
    """A string literal of the replication command grammar (quotes doubled, no escapes)."""
    return "'" + value.replace("'", "''") + "'"


class XidTracker:
    """The transaction id the SQL interface reports beside each message (``xid`` column),
    worked out from the messages' heads by the protocol layer's
    :class:`~pgcdc_events.protocol.transactions.TransactionResolver`, so both readers
    write the same capture."""

    def __init__(self) -> None:
        self._resolver: TransactionResolver[None] = TransactionResolver()

    def xid(self, data: bytes) -> int | None:
        """The xid for the message ``data`` (call for every message, in order); ``None``
        for a message too short to hold one (the protocol reader then reports it)."""
        resolver = self._resolver
        if resolver.feed_head(data) is None:
            return None
        return resolver.owner


class StreamReader(SlotReader):
    """Stream a logical slot over a replication connection; same interface as
    :class:`SlotReader` (``prepare``, ``read``, ``advance``, ``status``).

    ``read(after, limit)`` returns once ``limit`` rows were read (at a unit
    boundary) or once the server has sent everything it had when the read began
    (caught up). Units straddling two reads are kept, not read again.
    """

    def __init__(self, dsn: str | Mapping[str, Any] | ConnectionSettings | None = None, *,
                 slot: str, publications: Sequence[str], options: DecodingOptions | None = None,
                 memory_limit: int | None = 64 * 1024 * 1024,
                 session_settings: Mapping[str, str] | None = None,
                 status_interval: float = STATUS_INTERVAL) -> None:
        check_slot_name(slot)
        super().__init__(dsn, slot=slot, publications=publications, options=options,
                         memory_limit=memory_limit, session_settings=session_settings)
        if self.settings is None:
            self.settings = parse_conninfo({})
        self.status_interval = status_interval
        self._sock: socket.socket | None = None
        self._repl: Any = None
        # Received bytes; those before ``_pos`` are read. A bytearray only while one
        # message larger than what arrived so far is gathered.
        self._buf: bytes | bytearray = b""
        self._pos = 0
        self._offset = 0  # where ``_buf`` starts in the connection's received bytes
        #: The largest message an XLogData frame may carry: a frame announcing more is
        #: refused before it is gathered.
        self.max_message_size = MAX_MESSAGE_SIZE
        self._assembler: UnitAssembler | None = None
        self._xids = XidTracker()
        self._pending: list[tuple[bytes, int | None]] = []  # rows waiting for their LSN
        self._acked: int | None = None  # the flush position sent to the server
        self._sent_at = 0.0
        self._server_sent = 0  # the server's sent position (keepalives, XLogData)
        self._walsender_pid: int | None = None
        self._units_out: list[Unit] = []
        self._target: int | None = None  # the server's flush position when the read began
        self._idle: int | None = None  # a keepalive's position while nothing was pending
        self._delivered = 0  # the end of the last unit read on this connection

    # -- connection ------------------------------------------------------------------------
    def close(self) -> None:
        """Close both connections (never raises)."""
        if self._sock is not None:
            # End the stream as the protocol says: CopyDone, then wait (briefly) for the
            # server's ReadyForQuery, by which time it has released the slot; Terminate.
            with contextlib.suppress(PgCdcError, OSError):
                self._send(b"c", b"")
                deadline = time.monotonic() + 5
                while self._sock is not None and time.monotonic() < deadline:
                    tag, _ = self._message(max(deadline - time.monotonic(), 0))
                    if tag in (b"Z", b""):
                        break
                self._send(b"X", b"")
        self._drop()
        if self._assembler is not None:
            self._assembler.reset()
            self._assembler = None
        self._buf, self._pos, self._offset = b"", 0, 0
        self._pending = []
        self._xids = XidTracker()
        super().close()

    def _drop(self) -> None:
        """Close the replication socket at once (no goodbye)."""
        sock, self._sock = self._sock, None
        self._repl = None  # pg8000's connection object: its socket is ours, closed here
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.close()

    def prepare(self, *, create_slot: bool = False, create_publication: bool = False,
                tables: Sequence[str] | None = None, snapshot: bool = False,
                replace_slot: bool = False, before_create: Callable[[], None] | None = None
                ) -> SlotInfo:
        """Check (and create) slot and publications over SQL, then start streaming (after
        :meth:`finish_snapshot` when the slot was created for a snapshot: the stream is
        not read while the snapshot is, and would time out)."""
        info = super().prepare(create_slot=create_slot, create_publication=create_publication,
                               tables=tables, snapshot=snapshot, replace_slot=replace_slot,
                               before_create=before_create)
        if self.exported is None:
            self._start()
        return info

    def finish_snapshot(self) -> None:
        """Release the exporting connection, then start streaming from the consistent point."""
        super().finish_snapshot()
        self._start()

    def _start(self) -> None:
        assert self.info is not None and self.settings is not None
        try:
            self._repl, self._sock = self.settings.connect(replication="database",
                                                           slot=self.slot)
        except (SlotError, PgCdcError):
            raise
        except Exception as exc:
            raise translate_error(exc, slot=self.slot, action="replication connection",
                                  password_source=self.settings.password_source) from None
        options = ", ".join(f"{key} {_literal(value)}" for key, value
                            in self.info.options.pgoutput_args(self.publications))
        # The slot name is checked (lower-case letters, digits, underscores); the values are
        # literals of the replication grammar. START at 0/0: the slot's confirmed position.
        self._send(b"Q", f'START_REPLICATION SLOT "{self.slot}" LOGICAL 0/0 ({options})'
                   .encode() + b"\x00")
        while True:
            tag, body = self._message(timeout=None)
            if tag == b"W":  # CopyBothResponse
                break
            if tag == b"E":
                raise self._error(body, "start replication")
            if tag not in (b"N", b"S"):
                raise ConnectionLostError(f"start replication: unexpected message {tag!r}",
                                          slot=self.slot)
        self._acked = int(self._confirmed) if self._confirmed is not None else None
        self._sent_at = time.monotonic()
        self._idle, self._delivered = None, 0
        options_ = self.info.options
        self._assembler = UnitAssembler(proto_version=options_.proto_version,
                                        streaming=options_.streaming, budget=self._budget,
                                        render=self.render)
        pid = self._run("SELECT active_pid FROM pg_replication_slots WHERE slot_name = :slot",
                        action="check slot", slot=self.slot)
        self._walsender_pid = pid[0][0] if pid else None

    # -- the wire --------------------------------------------------------------------------
    def _send(self, tag: bytes, body: bytes) -> None:
        if self._sock is None:
            raise ConnectionLostError("the replication connection is closed", slot=self.slot)
        try:
            self._sock.sendall(_HEADER.pack(tag, len(body) + 4) + body)
        except OSError as exc:
            self._drop()
            raise ConnectionLostError(f"replication connection lost: {exc}",
                                      slot=self.slot) from None

    def _fill(self, timeout: float | None, need: int = 0) -> bool:
        """Read what the socket has (waiting up to ``timeout``); False if nothing came.
        ``need`` is how many unread bytes the next message takes (whole, with its head):
        more than the largest XLogData frame (:attr:`max_message_size`) is refused here,
        before any of it is gathered."""
        sock = self._sock
        if sock is None:
            raise ConnectionLostError("the replication connection is closed", slot=self.slot)
        if need > _XLOG_DATA_FRAME + self.max_message_size:
            raise self._oversized(need)
        pending = getattr(sock, "pending", None)  # TLS may hold decrypted bytes already
        if timeout is not None and not (pending and pending()):
            ready, _, _ = select.select([sock], [], [], timeout)
            if not ready:
                return False
        try:
            chunk = sock.recv(_RECV_BYTES)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError as exc:
            self._drop()
            raise ConnectionLostError(f"replication connection lost: {exc}",
                                      slot=self.slot) from None
        if not chunk:
            self._drop()
            raise ConnectionLostError("the server closed the replication connection",
                                      slot=self.slot, hint=RETRY_HINT)
        buf = self._buf
        if self._pos:
            buf = buf[self._pos:]
            self._offset += self._pos
            self._pos = 0
        if type(buf) is bytearray or (need > 5 and len(buf) + len(chunk) < need):
            # one large message arrives in many reads: gather it without copying it again
            # at each one, then scan it as bytes
            buf = buf if type(buf) is bytearray else bytearray(buf)
            buf += chunk
            self._buf = bytes(buf) if len(buf) >= need else buf
        else:
            self._buf = buf + chunk
        return True

    def _oversized(self, need: int) -> ProtocolError:
        """The error for the frame at ``_pos`` whose head announces ``need`` bytes (with its
        type byte); the connection is dropped, as the stream cannot be read past it."""
        tag = bytes(self._buf[self._pos:self._pos + 1]).decode("latin-1")
        at = self._offset + self._pos
        self._drop()
        return ProtocolError(
            f"a replication frame's length of at most "
            f"{_XLOG_DATA_FRAME - 1 + self.max_message_size:,} bytes (a message of at most "
            f"{self.max_message_size:,} bytes, max_message_size)",
            message_type=tag,
            detail=f"the frame at byte {at:,} of slot {self.slot!r}'s stream announces a "
                   f"length of {need - 1:,} bytes; refused before reading it")

    def _message(self, timeout: float | None) -> tuple[bytes, bytes]:
        """The next message (``(b"", b"")`` if none within ``timeout``)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            buf, pos = self._buf, self._pos
            need = 5
            if len(buf) - pos >= 5:
                tag, length = _HEADER.unpack_from(buf, pos)
                end = pos + 1 + length
                if length > _XLOG_DATA_FRAME - 1 + self.max_message_size:
                    raise self._oversized(1 + length)
                if len(buf) >= end:
                    self._pos = end
                    return tag, bytes(buf[pos + 5:end])
                need = end - pos
            left = None if deadline is None else max(deadline - time.monotonic(), 0)
            if not self._fill(left, need) and deadline is not None \
                    and time.monotonic() >= deadline:
                return b"", b""

    def _error(self, body: bytes, action: str) -> SlotError:
        fields = {part[:1].decode("ascii", "replace"): part[1:].decode("utf-8", "replace")
                  for part in body.split(b"\x00") if part}

        class _ServerError(Exception):
            pass

        return translate_error(_ServerError(fields), slot=self.slot,
                               publications=self.publications, action=action)

    def _status(self, *, reply: bool = False, flush: bool = True) -> None:
        """Tell the server how far the output is durable (never past what was acknowledged).

        With ``flush=False`` (answers to keepalives, periodic updates) the update reports
        only what was *received* (the write position) and no flush position. The slot
        moves only with a flush position, so this never acknowledges anything; but a
        walsender of a server shutting down waits until the client's flush position (or,
        when there is none, its write position) reaches everything it sent, the shutdown
        checkpoint included, which no durable unit ends at: answering keepalives with the
        durable position alone would hold the shutdown until ``pg_ctl`` gives up.
        """
        acked = self._acked or 0
        if flush:
            update = StandbyStatusUpdate.now(acked, reply_requested=reply)
        else:
            clock = unix_us_to_pg_timestamp(time.time_ns() // 1000)
            update = StandbyStatusUpdate(max(self._server_sent, acked), 0, 0, clock, reply)
        self._send(b"d", encode_copy_data(update))
        self._sent_at = time.monotonic()

    # -- reading ---------------------------------------------------------------------------
    def _units(self, assembler: UnitAssembler, batch: BatchInfo, timeout: float  # noqa: C901, PLR0915
               ) -> Generator[Unit | None, None, None]:
        """Complete units as the messages arrive (``batch.rows`` counts the messages);
        ``None`` when nothing came within ``timeout``.

        Every received buffer is scanned in one loop. An Insert, Update or Delete of an
        open transaction (no stream block, no message waiting for its LSN) whose first
        bytes are a head the assembler knows (:attr:`UnitAssembler.heads`) goes straight
        into the transaction (as its capture line when the assembler renders them, else
        as a row), unparsed; any other message is handed to :meth:`UnitAssembler.feed`.
        """
        heads = assembler.heads
        render = assembler.render
        take = assembler.take
        unpack_u32 = _U32
        xlog_head = _xlog_head
        head_size = wire.CHANGE_HEAD_SIZE
        data_at = _XLOG_DATA_FRAME
        head_end = data_at + head_size
        while True:
            if time.monotonic() - self._sent_at >= self.status_interval:
                self._status(flush=False)
            received, pos = self._buf, self._pos
            if isinstance(received, bytes):
                buf, size, need = received, len(received), 5
            else:  # a large message is being gathered: nothing complete yet
                buf, size, need = b"", 0, 1 + unpack_u32(received, 1)[0]
            # the open transaction's lines, while changes can go straight to it
            unit = assembler.open_transaction() if not self._pending else None
            if unit is not None:
                lines, seen, middle, add, xid = (unit.lines, unit.heads, unit.middle,
                                                 unit.add, unit.xid)
            high, open_lsn = -1, ""
            fast = wal_end = 0
            general = False
            while pos + 5 <= size:
                end = pos + 1 + unpack_u32(buf, pos + 1)[0]
                if end > size:
                    need = end - pos
                    break
                tag = buf[pos]
                if unit is not None and tag == _COPY_DATA and end >= pos + head_end \
                        and buf[pos + 5] == _XLOG_DATA:
                    head = buf[pos + data_at:pos + head_end]
                    if head in heads:
                        lsn, wal_end, _ = xlog_head(buf, pos + 6)
                        if lsn:
                            if head not in seen:
                                take(unit, head)
                            fast += 1
                            pos, start = end, pos + data_at
                            if not render:
                                add(CaptureRow(Lsn(lsn), xid, buf[start:end]))
                                continue
                            if lsn >> 32 != high:  # LSN as Lsn.__str__ writes it
                                high = lsn >> 32
                                open_lsn = f"{LINE_OPEN}{high:X}/"
                            lines.append(f"{open_lsn}{lsn & 0xFFFFFFFF:X}{middle}"
                                         f"{buf[start:end].hex()}{LINE_CLOSE}\n")
                            if len(lines) >= CHUNK_LINES:
                                unit.flush()
                            continue
                # anything else: count what went straight in, then the general path, then
                # start again from the reader's state (the open transaction may change)
                if fast:
                    self._settle(assembler, batch, unit, fast, wal_end)
                    fast = 0
                self._pos = end
                general = True
                if tag == _COPY_DATA:
                    done = self._copy_data(assembler, batch, buf[pos + 5:end])
                    if done is not None:
                        yield done
                else:
                    self._other(bytes([tag]), buf[pos + 5:end])
                break
            if fast:
                self._settle(assembler, batch, unit, fast, wal_end)
            if not general:  # everything complete is read
                self._pos = pos
                if self._caught_up():  # no wait for more: unless it is here, say so now
                    if not self._fill(0, need):
                        yield None
                elif not self._fill(timeout, need):
                    yield None

    def _caught_up(self) -> bool:
        """Whether the server has sent all it had when the read began (and no message
        waits for the LSN of the next)."""
        return self._target is not None and self._server_sent >= self._target \
            and not self._pending

    def _settle(self, assembler: UnitAssembler, batch: BatchInfo, unit: Any, count: int,
                wal_end: int) -> None:
        """Count ``count`` changes that went straight into ``unit`` (rows count
        themselves as they are added; lines here)."""
        if assembler.render:
            unit.changes += count
            unit.count += count
        assembler.rows_read += count
        batch.rows += count
        self._server_sent = max(self._server_sent, wal_end)

    def _copy_data(self, assembler: UnitAssembler, batch: BatchInfo, body: bytes
                   ) -> Unit | None:
        """One CopyData message on the general path; the unit it completes, if any."""
        if body[:1] == b"w" and len(body) >= _XLOG_DATA_END:  # XLogData
            data_start, wal_end, _ = _xlog_head(body, 1)
            self._server_sent = max(self._server_sent, wal_end)
            data = body[_XLOG_DATA_END:]
            xid = self._xids.xid(data)
            if data_start == 0:  # Relation, Type, Origin: the next message's LSN
                self._pending.append((data, xid))
                return None
            rows = [CaptureRow(Lsn(data_start), early_xid, early)
                    for early, early_xid in self._pending]
            self._pending = []
            rows.append(CaptureRow(Lsn(data_start), xid, data))
            done = None
            for row in rows:  # only the last can complete a unit
                batch.rows += 1
                done = assembler.feed(row)
            return done
        # a keepalive; anything else (a cut XLogData, an unknown frame) raises here
        frame = parse_copy_data(body)
        if isinstance(frame, PrimaryKeepalive):
            self._server_sent = max(self._server_sent, frame.wal_end)
            self._note_idle(frame.wal_end)
            if frame.reply_requested:
                self._status(flush=False)
        return None

    def _note_idle(self, wal_end: int) -> None:
        """Remember ``wal_end`` (a keepalive's) when nothing is pending: every transaction
        committed before it was sent, and each one still to come commits after it."""
        assembler = self._assembler
        if self._pending or assembler is None or assembler.incomplete:
            return
        if wal_end > max(self._idle or 0, self._delivered):
            self._idle = wal_end

    def _other(self, tag: bytes, body: bytes) -> None:
        """A message of the replication connection other than CopyData."""
        if tag == b"E":
            error = self._error(body, "read slot")
            self.close()
            raise error
        if tag == b"c":  # CopyDone: the server is shutting down
            self.close()
            raise ConnectionLostError("the server ended the replication stream",
                                      slot=self.slot, hint=RETRY_HINT)
        # NoticeResponse, ParameterStatus: nothing to do

    def read(self, after: int | None = None, limit: int | None = None
             ) -> Generator[Unit, None, None]:
        """Complete units, in commit order, until ``limit`` rows were read or the server
        has sent everything it had when the read began (see the class docstring)."""
        if self.info is None or self._assembler is None:
            raise SlotError("call prepare() before reading", slot=self.slot)
        assembler = self._assembler
        assembler.after = after
        batch = self.last_batch = BatchInfo(limit=limit)
        self._target = self._flush_position()
        asked = False
        units = self._units(assembler, batch, _CATCH_UP_POLL)
        try:
            for unit in units:
                if unit is None:
                    if self._caught_up():
                        break  # everything the server had is here
                    if not asked:
                        self._status(reply=True, flush=False)  # ask where the server is
                        asked = True
                    continue
                asked = False
                batch.units += 1
                batch.last_end = unit.end_lsn
                self._delivered = max(self._delivered, unit.end_lsn)
                batch.rows_at_last_unit = batch.rows
                yield unit
                if limit is not None and batch.rows >= limit:
                    break
        finally:
            units.close()
            self._target = None
            # also when the caller stops the read early (capture's --rotate-size,
            # --max-changes): an unresolved PREPARE seen so far still holds the slot
            batch.hold_lsn = assembler.hold_lsn
            batch.incomplete = assembler.incomplete

    def _flush_position(self) -> int:
        rows = self._run("SELECT pg_current_wal_flush_lsn()::text", action="server position")
        return int(Lsn.parse(rows[0][0]))

    def idle_position(self, durable: int) -> Lsn | None:
        """The server's position taken from a keepalive while nothing was pending, if every
        unit read on this connection ends at or before ``durable`` (the caller's durable
        position) and it is past what was acknowledged; else ``None``.

        The caller records it durably as its own position, then passes it to
        :meth:`advance`: the slot moves on a quiet database.
        """
        idle = self._idle
        if idle is None or self._delivered > durable or idle <= (self._acked or 0) \
                or (self._assembler is not None and self._assembler.hold_lsn is not None):
            return None
        return Lsn(idle)

    def advance(self, lsn: int) -> Lsn | None:
        """Acknowledge ``lsn`` (the end of the last durable unit, or an
        :meth:`idle_position` recorded durably) to the server, never past a unit not
        delivered or an unresolved PREPARE, never backwards."""
        batch = self.last_batch
        target = int(lsn)
        ceiling = batch.last_end
        if self._idle is not None and self._delivered <= target:
            ceiling = max(ceiling or 0, self._idle)  # nothing pending up to there
        if ceiling is not None:
            target = min(target, ceiling)
        if self._assembler is not None and self._assembler.hold_lsn is not None:
            target = min(target, self._assembler.hold_lsn)
        if self._acked is not None and target <= self._acked:
            return self._confirmed
        self.check_position()
        self._acked = target
        self._status()
        self._confirmed = Lsn(target)
        return self._confirmed

    def check_position(self) -> None:
        """Raise :class:`SlotMovedError` unless this reader still holds the slot (no other
        process can move it then) and the slot is not past what this reader acknowledged."""
        rows = self._run("SELECT active_pid, confirmed_flush_lsn::text FROM "
                         "pg_replication_slots WHERE slot_name = :slot",
                         action="check slot position", slot=self.slot)
        if not rows:
            raise SlotError(f"replication slot {self.slot!r} no longer exists", slot=self.slot)
        pid, confirmed = rows[0]
        now = Lsn.parse(confirmed) if confirmed else None
        moved = now is not None and self._acked is not None and int(now) > self._acked
        if pid is None and not moved:
            # our walsender ended (terminated, or the server restarting) and nobody took
            # the slot past what this reader acknowledged: a lost connection, not a move
            self.close()
            raise ConnectionLostError(
                f"the server ended the replication connection of slot {self.slot!r} (no "
                "process holds the slot; it did not move)", slot=self.slot)
        if pid != self._walsender_pid or moved:
            raise SlotMovedError(
                f"replication slot {self.slot!r} is no longer held by this reader (active PID "
                f"{pid}, confirmed {now}): changes may have been taken by another client",
                checkpoint_lsn=self._acked or 0, slot_lsn=int(now or 0))
