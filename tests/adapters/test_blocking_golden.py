"""Blocking snapshots against the real connector (tests/golden/events_blocking).

Recorded by tools/record_debezium (corpus ``events_blocking``, mode ``blocking``): Debezium
3.6.3 streams with ``snapshot.mode=no_data``; a row and an update are streamed, then two
``execute-snapshot`` signals of type ``blocking`` are inserted into the signalling table
(the first names ``public\\.blk_[ab]``, the second ``public.blk_c`` with an
``additional-conditions`` ``SELECT``). The connector pauses its stream after each signal,
snapshots the tables with the initial snapshot's markers, and streams on.

Here the same setup runs on the test's database and ``pgcdc-events capture`` (with the
recording's connector properties as ``--config``), then ``decode``, make the records.
They are compared one by one, in order, as JsonConverter JSON: topic, key, schema and
payload, with what changes with every run set aside (the times, the database name,
``source.version``, the streamed events' ``lsn``, ``txId`` and ``sequence``). What the
position of the ``r`` events must be is checked apart, on both sides, against each
side's own capture of the stream: the connector's blocking snapshot keeps its streaming
offset, so each ``r`` event carries the ``txId`` of the transaction that held its signal,
the end LSN of that transaction's Commit as ``lsn``, and ``sequence`` ``[lsn, lsn]``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from pgcdc_events.cli import main
from pgcdc_events.protocol import iter_capture
from pgcdc_events.protocol.decoder import parse_message
from pgcdc_events.protocol.messages import Commit
from pgcdc_events.testing.cluster import TempCluster
from support.golden import Recording, recordings
from support.signals import capture, decode

RECORDINGS = recordings("events_blocking", incremental=True)
SENTINEL = "recorder_sentinel"
_CHANGES = re.compile(r"^--\s*@changes\s*$", re.MULTILINE)
_PER_RUN_SOURCE = ("ts_ms", "ts_us", "ts_ns", "db", "version")
_POSITION = ("lsn", "txId", "sequence")


def _statements(sql: str) -> list[str]:
    """The corpus's statements (one a line, or several lines ending with ``;``), comment
    lines left out, and the recorder's pauses (``pg_sleep``) too."""
    out: list[str] = []
    current: list[str] = []
    for line in sql.splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("--")):
            continue
        current.append(line)
        if line.rstrip().endswith(";"):
            statement = "\n".join(current).strip().removesuffix(";")
            if "pg_sleep" not in statement:
                out.append(statement)
            current = []
    assert not current, "a statement without its ';'"
    return out


def _commit_ends(capture_file: Path) -> dict[int, int]:
    """The end LSN of each transaction's Commit in a capture file, by xid."""
    out: dict[int, int] = {}
    with open(capture_file, encoding="utf-8") as fh:
        for row in iter_capture(fh):
            if not row.snapshot and row.data[:1] == b"C":
                message = parse_message(row.data)
                assert isinstance(message, Commit)
                out[row.xid] = message.end_lsn
    return out


def _ours(cluster: TempCluster, conn: Any, recording: Recording, tmp_path: Path
          ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], Path]:
    """Our records for the recording's corpus, run live on ``conn``'s database: those of
    ``capture`` then ``decode``, those of ``capture --decode`` (its own slot), and the
    capture file the first were decoded from."""
    setup, changes = _CHANGES.split((recording.path / "corpus.sql").read_text(), maxsplit=1)
    for statement in _statements(setup):
        conn.run(statement)
    database = conn.run("SELECT current_database()")[0][0]
    url = f"postgresql://{cluster.user}@{cluster.host}:{cluster.port}/{database}"
    props = tmp_path / "connector.properties"
    props.write_text((recording.path / "connector.properties").read_text())
    # the catalog, as a user gives it to decode: the columns' NOT NULL (pgoutput has none)
    catalog = tmp_path / "catalog.json"
    assert main(["catalog", "--dsn", url, "--output", str(catalog)]) == 0
    out, live = tmp_path / "capture.jsonl", tmp_path / "live.jsonl"
    assert capture(url, out, "--config", str(props), "--create-slot",
                   "--create-publication") == 0
    # (the recording's database.dbname is the recorder's, not the test database's)
    live_args = ["--config", str(props), "--decode", "--catalog", str(catalog),
                 "--catalog-from-another-database"]
    assert capture(url, live, *live_args, "--create-slot", slot="s2") == 0
    for statement in _statements(changes):
        conn.run(statement)
    assert capture(url, out, "--config", str(props)) == 0
    assert capture(url, live, *live_args, slot="s2") == 0
    checkpoint = json.loads((tmp_path / "capture.jsonl.checkpoint.json").read_text())
    assert "blocking" not in checkpoint.get("incremental", {})
    decoded = decode(out, tmp_path, "--config", str(props), "--catalog", str(catalog))
    return decoded, [json.loads(x) for x in live.read_text().splitlines()], out


