"""Read a logical replication slot over pg8000 through the SQL decoding interface.

pg8000 cannot stream a replication connection (COPY BOTH), so :class:`SlotReader`
uses the SQL functions: it *peeks* at the slot with
``pg_logical_slot_peek_binary_changes`` (through a server-side cursor, so a large
read never sits in client memory whole), hands complete units to the caller,
and moves the slot with ``pg_replication_slot_advance`` only when the caller
says what is durable (:meth:`SlotReader.advance`). It never calls the consuming
``pg_logical_slot_get_binary_changes``: nothing leaves the slot behind the
caller's back.

It creates the slot and the publication only when asked to, chooses the
pgoutput options the server supports, and turns every driver or server error
into one of the exceptions of :mod:`pgcdc_events.adapters.errors`.
"""

from __future__ import annotations

import contextlib
import functools
import operator
import struct
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import Any, Final, Literal

import attrs

from pgcdc_events.adapters.connection import ConnectionSettings, parse_conninfo, parse_dsn
from pgcdc_events.adapters.errors import (
    RETRY_HINT,
    AuthenticationError,
    ConnectionLostError,
    PrivilegeError,
    PublicationNotFoundError,
    ServerConfigError,
    SlotBusyError,
    SlotError,
    SlotLostError,
    SlotMovedError,
    SlotNotFoundError,
    SnapshotError,
)
from pgcdc_events.adapters.names import check_slot_name, quote_ident
from pgcdc_events.adapters.units import Unit, UnitAssembler
from pgcdc_events.errors import ConfigurationError
from pgcdc_events.protocol.capture import CaptureRow
from pgcdc_events.protocol.lsn import Lsn
from pgcdc_events.spill import MemoryBudget

__all__ = [
    "BatchInfo",
    "DecodingOptions",
    "ResolvedOptions",
    "SlotInfo",
    "SlotReader",
    "SlotStatus",
    "copy_out",
    "is_driver_error",
    "parse_dsn",
    "server_fields",
]

StreamingMode = Literal["off", "on", "parallel"]

#: Server versions (``server_version_num``) that introduced each protocol version.
_PROTO_SINCE = {1: 100000, 2: 140000, 3: 150000, 4: 160000}
_DEFAULT_MEMORY = 64 * 1024 * 1024
_CURSOR = "pgcdc_events_peek"


def _require_pg8000() -> Any:
    """``pg8000.native``, or a ConfigurationError naming the extra that installs it."""
    try:
        import pg8000.native  # noqa: PLC0415 - the optional 'pg' extra
    except ImportError:
        raise ConfigurationError("reading a slot needs pg8000: pip install "
                                 "'pgcdc-events[pg]'") from None
    return pg8000.native


# ---------------------------------------------------------------- options


@attrs.frozen
class DecodingOptions:
    """The pgoutput options to read with; ``None`` means "what the server and slot allow".

    ``proto_version`` defaults to the highest the server speaks (up to 4);
    ``messages`` to on where supported (PostgreSQL 14+); ``two_phase`` to what the
    slot was created with. ``streaming`` (``"on"``, or ``"parallel"`` for protocol
    4) makes the server send large transactions before they commit; they are
    still delivered whole. ``binary`` asks for the types' binary send format.
    """

    proto_version: int | None = None
    binary: bool = False
    messages: bool | None = None
    streaming: StreamingMode = "off"
    two_phase: bool | None = None

    def resolve(self, server_version: int, slot_two_phase: bool) -> ResolvedOptions:
        """Concrete options for a server; unsupported requests raise :class:`ServerConfigError`."""
        major = f"{server_version // 10000}"
        supported = [v for v, since in _PROTO_SINCE.items() if server_version >= since]
        if not supported:
            raise ServerConfigError(f"PostgreSQL {major} has no pgoutput logical decoding "
                                    "(version 10 or later is needed)")
        proto = self.proto_version if self.proto_version is not None else max(supported)
        if proto not in _PROTO_SINCE:
            raise ConfigurationError(f"proto_version must be 1 to 4, got {proto}")
        if proto not in supported:
            raise ServerConfigError(f"proto_version {proto} needs PostgreSQL "
                                    f"{_PROTO_SINCE[proto] // 10000}; the server is {major}")
        if self.binary and server_version < 140000:
            raise ServerConfigError(f"binary needs PostgreSQL 14; the server is {major}")
        messages = self.messages if self.messages is not None else server_version >= 140000
        if messages and server_version < 140000:
            raise ServerConfigError(f"messages needs PostgreSQL 14; the server is {major}")
        needs = {"on": 2, "parallel": 4}.get(self.streaming)
        if needs is not None and proto < needs:
            raise ConfigurationError(f"streaming {self.streaming!r} needs proto_version "
                                     f"{needs} or higher, got {proto}")
        two_phase = self.two_phase if self.two_phase is not None else slot_two_phase
        if two_phase and proto < 3:
            raise ConfigurationError(f"two_phase needs proto_version 3 or higher, got {proto}")
        if two_phase and not slot_two_phase:
            raise ConfigurationError("two_phase: the slot was created without two-phase "
                                     "decoding; create it with two_phase (or do not ask for it)")
        return ResolvedOptions(proto, self.binary, messages, self.streaming, two_phase)


