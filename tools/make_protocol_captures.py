#!/usr/bin/env python
"""Regenerate the committed pgoutput captures in ``tests/protocol/captures/``.

Run by hand (``.venv/bin/python tools/make_protocol_captures.py``): it starts a throwaway
PostgreSQL cluster, runs every scenario in a fresh database, decodes a pgoutput slot
through the SQL interface and writes, per capture, ``<name>.jsonl`` (capture rows),
``<name>.sql`` (the SQL that produced it, with a header naming the slot, the pgoutput
options and the server version) and finally ``index.json``.

Every capture is checked with a small, independent byte scanner (not the library's
parser) so a fixture that stops exercising what it claims fails the run loudly.
"""

from __future__ import annotations

import argparse
import itertools
import json
import struct
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pg8000.native

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from pgcdc_events.protocol.capture import CaptureRow, write_capture  # noqa: E402
from pgcdc_events.testing.cluster import TempCluster  # noqa: E402
from support.capture import Capturer, message_types, quote_ident  # noqa: E402

OUT_DIR = ROOT / "tests" / "protocol" / "captures"
MAX_FILE_BYTES = 400_000


class CaptureCheckError(AssertionError):
    """A capture does not contain what its scenario promises."""


# ---------------------------------------------------------------------------
# An independent, minimal pgoutput scanner used only to check the fixtures.
# ---------------------------------------------------------------------------


@dataclass
class Msg:
    """What the checks need to know about one pgoutput message."""

    type: str
    lsn: int
    xid: int | None  # the capture row's xid column
    streamed: bool = False  # inside a Stream Start/Stop block
    body_xid: int | None = None  # xid carried in the message (streamed DML, S, c, A, b, P, ...)
    subxid: int | None = None  # Stream Abort
    first: int | None = None  # Stream Start first-segment flag
    old: str | None = None  # 'K' or 'O' for U/D
    kinds: list[str] = field(default_factory=list)  # column kinds of all tuples
    truncate_options: int | None = None
    transactional: int | None = None  # M flags
    prefix: str | None = None
    content: bytes | None = None
    name: str | None = None  # R relation, Y type, O origin, gid
    relid: int | None = None


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise CaptureCheckError(f"message truncated: {self.data.hex()}")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def u8(self) -> int:
        return self.take(1)[0]

    def i16(self) -> int:
        return int(struct.unpack(">h", self.take(2))[0])

    def i32(self) -> int:
        return int(struct.unpack(">i", self.take(4))[0])

    def u32(self) -> int:
        return int(struct.unpack(">I", self.take(4))[0])

    def i64(self) -> int:
        return int(struct.unpack(">q", self.take(8))[0])

    def cstr(self) -> str:
        end = self.data.index(b"\0", self.pos)
        out = self.data[self.pos : end].decode()
        self.pos = end + 1
        return out

    def tuple(self, msg: Msg) -> None:
        for _ in range(self.i16()):
            kind = chr(self.u8())
            msg.kinds.append(kind)
            if kind in "tb":
                self.take(self.i32())
            elif kind not in "nu":
                raise CaptureCheckError(f"unknown column kind {kind!r} in {self.data.hex()}")


def scan(rows: list[CaptureRow]) -> list[Msg]:
    """Walk every message, checking that each one is consumed exactly."""
    out: list[Msg] = []
    in_stream = False
    for row in rows:
        r = _Reader(row.data)
        t = chr(r.u8())
        m = Msg(t, int(row.lsn), row.xid, streamed=in_stream)
        if in_stream and t in "RYIUDTM":
            m.body_xid = r.u32()
        if t == "B":
            r.i64(), r.i64()
            m.body_xid = r.u32()
        elif t == "C":
            r.u8(), r.i64(), r.i64(), r.i64()
        elif t == "O":
            r.i64()
            m.name = r.cstr()
        elif t == "R":
            m.relid = r.u32()
            m.name = f"{r.cstr()}.{r.cstr()}"
            r.u8()
            for _ in range(r.i16()):
                r.u8(), r.cstr(), r.u32(), r.i32()
        elif t == "Y":
            r.u32()
            m.name = f"{r.cstr()}.{r.cstr()}"
        elif t == "I":
            m.relid = r.u32()
            if chr(r.u8()) != "N":
                raise CaptureCheckError(f"Insert without N: {row.data.hex()}")
            r.tuple(m)
        elif t == "U":
            m.relid = r.u32()
            k = chr(r.u8())
            if k in "KO":
                m.old = k
                r.tuple(m)
                k = chr(r.u8())
            if k != "N":
                raise CaptureCheckError(f"Update without N: {row.data.hex()}")
            r.tuple(m)
        elif t == "D":
            m.relid = r.u32()
            m.old = chr(r.u8())
            r.tuple(m)
        elif t == "T":
            n = r.i32()
            m.truncate_options = r.u8()
            for _ in range(n):
                r.u32()
        elif t == "M":
            m.transactional = r.u8()
            r.i64()
            m.prefix = r.cstr()
            m.content = r.take(r.i32())
        elif t == "S":
            m.body_xid = r.u32()
            m.first = r.u8()
            in_stream = True
        elif t == "E":
            in_stream = m.streamed = False
        elif t == "c":
            m.body_xid = r.u32()
            r.u8(), r.i64(), r.i64(), r.i64()
        elif t == "A":
            m.body_xid = r.u32()
            m.subxid = r.u32()
        elif t == "b":
            r.i64(), r.i64(), r.i64()
            m.body_xid = r.u32()
            m.name = r.cstr()
        elif t in "PKp":
            r.u8(), r.i64(), r.i64(), r.i64()
            m.body_xid = r.u32()
            m.name = r.cstr()
        elif t == "r":
            r.u8(), r.i64(), r.i64(), r.i64(), r.i64()
            m.body_xid = r.u32()
            m.name = r.cstr()
        else:
            raise CaptureCheckError(f"unknown message type {t!r}: {row.data.hex()}")
        if r.pos != len(row.data):
            raise CaptureCheckError(f"{len(row.data) - r.pos} trailing bytes in {row.data.hex()}")
        out.append(m)
    if in_stream:
        raise CaptureCheckError("capture ends inside a stream block")
    return out


