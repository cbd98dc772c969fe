"""The initial snapshot's fast path: COPY text written as it came, in COPY block lines of
bounded size, read back into exactly the Insert messages the row-at-a-time path built
(kept here as the reference), on every type family; tables read on several connections
give the same output; Ctrl-C stops a snapshot at once and leaves an output the next run
takes the snapshot again into."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgcdc_events.adapters import StreamReader
from pgcdc_events.adapters.errors import SnapshotError
from pgcdc_events.adapters.names import quote_ident
from pgcdc_events.adapters.snapshot import (
    CopyTextRows,
    TableRows,
    read_snapshot,
)
from pgcdc_events.events.snapshot import snapshot_tuple
from pgcdc_events.protocol import CaptureRow, iter_capture, rows_of_line
from pgcdc_events.protocol.capture import COPY_MARK, read_copy_block
from pgcdc_events.protocol.encoder import encode_message
from pgcdc_events.protocol.lsn import Lsn
from pgcdc_events.protocol.messages import Insert
from pgcdc_events.testing.cluster import TempCluster

ROOT = Path(__file__).resolve().parents[2]
AT, XID = Lsn(0x1_0000_2A30), 4_000_000_000


def _encoded(relation_id: int, width: int, rows: list[list[bytes | None]]) -> list[bytes]:
    """The Insert messages of rows of values, built by the protocol layer's encoder."""
    return [encode_message(Insert(relation_id, snapshot_tuple(values, width, "t")))
            for values in rows]


def _reference(relation_id: int, width: int, data: bytes) -> list[bytes]:
    """The Insert messages of COPY text the way the snapshot built them before the fast
    path: parse a row, build its tuple, encode the message."""
    out: list[bytes] = []

    def on_row(values: list[bytes | None]) -> None:
        if width == 0:
            values = []
        out.append(encode_message(Insert(relation_id, snapshot_tuple(values, width, "t"))))

    parser = CopyTextRows(on_row)
    parser.write(data)
    parser.close()
    return out


def _block_lines(relation_id: int, width: int, pieces: list[bytes], *,
                 block_size: int = 1 << 17) -> tuple[bytes, TableRows]:
    table = TableRows(relation_id, width, "s.t", lsn=int(AT), xid=XID, block_size=block_size)
    out = b"".join(table.lines(piece) for piece in pieces) + table.end()
    table.close()
    return out, table


def _rows(relation_id: int, width: int, pieces: list[bytes], *, lines: bool,
          block_size: int = 1 << 17) -> list[bytes]:
    """The Insert messages of COPY data arriving in ``pieces``: written as COPY block
    lines and read back (``lines``), or built as messages directly."""
    if lines:
        out, _ = _block_lines(relation_id, width, pieces, block_size=block_size)
        rows = list(iter_capture(out.splitlines(keepends=True)))
        assert all((r.lsn, r.xid, r.snapshot) == (AT, XID, True) for r in rows)
        return [r.data for r in rows]
    table = TableRows(relation_id, width, "s.t")
    messages = [m for piece in pieces for m in table.messages(table.whole(piece))]
    table.close()
    return messages


# What COPY TO writes for a value: a backslash doubled, these control characters escaped
# (others, and any other byte, as they are); a NULL is \N.
_COPY_ESCAPES = {ord("\\"): b"\\\\", 8: b"\\b", 12: b"\\f", 10: b"\\n", 13: b"\\r",
                 9: b"\\t", 11: b"\\v"}


def _copy_text(rows: list[list[bytes | None]]) -> bytes:
    def field(value: bytes | None) -> bytes:
        if value is None:
            return b"\\N"
        return b"".join(_COPY_ESCAPES.get(b, bytes((b,))) for b in value)

    return b"".join(b"\t".join(field(v) for v in row) + b"\n" for row in rows)


# values as PostgreSQL prints them: no NUL byte; the letters and characters that matter
# here (backslash, N, tab, newline, t, the bytes of a length) are made likely
_VALUE = st.one_of(st.none(), st.binary(max_size=12).map(lambda b: b.replace(b"\0", b"0")),
                   st.lists(st.sampled_from([b"\\", b"N", b"\t", b"\n", b"t", b"\x02",
                                             b"\x05", b"n", b"\r", b"x", "ü".encode()]),
                            max_size=6).map(b"".join))


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 4).flatmap(lambda w: st.tuples(
    st.just(w), st.lists(st.lists(_VALUE, min_size=w, max_size=w), max_size=12),
    st.integers(1, 40), st.integers(1, 64))))
