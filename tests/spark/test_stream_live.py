"""End to end: a live workload captured with ``capture --follow --rotate-every``, the rotating
files decoded by ``decode_stream`` and applied to Parquet directories and to PostgreSQL
tables (another database), the capture killed (SIGKILL) and restarted, the queries stopped
and restarted from their checkpoints, an ``ALTER TABLE ... ADD COLUMN`` mid-stream (the table's
query fails naming the column; restarted with a catalog taken after it), a big transaction
streamed by the server (``streaming on``, 1MB of ``logical_decoding_work_mem``) across
micro-batches, and ordinary transactions of 1 to a few thousand changes to one table (from
32 on decoded column-wise). At the end every target equals ``SELECT *`` on the source: nothing lost or
doubled. ``-m slow`` runs a longer workload."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pg8000.native
import pytest

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession

from pgcdc_events.cli import main
from pgcdc_events.events import EventConfig
from pgcdc_events.spark._session import to_arrow_table
from pgcdc_events.spark.apply import ParquetTarget, PostgresTarget
from pgcdc_events.spark.stream import DecodedStream, decode_stream, read_capture_stream
from pgcdc_events.testing.cluster import TempCluster
from pgcdc_events.types.catalog import CatalogSnapshot

ROOT = Path(__file__).resolve().parents[2]
TABLES = {
    "acct": "CREATE TABLE {s}acct (id int PRIMARY KEY, owner text NOT NULL, "
            "balance numeric(12,2))",
    "item": "CREATE TABLE {s}item (id bigint PRIMARY KEY, note text, qty int)",
    "pair": "CREATE TABLE {s}pair (a int, b text, v int, PRIMARY KEY (a, b))",
}
#: Ordinary transactions' sizes (rows of one table): 32 and more are decoded column-wise.
SIZES = (1, 31, 32, 100, 3000)
#: Big enough for SIZES' transactions, small enough that big_transaction is streamed.
WORK_MEM = "1MB"
PROPS = {"topic.prefix": "d", "skipped.operations": "none", "decimal.handling.mode": "string"}


class Setup:
    def __init__(self, cluster: TempCluster, conn: Any, tmp: Path) -> None:
        self.cluster = cluster
        self.conn = conn
        self.db = conn.run("SELECT current_database()")[0][0]
        self.url = f"postgresql://{cluster.user}@{cluster.host}:{cluster.port}/{self.db}"
        self.target_db = f"{self.db}_target"
        self.tmp = tmp
        self.files = tmp / "files"
        self.out = tmp / "out"
        self.cp = tmp / "cp"
        self.rng = random.Random(1)
        self.next_id = 1

    def target(self) -> Any:
        return pg8000.native.Connection(**{**self.cluster.dsn(), "database": self.target_db})

    def capture_args(self, *extra: str) -> list[str]:
        return ["capture", "--dsn", self.url, "--slot", "sparks", "--publication", "sparkp",
                "--snapshot-mode", "no_data", "--streaming", "on", "--output", str(self.files),
                "--rotate-every", "0.3", "--rotate-size", "0.05", "--poll-interval", "0.1",
                "--batch-rows", "500", "--quiet", *extra]

    def start_capture(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, "-m", "pgcdc_events",
                                 *self.capture_args("--follow")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT,
                                env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})

    def catalog(self, name: str) -> CatalogSnapshot:
        path = self.tmp / name
        assert main(["catalog", "--dsn", self.url, "--schema", "public", "-o", str(path)]) == 0
        return CatalogSnapshot.load(str(path))

    # -- the workload -------------------------------------------------------------------
    def transactions(self, n: int, *, noted: bool = False) -> None:
        rng, conn = self.rng, self.conn
        for _ in range(n):
            kind = rng.random()
            conn.run("BEGIN")
            if kind < 0.35:
                i = self.next_id
                self.next_id += 1
                if noted:
                    conn.run("INSERT INTO acct (id, owner, balance, note) VALUES "
                             "(:i, :o, :b, :n)", i=i, o=f"o{i}", b=Decimal(i) / 4, n=f"n{i}")
                else:
                    conn.run("INSERT INTO acct VALUES (:i, :o, :b)", i=i, o=f"o{i}",
                             b=Decimal(i) / 4)
                conn.run("INSERT INTO item VALUES (:i, :n, :q)", i=i, n=f"item {i}", q=i)
                conn.run("INSERT INTO pair VALUES (:a, :b, :v)", a=i, b=f"b{i % 3}", v=i)
            elif kind < 0.6:
                conn.run("UPDATE acct SET balance = balance + 1 WHERE id % 3 = :r",
                         r=rng.randrange(3))
                conn.run("UPDATE item SET qty = (qty * 2) % 1000003, note = NULL WHERE id % 5 = :r",
                         r=rng.randrange(5))
                if noted:
                    conn.run("UPDATE acct SET note = 'changed' WHERE id % 4 = :r",
                             r=rng.randrange(4))
            elif kind < 0.75:  # primary key changes
                conn.run("UPDATE pair SET a = a + 100000 WHERE a IN (SELECT a FROM pair "
                         "WHERE a < 100000 ORDER BY a LIMIT 2)")
                conn.run("UPDATE acct SET id = id + 500000 WHERE id = (SELECT min(id) FROM "
                         "acct WHERE id < 500000)")
            elif kind < 0.9:
                conn.run("DELETE FROM item WHERE id IN (SELECT id FROM item ORDER BY "
                         "random() LIMIT 2)")
                conn.run("DELETE FROM acct WHERE id = (SELECT max(id) FROM acct)")
            else:
                conn.run("INSERT INTO item VALUES (:i, 'rolled back', 0)", i=-self.next_id)
                conn.run("ROLLBACK")
                continue
            conn.run("COMMIT")

    def sized_transactions(self, stream: DecodedStream | None = None) -> None:
        """Ordinary transactions (not streamed: under ``logical_decoding_work_mem``) of one
        table, of every size around the column-wise runs' threshold (32 changes) and
        beyond; with ``stream``, each is waited for, so it ends a micro-batch."""
        for n in SIZES:
            start = self.next_id + 2_000_000
            self.next_id += n
            before = _lsn(self.conn.run("SELECT pg_current_wal_lsn()::text")[0][0])
            self.conn.run("INSERT INTO item SELECT g, 'sized', g % 7 FROM generate_series("
                          "CAST(:a AS bigint), CAST(:b AS bigint)) g", a=start, b=start + n - 1)
            if stream is not None:
                wait_for(f"the transaction of {n} rows decoded", lambda before=before: any(
                    b.lsn is not None and b.lsn > before for b in stream.batches),
                    query=stream.query)

    def big_transaction(self, rows: int) -> None:
        """Streamed by the server (bigger than logical_decoding_work_mem)."""
        start = self.next_id
        self.next_id += rows
        self.conn.run("BEGIN")
        self.conn.run("INSERT INTO item SELECT g, repeat('x', 200), g FROM "
                      "generate_series(CAST(:a AS bigint), CAST(:b AS bigint)) g", a=start + 1_000_000,
                      b=start + 1_000_000 + rows - 1)
        self.conn.run("UPDATE pair SET v = v + 1")
        self.conn.run("COMMIT")

    # -- the streaming queries ---------------------------------------------------------------
    def start_queries(self, spark: SparkSession, catalog: CatalogSnapshot
                      ) -> tuple[DecodedStream, list[Any]]:
        config = EventConfig.from_properties(PROPS)
        stream = decode_stream(read_capture_stream(spark, str(self.files),
                                                   max_files_per_trigger=4),
                               config, catalog=catalog, path=str(self.out),
                               checkpoint=str(self.cp / "decode"))
        queries = [stream.start(trigger_seconds=0.5)]
        for name in TABLES:
            table = f"public.{name}"
            parquet = ParquetTarget(str(self.out / "tables" / table), buckets=4)
            pg = PostgresTarget(self.target, "public", name)

            def both(df: Any, batch_id: int, parquet: ParquetTarget = parquet,
                     pg: PostgresTarget = pg) -> None:
                events = to_arrow_table(df)
                last = parquet.last_batch()
                if last is None or batch_id > last:
                    parquet.apply(events, batch_id)
                pg.apply(events, batch_id)

            queries.append(stream.table(table).writeStream.foreachBatch(both)
                           .option("checkpointLocation", str(self.cp / "tables" / table))
                           .trigger(processingTime="0.5 seconds").start())
        return stream, queries

    def select_all(self, conn: Any, name: str) -> list[str]:
        rows = conn.run(f"SELECT * FROM {name}")
        cols = [c["name"] for c in conn.columns]
        return sorted(json.dumps(dict(zip(cols, (str(v) if isinstance(v, Decimal) else v
                                                  for v in row), strict=True)), sort_keys=True)
                      for row in rows)

    def parquet_rows(self, spark: SparkSession, name: str) -> list[str]:
        table = to_arrow_table(spark.read.option("mergeSchema", "true")
                               .parquet(str(self.out / "tables" / f"public.{name}")))
        return sorted(json.dumps(row, sort_keys=True) for row in table.to_pylist())


def _lsn(text: str) -> int:
    hi, lo = (int(x, 16) for x in text.split("/"))
    return hi << 32 | lo


def wait_for(what: str, condition: Callable[[], bool], timeout: float = 120, *,
             query: Any = None) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if query is not None and query.exception() is not None:
            raise AssertionError(f"{what}: the query failed: {query.exception()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def files(setup: Setup) -> int:
    return len([p for p in os.listdir(setup.files) if p.startswith("capture-")]) \
        if setup.files.exists() else 0


@pytest.fixture
def setup(pg_cluster: TempCluster, pg_conn: Any, tmp_path: Path) -> Iterator[Setup]:
    s = Setup(pg_cluster, pg_conn, tmp_path)
    for sql in TABLES.values():
        pg_conn.run(sql.format(s=""))
    pg_conn.run("ALTER TABLE item REPLICA IDENTITY FULL")
    pg_conn.run(f'ALTER DATABASE "{s.db}" SET logical_decoding_work_mem = \'{WORK_MEM}\'')
    admin = pg8000.native.Connection(**pg_cluster.dsn())
    admin.run(f'CREATE DATABASE "{s.target_db}"')
    admin.close()
    target = s.target()
    for sql in TABLES.values():
        target.run(sql.format(s=""))
    target.close()
    # the slot and the publication, before the workload
    assert main([*s.capture_args("--create-slot", "--create-publication")]) == 0
    try:
        yield s
    finally:
        admin = pg8000.native.Connection(**pg_cluster.dsn())
        with contextlib.suppress(Exception):
            admin.run(f'DROP DATABASE IF EXISTS "{s.target_db}" WITH (FORCE)')
        admin.close()


def run_end_to_end(spark: SparkSession, setup: Setup, scale: int) -> dict[str, int]:
    capture = setup.start_capture()
    queries: list[Any] = []
    try:
        setup.transactions(10 * scale)
        setup.big_transaction(4000 * scale)
        setup.transactions(10 * scale)
        wait_for("capture files", lambda: files(setup) >= 2)
        stream, queries = setup.start_queries(spark, setup.catalog("catalog1.json"))
        setup.transactions(10 * scale)
        setup.sized_transactions(stream)
        wait_for("a decoded batch", lambda: any(b.records for b in stream.batches))
        # kill the capture mid-stream, and stop the queries while batches are in flight
        capture.kill()
        capture.wait()
        setup.transactions(5 * scale)
        for query in queries:
            query.stop()
        capture = setup.start_capture()
        stream, queries = setup.start_queries(spark, setup.catalog("catalog1.json"))
        setup.transactions(5 * scale)
        setup.conn.run("TRUNCATE pair")
        setup.transactions(5 * scale)
        # ALTER TABLE mid-stream: the table's query stops at the first change with the column
        setup.conn.run("ALTER TABLE acct ADD COLUMN note text")
        setup.transactions(10 * scale, noted=True)
        acct = queries[1 + list(TABLES).index("acct")]
        wait_for("the acct query to refuse the new column", lambda: acct.exception() is not None,
                 timeout=120 + 120 * scale)
        assert "public.acct.note" in str(acct.exception())
        for query in queries:
            query.stop()
        target = setup.target()
        target.run("ALTER TABLE acct ADD COLUMN note text")
        target.close()
        stream, queries = setup.start_queries(spark, setup.catalog("catalog2.json"))
        setup.big_transaction(4000 * scale)
        setup.sized_transactions()
        setup.transactions(10 * scale, noted=True)
        setup.conn.run("INSERT INTO pair VALUES (-1, 'end', 0)")  # an ordinary last commit
        end_lsn = setup.conn.run("SELECT pg_current_wal_lsn()::text")[0][0]
        checkpoint = setup.files / "_capture.checkpoint.json"

        def caught_up() -> bool:
            text = json.loads(checkpoint.read_text()).get("lsn") if checkpoint.exists() else None
            if text is None:
                return False
            hi, lo = (int(x, 16) for x in text.split("/"))
            ehi, elo = (int(x, 16) for x in end_lsn.split("/"))
            return (hi << 32 | lo) >= (ehi << 32 | elo) - 0x10000 and files(setup) > 0

        wait_for("the capture to catch up", caught_up, timeout=120 + 60 * scale)
        time.sleep(1)
        capture.send_signal(signal.SIGINT)
        _, err = capture.communicate(timeout=60)
        assert capture.returncode == 0, err.decode()
        for query in queries:  # decode first, then the tables that read its records
            query.processAllAvailable()
        for query in queries:
            query.processAllAvailable()
        for query in queries:
            assert query.exception() is None
            query.stop()
    finally:
        for query in queries:
            with contextlib.suppress(Exception):
                query.stop()
        if capture.poll() is None:
            capture.kill()
            capture.wait()
    target = setup.target()
    figures = {"files": files(setup)}
    try:
        for name in TABLES:
            want = setup.select_all(setup.conn, name)
            assert setup.parquet_rows(spark, name) == want, name
            assert setup.select_all(target, name) == want, name
            figures[name] = len(want)
    finally:
        target.close()
    captured = [json.loads(line) for p in sorted(setup.files.glob("capture-*"))
                for line in p.read_text().splitlines()]
    figures["streamed_blocks"] = sum(1 for r in captured if r["data"].startswith("53"))
    assert figures["streamed_blocks"] >= 2  # Stream Start: the big transactions streamed
    # the sized transactions were ordinary ones (Begin ... Commit, not streamed)
    ordinary: list[int] = []
    inside = False
    for r in captured:
        tag = r["data"][:2]
        if tag == "42":  # Begin
            ordinary.append(0)
            inside = True
        elif tag in ("43", "53"):  # Commit, Stream Start
            inside = False
        elif tag == "49" and inside:  # Insert
            ordinary[-1] += 1
    assert max(SIZES) in ordinary and {32, 100} <= set(ordinary), sorted(ordinary)[-5:]
    return figures


@pytest.mark.slow  # 30 s; test_e2e_delta (live capture, spark stream, Delta and PostgreSQL)
# and test_stream_exec (transactions of every size) run by default
def test_end_to_end(spark: SparkSession, setup: Setup) -> None:
    figures = run_end_to_end(spark, setup, 1)
    assert figures["item"] > 1500 and figures["files"] > 3


@pytest.mark.slow
def test_end_to_end_long(spark: SparkSession, setup: Setup) -> None:
    figures = run_end_to_end(spark, setup, 6)
    print("\nspark stream end to end:", json.dumps(figures))