def require(cond: object, what: str) -> None:
    """Fail the run with ``what`` unless ``cond``."""
    if not cond:
        raise CaptureCheckError(what)


def require_types(msgs: list[Msg], types: str) -> None:
    """Every message type in ``types`` occurs."""
    seen = {m.type for m in msgs}
    missing = [t for t in types if t not in seen]
    require(not missing, f"missing message types {missing}; saw {sorted(seen)}")


def forbid_types(msgs: list[Msg], types: str) -> None:
    """No message type in ``types`` occurs."""
    bad = sorted({m.type for m in msgs} & set(types))
    require(not bad, f"unexpected message types {bad}")


# ---------------------------------------------------------------------------
# Scenario plumbing
# ---------------------------------------------------------------------------


#: (session label, statement, parameters) for every statement a scenario runs.
LogEntry = tuple[str, str, dict[str, Any]]


class Session:
    """A pg8000 connection that logs every statement it runs into the scenario's log."""

    def __init__(self, env: Env, label: str) -> None:
        self.env = env
        self.label = label
        self.conn = pg8000.native.Connection(**{**env.cluster.dsn(), "database": env.database})

    def run(self, sql: str, stream: Any = None, types: Any = None, **params: Any) -> Any:
        """Run and log one statement (parameters are not used by the scenarios)."""
        self.env.log.append((self.label, sql, params))
        return self.conn.run(sql, stream=stream, types=types, **params)

    def fails(self, sql: str) -> str:
        """Run a statement that must fail; logs it and returns the server's message."""
        try:
            self.conn.run(sql)
        except pg8000.native.DatabaseError as exc:
            info = exc.args[0] if exc.args and isinstance(exc.args[0], dict) else {}
            message = str(info.get("M", exc))
            self.env.log.append((self.label, f"-- fails: {message}\n-- {sql}", {}))
            return message
        raise CaptureCheckError(f"expected failure: {sql}")

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()


@dataclass
class Capture:
    """One capture file's content and the options that produced it."""

    name: str
    description: str
    rows: list[CaptureRow]
    slot_sql: str
    decode_sql: str
    proto_version: int = 1
    binary: bool = False
    messages: bool = False
    streaming: bool = False
    two_phase: bool = False
    two_phase_option: bool = False
    work_mem: str | None = None
    notes: list[str] = field(default_factory=list)
    log: list[LogEntry] = field(default_factory=list)


class Env:
    """One scenario's database, sessions and statement log."""

    def __init__(self, cluster: TempCluster, admin: pg8000.native.Connection, name: str) -> None:
        self.cluster = cluster
        self.admin = admin
        self.database = f"cap_{name}"
        admin.run(f"CREATE DATABASE {quote_ident(self.database)}")
        self.log: list[LogEntry] = []
        self.schema_end: int | None = None  # log[:schema_end] is shared by every section
        self.section_start = 0  # a capture's .sql holds the schema plus its section
        self.sessions: list[Session] = []
        self.main = self.session("A")

    def end_schema(self) -> None:
        """Mark the statements so far as the schema every capture's .sql repeats."""
        self.schema_end = self.section_start = len(self.log)

    def new_section(self) -> None:
        """Start a new section: later captures' .sql omit statements logged before it."""
        self.section_start = len(self.log)

    def section_log(self) -> list[LogEntry]:
        """The schema followed by the current section."""
        if self.schema_end is None:
            return list(self.log)
        return self.log[: self.schema_end] + self.log[self.section_start :]

    def session(self, label: str) -> Session:
        """Open another connection to the scenario database."""
        s = Session(self, label)
        self.sessions.append(s)
        return s

    def sql(self, *statements: str) -> None:
        """Run statements on the main session."""
        for statement in statements:
            self.main.run(statement)

    def capture(
        self,
        cap: Capturer,
        name: str,
        description: str,
        *,
        proto_version: int = 1,
        binary: bool = False,
        messages: bool = False,
        streaming: bool = False,
        two_phase_option: bool = False,
        work_mem: str | None = None,
        notes: list[str] | None = None,
    ) -> Capture:
        """Decode (consume) ``cap``'s slot with the given options into a :class:`Capture`."""
        decode_sql = cap.changes_sql(proto_version, binary, messages, streaming, two_phase_option)
        rows = cap.changes(
            proto_version=proto_version,
            binary=binary,
            messages=messages,
            streaming=streaming,
            two_phase=two_phase_option,
            work_mem=work_mem,
        )
        return Capture(
            name=name,
            description=description,
            rows=rows,
            slot_sql=cap.slot_sql(),
            decode_sql=decode_sql,
            proto_version=proto_version,
            binary=binary,
            messages=messages,
            streaming=streaming,
            two_phase=cap.two_phase,
            two_phase_option=two_phase_option,
            work_mem=work_mem,
            notes=notes or [],
            log=self.section_log(),
        )

    def close(self) -> None:
        """Close sessions, drop this database's slots and the database."""
        for s in self.sessions:
            s.close()
        self.admin.run(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
            " WHERE database = :db",
            db=self.database,
        )
        self.admin.run(f"DROP DATABASE {quote_ident(self.database)} WITH (FORCE)")


def filler(env_sql: Callable[[str], Any], kb: int) -> None:
    """Insert about ``kb`` kB into the unpublished ``filler`` table (drives streaming)."""
    env_sql(f"INSERT INTO filler SELECT g, repeat('x', 1000) FROM generate_series(1, {kb}) g")


# ---------------------------------------------------------------------------
# Scenarios
# ---------------------------------------------------------------------------