def test_same_messages_as_the_encoder_builds(
        case: tuple[int, list[list[bytes | None]], int, int]) -> None:
    """Rows of any values, their COPY text cut anywhere, written in blocks of any size:
    read back, the Insert messages the encoder builds from the values themselves."""
    width, rows, cut, block_size = case
    data = _copy_text(rows) if width else b"\n" * len(rows)
    pieces = [data[i:i + cut] for i in range(0, len(data), cut)] or [b""]
    expected = _encoded(16385, width, rows)
    assert _reference(16385, width, data) == expected
    assert _rows(16385, width, pieces, lines=False) == expected
    assert _rows(16385, width, pieces, lines=True, block_size=block_size) == expected


def test_every_copy_escape_round_trips() -> None:
    """Tab, newline, carriage return, backslash, the other control characters COPY
    escapes, NULL against the texts 'N', '\\N' and 'NULL', non-ASCII and bytes that are no
    UTF-8: through a block line and back, the values as they were."""
    values: list[list[bytes | None]] = [
        [b"a\tb", b"line\nnext", b"cr\rlf\n"], [b"back\\slash", b"\\N", None],
        [b"N", b"NULL", b"\\\\N"], [b"\b\f\v", "ü€😀".encode(), b"\xff\xfe\x80"],
        [None, None, None], [b"", b"", b""], [b"\\", b"\\\\", b"\t\\t\n\\n"]]
    data = _copy_text(values)
    assert data.count(b"\n") == len(values)  # the newlines of the values are escaped
    for block_size in (1, 16, 1 << 17):
        _, table = _block_lines(16400, 3, [data], block_size=block_size)
        assert table.rows == len(values)
        assert _rows(16400, 3, [data], lines=True, block_size=block_size) == \
            _encoded(16400, 3, values)


def test_blocks_hold_whole_rows_of_a_bounded_size() -> None:
    """COPY data arriving in pieces cut anywhere: each block line holds whole rows, about
    the block size of them (a row longer than a block in a block of its own), the rows
    in order; the row count is the table's."""
    rows: list[list[bytes | None]] = [[str(n).encode(), b"v" * (n % 50)] for n in range(3000)]
    rows[1500][1] = b"x" * 10_000  # longer than a block
    data = _copy_text(rows)
    for cut in (7, 1000, 65536, len(data)):
        pieces = [data[i:i + cut] for i in range(0, len(data), cut)]
        out, table = _block_lines(16400, 2, pieces, block_size=4096)
        lines = out.splitlines(keepends=True)
        assert table.rows == 3000
        texts = []
        for number, line in enumerate(lines, 1):
            block = read_copy_block(line, line_number=number)
            assert block is not None and block.text.endswith(b"\n")
            assert len(block.text) < 4096 + max(cut, 10_100), (cut, len(block.text))
            texts.append(block.text)
        assert b"".join(texts) == data
        assert len(lines) > len(data) // (4096 + cut + 10_100)
        assert _rows(16400, 2, pieces, lines=True, block_size=4096) == _encoded(16400, 2, rows)


def test_the_writer_does_no_work_a_row() -> None:
    """A block line is the COPY text as it came, in hex: its ``copy`` is exactly the
    data's hex (nothing parsed, nothing rebuilt)."""
    data = _copy_text([[b"1", b"a\tb"], [None, b"\\N"]])
    out, _ = _block_lines(16400, 2, [data])
    assert out.count(b"\n") == 1 and COPY_MARK + data.hex().encode() + b'"' in out
    assert json.loads(out)["rows"] == 2


def test_a_row_with_a_wrong_number_of_values_is_named() -> None:
    """The writer counts a block's values in bulk (the reader checks each row: see
    tests/protocol/test_capture_copy_blocks.py), naming the first row that is wrong."""
    rows = TableRows(16400, 2, "s.t", block_size=1)
    with pytest.raises(SnapshotError, match=r"snapshot of table s\.t: row 2 has 3 values, expected 2"):
        rows.lines(b"1\ta\n2\tb\tc\n3\tc\n4\td\n")
    with pytest.raises(SnapshotError, match=r"snapshot of table s\.t: row 2 has 3 values, expected 2"):
        TableRows(16400, 2, "s.t").messages(b"1\ta\n2\tb\tc\n3\n4\td\n")


