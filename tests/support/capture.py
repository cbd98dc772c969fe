"""Capture pgoutput messages from a live server through the SQL decoding interface.

:class:`Capturer` creates a publication and a ``pgoutput`` slot on a pg8000
connection and reads the slot with ``pg_logical_slot_get_binary_changes`` (or
``_peek_``), returning :class:`~pgcdc_events.protocol.capture.CaptureRow` objects,
the same rows a capture file holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from pgcdc_events.protocol.capture import CaptureRow
from pgcdc_events.protocol.lsn import Lsn

__all__ = [
    "Capturer",
    "SqlRunner",
    "message_types",
    "pgoutput_options",
    "quote_ident",
    "quote_literal",
]

#: The smallest value PostgreSQL accepts for ``logical_decoding_work_mem`` (kB).
MIN_WORK_MEM_KB = 64


class SqlRunner(Protocol):
    """Anything with pg8000 ``native.Connection.run``'s shape."""

    def run(self, sql: str, stream: Any = None, types: Any = None, **params: Any) -> Any:
        """Run one statement and return its rows (a list of lists, or None)."""
        ...


def quote_literal(value: str) -> str:
    """``value`` as an SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def quote_ident(name: str) -> str:
    """``name`` as an always-quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def _bool(value: bool) -> str:
    return "true" if value else "false"


def pgoutput_options(
    publication: str | Sequence[str],
    *,
    proto_version: int = 1,
    binary: bool = False,
    messages: bool = False,
    streaming: bool = False,
    two_phase: bool = False,
) -> list[tuple[str, str]]:
    """The pgoutput option pairs, as the strings pgoutput parses; defaults are left out."""
    names = [publication] if isinstance(publication, str) else list(publication)
    opts = [("proto_version", str(proto_version)), ("publication_names", ",".join(names))]
    if binary:
        opts.append(("binary", _bool(binary)))
    if messages:
        opts.append(("messages", _bool(messages)))
    if streaming:
        opts.append(("streaming", _bool(streaming)))
    if two_phase:
        opts.append(("two_phase", _bool(two_phase)))
    return opts


def message_types(rows: Iterable[CaptureRow]) -> list[str]:
    """The message type of each row: the first byte of its data, as a one-character string."""
    return [chr(row.data[0]) if row.data else "" for row in rows]


class Capturer:
    """A publication plus a pgoutput slot on ``conn``; :meth:`changes` reads the slot.

    ``tables`` are SQL table names (quote them yourself, e.g. ``'"Sales Ö"."Order-Items"'``);
    ``None`` publishes ``FOR ALL TABLES``. ``extra_publications`` are further publication
    names to decode (the caller creates them). With ``create=False`` nothing is created,
    for attaching to an existing slot and publication.
    """

    def __init__(
        self,
        conn: SqlRunner,
        *,
        slot: str = "s",
        publication: str = "pub",
        two_phase: bool = False,
        tables: Sequence[str] | None = None,
        extra_publications: Sequence[str] = (),
        create: bool = True,
    ) -> None:
        self.conn = conn
        self.slot = slot
        self.publication = publication
        self.two_phase = two_phase
        self.tables = list(tables) if tables is not None else None
        #: Every publication name passed to pgoutput's ``publication_names``.
        self.publication_names = [publication, *extra_publications]
        #: The LSN at which the slot became consistent (set by :meth:`create`).
        self.start_lsn: Lsn | None = None
        if create:
            self.create()

    def publication_sql(self) -> str:
        """The ``CREATE PUBLICATION`` statement this capturer runs."""
        target = "ALL TABLES" if self.tables is None else "TABLE " + ", ".join(self.tables)
        return f"CREATE PUBLICATION {quote_ident(self.publication)} FOR {target}"

    def slot_sql(self) -> str:
        """The statement creating the slot (``two_phase`` is the 4th argument on PG15)."""
        return (
            f"SELECT lsn::text FROM pg_create_logical_replication_slot("
            f"{quote_literal(self.slot)}, 'pgoutput', false, {_bool(self.two_phase)})"
        )

    def create(self) -> None:
        """Create the publication, then the slot (the slot only decodes WAL written after it)."""
        self.conn.run(self.publication_sql())
        rows = self.conn.run(self.slot_sql())
        self.start_lsn = Lsn.parse(rows[0][0])

    def drop(self) -> None:
        """Drop the slot and the publication if they exist."""
        self.conn.run(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
            " WHERE slot_name = :slot",
            slot=self.slot,
        )
        self.conn.run(f"DROP PUBLICATION IF EXISTS {quote_ident(self.publication)}")

    def options(
        self,
        proto_version: int = 1,
        binary: bool = False,
        messages: bool = False,
        streaming: bool = False,
        two_phase: bool = False,
    ) -> list[tuple[str, str]]:
        """The pgoutput option pairs for this capturer's publication."""
        return pgoutput_options(
            self.publication_names,
            proto_version=proto_version,
            binary=binary,
            messages=messages,
            streaming=streaming,
            two_phase=two_phase,
        )

    def changes_sql(
        self,
        proto_version: int = 1,
        binary: bool = False,
        messages: bool = False,
        streaming: bool = False,
        two_phase: bool = False,
        peek: bool = False,
        upto_nchanges: int | None = None,
    ) -> str:
        """The ``SELECT lsn, xid, data FROM pg_logical_slot_*_binary_changes(...)`` statement."""
        func = f"pg_logical_slot_{'peek' if peek else 'get'}_binary_changes"
        opts = self.options(proto_version, binary, messages, streaming, two_phase)
        limit = "NULL" if upto_nchanges is None else str(int(upto_nchanges))
        args = [quote_literal(self.slot), "NULL", limit]
        args += [f"{quote_literal(k)}, {quote_literal(v)}" for k, v in opts]
        return f"SELECT lsn::text, xid::text::bigint, data FROM {func}({', '.join(args)})"

    def changes(
        self,
        proto_version: int = 1,
        binary: bool = False,
        messages: bool = False,
        streaming: bool = False,
        work_mem: int | str | None = None,
        peek: bool = False,
        two_phase: bool = False,
        upto_nchanges: int | None = None,
    ) -> list[CaptureRow]:
        """Decode the slot (consuming unless ``peek``) and return the messages as capture rows.

        ``work_mem`` (kB as an int, or a string like ``'64kB'``) sets
        ``logical_decoding_work_mem`` for this call so big transactions stream;
        ``two_phase`` adds pgoutput's ``two_phase`` option (needs ``proto_version >= 3``).
        """
        sql = self.changes_sql(
            proto_version, binary, messages, streaming, two_phase, peek, upto_nchanges
        )
        if work_mem is not None:
            if isinstance(work_mem, int):
                work_mem = f"{max(work_mem, MIN_WORK_MEM_KB)}kB"
            self.conn.run(f"SET logical_decoding_work_mem = {quote_literal(work_mem)}")
        try:
            rows = self.conn.run(sql)
        finally:
            if work_mem is not None:
                self.conn.run("RESET logical_decoding_work_mem")
        return [
            CaptureRow(Lsn.parse(lsn), None if xid is None else int(xid), bytes(data))
            for lsn, xid, data in rows or []
        ]