BASIC_SCHEMA = [
    "CREATE TABLE items (id int PRIMARY KEY, name text, qty int, price numeric(10,2))",
    'CREATE SCHEMA "Sales Ö"',
    'CREATE TABLE "Sales Ö"."Order-Items" ("Id" bigint PRIMARY KEY, "Ünit Price" numeric,'
    ' "Mixed Case" text, plain text)',
    "CREATE TABLE nopk_default (a int, b text)",
    "CREATE TABLE nopk_full (a int, b text)",
    "ALTER TABLE nopk_full REPLICA IDENTITY FULL",
    "CREATE TABLE ri_default (id int PRIMARY KEY, code text NOT NULL, val text)",
    "CREATE TABLE ri_full (id int PRIMARY KEY, code text NOT NULL, val text)",
    "ALTER TABLE ri_full REPLICA IDENTITY FULL",
    "CREATE TABLE ri_nothing (id int PRIMARY KEY, code text NOT NULL, val text)",
    "ALTER TABLE ri_nothing REPLICA IDENTITY NOTHING",
    "CREATE TABLE ri_index (id int PRIMARY KEY, code text NOT NULL, region text NOT NULL,"
    " val text)",
    "CREATE UNIQUE INDEX ri_index_code_region ON ri_index (code, region)",
    "ALTER TABLE ri_index REPLICA IDENTITY USING INDEX ri_index_code_region",
]

BASIC_TABLES = [
    "items",
    '"Sales Ö"."Order-Items"',
    "nopk_full",
    "ri_default",
    "ri_full",
    "ri_index",
]

BASIC_WORKLOAD = [
    # single-row autocommit transactions
    "INSERT INTO items VALUES (1, 'apple', 3, 1.50)",
    "UPDATE items SET qty = 4 WHERE id = 1",
    "DELETE FROM items WHERE id = 1",
    # multi-row statement, NULLs
    "INSERT INTO items VALUES (2, 'pear', NULL, 2.25), (3, NULL, 7, NULL), (4, 'fig', 1, 0.99)",
    # multi-statement transaction
    "BEGIN",
    "INSERT INTO items VALUES (5, 'kiwi', 10, 0.30)",
    "UPDATE items SET price = NULL, name = 'Kiwi' WHERE id = 5",
    "UPDATE items SET id = 50 WHERE id = 5",
    "DELETE FROM items WHERE id IN (2, 3)",
    "COMMIT",
    # quoted, mixed-case, non-ASCII identifiers and values
    'INSERT INTO "Sales Ö"."Order-Items" VALUES (1, 12.5, \'Ünïcødé ✓\', NULL)',
    'UPDATE "Sales Ö"."Order-Items" SET "Ünit Price" = 13 WHERE "Id" = 1',
    'DELETE FROM "Sales Ö"."Order-Items" WHERE "Id" = 1',
    # no primary key: DEFAULT accepts only inserts while published for update/delete
    "INSERT INTO nopk_default VALUES (1, 'one'), (NULL, NULL)",
    "INSERT INTO nopk_full VALUES (1, 'one'), (2, NULL)",
    "UPDATE nopk_full SET b = 'uno' WHERE a = 1",
    "DELETE FROM nopk_full WHERE a = 2",
]

RI_WORKLOAD = [
    # DEFAULT (primary key): identity unchanged -> no old tuple; changed -> 'K'
    "INSERT INTO ri_default VALUES (1, 'c1', 'v1')",
    "UPDATE ri_default SET val = 'v2' WHERE id = 1",
    "UPDATE ri_default SET id = 2 WHERE id = 1",
    "DELETE FROM ri_default WHERE id = 2",
    # FULL: always 'O'
    "INSERT INTO ri_full VALUES (1, 'c1', 'v1')",
    "UPDATE ri_full SET val = 'v2' WHERE id = 1",
    "UPDATE ri_full SET id = 2 WHERE id = 1",
    "DELETE FROM ri_full WHERE id = 2",
    # NOTHING: inserts only are published (see ri_nothing notes)
    "INSERT INTO ri_nothing VALUES (1, 'c1', 'v1')",
    "UPDATE ri_nothing SET val = 'v2' WHERE id = 1",
    "UPDATE ri_nothing SET id = 2 WHERE id = 1",
    "DELETE FROM ri_nothing WHERE id = 2",
    # USING INDEX (code, region): changed only when code/region change -> 'K'
    "INSERT INTO ri_index VALUES (1, 'c1', 'eu', 'v1')",
    "UPDATE ri_index SET val = 'v2' WHERE id = 1",
    "UPDATE ri_index SET id = 2 WHERE id = 1",
    "UPDATE ri_index SET region = 'us' WHERE id = 2",
    "DELETE FROM ri_index WHERE id = 2",
]


def _relid(env: Env, table: str) -> int:
    return int(env.main.conn.run("SELECT CAST(:t AS regclass)::oid", t=table)[0][0])


def check_basic(env: Env, msgs: list[Msg]) -> None:
    """The basic workload's expected shapes."""
    require_types(msgs, "BCRIUD")
    forbid_types(msgs, "SEcAbPKrpTMOY")
    rel = {name: _relid(env, name) for name in [*BASIC_TABLES, "nopk_default", "ri_nothing"]}
    rel_names = {m.name for m in msgs if m.type == "R"}
    require("Sales Ö.Order-Items" in rel_names, f"non-ASCII relation missing: {rel_names}")

    def dml(table: str, t: str) -> list[Msg]:
        return [m for m in msgs if m.type == t and m.relid == rel[table]]

    require(any("n" in m.kinds for m in dml("items", "I")), "no NULL column in items inserts")
    require(len(dml("nopk_default", "I")) == 2, "nopk_default inserts")
    require([m.old for m in dml("nopk_full", "U")] == ["O"], "nopk_full update has O")
    require([m.old for m in dml("nopk_full", "D")] == ["O"], "nopk_full delete has O")
    require([m.old for m in dml("ri_default", "U")] == [None, "K"], "ri_default updates")
    require([m.old for m in dml("ri_default", "D")] == ["K"], "ri_default delete")
    require([m.old for m in dml("ri_full", "U")] == ["O", "O"], "ri_full updates")
    require([m.old for m in dml("ri_full", "D")] == ["O"], "ri_full delete")
    require(len(dml("ri_nothing", "I")) == 1, "ri_nothing insert")
    require(not dml("ri_nothing", "U") and not dml("ri_nothing", "D"), "ri_nothing sends no U/D")
    require([m.old for m in dml("ri_index", "U")] == [None, None, "K"], "ri_index updates")
    require([m.old for m in dml("ri_index", "D")] == ["K"], "ri_index delete")
    multi = [m for m in msgs if m.type in "IUD" and m.relid == rel["items"]]
    require(len(multi) >= 9, "items workload")


