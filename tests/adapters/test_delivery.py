"""Delivery: the capture process is killed (SIGKILL) at random moments and at every step of its
write / fsync / checkpoint / advance cycle, the server is restarted under it, and at the end
the output holds each change exactly once, in commit order.

The referee is a second slot created before the workload and read once at the end, in one
peek with protocol 1 (no streaming, no two-phase): its changes, decoded, must equal the
decoded capture record for record, and the capture's events applied to empty tables must
reproduce ``SELECT *`` of every table.

The CI runs bound the number of kills; ``-m slow`` runs the long campaign
(``PGCDC_DELIVERY_KILLS`` / ``PGCDC_DELIVERY_RESTARTS`` override its size) and prints its
figures.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pg8000.native
import pytest

from pgcdc_events.events import EventConfig, EventDecoder, JsonRecordWriter
from pgcdc_events.protocol import (
    Begin,
    BeginPrepare,
    CaptureError,
    CaptureRow,
    Commit,
    CommitPrepared,
    Lsn,
    PgOutputReader,
    StreamCommit,
    iter_capture,
)
from pgcdc_events.testing.cluster import TempCluster

ROOT = Path(__file__).resolve().parents[2]
TABLES = {
    "acct": "CREATE TABLE acct (id int PRIMARY KEY, owner text NOT NULL, balance numeric(12,2),"
            " active boolean)",
    "item": "CREATE TABLE item (id bigint PRIMARY KEY, note text, qty int)",
    "pair": "CREATE TABLE pair (a int, b text, v int, PRIMARY KEY (a, b))",
}
CLOCK = 1_700_000_000_000_000_000
DECODE_PROPS = {"topic.prefix": "d", "skipped.operations": "none",
                "decimal.handling.mode": "string", "tombstones.on.delete": "false"}


# ---------------------------------------------------------------- the server and the workload


@pytest.fixture
def cluster() -> Iterator[TempCluster]:
    """A cluster of its own: it gets restarted, and big transactions stream at 64kB."""
    with TempCluster(settings={"logical_decoding_work_mem": "64kB",
                               "max_prepared_transactions": "20"}) as c:
        conn = pg8000.native.Connection(**c.dsn())
        try:
            for sql in TABLES.values():
                conn.run(sql)
            conn.run("ALTER TABLE item REPLICA IDENTITY FULL")
            conn.run("CREATE PUBLICATION pub FOR ALL TABLES")
            # the referee first, then the slot under test: both see the whole workload
            conn.run("SELECT pg_create_logical_replication_slot('oracle', 'pgoutput')")
            conn.run("SELECT pg_create_logical_replication_slot('cap', 'pgoutput', false, true)")
        finally:
            conn.close()
        yield c


class Workload(threading.Thread):
    """Random transactions until stopped; survives server restarts (reconnects and goes on).

    Small and multi-statement transactions, savepoints rolled back, rollbacks, big
    transactions that stream, primary-key changes, truncates, logical messages, and
    prepared transactions committed or rolled back later.
    """

    def __init__(self, cluster: TempCluster, seed: int, big_every: int = 40) -> None:
        super().__init__(daemon=True)
        self.cluster = cluster
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.big_every = big_every
        self.transactions = 0
        self.errors = 0
        self.prepared: list[str] = []
        self._gid = 0
        self.conn: Any = None

    def connect(self) -> Any:
        """A connection whose lock waits fail instead of blocking (never a hang)."""
        conn = pg8000.native.Connection(**self.cluster.dsn())
        conn.run("SET lock_timeout = '2s'")
        return conn

    def _connect(self) -> Any:
        while not self.stop.is_set():
            try:
                return self.connect()
            except Exception:
                time.sleep(0.1)
        return None

    def run(self) -> None:
        while not self.stop.is_set():
            if self.conn is None:
                self.conn = self._connect()
                if self.conn is None:
                    return
            try:
                self.step(self.conn)
                self.transactions += 1
            except Exception:
                self.errors += 1
                with contextlib.suppress(Exception):
                    self.conn.close()
                self.conn = None
            time.sleep(self.rng.uniform(0, 0.01))

    def step(self, conn: Any) -> None:
        rng = self.rng
        kind = rng.random()
        if self.prepared and kind < 0.05:
            gid = self.prepared.pop(rng.randrange(len(self.prepared)))
            verb = "COMMIT" if rng.random() < 0.7 else "ROLLBACK"
            conn.run(f"{verb} PREPARED '{gid}'")
            return
        if kind < 0.04:
            conn.run("SELECT pg_logical_emit_message(false, 'wl', :m)", m=f"note {rng.random()}")
            return
        if kind < 0.10 and len(self.prepared) < 8:
            # Prepared transactions hold their row locks until resolved: they only insert
            # rows no other statement touches (negative ids).
            self._gid += 1
            gid = f"g{self._gid}_{rng.randint(0, 10**6)}"
            conn.run("BEGIN")
            for _ in range(rng.randint(1, 3)):
                conn.run("INSERT INTO item VALUES (:k, 'prepared', 1)",
                         k=-(self._gid * 10 + rng.randint(0, 9)) - 10**6 * rng.randint(1, 9))
            conn.run(f"PREPARE TRANSACTION '{gid}'")
            self.prepared.append(gid)
            return
        conn.run("BEGIN")
        for _ in range(rng.randint(1, 5)):
            self.statement(conn)
            if rng.random() < 0.15:
                conn.run("SAVEPOINT sp")
                self.statement(conn)
                conn.run("ROLLBACK TO SAVEPOINT sp" if rng.random() < 0.5
                         else "RELEASE SAVEPOINT sp")
        if rng.random() < 1 / self.big_every:
            base = rng.randint(1, 10**9)
            conn.run("INSERT INTO item SELECT :b + g, repeat('big', 60), g FROM "
                     "generate_series(1, 1500) g ON CONFLICT (id) DO NOTHING", b=base)
        conn.run("ROLLBACK" if rng.random() < 0.08 else "COMMIT")

    def statement(self, conn: Any) -> None:
        rng = self.rng
        r = rng.random()
        key = rng.randint(1, 60)
        if r < 0.3:
            conn.run("INSERT INTO acct VALUES (:k, :o, :b, :a) ON CONFLICT (id) DO UPDATE SET "
                     "balance = acct.balance + 1", k=key, o=f"o{key}",
                     b=Decimal(rng.randint(0, 10**6)) / 100, a=rng.random() < 0.5)
        elif r < 0.45:
            conn.run("UPDATE acct SET balance = balance - 1.5, active = NOT active WHERE id = :k",
                     k=key)
        elif r < 0.55:
            conn.run("DELETE FROM acct WHERE id = :k", k=key)
        elif r < 0.7:
            conn.run("INSERT INTO item VALUES (:k, :n, :q) ON CONFLICT (id) DO UPDATE SET "
                     "qty = item.qty + 1", k=key, n="é" * rng.randint(0, 30), q=key)
        elif r < 0.78:
            conn.run("UPDATE item SET id = id + 1000 WHERE id = :k", k=key)  # a key change
        elif r < 0.88:
            conn.run("INSERT INTO pair VALUES (:a, :b, 0) ON CONFLICT (a, b) DO UPDATE SET "
                     "v = pair.v + 1", a=key % 7, b=str(key % 5))
        elif r < 0.95:
            conn.run("DELETE FROM pair WHERE a = :a", a=key % 7)
        elif r < 0.97:
            conn.run("TRUNCATE pair")
        elif r < 0.985:
            conn.run("SELECT pg_logical_emit_message(true, 'tx', 'in a transaction')")
        else:  # non-transactional, inside a transaction: its commit may follow right after
            conn.run("SELECT pg_logical_emit_message(false, 'nt', 'inside a transaction')")

    def finish(self) -> None:
        """Stop, then resolve every prepared transaction still pending."""
        self.stop.set()
        self.join(30)
        conn = self._connect_finally()
        try:
            for gid in self.prepared:
                with contextlib.suppress(Exception):
                    conn.run(f"COMMIT PREPARED '{gid}'")
            self.prepared = []
        finally:
            conn.close()
        if self.conn is not None:
            with contextlib.suppress(Exception):
                self.conn.close()

    def _connect_finally(self) -> Any:
        for _ in range(100):
            try:
                return pg8000.native.Connection(**self.cluster.dsn())
            except Exception:
                time.sleep(0.1)
        raise RuntimeError("the server did not come back")


# ---------------------------------------------------------------- the capture process

def crash_wrapper(imports: str, points: str) -> str:
    """A script that runs the CLI and SIGKILLs itself at the CRASH_NTH passage through the
    crash point CRASH_AT: ``points`` (an if/elif chain over ``point`` that patches the
    code, calling ``passing()`` and ``die()``) after ``imports``."""
    return CRASH_FRAME.format(imports=textwrap.dedent(imports).strip(),
                              points=textwrap.dedent(points).strip())


CRASH_FRAME = textwrap.dedent('''
    """Run the CLI, SIGKILLing itself at the CRASH_NTH passage through CRASH_AT."""
    import os, signal, sys
    {imports}
    from pgcdc_events.cli import main

    point, nth = os.environ["CRASH_AT"], int(os.environ["CRASH_NTH"])
    calls = 0

    def passing() -> bool:
        global calls
        calls += 1
        return calls == nth

    def die():
        os.kill(os.getpid(), signal.SIGKILL)

    {points}
    else:
        raise SystemExit(f"unknown crash point {{point}}")
    sys.exit(main(sys.argv[1:]))
''')

CRASH_WRAPPER = crash_wrapper(
    "from pgcdc_events.adapters import checkpoint, pg8000 as slot_reader, stream", '''
    Out = checkpoint.DurableOutput
    write, commit, store = Out.write, Out.commit, Out._store
    readers = (slot_reader.SlotReader, stream.StreamReader)  # each has its own advance
    fsync = os.fsync

    if point == "torn-write":  # half of a unit's lines reach the file, then death
        def torn(self, data):
            write(self, data)
            if passing():
                os.write(self._fd, bytes(self._buffer[:len(self._buffer) // 2]))
                die()
        Out.write = torn
    elif point == "before-fsync":
        def flushed_not_synced(self, *a):
            if passing():
                self._flush()
                die()
            return commit(self, *a)
        Out.commit = flushed_not_synced
    elif point == "before-checkpoint":
        def synced_no_checkpoint(self, cp):
            if cp.lsn is not None and passing():
                die()
            return store(self, cp)
        Out._store = synced_no_checkpoint
    elif point == "before-advance":
        for Reader in readers:
            def checkpointed_not_advanced(self, lsn, advance=Reader.advance):
                if passing():
                    die()
                return advance(self, lsn)
            Reader.advance = checkpointed_not_advanced
    elif point == "after-advance":
        for Reader in readers:
            def advanced(self, lsn, advance=Reader.advance):
                result = advance(self, lsn)
                if passing():
                    die()
                return result
            Reader.advance = advanced
''')


def capture_args(cluster: TempCluster, output: Path, *extra: str, reader: str = "stream"
                 ) -> list[str]:
    return ["capture", "--dsn", cluster.url(), "--slot", "cap", "--publication", "pub",
            "--reader", reader, "--snapshot-mode", "no_data",
            "--output", f"{output}/", "--streaming", "on", "--two-phase", "--quiet",
            "--batch-rows", "300", "--poll-interval", "0.05", "--memory-limit", "1",
            "--retry-for", "120", *extra]


def start_capture(args: list[str], env: dict[str, str] | None = None,
                  script: Path | None = None) -> subprocess.Popen[bytes]:
    prefix = [sys.executable, str(script)] if script else [sys.executable, "-m", "pgcdc_events"]
    return subprocess.Popen(prefix + args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, **(env or {})}, cwd=ROOT)


def finish_capture(cluster: TempCluster, output: Path, reader: str = "stream") -> None:
    """One more run without --follow: must exit 0, caught up."""
    proc = subprocess.run([sys.executable, "-m", "pgcdc_events",
                           *capture_args(cluster, output, reader=reader)],
                          capture_output=True, timeout=300, cwd=ROOT, check=False)
    assert proc.returncode == 0, proc.stderr.decode()


# ---------------------------------------------------------------- verification


def _decode(rows: list[CaptureRow]) -> list[dict[str, Any]]:
    config = EventConfig.from_properties(DECODE_PROPS)
    decoder = EventDecoder(config, clock=lambda: CLOCK, run_id="r")
    writer = JsonRecordWriter(config.json)
    return [json.loads(writer.record_line(r)) for r in decoder.feed_rows(rows)]


def _oracle_rows(cluster: TempCluster) -> list[CaptureRow]:
    conn = pg8000.native.Connection(**cluster.dsn())
    try:
        rows = conn.run("SELECT lsn::text, xid::text, data FROM pg_logical_slot_peek_binary_changes("
                        "'oracle', NULL, NULL, 'proto_version', '1', 'publication_names', 'pub',"
                        " 'messages', 'true')")
    finally:
        conn.close()
    return [CaptureRow(Lsn.parse(lsn), int(xid), bytes(data)) for lsn, xid, data in rows]


def _committed_xids(rows: list[CaptureRow]) -> Counter[int]:
    """How many times each transaction's commit appears (plain, streamed or prepared)."""
    reader = PgOutputReader()
    seen: Counter[int] = Counter()
    current = None
    for row in rows:
        message = reader.read(row.data)
        if isinstance(message, (Begin, BeginPrepare)):
            current = message.xid
        elif isinstance(message, Commit):
            assert current is not None
            seen[current] += 1
        elif isinstance(message, (StreamCommit, CommitPrepared)):
            seen[message.xid] += 1
    return seen