def test_data_cut_inside_a_row_is_an_error() -> None:
    rows = TableRows(16400, 2, "s.t")
    assert rows.lines(b"1\ta\n2\tpart") == b""
    assert rows.end().count(b"\n") == 1 and rows.rows == 1
    with pytest.raises(SnapshotError, match=r"COPY data of table s\.t ended inside a row"):
        rows.close()
    rows = TableRows(16400, 2, "s.t")
    assert len(rows.messages(rows.whole(b"1\ta\n2\tpart"))) == 1
    with pytest.raises(SnapshotError, match=r"COPY data of table s\.t ended inside a row"):
        rows.close()


# -- against the server ----------------------------------------------------------------------

#: A column of every type family, with values that matter for COPY text (NULLs, escapes,
#: special values); each table gets its rows from this list, repeated.
FAMILIES = {
    "ints": ("a smallint, b int, c bigint, d oid",
             ["(-32768, -2147483648, -9223372036854775808, 0)", "(1, NULL, 3, 4294967295)"]),
    "floats": ("a real, b double precision",
               ["('NaN', '-Infinity')", "(1.5e-30, 1.7976931348623157e308)", "(NULL, -0.0)"]),
    "numeric": ("a numeric, b numeric(12, 2), c money",
                ["('NaN', 1.25, 12.5)", "(1e-100, NULL, -3)", "('Infinity', 0, NULL)"]),
    "text": ("a text, b varchar(20), c char(4), d \"char\", e name",
             ["(E'tab\\there\\nnew\\\\back\\r\\b\\f\\v', 'ü€😀', 'ab', 'x', 'n')",
              "('\\N', '', NULL, NULL, '\\\\N')", "(repeat('long ', 3000), 'N', ' ', 'y', 'z')"]),
    "bytes_bits": ("a bytea, b bit(4), c bit varying, d boolean",
                   ["('\\x00ff5c0a', B'1010', B'', true)", "(NULL, NULL, B'1', false)",
                    "('', B'0000', NULL, NULL)"]),
    "temporal": ("a date, b time, c timetz, d timestamp, e timestamptz, f interval",
                 ["('infinity', '24:00', '12:00+05:30', '-infinity', '2024-02-29 12:00:00.5+01', "
                  "'1 year 2 mons -3 days 04:05:06.7')",
                  "('0044-03-15 BC', '00:00:00.000001', NULL, '2000-01-01', NULL, NULL)"]),
    "ids_net": ("a uuid, b inet, c cidr, d macaddr, e macaddr8, f pg_lsn",
                ["('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '::1/128', '10.0.0.0/8', "
                 "'08:00:2b:01:02:03', '08:00:2b:01:02:03:04:05', '16/B374D848')",
                 "(NULL, '192.168.0.1', NULL, NULL, NULL, '0/0')"]),
    "json_xml": ("a json, b jsonb, c xml",
                 ["('{\"a\": \"tab\\there\", \"b\": [1, null]}', '{\"k\": \"\\\\u00e9\"}', "
                  "'<a x=\"1\">t&amp;</a>')",
                  "('null', 'null', NULL)", "(NULL, '[]', '<b/>')"]),
    "geometric": ("a point, b line, c lseg, d box, e path, f polygon, g circle",
                  ["('(1,2)', '{1,2,3}', '[(0,0),(1,1)]', '(1,1),(0,0)', '[(0,0),(1,1),(2,0)]', "
                   "'((0,0),(1,1),(1,0))', '<(0,0),2>')",
                   "(NULL, NULL, NULL, NULL, '((0,0),(1,1))', NULL, NULL)"]),
    "ranges_search": ("a int4range, b tstzrange, c int4multirange, d tsvector, e tsquery",
                      ["('[1,5)', '[2024-01-01 00:00+00,)', '{[1,2), [5,8)}', "
                       "'a fat:2 cat''s', 'fat & !rat')",
                       "('empty', NULL, '{}', NULL, NULL)"]),
    "arrays": ("a int[], b text[], c numeric[][], d e[]",
               ["('{1,NULL,3}', '{\"a b\",\"q\\\"uote\",\"back\\\\\\\\slash\",NULL,\"\"}', "
                "'{{1.5,2},{3,NaN}}', '{x,y}')",
                "('{}', NULL, NULL, '{}')", "(NULL, ARRAY[E'tab\\t', 'NULL'], '{}', NULL)"]),
    "user_types": ("a e, b pos, c pair, d e",
                   ["('x', 1, '(1,\"a\\\\b\")', 'y')", "(NULL, NULL, '(,)', NULL)",
                    "('y', 2, NULL, 'x')"]),
}