def scenario_basic(env: Env) -> list[Capture]:
    """Basic DML, identifiers and replica identities, decoded with proto 1, 2 and 3."""
    env.sql(*BASIC_SCHEMA)
    # ri_nothing and nopk_default cannot be updated while a publication publishes their
    # updates/deletes, so they get their own insert-only publication.
    env.sql(
        "CREATE PUBLICATION pub_ins FOR TABLE ri_nothing, nopk_default WITH (publish = 'insert')"
    )
    # three slots on one publication pair, so the same WAL is decoded with proto 1, 2 and 3
    caps = {
        v: Capturer(
            env.main,
            slot=f"s_v{v}",
            tables=BASIC_TABLES,
            extra_publications=["pub_ins"],
            create=v == 1,
        )
        for v in (1, 2, 3)
    }
    for v in (2, 3):
        env.main.run(caps[v].slot_sql())
    env.sql(*BASIC_WORKLOAD)
    env.sql("UPDATE nopk_default SET b = 'not sent' WHERE a = 1")
    env.sql(*RI_WORKLOAD)
    env.main.run("ALTER PUBLICATION pub_ins SET (publish = 'insert, update, delete')")
    env.main.fails("UPDATE nopk_default SET b = 'x'")
    env.main.fails("DELETE FROM nopk_default")
    env.main.fails("UPDATE ri_nothing SET val = 'v3'")
    env.main.fails("DELETE FROM ri_nothing")
    out = []
    desc = (
        "insert/update/delete with a primary key; multi-row and multi-statement transactions;"
        " NULLs; quoted non-ASCII identifiers; no-PK tables (DEFAULT: inserts only, FULL);"
        " REPLICA IDENTITY DEFAULT/FULL/NOTHING/USING INDEX with identity-changing and"
        " -preserving updates and deletes"
    )
    for v in (1, 2, 3):
        out.append(
            env.capture(caps[v], f"basic_v{v}", desc + f" (proto_version {v})", proto_version=v)
        )
    for c in out:
        check_basic(env, scan(c.rows))
    ref = [(r.lsn, r.xid, r.data) for r in out[0].rows]
    for c in out[1:]:
        require(
            [(r.lsn, r.xid, r.data) for r in c.rows] == ref,
            f"{c.name} differs from basic_v1 although nothing streamed",
        )
    note = (
        "Identical to basic_v1 byte for byte: without streaming or two-phase, proto_version"
        " 2 and 3 change nothing on the wire."
    )
    out[1].notes.append(note)
    out[2].notes.append(note)
    return out


def scenario_truncate(env: Env) -> list[Capture]:
    """TRUNCATE of one table, two tables, CASCADE and RESTART IDENTITY."""
    env.sql(
        "CREATE TABLE t1 (id serial PRIMARY KEY, v text)",
        "CREATE TABLE t2 (id int PRIMARY KEY)",
        "CREATE TABLE parent (id int PRIMARY KEY)",
        "CREATE TABLE child (id int PRIMARY KEY, parent_id int REFERENCES parent)",
        "CREATE TABLE grandchild (id int PRIMARY KEY, child_id int REFERENCES child)",
    )
    cap = Capturer(env.main)
    env.sql(
        "INSERT INTO t1 (v) VALUES ('a'), ('b')",
        "TRUNCATE t1",
        "INSERT INTO t2 VALUES (1)",
        "TRUNCATE t1, t2",
        "INSERT INTO parent VALUES (1)",
        "INSERT INTO child VALUES (1, 1)",
        "INSERT INTO grandchild VALUES (1, 1)",
        "TRUNCATE parent CASCADE",
        "INSERT INTO t1 (v) VALUES ('c')",
        "TRUNCATE t1 RESTART IDENTITY",
        "TRUNCATE parent RESTART IDENTITY CASCADE",
        "BEGIN",
        "INSERT INTO t2 VALUES (2)",
        "TRUNCATE t2",
        "INSERT INTO t2 VALUES (3)",
        "COMMIT",
    )
    c = env.capture(
        cap,
        "truncate",
        "TRUNCATE of one table, of two tables, CASCADE over an FK"
        " chain, RESTART IDENTITY, both, and TRUNCATE between inserts in a transaction",
    )
    msgs = scan(c.rows)
    require_types(msgs, "BCRIT")
    opts = [m.truncate_options for m in msgs if m.type == "T"]
    require({0, 1, 2, 3} <= set(opts), f"truncate option bits: {opts}")
    return [c]


TOAST_VALUE = "(SELECT string_agg(md5(g::text), '') FROM generate_series(1, 270) g)"