def _theirs(recording: Recording) -> list[dict[str, Any]]:
    return [r for r in recording.records if not r["topic"].endswith("." + SENTINEL)]


def _payload(record: dict[str, Any]) -> dict[str, Any] | None:
    value = record["value"]
    return None if value is None else value["payload"]


def _positions_are_the_streams(records: list[dict[str, Any]], commits: dict[int, int]
                               ) -> int:
    """Each ``r`` event carries the position of the signal's transaction (the last one
    streamed before its block): its ``txId``, its Commit's end LSN as ``lsn``, and
    ``sequence`` ``[lsn, lsn]``. Returns the number of ``r`` events."""
    signal_tx: int | None = None
    reads = 0
    for record in records:
        payload = _payload(record)
        if payload is None:
            continue
        source = payload["source"]
        if payload["op"] != "r":
            signal_tx = source["txId"] if source["table"] == "debezium_signal" else None
            continue
        reads += 1
        assert signal_tx is not None, "an r event not right after its signal's transaction"
        end = commits[signal_tx]
        assert (source["txId"], source["lsn"]) == (signal_tx, end)
        assert json.loads(source["sequence"]) == [str(end), str(end)]
    return reads


def _normalised(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``records`` with the per-run fields set aside (see the module docstring)."""
    out = []
    for record in json.loads(json.dumps(records)):  # a deep copy
        record["headers"] = {k: v for k, v in record["headers"].items()
                             if not k.endswith(".runId")}
        payload = _payload(record)
        if payload is not None:
            for field in ("ts_ms", "ts_us", "ts_ns"):
                payload.pop(field, None)
            for field in (*_PER_RUN_SOURCE, *_POSITION):
                payload["source"].pop(field)
        out.append(record)
    return out


@pytest.fixture(params=RECORDINGS, ids=[r.mode for r in RECORDINGS])
def recording(request: pytest.FixtureRequest) -> Recording:
    return request.param  # type: ignore[no-any-return]


def test_the_recording_is_there() -> None:
    assert [r.mode for r in RECORDINGS] == ["blocking"]
    meta = RECORDINGS[0].meta
    assert meta["problems"] == [] and not meta["connector_failed"]
    assert meta["checks"]["incremental_reads_per_table"] == {
        "public.blk_a": 3, "public.blk_b": 3, "public.blk_c": 2}


def test_records_equal_the_connectors(pg_cluster: TempCluster, pg_conn: Any,
                                      recording: Recording, tmp_path: Path) -> None:
    """Every record, in order: the streamed insert and update, the first signal's event,
    its block (``blk_a`` in the table's physical order, the update's row where it now
    is, then ``blk_b``: ``first``, ``true``, ``last_in_data_collection``,
    ``first_in_data_collection``, ``true``, ``last``), the second signal's event and its
    block (``blk_c`` filtered by the ``SELECT``: ``first``, ``last``); and the position
    each ``r`` event carries. The same from ``capture --decode``, whose records are
    made as the stream is read (its commits are at the same LSNs: the same WAL)."""
    decoded, live, capture_file = _ours(pg_cluster, pg_conn, recording, tmp_path)
    theirs = _theirs(recording)
    assert _positions_are_the_streams(theirs, _commit_ends(recording.path / "capture.jsonl")) \
        == 8
    commits = _commit_ends(capture_file)
    theirs = _normalised(theirs)
    for ours in (decoded, live):
        assert _positions_are_the_streams(ours, commits) == 8
        ours = _normalised(ours)
        assert [(r["topic"], (_payload(r) or {}).get("op")) for r in ours] == [
            (r["topic"], (_payload(r) or {}).get("op")) for r in theirs]
        for mine, real in zip(ours, theirs, strict=True):
            assert mine == real