def _create_families(conn: Any, repeat: int) -> None:
    conn.run("CREATE TYPE e AS ENUM ('x', 'y')")
    conn.run("CREATE DOMAIN pos AS int CHECK (VALUE > 0)")
    conn.run("CREATE TYPE pair AS (n int, t text)")
    for name, (columns, rows) in FAMILIES.items():
        conn.run(f"CREATE TABLE {name} ({columns})")
        for _ in range(repeat):
            for values in rows:
                conn.run(f"INSERT INTO {name} VALUES {values}")
    try:
        conn.run("CREATE EXTENSION postgis")
    except Exception:
        pass
    else:
        conn.run("CREATE TABLE gis (a geometry, b geography)")
        conn.run("INSERT INTO gis VALUES ('SRID=4326;POINT(1 2)', 'POINT(3 4)'), (NULL, NULL)")
    conn.run("CREATE PUBLICATION p FOR ALL TABLES")


@pytest.fixture
def families(pg_cluster: TempCluster, pg_conn: Any) -> str:
    _create_families(pg_conn, repeat=40)
    database = pg_conn.run("SELECT current_database()")[0][0]
    return f"postgresql://{pg_cluster.user}@{pg_cluster.host}:{pg_cluster.port}/{database}"


def _expected_inserts(pg_conn: Any, relation: bytes) -> list[bytes]:
    """The Insert messages of a table, built by the reference path from a COPY the test
    runs itself (the tables do not change)."""
    from pgcdc_events.protocol import parse_message  # noqa: PLC0415

    rel = parse_message(relation)
    table = f"{quote_ident(rel.namespace)}.{quote_ident(rel.name)}"
    columns = ", ".join(quote_ident(c.name) for c in rel.columns)

    class Sink:
        def __init__(self) -> None:
            self.data = b""

        def write(self, chunk: bytes) -> None:
            self.data += bytes(chunk)

    sink = Sink()
    pg_conn.run(f"COPY (SELECT {columns} FROM ONLY {table}) TO STDOUT", stream=sink)
    return _reference(rel.relation_id, len(rel.columns), sink.data)


def _snapshot(url: str, slot: str, **kwargs: Any) -> tuple[list[bytes], list[CaptureRow]]:
    """(the capture lines written, the rows emitted) of a snapshot on a new slot."""
    reader = StreamReader(url, slot=slot, publications=["p"])
    reader.connect()
    try:
        reader.prepare(create_slot=True, snapshot=True)
        written: list[bytes] = []
        emitted: list[CaptureRow] = []
        if kwargs.pop("lines", True):
            kwargs["write"] = written.append
        read_snapshot(reader, emitted.append, **kwargs)
        reader.finish_snapshot()
    finally:
        reader.close()
    return b"".join(written).splitlines(keepends=True), emitted


def _parsed(lines: list[bytes]) -> list[CaptureRow]:
    """The rows of the lines written: the Inserts in COPY block lines, the rest a line a
    message."""
    rows = []
    for number, line in enumerate(lines, 1):
        expanded = rows_of_line(line, line_number=number)
        assert (COPY_MARK in line) == (len(expanded) != 1 or expanded[0].data[:1] == b"I")
        rows.extend(expanded)
    return rows


def test_every_type_family_as_the_reference_builds_it(families: str, pg_conn: Any) -> None:
    """Lines written (one and three threads) and rows emitted: every Insert is the
    reference path's message, in the tables' order, with the same schema messages."""
    one, _ = _snapshot(families, "s1")
    three, _ = _snapshot(families, "s3", threads=3)
    # every table's rows are in COPY block lines
    assert sum(COPY_MARK in line for line in one) >= len(FAMILIES)
    _, emitted = _snapshot(families, "se", lines=False)
    runs = {"one thread": _parsed(one), "three threads": _parsed(three), "emitted": emitted}
    first = runs["one thread"]
    relations = [r.data for r in first if r.data[:1] == b"R"]
    assert len(relations) >= len(FAMILIES)  # (and PostGIS: gis, spatial_ref_sys)
    expected: list[bytes] = []
    for relation in relations:
        expected.append(relation)
        expected.extend(_expected_inserts(pg_conn, relation))
    for name, rows in runs.items():
        assert all(r.snapshot and r.lsn == rows[0].lsn for r in rows), name
        assert rows[0].data[:1] == b"B" and rows[-1].data[:1] == b"C", name
        body = [r.data for r in rows[1:-1] if r.data[:1] != b"Y"]
        assert body == expected, name
        assert [r.data for r in rows if r.data[:1] == b"Y"] == \
            [r.data for r in first if r.data[:1] == b"Y"], name
    assert sum(r.data[:1] == b"I" for r in first) > 400