def scenario_toast(env: Env) -> list[Capture]:
    """Unchanged TOASTed values ('u') with REPLICA IDENTITY DEFAULT and FULL."""
    stmts = []
    for ri in ("default", "full"):
        t = f"toast_{ri}"
        env.sql(
            f"CREATE TABLE {t} (id int PRIMARY KEY, counter int, doc text)",
            f"ALTER TABLE {t} ALTER COLUMN doc SET STORAGE EXTERNAL",
            f"ALTER TABLE {t} REPLICA IDENTITY {ri.upper()}",
        )
        stmts += [
            f"INSERT INTO {t} VALUES (1, 0, {TOAST_VALUE})",
            f"UPDATE {t} SET counter = counter + 1 WHERE id = 1",
            f"DELETE FROM {t} WHERE id = 1",
        ]
    cap = Capturer(env.main)
    env.sql(*stmts)
    c = env.capture(
        cap,
        "toast",
        "an 8640-byte md5-hex text column stored EXTERNAL: insert,"
        " update of another column (unchanged TOAST 'u'), delete; on REPLICA IDENTITY"
        " DEFAULT then FULL",
    )
    msgs = scan(c.rows)
    require_types(msgs, "BCRIUD")
    require(any("u" in m.kinds for m in msgs if m.type == "U"), "no 'u' unchanged-TOAST column")
    require(max(len(r.data) for r in c.rows) > 8192, "no > 8 kB value")
    return [c]


def scenario_types(env: Env) -> list[Capture]:
    """Type ('Y') messages and Relation re-sends after ALTER TABLE."""
    env.sql(
        "CREATE EXTENSION hstore",
        "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')",
        "CREATE DOMAIN posint AS integer CHECK (VALUE > 0)",
        "CREATE TABLE typed (id int PRIMARY KEY, m mood, h hstore, p posint, ms mood[])",
    )
    cap = Capturer(env.main)
    env.sql(
        "INSERT INTO typed VALUES (1, 'ok', 'a=>1, b=>NULL', 5, '{sad,happy}')",
        "ALTER TABLE typed ADD COLUMN extra text DEFAULT 'x'",
        "INSERT INTO typed VALUES (2, 'happy', '', 6, '{}', 'y')",
        "ALTER TABLE typed DROP COLUMN h",
        "INSERT INTO typed VALUES (3, 'sad', 7, NULL, NULL)",
        "ALTER TABLE typed ALTER COLUMN p TYPE bigint",
        "INSERT INTO typed VALUES (4, NULL, 8, '{ok}', 'z')",
        "UPDATE typed SET m = 'happy' WHERE id = 1",
    )
    c = env.capture(
        cap,
        "types",
        "enum, hstore, domain and enum[] columns (Type messages);"
        " ALTER TABLE ADD COLUMN, DROP COLUMN and ALTER COLUMN TYPE between inserts"
        " (Relation re-sent)",
    )
    msgs = scan(c.rows)
    require_types(msgs, "BCRYIU")
    relations = [m for m in msgs if m.type == "R"]
    require(len(relations) >= 4, f"Relation sent {len(relations)} times, want >= 4")
    type_names = {m.name for m in msgs if m.type == "Y"}
    # a domain's Type message names its base type; pg_catalog is sent as ""
    require(
        {"public.mood", "public.hstore", ".int4", "public._mood"} <= type_names,
        f"Type messages: {type_names}",
    )
    return [c]


def scenario_binary(env: Env) -> list[Capture]:
    """binary 'true': kind 'b' columns, and 't' for a type without a send function."""
    env.sql(
        "CREATE EXTENSION hstore",
        "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')",
        "CREATE TYPE pair AS (x int, label text)",
        "CREATE TABLE bin (id int PRIMARY KEY, i8 bigint, t text, n numeric, ts timestamptz,"
        " by bytea, u uuid, b bool, ia int[], ta text[], m mood, h hstore, pr pair, acl aclitem,"
        " f8 float8, d date, j jsonb)",
    )
    cap = Capturer(env.main)
    env.sql(
        "INSERT INTO bin VALUES (1, -9000000000, 'héllo', 12345.678900,"
        " '2024-02-29 12:34:56.789012+00', '\\x00ff10', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',"
        " true, '{1,NULL,3}', '{a,\"b c\"}', 'happy', 'k=>v', ROW(7, 'seven'),"
        " 'postgres=r/postgres', 'NaN', '2000-01-01', '{\"a\": [1, 2]}')",
        "INSERT INTO bin (id) VALUES (2)",
        "UPDATE bin SET n = 'NaN', b = false, ts = '-infinity' WHERE id = 1",
        "DELETE FROM bin WHERE id = 2",
    )
    c = env.capture(
        cap,
        "binary",
        "binary 'true': int, text, numeric, timestamptz, bytea,"
        " uuid, bool, arrays, enum, hstore, composite, aclitem (no send function,"
        " falls back to text), float8, date, jsonb",
        binary=True,
    )
    msgs = scan(c.rows)
    require_types(msgs, "BCRIUDY")
    kinds = {k for m in msgs for k in m.kinds}
    require({"b", "n"} <= kinds, f"binary kinds {kinds}")
    first_insert = next(m for m in msgs if m.type == "I")
    require(
        first_insert.kinds.count("t") == 1,
        f"exactly the aclitem column is text: {first_insert.kinds}",
    )
    return [c]


def scenario_messages(env: Env) -> list[Capture]:
    """Logical decoding messages, transactional and not."""
    env.sql("CREATE TABLE notes (id int PRIMARY KEY, v text)")
    cap = Capturer(env.main)
    env.sql(
        "SELECT pg_logical_emit_message(true, 'tx-text', 'transactional text')",
        "SELECT pg_logical_emit_message(false, 'nontx-text', 'non-transactional text')",
        "SELECT pg_logical_emit_message(true, 'tx-bytea', '\\x00ff0102'::bytea)",
        "SELECT pg_logical_emit_message(false, 'nontx-bytea', '\\x'::bytea)",
        "SELECT pg_logical_emit_message(true, '', '')",
        "BEGIN",
        "INSERT INTO notes VALUES (1, 'a')",
        "SELECT pg_logical_emit_message(true, 'with-dml', 'between inserts')",
        "INSERT INTO notes VALUES (2, 'b')",
        "COMMIT",
        "BEGIN",
        "SELECT pg_logical_emit_message(false, 'nontx-no-xid', 'before any write')",
        "INSERT INTO notes VALUES (3, 'c')",
        "SELECT pg_logical_emit_message(false, 'nontx-rolled-back', 'survives the rollback')",
        "SELECT pg_logical_emit_message(true, 'tx-rolled-back', 'never decoded')",
        "ROLLBACK",
        # the SQL interface decodes only up to the flushed WAL; an abort does not flush
        "INSERT INTO notes VALUES (4, 'flushes the WAL')",
    )
    c = env.capture(
        cap,
        "messages",
        "messages 'true': transactional and non-transactional"
        " pg_logical_emit_message with text, bytea and empty prefix/content, one between"
        " DML in a transaction, non-transactional ones inside a transaction that rolls"
        " back",
        messages=True,
    )
    msgs = scan(c.rows)
    require_types(msgs, "BCMRI")
    ms = [m for m in msgs if m.type == "M"]
    prefixes = [m.prefix for m in ms]
    require("tx-rolled-back" not in prefixes, "rolled-back transactional message decoded")
    require("nontx-rolled-back" in prefixes, "non-transactional message lost on rollback")
    require(
        any(m.transactional == 1 for m in ms) and any(m.transactional == 0 for m in ms),
        "both message flags",
    )
    require(any(m.prefix == "" and m.content == b"" for m in ms), "empty prefix/content message")
    return [c]