@attrs.frozen
class ResolvedOptions:
    """The options actually sent to pgoutput."""

    proto_version: int
    binary: bool
    messages: bool
    streaming: StreamingMode
    two_phase: bool

    def pgoutput_args(self, publications: Sequence[str]) -> list[tuple[str, str]]:
        """The option pairs for the decoding functions (defaults left out)."""
        # publication_names is parsed as a list of SQL identifiers: quote each.
        names = ",".join(quote_ident(p) for p in publications)
        args = [("proto_version", str(self.proto_version)), ("publication_names", names)]
        if self.binary:
            args.append(("binary", "true"))
        if self.messages:
            args.append(("messages", "true"))
        if self.streaming != "off":
            args.append(("streaming", self.streaming))
        if self.two_phase:
            args.append(("two_phase", "true"))
        return args

    def as_dict(self) -> dict[str, Any]:
        """The options as a JSON-able mapping (stored in checkpoints)."""
        return attrs.asdict(self)


# ---------------------------------------------------------------- state objects


@attrs.frozen
class SlotInfo:
    """What :meth:`SlotReader.prepare` found (or created)."""

    slot: str
    database: str
    server_version: int
    confirmed_lsn: Lsn | None
    restart_lsn: Lsn | None
    two_phase: bool
    created_slot: bool
    created_publications: tuple[str, ...]
    options: ResolvedOptions
    #: The server's identity (``pg_control_system()``, the timeline of its last checkpoint)
    #: and its WAL position when the slot was checked.
    system_identifier: str | None = None
    timeline: int | None = None
    current_lsn: Lsn | None = None

    @property
    def server(self) -> dict[str, Any]:
        """What a checkpoint records of the server (see :meth:`DurableOutput.bind`)."""
        return {"system_identifier": self.system_identifier, "timeline": self.timeline}


@attrs.frozen
class SlotStatus:
    """The slot's positions and how far behind the server's WAL it is."""

    confirmed_lsn: Lsn | None
    restart_lsn: Lsn | None
    current_lsn: Lsn
    active_pid: int | None
    wal_status: str | None

    @property
    def lag_bytes(self) -> int | None:
        """WAL bytes written since the slot's confirmed position (what is not yet delivered)."""
        return None if self.confirmed_lsn is None else max(self.current_lsn - self.confirmed_lsn,
                                                           0)

    @property
    def retained_bytes(self) -> int | None:
        """WAL bytes the server keeps for this slot (from its restart position)."""
        return None if self.restart_lsn is None else max(self.current_lsn - self.restart_lsn, 0)


@attrs.define
class BatchInfo:
    """What the last :meth:`SlotReader.read` saw."""

    rows: int = 0
    units: int = 0
    limit: int | None = None
    last_end: int | None = None
    #: Rows read when the last complete unit ended (the rows a re-read must cover).
    rows_at_last_unit: int = 0
    hold_lsn: int | None = None
    incomplete: int = 0

    @property
    def hit_limit(self) -> bool:
        """Whether the read stopped at its row limit (more may be waiting)."""
        return self.limit is not None and self.rows >= self.limit


# ---------------------------------------------------------------- error translation


def server_fields(exc: BaseException) -> tuple[str | None, str]:
    args = getattr(exc, "args", ())
    if args and isinstance(args[0], dict):
        fields = args[0]
        return fields.get("C"), str(fields.get("M", "")) or str(exc)
    return None, str(exc)


#: pg8000's InterfaceError texts for a socket that failed or closed (the rest are not).
_LOST_TEXTS: Final = frozenset({"network error", "communication error", "connection is closed"})


def _lost(exc: BaseException, message: str) -> bool:
    """Whether a driver error without a SQLSTATE is the connection itself failing: a
    socket error, or pg8000's InterfaceError wrapping one."""
    if isinstance(exc, OSError) or isinstance(exc.__cause__, OSError):
        return True
    if not type(exc).__module__.startswith("pg8000"):
        return True  # (not the driver's: as before)
    return message.strip().lower() in _LOST_TEXTS or message.startswith("Can't create a connection")


def _without_sqlstate(exc: BaseException, message: str, where: str, slot: str | None,
                      password_source: str) -> SlotError:
    """A driver or socket error that carries no SQLSTATE."""
    if _lost(exc, message):
        return ConnectionLostError(f"{where}connection to the server lost or refused: {message}",
                                   slot=slot, hint=RETRY_HINT)
    # pg8000's InterfaceError for what is not the connection: the server's authentication
    # request, a refused TLS, the driver's own checks (and ours on COPY)
    lowered = message.lower()
    if "password" in lowered or "authentication" in lowered:
        source = password_source or "see --dsn"
        return AuthenticationError(f"{where}{message}", slot=slot,
                                   hint=f"check the password ({source}); passwords come from "
                                   "the DSN, PGPASSWORD, --dsn-file or ~/.pgpass")
    return SlotError(f"{where}the driver stopped: {message}", slot=slot,
                     hint="not a lost connection: reconnecting would not help")


_REPLICATION_HINT = "the role needs the REPLICATION attribute (ALTER ROLE ... REPLICATION) or " \
    "superuser"