def test_generated_tables_as_the_reference_builds_them(pg_cluster: TempCluster,
                                                      pg_conn: Any) -> None:
    """Tables and rows the testing layer generates (any mapped type, enums and arrays,
    NULLs, long values), on the server: the lines written with one and two threads hold
    the reference path's Inserts, and were built in bulk."""
    from pgcdc_events.testing.strategies import rows as table_rows  # noqa: PLC0415
    from pgcdc_events.testing.strategies import tables  # noqa: PLC0415
    from pgcdc_events.testing.tables import TableDef  # noqa: PLC0415

    made: list[tuple[TableDef, list[Any]]] = []

    @given(tables(max_columns=8).flatmap(lambda t: st.tuples(
        st.just(t), st.lists(table_rows(t, long_values=True), min_size=5, max_size=25))))
    @settings(max_examples=20, database=None, deadline=None)
    def collect(case: tuple[TableDef, list[Any]]) -> None:
        if all(case[0].qualified != m[0].qualified for m in made):
            made.append(case)

    collect()
    for table, values in made:
        for statement in table.create_sql():
            pg_conn.run(statement)
        for row in values:
            sql = ", ".join("NULL" if v is None else v.sql() for v in row)
            try:
                pg_conn.run(f"INSERT INTO {table.sql_name} VALUES ({sql})")
            except Exception as exc:  # a key drawn twice
                assert "duplicate key" in str(exc), exc
    pg_conn.run("CREATE PUBLICATION p FOR ALL TABLES")
    database = pg_conn.run("SELECT current_database()")[0][0]
    url = f"postgresql://{pg_cluster.user}@{pg_cluster.host}:{pg_cluster.port}/{database}"
    one, _ = _snapshot(url, "g1")
    two, _ = _snapshot(url, "g2", threads=2)
    for lines in (one, two):
        rows = _parsed(lines)
        relations = [r.data for r in rows if r.data[:1] == b"R"]
        assert len(relations) == len(made)
        expected: list[bytes] = []
        for relation in relations:
            expected.append(relation)
            expected.extend(_expected_inserts(pg_conn, relation))
        assert [r.data for r in rows[1:-1] if r.data[:1] != b"Y"] == expected
    assert sum(r.data[:1] == b"I" for r in _parsed(one)) > 50


def test_every_copy_escape_round_trips_through_the_server(pg_cluster: TempCluster,
                                                         pg_conn: Any) -> None:
    """Values holding every character COPY escapes (tab, newline, carriage return,
    backslash, backspace, form feed, vertical tab), NULL against the texts 'N', '\\N' and
    'NULL', non-ASCII, and a value longer than a block (its row in a block of its own):
    the Inserts read back from the capture's block lines hold exactly what the server's
    own text output gives for them (a SELECT through the extended protocol)."""
    values = ["tab\there", "new\nline", "cr\rlf\r\n", "back\\slash", "\\N", "N",
              "NULL", "\b\f\v", "ünïcødé ✓ 😀", "", "\\", "\\\\t", "x" * 300_000, None]
    pg_conn.run("CREATE TABLE esc (id int PRIMARY KEY, v text, w varchar(10))")
    for number, value in enumerate(values):
        pg_conn.run("INSERT INTO esc VALUES (:n, :v, :w)", n=number, v=value,
                    w=None if value is None else value[:10])
    pg_conn.run("CREATE PUBLICATION p FOR ALL TABLES")
    expected = {(str(n), v, w) for n, v, w in pg_conn.run(
        "SELECT id::text, v, w::text FROM esc")}
    database = pg_conn.run("SELECT current_database()")[0][0]
    url = f"postgresql://{pg_cluster.user}@{pg_cluster.host}:{pg_cluster.port}/{database}"
    lines, _ = _snapshot(url, "esc")
    assert sum(COPY_MARK in line for line in lines) >= 1
    from pgcdc_events.protocol import PgOutputReader  # noqa: PLC0415

    reader = PgOutputReader()
    got = set()
    for row in _parsed(lines):
        message = reader.read(row.data)
        if isinstance(message, Insert):
            got.add(tuple(None if v is None else v.decode() for v in message.new.values))
    assert got == expected and len(got) == len(values)