def scenario_origin(env: Env) -> list[Capture]:
    """A transaction with a replication origin: the Origin ('O') message."""
    env.sql("CREATE TABLE replicated (id int PRIMARY KEY, v text)")
    cap = Capturer(env.main)
    env.sql(
        "INSERT INTO replicated VALUES (1, 'local')",
        "SELECT pg_replication_origin_create('origin_x')",
        "SELECT pg_replication_origin_session_setup('origin_x')",
        "BEGIN",
        "SELECT pg_replication_origin_xact_setup('0/ABCDEF', '2024-01-02 03:04:05.678901+00')",
        "INSERT INTO replicated VALUES (2, 'from origin_x')",
        "UPDATE replicated SET v = 'changed by origin_x' WHERE id = 1",
        "COMMIT",
        "INSERT INTO replicated VALUES (3, 'origin session, no xact_setup')",
        "SELECT pg_replication_origin_session_reset()",
        "INSERT INTO replicated VALUES (4, 'local again')",
    )
    c = env.capture(
        cap,
        "origin",
        "transactions with replication origin 'origin_x' (with and"
        " without pg_replication_origin_xact_setup) between local ones",
    )
    env.sql("SELECT pg_replication_origin_drop('origin_x')")
    msgs = scan(c.rows)
    require_types(msgs, "BCRIUO")
    origins = [m.name for m in msgs if m.type == "O"]
    require(origins and set(origins) == {"origin_x"}, f"Origin messages {origins}")
    return [c]


STREAM_SCHEMA = [
    "CREATE TABLE filler (id int, pad text)",
    "CREATE TABLE big (id int PRIMARY KEY, v text)",
    "CREATE TABLE small (id int PRIMARY KEY, v text)",
]


def _stream_rows(session: Session, start: int, count: int, kb: int) -> None:
    last = start + count - 1
    session.run(f"INSERT INTO big SELECT g, 'row ' || g FROM generate_series({start}, {last}) g")
    filler(session.run, kb)


def check_stream_common(msgs: list[Msg]) -> None:
    """Streamed messages carry an xid; Stream Start first-segment flags are right."""
    require_types(msgs, "SE")
    for m in msgs:
        if m.streamed:
            require(m.type in "RYIUDTM", f"{m.type} inside a stream block")
            require(m.body_xid, f"streamed {m.type} without xid")
    first_seen: set[int] = set()
    for m in msgs:
        if m.type == "S":
            assert m.body_xid is not None
            want = 0 if m.body_xid in first_seen else 1
            require(m.first == want, f"Stream Start first flag {m.first} for xid {m.body_xid}")
            first_seen.add(m.body_xid)