#: What to do about an invalidated slot (the hint of :class:`SlotLostError`).
LOST_SLOT_HINT = ("with --snapshot-mode when_needed --create-slot the capture replaces the slot "
                  "and appends a new snapshot of the tables to this output, then streams (the "
                  "changes in between are not recoverable); see docs/operations.md, 'When the "
                  "slot is lost'")


def translate_error(exc: BaseException, *, slot: str | None, publications: Sequence[str] = (),
                    action: str = "", password_source: str = "") -> SlotError:
    """One of our exceptions for a pg8000 or socket error, chosen by SQLSTATE (see the
    module docstring); ``password_source`` says where the password came from."""
    code, message = server_fields(exc)
    where = f"{action}: " if action else ""
    pubs = ", ".join(repr(p) for p in publications)
    if code is None:
        return _without_sqlstate(exc, message, where, slot, password_source)
    text = f"{where}{message}"
    lowered = message.lower()
    if code == "42704" and "publication" in lowered:
        return PublicationNotFoundError(text, slot=slot, sqlstate=code,
                                        hint=f"create it (CREATE PUBLICATION ... FOR ALL TABLES)"
                                        f" or pass --create-publication; asked for {pubs}")
    if code == "42704":
        return SlotNotFoundError(text, slot=slot, sqlstate=code,
                                 hint="create it with --create-slot")
    if code == "55006":
        return SlotBusyError(text, slot=slot, sqlstate=code,
                             hint="another session is reading the slot; retry later")
    if code == "55000" and "wal_level" in lowered:
        return ServerConfigError(text, slot=slot, sqlstate=code,
                                 hint="set wal_level = logical and restart the server")
    if code == "55000" and ("invalidated" in lowered or "no longer" in lowered):
        return SlotLostError(text, slot=slot, sqlstate=code, hint=LOST_SLOT_HINT)
    if code == "28P01":  # invalid_password
        return AuthenticationError(text, slot=slot, sqlstate=code,
                                   hint=f"check the password ({password_source or 'see --dsn'})"
                                   "; passwords come from the DSN, PGPASSWORD, --dsn-file or "
                                   "~/.pgpass")
    if "replication" in lowered and ("superuser" in lowered or "role" in lowered) \
            and code in ("42501", "28000"):
        return PrivilegeError(text, slot=slot, sqlstate=code, hint=_REPLICATION_HINT)
    if code == "28000" and "pg_hba.conf" in lowered:
        return AuthenticationError(text, slot=slot, sqlstate=code,
                                   hint="the server's pg_hba.conf has no line for this host, "
                                   "user, database and encryption (see sslmode)")
    if code.startswith("28"):
        return AuthenticationError(text, slot=slot, sqlstate=code,
                                   hint="check the user name and the server's pg_hba.conf")
    if code == "42501" and "database" in lowered:
        return PrivilegeError(text, slot=slot, sqlstate=code,
                              hint="the role needs CONNECT on the database (GRANT CONNECT ON "
                              "DATABASE ... TO ...)")
    if code == "42501":
        return PrivilegeError(text, slot=slot, sqlstate=code,
                              hint="the role lacks a privilege the statement needs")
    if code == "3D000":
        return SlotError(text, slot=slot, sqlstate=code, hint="check dbname in the DSN")
    if code.startswith(("08", "57P")):
        return ConnectionLostError(text, slot=slot, sqlstate=code,
                                   hint=RETRY_HINT)
    return SlotError(text, slot=slot, sqlstate=code)


# ---------------------------------------------------------------- the reader


def is_driver_error(exc: BaseException) -> bool:
    """A pg8000 or socket error (translated), not a bug or one of our own errors."""
    return isinstance(exc, OSError) or type(exc).__module__.startswith("pg8000")


Connector = Callable[[], Any]


