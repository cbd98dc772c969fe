"""What the tests of captures driven by signals share: the signalling table, the
connector properties naming it, and ``capture``/``decode`` run as a user runs them."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pgcdc_events.adapters.connection import parse_conninfo
from pgcdc_events.cli import main
from pgcdc_events.testing.cluster import TempCluster

SIGNAL_DDL = ("CREATE TABLE debezium_signal (id varchar(64) PRIMARY KEY, type varchar(32) "
              "NOT NULL, data varchar(2048) NULL)")
PROPS = ["-c", "signal.data.collection=public.debezium_signal"]


def signal_url(pg_cluster: TempCluster, pg_conn: Any) -> str:
    """The test database's URL, with its signalling table created."""
    database = pg_conn.run("SELECT current_database()")[0][0]
    pg_conn.run(SIGNAL_DDL)
    return f"postgresql://{pg_cluster.user}@{pg_cluster.host}:{pg_cluster.port}/{database}"


def capture(url: str, out: Path, *extra: str, slot: str = "s") -> int:
    """``pgcdc-events capture`` of slot ``slot`` and publication ``p`` into ``out``."""
    return main(["capture", "--dsn", url, "--slot", slot, "--publication", "p",
                 "--output", str(out), "--snapshot-mode", "no_data", "-q", *PROPS, *extra])


def decode(capture_file: Path, tmp_path: Path, *extra: str, workers: int = 1
           ) -> list[dict[str, Any]]:
    """``pgcdc-events decode`` of ``capture_file``: its records."""
    out = tmp_path / f"records-{len(list(tmp_path.iterdir()))}.jsonl"
    assert main(["decode", "--capture", str(capture_file), "--output", str(out), "-q",
                 "--workers", str(workers), *PROPS, *extra]) == 0
    return [json.loads(line) for line in out.read_text().splitlines()]


def payloads(records: list[dict[str, Any]], table: str) -> list[dict[str, Any]]:
    """The payloads of ``public.table``'s change records (tombstones left out)."""
    return [r["value"]["payload"] for r in records
            if r["topic"] == f"pgcdc.public.{table}" and r["value"] is not None]


def keyed(records: list[dict[str, Any]], table: str) -> list[tuple[str, Any, Any]]:
    """(op, key, after) of each record of ``table``: what two runs must agree on."""
    return [(r["value"]["payload"]["op"], json.dumps(r["key"]["payload"], sort_keys=True),
             json.dumps(r["value"]["payload"]["after"], sort_keys=True))
            for r in records if r["topic"] == f"pgcdc.public.{table}" and r["value"]]


def check_invariants(records: list[dict[str, Any]], table: str, conn: Any, key: list[str],
                     touched: set[Any], *, read_once: bool = False) -> None:
    """What any correct run gives: the last event per key is the row ``SELECT *`` gives,
    and each row no change touched (keys as tuples) is read (``op: r``) exactly once;
    with ``read_once``, no row at all is read twice."""
    state: dict[Any, Any] = {}
    reads: dict[Any, int] = {}
    for payload in payloads(records, table):
        row = payload["after"] if payload["op"] != "d" else payload["before"]
        k = tuple(row[c] for c in key)
        if payload["op"] == "d":
            state.pop(k, None)
        else:
            state[k] = payload["after"]
        if payload["op"] == "r":
            reads[k] = reads.get(k, 0) + 1
    columns = [c for c, in conn.run(
        "SELECT attname FROM pg_attribute WHERE attrelid = CAST(:t AS regclass) AND attnum > 0 "
        "AND NOT attisdropped ORDER BY attnum", t=table)]
    expected = {}
    for values in conn.run(f"SELECT to_json(t) FROM {table} t"):
        row = values[0] if isinstance(values[0], dict) else json.loads(values[0])
        expected[tuple(row[c] for c in key)] = {c: row[c] for c in columns}
    assert set(state) == set(expected)
    for k, row in expected.items():
        assert {c: state[k][c] for c in columns} == row, k
    untouched = set(expected) - touched
    assert all(reads.get(k) == 1 for k in untouched), \
        [(k, reads.get(k)) for k in untouched if reads.get(k) != 1][:5]
    if read_once:
        assert all(n == 1 for n in reads.values()), {k: n for k, n in reads.items() if n != 1}


class MixedWorkload:
    """Deletes (every fifth), upserts (every third) and updates of table ``w`` (``id int
    PRIMARY KEY, v int, s text``) from a thread of its own, 2 ms apart, from entering the
    ``with`` block until it ends and at least ``at_least`` changes are made: keys
    ``(n * 37) % keys + 1``, some of them beyond the table's rows. ``also`` is run after
    each change (with ``n``). :attr:`touched` holds each key changed (as a 1-tuple); the
    workload's own failure is raised when the block ends."""

    def __init__(self, url: str, *, keys: int, at_least: int, also: str | None = None) -> None:
        self.url, self.keys, self.at_least, self.also = url, keys, at_least, also
        self.touched: set[tuple[int]] = set()
        self._stop = threading.Event()
        self._failures: list[BaseException] = []
        self._thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        conn = parse_conninfo(self.url).connect()[0]
        try:
            n = 0
            while not self._stop.is_set() or n < self.at_least:
                n += 1
                key = (n * 37) % self.keys + 1
                self.touched.add((key,))
                if n % 5 == 0:
                    conn.run("DELETE FROM w WHERE id = :k", k=key)
                elif n % 3 == 0:
                    conn.run("INSERT INTO w VALUES (:k, :n, 'new') ON CONFLICT (id) DO "
                             "UPDATE SET v = :n, s = 'upserted'", k=key, n=n)
                else:
                    conn.run("UPDATE w SET v = v + 1000, s = 'updated' WHERE id = :k", k=key)
                if self.also is not None:
                    conn.run(self.also, n=n)
                time.sleep(0.002)
        except BaseException as error:  # raised by __exit__
            self._failures.append(error)
        finally:
            conn.close()

    def __enter__(self) -> MixedWorkload:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        if self._failures and exc[0] is None:
            raise self._failures[0]