def scenario_streaming(env: Env) -> list[Capture]:
    """proto_version 2 streaming: commit, abort, subtransaction abort, interleaving."""
    env.sql(*STREAM_SCHEMA)
    env.end_schema()
    opts: dict[str, Any] = {"proto_version": 2, "streaming": True, "work_mem": "64kB"}
    out = []
    big_a = env.main
    other = env.session("B")

    # -- commit: several segments, a small non-streamed transaction in between
    cap = Capturer(env.main, slot="s_commit", tables=["big", "small"])
    env.sql("BEGIN")
    _stream_rows(big_a, 1, 20, 100)
    other.run("INSERT INTO small VALUES (1, 'small committed while big is open')")
    _stream_rows(big_a, 21, 20, 100)
    _stream_rows(big_a, 41, 20, 100)
    env.sql("UPDATE big SET v = 'updated' WHERE id <= 3", "DELETE FROM big WHERE id = 4", "COMMIT")
    other.run("INSERT INTO small VALUES (2, 'after')")
    c = env.capture(
        cap,
        "stream_commit",
        "a large transaction streamed in several segments"
        " (inserts into an unpublished filler table push it over 64kB) that commits;"
        " a small transaction commits from another session while it is open",
        **opts,
    )
    msgs = scan(c.rows)
    check_stream_common(msgs)
    require_types(msgs, "SEcBCRIUD")
    starts = [m for m in msgs if m.type == "S"]
    require(
        len(starts) >= 3 and starts[0].first == 1 and starts[1].first == 0,
        f"{len(starts)} segments",
    )
    out.append(c)

    # -- rollback of the whole transaction, and a savepoint rolled back
    env.sql("SELECT pg_drop_replication_slot('s_commit')")
    env.new_section()
    cap = Capturer(env.main, slot="s_abort", tables=["big", "small"], publication="pub_abort")
    # decoded after the fact, the first catalog lookup for a change of an already aborted
    # (sub)transaction stops its stream: with nothing cached yet the segment is empty
    env.sql("BEGIN")
    _stream_rows(big_a, 1001, 20, 100)
    env.sql("ROLLBACK")
    # a small committed transaction caches big and small, so later aborted streams carry rows
    env.sql(
        "BEGIN",
        "INSERT INTO big VALUES (1000, 'warm-up')",
        "INSERT INTO small VALUES (1000, 'warm-up')",
        "COMMIT",
    )
    env.sql("BEGIN")
    _stream_rows(big_a, 1101, 20, 100)
    _stream_rows(big_a, 1121, 20, 100)
    env.sql("ROLLBACK")
    env.sql("BEGIN")
    _stream_rows(big_a, 2001, 10, 100)
    env.sql("SAVEPOINT sp1")
    _stream_rows(big_a, 2011, 10, 100)
    env.sql("INSERT INTO small VALUES (10, 'in the rolled-back savepoint')")
    filler(big_a.run, 100)
    env.sql("ROLLBACK TO SAVEPOINT sp1")
    env.sql("SAVEPOINT sp2")
    _stream_rows(big_a, 2021, 10, 100)
    env.sql("RELEASE SAVEPOINT sp2", "COMMIT")
    c = env.capture(
        cap,
        "stream_abort",
        "streamed transactions that roll back entirely (Stream"
        " Abort, subxid = xid): the first with an empty segment, the second, after a"
        " small committed transaction, with rows; then one whose streamed savepoint is"
        " rolled back (Stream Abort, subxid != xid) and which then commits with a"
        " released savepoint",
        **opts,
    )
    msgs = scan(c.rows)
    check_stream_common(msgs)
    require_types(msgs, "SEcAIBC")
    aborts = [m for m in msgs if m.type == "A"]
    require(sum(m.subxid == m.body_xid for m in aborts) == 2, "two whole-transaction aborts")
    require(any(m.subxid != m.body_xid for m in aborts), "no subtransaction Stream Abort")
    whole = aborts[1].body_xid
    require(
        any(m.type == "I" and m.body_xid == whole for m in msgs),
        "the second rolled-back stream carries no rows",
    )
    require(
        any(m.type == "I" and m.streamed and m.body_xid == aborts[2].subxid for m in msgs),
        "streamed DML of the aborted subtransaction carries its subxid",
    )
    out.append(c)

    # -- two interleaved large transactions
    env.sql("SELECT pg_drop_replication_slot('s_abort')")
    env.new_section()
    cap = Capturer(env.main, slot="s_inter", tables=["big", "small"], publication="pub_inter")
    env.sql("BEGIN")
    other.run("BEGIN")
    for i in range(3):
        _stream_rows(big_a, 3001 + 10 * i, 5, 60)
        _stream_rows(other, 4001 + 10 * i, 5, 60)
    other.run("COMMIT")
    env.sql("COMMIT")
    c = env.capture(
        cap,
        "stream_interleaved",
        "two large transactions from two sessions whose"
        " stream segments interleave; the second one commits first",
        **opts,
    )
    msgs = scan(c.rows)
    check_stream_common(msgs)
    seg_xids = [m.body_xid for m in msgs if m.type == "S"]
    switches = sum(1 for a, b in itertools.pairwise(seg_xids) if a != b)
    require(len(set(seg_xids)) == 2 and switches >= 2, f"segments not interleaved: {seg_xids}")
    require(len([m for m in msgs if m.type == "c"]) == 2, "two Stream Commits")
    out.append(c)

    # -- a logical message inside a streamed transaction
    env.sql("SELECT pg_drop_replication_slot('s_inter')")
    env.new_section()
    cap = Capturer(env.main, slot="s_msg", tables=["big", "small"], publication="pub_msg")
    env.sql("BEGIN", "SELECT pg_logical_emit_message(true, 'stream', 'first in the stream')")
    _stream_rows(big_a, 5001, 5, 100)
    env.sql(
        "SELECT pg_logical_emit_message(true, 'stream', 'transactional, second segment')",
        "SELECT pg_logical_emit_message(false, 'stream-nontx', 'non-transactional')",
    )
    _stream_rows(big_a, 5011, 5, 100)
    env.sql("COMMIT")
    env.sql("SELECT pg_logical_emit_message(true, 'small', 'not streamed')")
    c = env.capture(
        cap,
        "stream_messages",
        "messages 'true' with streaming: transactional"
        " messages inside a streamed transaction, a non-transactional one emitted"
        " from inside it, and a small non-streamed transactional message",
        messages=True,
        **opts,
    )
    msgs = scan(c.rows)
    check_stream_common(msgs)
    require(any(m.type == "M" and m.streamed for m in msgs), "no M inside a stream block")
    require(
        any(m.type == "M" and not m.streamed and m.transactional for m in msgs),
        "no non-streamed transactional M",
    )
    out.append(c)
    return out


def scenario_two_phase(env: Env) -> list[Capture]:
    """proto_version 3 with a two-phase slot: prepare/commit/rollback prepared, stream prepare."""
    env.sql(*STREAM_SCHEMA)
    cap = Capturer(env.main, tables=["big", "small"], two_phase=True)
    other = env.session("B")
    env.sql(
        "BEGIN",
        "INSERT INTO small VALUES (1, 'prepared then committed')",
        "PREPARE TRANSACTION 'gid-commit'",
        "BEGIN",
        "INSERT INTO small VALUES (2, 'prepared then rolled back')",
        "PREPARE TRANSACTION 'gid-rollback'",
        "INSERT INTO small VALUES (3, 'plain commit while two are prepared')",
        "COMMIT PREPARED 'gid-commit'",
        "ROLLBACK PREPARED 'gid-rollback'",
        "BEGIN",
    )
    _stream_rows(env.main, 100, 20, 100)
    _stream_rows(env.main, 120, 20, 100)
    env.sql("PREPARE TRANSACTION 'gid-stream'")
    other.run("COMMIT PREPARED 'gid-stream'")
    env.sql("BEGIN")
    _stream_rows(env.main, 200, 20, 100)
    env.sql("PREPARE TRANSACTION 'gid-stream-rb'", "ROLLBACK PREPARED 'gid-stream-rb'")
    c = env.capture(
        cap,
        "two_phase",
        "two_phase slot, proto_version 3, streaming: PREPARE +"
        " COMMIT PREPARED, PREPARE + ROLLBACK PREPARED, a plain commit while both are"
        " prepared, and two large streamed prepared transactions (Stream Prepare),"
        " one committed from another session, one rolled back",
        proto_version=3,
        streaming=True,
        two_phase_option=True,
        work_mem="64kB",
    )
    msgs = scan(c.rows)
    check_stream_common(msgs)
    require_types(msgs, "bPKrpSEBC")
    gids = {m.name for m in msgs if m.type in "bPKrp"}
    require({"gid-commit", "gid-rollback", "gid-stream", "gid-stream-rb"} <= gids, f"{gids}")
    return [c]