class SlotReader:
    """Peek at a logical slot, hand out complete units, advance only to durable positions.

    ``dsn`` is a ``postgresql://`` URL, a libpq ``key=value`` string or pg8000
    keyword arguments; ``connector`` (tests) replaces the connection factory.
    ``memory_limit`` bounds the rows of incomplete units held in memory (they
    spill to a temporary file beyond it); ``fetch_rows`` is how many rows each
    cursor FETCH brings; ``session_settings`` are ``SET`` before reading (for
    instance ``logical_decoding_work_mem``).

    Typical use::

        reader = SlotReader(dsn, slot="s", publications=["p"])
        reader.connect()
        reader.prepare()
        for unit in reader.read(after=checkpoint_lsn, limit=10_000):
            ...write the unit's rows somewhere durable...
        reader.advance(last_durable_end_lsn)
    """

    def __init__(self, dsn: str | Mapping[str, Any] | ConnectionSettings | None = None, *,
                 slot: str,
                 publications: Sequence[str], options: DecodingOptions | None = None,
                 memory_limit: int | None = _DEFAULT_MEMORY, fetch_rows: int = 1000,
                 session_settings: Mapping[str, str] | None = None,
                 connector: Connector | None = None) -> None:
        check_slot_name(slot)
        if not publications or not all(publications):
            raise ConfigurationError("--publication: at least one publication name is required")
        if fetch_rows < 1:
            raise ConfigurationError(f"fetch_rows must be positive, got {fetch_rows}")
        self.slot = slot
        self.publications = tuple(publications)
        self.requested = options or DecodingOptions()
        self.fetch_rows = fetch_rows
        self.session_settings = dict(session_settings or {})
        self.settings = (dsn if isinstance(dsn, ConnectionSettings) or dsn is None
                         else parse_conninfo(dsn))
        self._connector = connector
        if connector is None:
            _require_pg8000()  # before the caller creates files for a read that cannot run
        self._budget = MemoryBudget(memory_limit) if memory_limit is not None else None
        #: Hold units' rows as capture lines (see :class:`UnitAssembler`): set by a
        #: consumer that writes them as they are (the capture sink).
        self.render = False
        self._conn: Any = None
        self.info: SlotInfo | None = None
        self.last_batch = BatchInfo()
        self._confirmed: Lsn | None = None
        #: The server's flush position before the last peek, when that peek returned
        #: everything up to it and left nothing pending (see :meth:`idle_position`).
        self._idle: int | None = None
        #: The snapshot the slot exported when :meth:`prepare` created it for one (its
        #: name and the slot's consistent point), until :meth:`finish_snapshot`.
        self.exported: tuple[str, Lsn] | None = None
        self._exporter: Any = None  # the replication connection that holds it

    # -- connection ------------------------------------------------------------------------
    def connect(self) -> None:
        """Open the connection (closing any previous one)."""
        self.close()
        try:
            if self._connector is not None:
                self._conn = self._connector()
            else:
                self._conn, _ = (self.settings or parse_conninfo({})).connect(slot=self.slot)
        except (ConfigurationError, SlotError):
            raise
        except Exception as exc:
            raise translate_error(exc, slot=self.slot, action="connect",
                                  password_source=self._password_source) from None
        version = int(self._run("SHOW server_version_num", action="connect")[0][0])
        settings = dict(self.session_settings)
        if version >= 140000:
            # Let the server notice a vanished client (killed process) during a long read.
            settings.setdefault("client_connection_check_interval", "1s")
        for name, value in settings.items():
            self._run("SELECT set_config(:name, :value, false)", action=f"SET {name}",
                      name=name, value=value)

    @property
    def _password_source(self) -> str:
        return self.settings.password_source if self.settings is not None else ""

    def close(self) -> None:
        """Close the connection if open (never raises)."""
        self._close_exporter()
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):  # the connection may already be dead
                conn.close()

    def _close_exporter(self) -> None:
        exporter, self._exporter = self._exporter, None
        self.exported = None
        if exporter is not None:
            with contextlib.suppress(Exception):
                exporter.close()

    @property
    def connected(self) -> bool:
        """Whether the SQL connection is open."""
        return self._conn is not None

    def run_sql(self, sql: str, *, action: str, **params: Any) -> list[list[Any]]:
        """One statement on the SQL connection, values bound (errors translated)."""
        return self._run(sql, action=action, **params)

    def call(self, function: Callable[[Any], Any], *, action: str) -> Any:
        """``function(connection)`` on the SQL connection (a pg8000 native connection),
        its errors translated as for :meth:`run_sql`."""
        if self._conn is None:
            raise ConnectionLostError(f"{action}: not connected", slot=self.slot)
        try:
            return function(self._conn)
        except SlotError:
            raise
        except Exception as exc:
            if not is_driver_error(exc):
                raise
            error = translate_error(exc, slot=self.slot, publications=self.publications,
                                    action=action)
            if isinstance(error, ConnectionLostError):
                self.close()
            raise error from None

    def __enter__(self) -> SlotReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, sql: str, *, action: str, **params: Any) -> list[list[Any]]:
        """Run one statement through the extended protocol (values bound, never
        interpolated; the server refuses a second statement in ``sql``)."""
        if self._conn is None:
            raise ConnectionLostError(f"{action}: not connected", slot=self.slot)
        try:
            if params:
                rows = self._conn.run(sql, **params)
            else:  # pg8000 sends parameter-less SQL as a simple query: prepare it instead
                statement = self._conn.prepare(sql)
                try:
                    rows = statement.run()
                finally:
                    statement.close()
        except Exception as exc:
            error = translate_error(exc, slot=self.slot, publications=self.publications,
                                    action=action)
            if isinstance(error, ConnectionLostError):
                self.close()
            raise error from None
        return list(rows or [])

    # -- checks and creation ---------------------------------------------------------------
    def prepare(self, *, create_slot: bool = False, create_publication: bool = False,
                tables: Sequence[str] | None = None, snapshot: bool = False,
                replace_slot: bool = False, before_create: Callable[[], None] | None = None
                ) -> SlotInfo:
        """Check that the slot can be read; create slot and publication only when asked.

        Raises :class:`ServerConfigError` (``wal_level``), :class:`PrivilegeError`,
        :class:`PublicationNotFoundError`, :class:`SlotNotFoundError`,
        :class:`SlotLostError` or :class:`SlotError` (wrong plugin or database).
        ``tables`` limits a created publication (``FOR ALL TABLES`` otherwise).

        ``snapshot``: the slot must be created now, exporting its snapshot
        (:attr:`exported`; see :mod:`pgcdc_events.adapters.snapshot`); a slot that
        exists already is a :class:`SnapshotError`, unless ``replace_slot`` (a snapshot
        of this output that did not finish created it): it is then dropped first.
        ``before_create`` is called once every check passed, just before that.
        """
        version = int(self._run("SHOW server_version_num", action="check")[0][0])
        wal_level = self._run("SHOW wal_level", action="check")[0][0]
        if wal_level != "logical":
            raise ServerConfigError(
                f"wal_level is {wal_level!r}: logical decoding needs wal_level = logical",
                slot=self.slot, hint="ALTER SYSTEM SET wal_level = logical; then restart the "
                "server")
        database, allowed = self._run(
            "SELECT current_database(), (SELECT rolsuper OR rolreplication FROM pg_roles"
            " WHERE rolname = current_user)", action="check")[0]
        if not allowed:
            raise PrivilegeError(
                "the role may not read replication slots", slot=self.slot,
                hint=_REPLICATION_HINT)
        created_pubs = self._publications(create_publication, tables)
        created_slot = False
        row = self._slot_row(version)
        if snapshot and row is not None and not replace_slot:
            raise SnapshotError(
                f"replication slot {self.slot!r} exists already: a snapshot consistent "
                "with a slot can only be taken when the slot is created", slot=self.slot,
                hint="use --snapshot-mode no_data to stream from the slot's position "
                "without a snapshot, or drop the slot (or name a new one) to take one")
        if row is None and not create_slot:
            raise SlotNotFoundError(
                f"replication slot {self.slot!r} does not exist", slot=self.slot,
                hint="create it with --create-slot (it decodes only changes made after)")
        if snapshot:
            if before_create is not None:
                before_create()
            if row is not None:
                self._drop_unfinished(version)
            self._create_slot_exporting(version)
            created_slot = True
            row = self._slot_row(version)
            assert row is not None
        elif row is None:
            self._create_slot(version)
            created_slot = True
            row = self._slot_row(version)
            assert row is not None
        slot_type, plugin, slot_db, two_phase, confirmed, restart, wal_status = row
        if slot_type != "logical" or plugin != "pgoutput":
            raise SlotError(f"replication slot {self.slot!r} is a {slot_type} slot of plugin "
                            f"{plugin!r}; a logical pgoutput slot is needed", slot=self.slot)
        if slot_db != database:
            raise SlotError(f"replication slot {self.slot!r} belongs to database {slot_db!r}, "
                            f"not {database!r}", slot=self.slot,
                            hint=f"connect to database {slot_db!r}")
        if wal_status == "lost":
            keep = self._run("SHOW max_slot_wal_keep_size", action="check")[0][0]
            raise SlotLostError(
                f"replication slot {self.slot!r} was invalidated by the server (wal_status "
                f"'lost'): it held more WAL than max_slot_wal_keep_size ({keep}) allows, so the "
                f"WAL it needs is gone and the changes after {confirmed or 'its position'} can "
                "no longer be read", slot=self.slot, hint=LOST_SLOT_HINT)
        options = self.requested.resolve(version, bool(two_phase))
        self._confirmed = Lsn.parse(confirmed) if confirmed else None
        sysid, timeline, current = self._run(
            "SELECT (SELECT system_identifier::text FROM pg_control_system()), (SELECT "
            "timeline_id FROM pg_control_checkpoint()), pg_current_wal_lsn()::text",
            action="check server")[0]
        self.info = SlotInfo(self.slot, database, version, self._confirmed,
                             Lsn.parse(restart) if restart else None, bool(two_phase),
                             created_slot, created_pubs, options, sysid,
                             None if timeline is None else int(timeline), Lsn.parse(current))
        return self.info

    def _publications(self, create: bool, tables: Sequence[str] | None) -> tuple[str, ...]:
        found = {r[0] for r in self._run(
            "SELECT pubname FROM pg_publication WHERE pubname = ANY(CAST(:names AS text[]))",
            action="check publications", names=list(self.publications))}
        missing = [p for p in self.publications if p not in found]
        if missing and not create:
            raise PublicationNotFoundError(
                f"publication(s) {', '.join(repr(p) for p in missing)} do not exist in this "
                "database", slot=self.slot,
                hint="create them (CREATE PUBLICATION ... FOR ALL TABLES) or pass "
                "--create-publication")
        target = ("ALL TABLES" if not tables
                  else "TABLE " + ", ".join(self._table(t) for t in tables))
        for name in missing:
            self._run(f"CREATE PUBLICATION {quote_ident(name)} FOR {target}",
                      action=f"create publication {name!r}")
        return tuple(missing)

    def _table(self, name: str) -> str:
        """A table name as SQL reads it (``schema.table``, quoted parts, the search path),
        resolved by the server with the name bound, returned schema-qualified and quoted."""
        try:
            rows = self._run(
                "SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = "
                "c.relnamespace WHERE c.oid = to_regclass(:name)", action="check --table",
                name=name)
        except SlotError as exc:
            if exc.sqlstate in ("42602", "42601", "3F000", "3D000", "0A000"):
                raise ConfigurationError(f"--table {name!r}: not a table name ({exc})") from None
            raise
        if not rows:
            raise ConfigurationError(f"--table {name!r}: no such table (a name is folded to lower "
                                     'case unless quoted: --table \'"MyTable"\')')
        schema, table = rows[0]
        return f"{quote_ident(schema)}.{quote_ident(table)}"

    def _slot_row(self, version: int) -> list[Any] | None:
        two_phase = "two_phase" if version >= 140000 else "false"
        wal_status = "wal_status" if version >= 130000 else "NULL"
        rows = self._run(
            f"SELECT slot_type, plugin, (SELECT datname FROM pg_database d WHERE d.oid = s.datoid),"
            f" {two_phase}, confirmed_flush_lsn::text, restart_lsn::text, {wal_status}"
            " FROM pg_replication_slots s WHERE slot_name = :slot",
            action="check slot", slot=self.slot)
        return rows[0] if rows else None

    def _drop_unfinished(self, version: int) -> None:
        """Drop the slot a snapshot of this output created and never finished (its changes
        were never read: the output holds nothing from it)."""
        rows = self._run("SELECT active_pid FROM pg_replication_slots WHERE slot_name = :slot",
                         action="check slot", slot=self.slot)
        if rows and rows[0][0] is not None:
            raise SlotBusyError(f"replication slot {self.slot!r} is active for PID {rows[0][0]}",
                                slot=self.slot, hint="another session is reading the slot; "
                                "retry later")
        if rows:
            self._run("SELECT pg_drop_replication_slot(:slot)",
                      action=f"drop slot {self.slot!r} of the unfinished snapshot",
                      slot=self.slot)

    def _create_slot_exporting(self, version: int) -> None:
        """``CREATE_REPLICATION_SLOT ... (SNAPSHOT 'export')`` on a replication connection,
        kept open (and idle) so that the snapshot stays importable."""
        two_phase = bool(self.requested.two_phase)
        if version < 100000 or (two_phase and version < 150000):
            raise ServerConfigError(f"an initial snapshot{' with two_phase' * two_phase} needs "
                                    f"PostgreSQL {15 if two_phase else 10}; the server is "
                                    f"{version // 10000}", slot=self.slot)
        if self.settings is None:
            raise SnapshotError("an initial snapshot needs connection settings (a DSN), not a "
                                "connector", slot=self.slot)
        self._close_exporter()
        conn, _sock = self.settings.connect(replication="database", slot=self.slot)
        self._exporter = conn
        # The slot name was checked (lower-case letters, digits, underscores).
        if version >= 150000:
            options = "(TWO_PHASE, SNAPSHOT 'export')" if two_phase else "(SNAPSHOT 'export')"
        else:
            options = "EXPORT_SNAPSHOT"
        command = f'CREATE_REPLICATION_SLOT "{self.slot}" LOGICAL pgoutput {options}'
        try:
            rows = conn.run(command)
        except Exception as exc:
            self._close_exporter()
            if not is_driver_error(exc):
                raise
            raise translate_error(exc, slot=self.slot, action=f"create slot {self.slot!r}"
                                  ) from None
        _slot, consistent_point, snapshot_name, _plugin = rows[0]
        self.exported = (str(snapshot_name), Lsn.parse(consistent_point))

    def finish_snapshot(self) -> None:
        """The snapshot was read: release the connection that exported it."""
        self._close_exporter()

    def _create_slot(self, version: int) -> None:
        two_phase = self.requested.two_phase
        if two_phase and version < 150000:
            raise ServerConfigError(f"two_phase needs PostgreSQL 15; the server is "
                                    f"{version // 10000}", slot=self.slot)
        if version >= 140000:
            self._run("SELECT lsn::text FROM pg_create_logical_replication_slot(:slot, "
                      "'pgoutput', false, :two_phase)", action=f"create slot {self.slot!r}",
                      slot=self.slot, two_phase=bool(two_phase))
        else:
            self._run("SELECT lsn::text FROM pg_create_logical_replication_slot(:slot, "
                      "'pgoutput')", action=f"create slot {self.slot!r}", slot=self.slot)

    # -- reading ---------------------------------------------------------------------------
    def peek_sql(self, limit: int | None) -> tuple[str, dict[str, Any]]:
        """The ``SELECT`` over ``pg_logical_slot_peek_binary_changes`` a read runs, and the
        values bound to its parameters."""
        if self.info is None:
            raise SlotError("call prepare() before reading", slot=self.slot)
        params: dict[str, Any] = {"slot": self.slot, "upto": limit}
        args = [":slot", "NULL", "CAST(:upto AS integer)"]
        for i, (key, value) in enumerate(self.info.options.pgoutput_args(self.publications)):
            params[f"k{i}"], params[f"v{i}"] = key, value
            args += [f":k{i}", f":v{i}"]
        return ("SELECT lsn::text, xid::text, data FROM "
                f"pg_logical_slot_peek_binary_changes({', '.join(args)})", params)

    def rows(self, limit: int | None = None) -> Generator[CaptureRow, None, None]:
        """The raw rows of one peek at the slot, fetched through a cursor."""
        sql, params = self.peek_sql(limit)
        self._run("BEGIN", action="read")
        try:
            self._run(f"DECLARE {_CURSOR} NO SCROLL CURSOR FOR {sql}", action="read", **params)
            fetch = f"FETCH FORWARD {self.fetch_rows} FROM {_CURSOR}"
            while True:
                batch = self._run(fetch, action="read slot")
                for lsn, xid, data in batch:
                    yield CaptureRow(Lsn.parse(lsn), int(xid) if xid else None, bytes(data))
                if len(batch) < self.fetch_rows:
                    break
        finally:
            if self._conn is not None:
                try:
                    self._run("ROLLBACK", action="end read")
                except SlotError:
                    self.close()

    def read(self, after: int | None = None, limit: int | None = None
             ) -> Generator[Unit, None, None]:
        """Complete units of one peek, in commit order; see :class:`UnitAssembler`.

        ``after`` is the end LSN of the last unit already delivered durably (units at
        or before it come out with ``seen`` set); ``limit`` caps the rows the server
        decodes for this read (it stops at the first message boundary past it).
        The caller must consume or close the iterator before calling anything else.
        """
        if self.info is None:
            raise SlotError("call prepare() before reading", slot=self.slot)
        options = self.info.options
        assembler = UnitAssembler(proto_version=options.proto_version,
                                  streaming=options.streaming, budget=self._budget, after=after,
                                  render=self.render)
        batch = self.last_batch = BatchInfo(limit=limit)
        self._idle = None
        # every transaction committed before this position is in the peek, unless it stops
        # at ``limit``
        before = Lsn.parse(self._run("SELECT pg_current_wal_flush_lsn()::text",
                                     action="server position")[0][0])
        rows = self.rows(limit)
        try:
            for row in rows:
                batch.rows += 1
                unit = assembler.feed(row)
                if unit is not None:
                    batch.units += 1
                    batch.last_end = unit.end_lsn
                    batch.rows_at_last_unit = batch.rows
                    batch.hold_lsn = assembler.hold_lsn
                    yield unit
            batch.hold_lsn = assembler.hold_lsn
            batch.incomplete = assembler.incomplete
            if not batch.hit_limit and not assembler.incomplete:
                self._idle = int(before)
        finally:
            rows.close()  # ends the read's transaction now, not when garbage-collected
            assembler.reset()

    def advance(self, lsn: int) -> Lsn | None:
        """Move the slot to ``lsn`` (the end of the last durable unit), never past a unit
        the last read did not deliver or an unresolved PREPARE, never backwards.

        Returns the slot's confirmed position afterwards.
        """
        batch = self.last_batch
        target = int(lsn)
        ceiling = batch.last_end
        if self._idle is not None and (batch.last_end or 0) <= target:
            ceiling = max(ceiling or 0, self._idle)  # nothing pending up to there
        if ceiling is None:
            return self._confirmed
        target = min(target, ceiling)
        if batch.hold_lsn is not None:
            target = min(target, batch.hold_lsn)
        if self._confirmed is not None and target <= self._confirmed:
            return self._confirmed
        self.check_position()
        rows = self._run("SELECT end_lsn::text FROM pg_replication_slot_advance(:slot, "
                         "CAST(:lsn AS pg_lsn))", action="advance slot", slot=self.slot,
                         lsn=str(Lsn(target)))
        if rows and rows[0][0]:
            self._confirmed = Lsn.parse(rows[0][0])
        return self._confirmed

    def idle_position(self, durable: int) -> Lsn | None:
        """The server's flush position taken before the last peek, when that peek read
        everything up to it (not stopped by its limit) and left nothing pending (no
        transaction streamed or prepared and unresolved), if every unit it delivered ends
        at or before ``durable`` and it is past the slot's position; else ``None``.

        The caller records it durably, then passes it to :meth:`advance` (see
        :meth:`StreamReader.idle_position`).
        """
        idle = self._idle
        if idle is None or (self.last_batch.last_end or 0) > durable \
                or idle <= int(self._confirmed or 0):
            return None
        return Lsn(idle)

    def check_position(self) -> None:
        """Raise :class:`SlotMovedError` unless the slot is where this reader left it.

        A peek holds the slot only while it runs: between two reads another client
        can consume or advance it, and the changes it took would be missing here.
        Called before anything read is committed or acknowledged.
        """
        before = self._confirmed
        rows = self._run("SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
                         "WHERE slot_name = :slot", action="check slot position", slot=self.slot)
        if not rows:
            raise SlotNotFoundError(f"replication slot {self.slot!r} no longer exists",
                                    slot=self.slot, hint="see docs/operations.md, 'When the "
                                    "slot is lost'")
        now = Lsn.parse(rows[0][0]) if rows[0][0] else None
        if now != before:
            raise SlotMovedError(
                f"replication slot {self.slot!r} was moved by another client from {before} to "
                f"{now} while this capture was reading it: changes in between may have been "
                "taken; nothing read since was committed", checkpoint_lsn=int(before or 0),
                slot_lsn=int(now or 0))

    def status(self) -> SlotStatus:
        """The slot's confirmed and restart positions and the server's current WAL position."""
        rows = self._run(
            "SELECT confirmed_flush_lsn::text, restart_lsn::text, pg_current_wal_lsn()::text,"
            " active_pid, " + ("wal_status" if (self.info and self.info.server_version >= 130000)
                               else "NULL") + " FROM pg_replication_slots WHERE slot_name = :slot",
            action="slot status", slot=self.slot)
        if not rows:
            raise SlotNotFoundError(f"replication slot {self.slot!r} no longer exists",
                                    slot=self.slot, hint="see docs/operations.md, 'When the "
                                    "slot is lost'")
        confirmed, restart, current, pid, wal_status = rows[0]
        # (not taken as this reader's position: check_position() compares the two)
        return SlotStatus(Lsn.parse(confirmed) if confirmed else None,
                          Lsn.parse(restart) if restart else None,
                          Lsn.parse(current), pid, wal_status)

    @property
    def confirmed_lsn(self) -> Lsn | None:
        """The slot's confirmed position as this reader left it (after prepare or advance)."""
        return self._confirmed