def test_parallel_tables_write_the_same_lines(pg_cluster: TempCluster, pg_conn: Any) -> None:
    """The same exported snapshot read with one thread and with four: the same lines,
    Begin and Commit aside (each read is its own transaction)."""
    for name in "dcba":
        pg_conn.run(f"CREATE TABLE {name} (id int PRIMARY KEY, v text)")
        pg_conn.run(f"INSERT INTO {name} SELECT g, repeat('{name}', g % 9) || CASE WHEN g % 7 = 0 "
                    f"THEN E'\\t' ELSE '' END FROM generate_series(1, 30000) g")
    pg_conn.run("CREATE PUBLICATION p FOR ALL TABLES")
    database = pg_conn.run("SELECT current_database()")[0][0]
    url = f"postgresql://{pg_cluster.user}@{pg_cluster.host}:{pg_cluster.port}/{database}"
    reader = StreamReader(url, slot="s", publications=["p"])
    reader.connect()
    try:
        reader.prepare(create_slot=True, snapshot=True)
        outputs = []
        for threads in (1, 4, 2):
            written: list[bytes] = []
            result = read_snapshot(reader, lambda row: None, write=written.append,
                                   threads=threads)
            assert (result.tables, result.rows) == (4, 120000)
            lines = b"".join(written).splitlines(keepends=True)
            assert len(lines) < 4 + 120000 // 100  # the rows in blocks
            rows = _parsed(lines)
            assert {r.xid for r in rows} == {result.xid & 0xFFFFFFFF}  # each read's own
            # (where the blocks end depends on how the data arrived: the rows compared)
            outputs.append([(r.lsn, r.data) for r in rows if r.data[:1] not in b"BC"])
        reader.finish_snapshot()
    finally:
        reader.close()
    assert outputs[0] == outputs[1] == outputs[2]
    assert len(outputs[0]) == 4 + 120000