SCENARIOS: list[Callable[[Env], list[Capture]]] = [
    scenario_basic,
    scenario_truncate,
    scenario_toast,
    scenario_types,
    scenario_binary,
    scenario_messages,
    scenario_origin,
    scenario_streaming,
    scenario_two_phase,
]


# ---------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------


def option_text(c: Capture) -> str:
    """The pgoutput options as written in the decode call."""
    parts = [f"proto_version '{c.proto_version}'"]
    for key in ("binary", "messages", "streaming"):
        if getattr(c, key):
            parts.append(f"{key} 'true'")
    if c.two_phase_option:
        parts.append("two_phase 'true'")
    return ", ".join(parts)


def sql_text(c: Capture, version: str) -> str:
    """The .sql file: a header, then every statement the scenario ran, in order."""
    log = c.log
    labels = {label for label, _, _ in log}
    head = [
        f"-- Capture {c.name}.jsonl: {len(c.rows)} rows",
        f"-- {c.description}",
        f"-- Server: {version}",
        f"-- Slot: pgoutput, two_phase={str(c.two_phase).lower()}: {c.slot_sql}",
        f"-- pgoutput options: {option_text(c)}",
        f"-- logical_decoding_work_mem: {c.work_mem or 'default (64MB)'}",
        f"-- Decoded with: {c.decode_sql}",
    ]
    if c.two_phase:
        head.append(
            "-- Two-phase on PG15: the slot's two_phase flag (4th argument of"
            " pg_create_logical_replication_slot) alone enables b/P/K/r/p, even with"
            " proto_version 1 and without the two_phase option; the option ('two_phase'"
            " 'true') needs proto_version >= 3 and, on a slot without the flag, turns the flag"
            " on permanently (even with peek)."
        )
    head += [f"-- Note: {n}" for n in c.notes]
    if len(labels) > 1:
        head.append("-- Statements are prefixed with the session (connection) that ran them.")
    head.append(
        "-- The statements that produced it follow in order (captures of the same scenario may"
        " share some)."
    )
    body = []
    for label, sql, params in log:
        prefix = f"/* session {label} */ " if len(labels) > 1 else ""
        text = sql if not params else f"{sql}  -- params: {params}"
        body.append(prefix + text + ("" if sql.startswith("--") else ";"))
    return "\n".join(head) + "\n\n" + "\n".join(body) + "\n"


def index_entry(c: Capture) -> dict[str, Any]:
    """The index.json record for one capture."""
    msgs = scan(c.rows)
    return {
        "name": c.name,
        "capture": f"{c.name}.jsonl",
        "sql": f"{c.name}.sql",
        "description": c.description,
        "rows": len(c.rows),
        "proto_version": c.proto_version,
        "binary": c.binary,
        "messages": c.messages,
        "streaming": c.streaming,
        "two_phase": c.two_phase,
        "two_phase_option": c.two_phase_option,
        "logical_decoding_work_mem": c.work_mem,
        "message_types": sorted(set(message_types(c.rows))),
        "column_kinds": sorted({k for m in msgs for k in m.kinds}),
    }


def iter_captures(cluster: TempCluster, only: set[str] | None) -> Iterator[Capture]:
    """Run each scenario in its own database and yield its captures."""
    admin = pg8000.native.Connection(**cluster.dsn())
    try:
        for scenario in SCENARIOS:
            name = scenario.__name__.removeprefix("scenario_")
            if only and name not in only:
                continue
            print(f"scenario {name} ...", flush=True)
            env = Env(cluster, admin, name)
            try:
                yield from scenario(env)
            finally:
                env.close()
    finally:
        admin.close()


def main(argv: list[str] | None = None) -> int:
    """Regenerate the captures (all scenarios, or those named on the command line)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*", help="scenario names (default: all)")
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    index_path = args.out / "index.json"
    index: dict[str, Any] = (
        json.loads(index_path.read_text()) if index_path.exists() and args.scenarios else {}
    )
    entries = {e["name"]: e for e in index.get("captures", [])}
    with TempCluster() as cluster:
        admin = pg8000.native.Connection(**cluster.dsn())
        version = str(admin.run("SELECT version()")[0][0])
        admin.close()
        for c in iter_captures(cluster, set(args.scenarios) or None):
            jsonl = args.out / f"{c.name}.jsonl"
            with open(jsonl, "w", encoding="utf-8") as fh:
                write_capture(c.rows, fh)
            (args.out / f"{c.name}.sql").write_text(sql_text(c, version), encoding="utf-8")
            size = jsonl.stat().st_size
            if size > MAX_FILE_BYTES:
                raise CaptureCheckError(f"{jsonl.name} is {size} bytes (> {MAX_FILE_BYTES})")
            entries[c.name] = index_entry(c)
            print(
                f"  {c.name}: {len(c.rows)} rows, {size} bytes,"
                f" types {''.join(entries[c.name]['message_types'])}"
            )
    index = {
        "server_version": version,
        "format": "JSON Lines {lsn, xid, data(hex)} as returned by"
        " pg_logical_slot_get_binary_changes",
        "captures": sorted(entries.values(), key=lambda e: e["name"]),
    }
    index_path.write_text(json.dumps(index, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