_COPY_READ: Final = 1 << 18  # bytes asked of the socket at a time
_LENGTH = struct.Struct("!I")


_BOUNDARY: Final = b"\nd\0"
_LENGTH_BYTES = operator.itemgetter(slice(0, 3))
_ROW_TEXT = operator.itemgetter(slice(3, None))
_BIG_ENDIAN = functools.partial(int.from_bytes, byteorder="big")


def _copy_rows(buf: bytes, start: int, rows: list[bytes]) -> int:
    """The CopyData messages from ``start`` in ``buf`` taken at once, when they are what the
    server sends for COPY TO (one row a message: its text and a newline): appends their
    rows to ``rows`` and returns where the next message starts (``start`` when none is
    taken).

    The messages up to the last ``\\n d \\0`` (a newline ending a row, then the code and
    the first length byte of the next message, 0 below 16 MiB) are split there, and taken
    only if every piece's Int32 length is exactly its size: then each message, from the
    first, ends where the next piece begins, so the split is the framing itself (anything
    else, such as a notice between rows, a row cut between messages or a length byte
    that happens to look like a boundary, leaves the messages to the loop that reads one
    at a time)."""
    last = buf.rfind(_BOUNDARY, start)
    if last <= start or not buf.startswith(b"d\0", start):
        return start
    pieces = buf[start + 2:last].split(_BOUNDARY)  # each: the last 3 bytes of the length, the row
    sizes = list(map(len, pieces))
    lengths = map(_BIG_ENDIAN, map(_LENGTH_BYTES, pieces))  # = size + 2 (the \\n, 4 - 3)
    if list(map(operator.sub, lengths, sizes)).count(2) != len(pieces):
        return start
    rows.append(b"\n".join(map(_ROW_TEXT, pieces)) + b"\n")
    return last + 1