#: The capture options of :func:`capture_closed_at_a_stream_commit` (its decoding takes
#: them less the first two).
STREAM_COMMIT_CLOSE = ("--streaming", "on", "-c", "read.only=true",
                       "-c", "incremental.snapshot.chunk.size=2")


def capture_closed_at_a_stream_commit(url: str, pg_conn: Any, cap: Path) -> None:
    """A read-only incremental snapshot (``read.only=true``, chunks of 2) of table ``t`` (5
    rows) captured into ``cap`` with ``--streaming on``, a window of which a Stream Commit
    closes: a big transaction on ``bulk`` is in progress (streamed) when the first chunk is
    read, so the chunk's high watermark has it as ``xmin``; it commits while the capture
    follows, and its Stream Commit closes the window (the next chunk is read there:
    ``again``). The database needs the signalling table."""
    database = pg_conn.run("SELECT current_database()")[0][0]
    pg_conn.run(f'ALTER DATABASE "{database}" SET logical_decoding_work_mem = \'64kB\'')
    pg_conn.run("CREATE TABLE t (id int PRIMARY KEY, v int)")
    pg_conn.run("INSERT INTO t SELECT g, g FROM generate_series(1, 5) g")
    pg_conn.run("CREATE TABLE bulk (id int PRIMARY KEY, pad text)")
    assert capture(url, cap, "--create-slot", "--create-publication",
                   *STREAM_COMMIT_CLOSE) == 0
    other = parse_conninfo(url).connect()[0]
    other.run("START TRANSACTION")
    other.run("INSERT INTO bulk SELECT g, repeat('x', 100) FROM generate_series(1, 3000) g")
    pg_conn.run("INSERT INTO debezium_signal VALUES ('ad-hoc', 'execute-snapshot', "
                "'{\"data-collections\": [\"public.t\"]}')")

    def commit() -> None:  # the first chunk is read: the big one commits
        other.run("INSERT INTO bulk SELECT g, 'y' FROM generate_series(3001, 4000) g")
        other.run("COMMIT")

    try:
        follow_read_only_snapshot(url, cap, commit, streaming=True)
    finally:
        other.close()


def follow_read_only_snapshot(url: str, cap: Path, on_first_chunk: Callable[[], None], *,
                              after_snapshot: Callable[[], None] | None = None,
                              streaming: bool = False) -> None:
    """Capture into ``cap`` (slot ``s``, publication ``p``, made before) the read-only
    incremental snapshot (``read.only=true``, chunks of 2) that a signal already inserted
    asks for, following: ``on_first_chunk`` runs once the first chunk is read,
    ``after_snapshot`` at the first poll after the snapshot finished; the capture stops
    five polls later (or after 20 chunks). ``streaming``: ``--streaming on``."""
    from pgcdc_events.adapters import (  # noqa: PLC0415
        CaptureSink,
        DurableOutput,
        SlotReader,
        run_capture,
    )
    from pgcdc_events.adapters.incremental import IncrementalCapture  # noqa: PLC0415
    from pgcdc_events.adapters.pg8000 import DecodingOptions  # noqa: PLC0415
    from pgcdc_events.events import EventConfig  # noqa: PLC0415

    properties = {"topic.prefix": "pgcdc", "signal.data.collection": "public.debezium_signal",
                  "incremental.snapshot.chunk.size": "2", "read.only": "true"}
    settings = parse_conninfo(url)
    chunks: list[str] = []
    incremental = IncrementalCapture(
        lambda: settings.connect()[0], properties, EventConfig.from_properties(properties),
        decode=False, publications=["p"],
        on_step=lambda step, chunk_id: chunks.append(chunk_id) if step == "after_open" else None)
    state = {"committed": False, "done": 0}

    def should_stop() -> bool:
        if chunks and not state["committed"]:
            on_first_chunk()
            state["committed"] = True
        snapshotter = incremental.snapshotter
        if state["committed"] and snapshotter is not None and not snapshotter.context.running:
            state["done"] += 1
            if state["done"] == 1 and after_snapshot is not None:
                after_snapshot()
        return state["done"] > 5 or len(chunks) > 20

    reader = SlotReader(url, slot="s", publications=["p"],
                        **({"options": DecodingOptions(streaming="on")} if streaming else {}))
    output = DurableOutput(cap, kind="capture", slot="s", publications=("p",))
    output.open()
    try:
        run_capture(reader, output, CaptureSink(), incremental=incremental, follow=True,
                    poll_interval=0.05, should_stop=should_stop)
    finally:
        output.close()
        reader.close()
        incremental.close()