@pytest.mark.parametrize("threads", [1, 2])
def test_ctrl_c_stops_a_snapshot_at_once(pg_cluster: TempCluster, pg_conn: Any,
                                         tmp_path: Path, threads: int) -> None:
    """SIGINT while a snapshot of 600,000 rows in two tables is being written (one thread,
    and two: the tables read at once): the capture exits (interrupted) at once; the output
    holds nothing of it and says it is unfinished; the next run takes it whole. (The issue
    measured 37 s on 1.5M rows: the wait does not depend on the size, so the suite keeps
    the tables small enough to snapshot again quickly.)"""
    for name in ("t", "u"):
        pg_conn.run(f"CREATE TABLE {name} (id int PRIMARY KEY, v text)")
        pg_conn.run(f"INSERT INTO {name} SELECT g, repeat('x', 60) FROM "
                    "generate_series(1, 300000) g")
    pg_conn.run("CREATE PUBLICATION p FOR ALL TABLES")
    database = pg_conn.run("SELECT current_database()")[0][0]
    url = f"postgresql://{pg_cluster.user}@{pg_cluster.host}:{pg_cluster.port}/{database}"
    out = tmp_path / "o"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    command = [sys.executable, "-m", "pgcdc_events", "capture", "--dsn", url, "--slot", "s",
               "--publication", "p", "--output", f"{out}/", "-c",
               f"snapshot.max.threads={threads}", "--create-slot"]
    proc = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    path = out / "capture.jsonl"
    deadline = time.monotonic() + 120
    waited: float | None = None
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            # one thread: lines are being written; two: the tables are being read into
            # their temporary files (nothing is written before the first table is done)
            files = [] if threads == 1 else _snapshot_files(proc.pid)
            started = path.exists() and (path.stat().st_size > 3_000_000 if threads == 1
                                         else bool(files))
            if started:
                proc.send_signal(signal.SIGINT)
                sent = time.monotonic()
                proc.wait(timeout=30)
                waited = time.monotonic() - sent
                break
            time.sleep(0.01)
    finally:
        if proc.poll() is None:
            proc.kill()
        _, stderr = proc.communicate()
    assert waited is not None, "the snapshot ended before it could be interrupted"
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr
    # measured here, not asserted to the second (a shared machine): 0.1 s when idle
    print(f"\nCtrl-C during the snapshot ({threads} threads): exited {waited:.2f} s after SIGINT")
    assert waited < 3.0, f"the capture took {waited:.1f} s to stop"
    checkpoint = json.loads((out / "capture.jsonl.checkpoint.json").read_text())
    assert checkpoint["snapshot"]["state"] == "running" and checkpoint["offset"] == 0
    assert not any(os.path.exists(os.path.dirname(name)) for name in files)  # cleaned up
    rerun = subprocess.run([*command[:-1], "-q", "--snapshot-mode", "initial_only"], env=env,
                           check=False, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr
    with open(path, encoding="utf-8") as fh:
        rows = list(iter_capture(fh))
    assert len(rows) == 600_000 + 4 and all(r.snapshot for r in rows)
    assert sum(r.data[:1] == b"I" for r in rows) == 600_000


def _snapshot_files(pid: int) -> list[str]:
    """The files process ``pid`` holds open in a parallel snapshot's temporary directory."""
    found = []
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if "pgcdc-snapshot-" in target and os.path.getsize(target) > 1_000_000:
                    found.append(target)
    return found


# -- the COPY protocol read in bulk ----------------------------------------------------------

class _Socket:
    """Bytes handed out in the sizes given (the buffered socket of a pg8000 connection)."""

    def __init__(self, data: bytes, sizes: list[int]) -> None:
        self.data, self.sizes = data, sizes

    def flush(self) -> None:
        pass

    def read1(self, limit: int) -> bytes:
        size = min(self.sizes.pop(0) if self.sizes else limit, limit)
        chunk, self.data = self.data[:size], self.data[size:]
        return chunk


class _Connection:
    _client_encoding = "utf8"

    def __init__(self, data: bytes, sizes: list[int]) -> None:
        self._sock = _Socket(data, sizes)

    def send_QUERY(self, sql: str) -> None:
        pass


def _message(code: bytes, body: bytes) -> bytes:
    return code + (len(body) + 4).to_bytes(4, "big") + body


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.binary(max_size=300).map(
    lambda b: b.replace(b"\n", b"x").replace(b"\0", b"0")),
    st.sampled_from([b"", b"d", b"d\0", b"\nd\0"[1:]])), st.integers(0, 9)), max_size=40),
    st.lists(st.integers(1, 700), max_size=60))
def test_copy_out_reads_the_rows_whatever_the_messages(
        rows: list[tuple[bytes, int]], sizes: list[int]) -> None:
    """Rows of every length (lengths with a newline byte), a notice or a parameter status
    between rows, a row cut across two messages, reads cut anywhere: the rows as sent."""
    from pgcdc_events.adapters.pg8000 import copy_out  # noqa: PLC0415

    stream = _message(b"H", b"\0\0\x01\0\0")
    for text, how in rows:
        if how == 1:
            stream += _message(b"N", b"SNOTICE\0Mhello\nd\0\0")
        elif how == 2:
            stream += _message(b"S", b"a\0b\0")
        if how == 3 and text:
            stream += _message(b"d", text[:1]) + _message(b"d", text[1:] + b"\n")
        else:
            stream += _message(b"d", text + b"\n")
    stream += _message(b"c", b"") + _message(b"C", b"COPY 1\0") + _message(b"Z", b"I")
    received: list[bytes] = []
    copy_out(_Connection(stream, list(sizes)), "COPY", received.append)
    assert b"".join(received) == b"".join(text + b"\n" for text, _ in rows)


def test_copy_out_raises_the_servers_error_once_it_is_ready() -> None:
    import pg8000.native  # noqa: PLC0415

    from pgcdc_events.adapters.pg8000 import copy_out  # noqa: PLC0415

    stream = (_message(b"H", b"\0\0\x01\0\0") + _message(b"d", b"1\n")
              + _message(b"E", b"SERROR\0C57014\0Mcanceling statement\0\0")
              + _message(b"Z", b"E"))
    received: list[bytes] = []
    with pytest.raises(pg8000.native.DatabaseError) as info:
        copy_out(_Connection(stream, []), "COPY", received.append)
    assert info.value.args[0]["C"] == "57014" and received == [b"1\n"]