def _payload(value: Any) -> Any:
    return value.get("payload", value) if isinstance(value, dict) and "schema" in value else value


PRIMARY_KEYS = {"acct": ("id",), "item": ("id",), "pair": ("a", "b")}


def _apply(records: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Apply the change events to empty tables, keyed by each table's primary key."""
    tables: dict[str, dict[str, dict[str, Any]]] = {name: {} for name in TABLES}
    for record in records:
        value = _payload(record["value"])
        if value is None or value.get("op") not in ("c", "u", "d", "r", "t"):
            continue
        name = value["source"]["table"]
        table = tables[name]
        if value["op"] == "t":
            table.clear()
            continue

        def key(row: dict[str, Any], name: str = name) -> str:
            return json.dumps([row[c] for c in PRIMARY_KEYS[name]])

        if value["before"] is not None:  # deletes, and updates that carry the old row
            table.pop(key(value["before"]), None)
        if value["after"] is not None:
            table[key(value["after"])] = value["after"]
    return tables


def _select_all(cluster: TempCluster) -> dict[str, list[dict[str, Any]]]:
    conn = pg8000.native.Connection(**cluster.dsn())
    try:
        out = {}
        for name in TABLES:
            rows = conn.run(f"SELECT * FROM {name}")
            cols = [c["name"] for c in conn.columns]
            out[name] = sorted(
                (dict(zip(cols, (str(v) if isinstance(v, Decimal) else v for v in row),
                          strict=True)) for row in rows), key=json.dumps)
    finally:
        conn.close()
    return out


def verify(cluster: TempCluster, output: Path) -> dict[str, int]:
    """Exactly once, in order, and the events rebuild every table; returns the figures."""
    with open(output / "capture.jsonl", encoding="utf-8") as fh:
        captured = list(iter_capture(fh))
    oracle = _oracle_rows(cluster)
    commits = _committed_xids(captured)
    duplicates = sum(n - 1 for n in commits.values() if n > 1)
    expected_commits = _committed_xids(oracle)
    assert duplicates == 0, [x for x, n in commits.items() if n > 1][:10]
    lost = set(expected_commits) - set(commits)
    invented = set(commits) - set(expected_commits)
    assert not lost and not invented, (sorted(lost)[:10], sorted(invented)[:10])
    records = _decode(captured)
    expected = _decode(oracle)
    assert len(records) == len(expected)
    assert records == expected  # every change once, in commit order, with the same content
    rebuilt = {name: sorted(rows.values(), key=json.dumps)
               for name, rows in _apply(records).items()}
    assert rebuilt == _select_all(cluster)
    changes = sum(1 for r in captured if r.data[:1] in (b"I", b"U", b"D", b"T", b"M"))
    return {"transactions": len(commits), "records": len(records), "changes": changes,
            "duplicates": duplicates, "lost": len(lost),
            "streamed": sum(1 for r in captured if r.data[:1] == b"c"),
            "prepared": sum(1 for r in captured if r.data[:1] == b"K")}


# ---------------------------------------------------------------- the tests


def kill_campaign(cluster: TempCluster, output: Path, *, kills: int, restarts: int,
                  seed: int, reader: str = "stream") -> dict[str, int]:
    """Run the workload; kill the follower ``kills`` times and restart the server
    ``restarts`` times at random moments; finish, verify, return the figures."""
    rng = random.Random(seed)
    workload = Workload(cluster, seed)
    workload.start()
    events = ["kill"] * kills + ["restart"] * restarts
    rng.shuffle(events)
    proc = start_capture(capture_args(cluster, output, "--follow", reader=reader))
    done_kills = done_restarts = 0
    try:
        for event in events:
            time.sleep(rng.uniform(0.2, 1.2))
            if event == "kill":
                proc.kill()
                proc.wait()
                done_kills += 1
                proc = start_capture(capture_args(cluster, output, "--follow", reader=reader))
            else:
                cluster.restart()
                done_restarts += 1
    finally:
        workload.finish()
    # the follower (running for a while: past its start-up) stops cleanly on SIGINT,
    # after its current read
    time.sleep(3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()
    finish_capture(cluster, output, reader)
    figures = verify(cluster, output)
    assert workload.transactions > 50
    return {**figures, "kills": done_kills, "server_restarts": done_restarts,
            "workload_transactions": workload.transactions,
            "workload_errors": workload.errors}


READERS = ["stream", "sql"]


@pytest.mark.parametrize("reader", READERS)
def test_sigkill_at_random_moments(cluster: TempCluster, tmp_path: Path, reader: str) -> None:
    figures = kill_campaign(cluster, tmp_path / "out", kills=8, restarts=0, seed=7,
                            reader=reader)
    assert figures["kills"] == 8 and figures["streamed"] > 0 and figures["prepared"] > 0


@pytest.mark.parametrize("reader", READERS)
def test_server_restarted_under_the_reader(cluster: TempCluster, tmp_path: Path,
                                           reader: str) -> None:
    figures = kill_campaign(cluster, tmp_path / "out", kills=3, restarts=4, seed=11,
                            reader=reader)
    assert figures["server_restarts"] == 4


CRASH_POINTS = ["torn-write", "before-fsync", "before-checkpoint", "before-advance",
                "after-advance"]


@pytest.mark.parametrize("reader", READERS)
def test_a_crash_at_every_step_of_the_cycle(cluster: TempCluster, tmp_path: Path,
                                            reader: str) -> None:
    """A fixed workload; for each step of write/fsync/checkpoint/advance, the capture dies
    there on its 1st, 2nd and 3rd pass, is restarted, and in the end the output is exact."""
    workload = Workload(cluster, seed=3, big_every=10)
    conn = workload.connect()
    script = tmp_path / "crash.py"
    script.write_text(CRASH_WRAPPER)
    output = tmp_path / "out"
    crashes = 0
    try:
        for point in CRASH_POINTS:
            for nth in (1, 3):
                for _ in range(20):  # new changes for this run to write
                    try:
                        workload.step(conn)
                    except Exception:
                        conn.run("ROLLBACK")
                proc = start_capture(capture_args(cluster, output, reader=reader),
                                     {"CRASH_AT": point, "CRASH_NTH": str(nth)}, script)
                _, err = proc.communicate(timeout=300)
                if proc.returncode == -signal.SIGKILL:
                    crashes += 1
                else:  # caught up before passing the crash point that many times
                    assert proc.returncode == 0, err.decode()
        for gid in workload.prepared:
            conn.run(f"COMMIT PREPARED '{gid}'")
    finally:
        conn.close()
    assert crashes >= 7
    finish_capture(cluster, output, reader)
    verify(cluster, output)


@pytest.mark.slow
@pytest.mark.parametrize("reader", READERS)
def test_long_kill_campaign(cluster: TempCluster, tmp_path: Path, reader: str) -> None:
    kills = int(os.environ.get("PGCDC_DELIVERY_KILLS", "150"))
    restarts = int(os.environ.get("PGCDC_DELIVERY_RESTARTS", "15"))
    started = time.monotonic()
    figures = kill_campaign(cluster, tmp_path / "out", kills=kills, restarts=restarts, seed=2024,
                            reader=reader)
    figures["seconds"] = round(time.monotonic() - started)
    print(f"\ndelivery campaign ({reader} reader):", json.dumps(figures))
    assert figures["duplicates"] == 0 and figures["lost"] == 0


def _captured_types(output: Path) -> set[bytes]:
    try:
        with open(output / "capture.jsonl", encoding="utf-8") as fh:
            return {row.data[:1] for row in iter_capture(fh)}
    except (FileNotFoundError, CaptureError):  # not there yet, or a line being written
        return set()


def test_a_server_shuts_down_under_a_following_reader(cluster: TempCluster,
                                                       tmp_path: Path) -> None:
    """A fast shutdown waits until every walsender's client has confirmed all it was sent,
    the shutdown checkpoint included, which no unit ends at; a prepared transaction still
    unresolved holds the durable position further back. The streaming reader must let
    the server go (pg_ctl gave up after 60 s before: "server does not shut down") and
    still deliver everything exactly once afterwards."""
    output = tmp_path / "out"
    conn = pg8000.native.Connection(**cluster.dsn())
    proc = start_capture(capture_args(cluster, output, "--follow"))
    try:
        conn.run("INSERT INTO acct VALUES (1, 'a', 10, true)")
        conn.run("BEGIN")
        conn.run("INSERT INTO acct VALUES (2, 'b', 20, true)")
        conn.run("PREPARE TRANSACTION 'pending'")
        deadline = time.monotonic() + 60
        while not _captured_types(output) & {b"I"}:
            assert time.monotonic() < deadline, "the first insert never reached the output"
            time.sleep(0.1)
        conn.close()
        cluster.restart()  # raises ClusterError when the server does not shut down
        conn = pg8000.native.Connection(**cluster.dsn())
        conn.run("COMMIT PREPARED 'pending'")
        conn.run("INSERT INTO acct VALUES (3, 'c', 30, true)")
    finally:
        conn.close()
        time.sleep(2)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()
    finish_capture(cluster, output)
    figures = verify(cluster, output)
    assert figures["duplicates"] == 0 and figures["lost"] == 0 and figures["prepared"] == 1