def _error_fields(buf: bytes, pos: int, end: int, encoding: str) -> dict[str, str] | None:
    """The fields of the whole ErrorResponse at ``pos`` of ``buf`` (up to ``end``), as
    pg8000 gives them; ``None`` when none is there whole."""
    if pos + 5 > end or buf[pos] != 0x45:
        return None
    nxt = pos + 1 + _LENGTH.unpack_from(buf, pos + 1)[0]
    if nxt > end:
        return None
    return {s[:1].decode("ascii"): s[1:].decode(encoding, errors="replace")
            for s in buf[pos + 5:nxt].split(b"\0") if s}


def copy_out(conn: Any, sql: str, write: Callable[[bytes], object]) -> None:
    """Run ``COPY ... TO STDOUT`` (text format) on a pg8000 connection, giving ``write``
    the COPY data in large pieces as it arrives (several rows a call, a row possibly cut
    between two calls), without pg8000's per-row message handling.

    Sends one simple Query and reads its messages straight from the connection's
    buffered socket up to ReadyForQuery, leaving the connection as pg8000 expects it.
    The server's error is raised as pg8000's ``DatabaseError`` (its fields as pg8000
    gives them, for :func:`translate_error`), once the server is ready again; a closed
    socket is pg8000's ``InterfaceError``. An exception raised by ``write`` (or a
    KeyboardInterrupt) leaves the connection in the middle of the COPY: close it.
    """
    pg8000 = _require_pg8000()
    sock = conn._sock
    conn.send_QUERY(sql)
    sock.flush()
    read1 = sock.read1
    unpack_length = _LENGTH.unpack_from
    buf = b""
    pos = 0
    error: dict[str, str] | None = None
    while True:
        try:
            data = read1(_COPY_READ)
        except OSError as exc:
            raise pg8000.InterfaceError("network error") from exc
        if not data:
            raise pg8000.InterfaceError("network error")
        buf = buf[pos:] + data if pos < len(buf) else data
        pos, end = 0, len(buf)
        rows: list[bytes] = []
        bulk = True  # the first CopyData of each read takes those after it at once if it can
        while pos + 5 <= end:
            code = buf[pos]
            if code == 0x64 and bulk:
                bulk = False
                pos = _copy_rows(buf, pos, rows)
                continue
            nxt = pos + 1 + unpack_length(buf, pos + 1)[0]
            if nxt > end:
                break
            if code == 0x64:  # CopyData
                rows.append(buf[pos + 5:nxt])
            elif code == 0x5A:  # ReadyForQuery: the end
                if rows:
                    write(b"".join(rows))
                if error is not None:
                    raise pg8000.DatabaseError(error)
                if nxt != end:
                    # the server's FATAL when it ended the session right after the COPY
                    # (terminated, or shutting down): that error, a lost connection
                    fatal = _error_fields(buf, nxt, end, conn._client_encoding)
                    if fatal is not None:
                        raise pg8000.DatabaseError(fatal)
                    raise pg8000.InterfaceError("unexpected data after the COPY")
                return
            elif code == 0x45:  # ErrorResponse
                error = _error_fields(buf, pos, end, conn._client_encoding)
            # else: CopyOutResponse, CopyDone, CommandComplete, a notice or a parameter
            # status: nothing to do
            pos = nxt
        if rows:
            write(b"".join(rows))
