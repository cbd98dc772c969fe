"""What the capture skips as "already delivered" must be in the output.

When the slot is behind the checkpoint, the units between them come again and are skipped.
A database restored from a storage snapshot (same system identifier and timeline), or a
checkpoint whose LSN was edited forward, makes new transactions look delivered: the review
saw 19 of 40 skipped, exit 0, and the slot acknowledged past them. These tests reproduce
both on a real cluster; the capture must refuse, write nothing and acknowledge nothing.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pg8000.native
import pytest

from pgcdc_events.cli import main
from pgcdc_events.protocol import Insert, PgOutputReader, iter_capture
from pgcdc_events.testing.cluster import TempCluster


@pytest.fixture
def url(pg_cluster: TempCluster, pg_conn: Any) -> str:
    database = pg_conn.run("SELECT current_database()")[0][0]
    pg_conn.run("CREATE TABLE t (id int PRIMARY KEY, v text)")
    return f"postgresql://{pg_cluster.user}@{pg_cluster.host}:{pg_cluster.port}/{database}"


def _args(url: str, out: Path, *extra: str) -> list[str]:
    return ["capture", "--dsn", url, "--slot", "s", "--publication", "p", "--output",
            f"{out}/", "--snapshot-mode", "no_data", "-q", *extra]


def _ids(path: Path) -> list[int]:
    reader = PgOutputReader()
    ids = []
    with open(path, encoding="utf-8") as fh:
        for row in iter_capture(fh):
            message = reader.read(row.data)
            if isinstance(message, Insert):
                ids.append(int(message.new.values[0] or b""))
    return ids


def _slot_lsn(conn: Any) -> str:
    return str(conn.run("SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
                        "WHERE slot_name = 's'")[0][0])


def _edit_lsn(out: Path, lsn: str) -> None:
    path = out / "capture.jsonl.checkpoint.json"
    saved = json.loads(path.read_text())
    saved["lsn"] = lsn
    path.write_text(json.dumps(saved))


@pytest.mark.parametrize("where", ["inside", "at a commit"])
def test_a_checkpoint_edited_forward_is_refused(url: str, pg_conn: Any, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str],
                                                where: str) -> None:
    out = tmp_path / "o"
    assert main(_args(url, out, "--create-slot", "--create-publication")) == 0
    pg_conn.run("INSERT INTO t VALUES (0, 'x')")
    assert main(_args(url, out)) == 0
    ends = []
    for i in (1, 2, 3):
        pg_conn.run("INSERT INTO t VALUES (:i, 'x')", i=i)
        ends.append(pg_conn.run("SELECT pg_current_wal_lsn()::text")[0][0])
    slot_before = _slot_lsn(pg_conn)
    # "at a commit": exactly where transaction 2's commit ends (a unit end of the stream);
    # "inside": one byte further, where no unit ends
    edited = ends[1] if where == "at a commit" else str(pg_conn.run(
        "SELECT (CAST(:l AS pg_lsn) + 1)::text", l=ends[1])[0][0])
    _edit_lsn(out, edited)
    size = (out / "capture.jsonl").stat().st_size
    capsys.readouterr()
    assert main(_args(url, out)) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert f"capture.jsonl.checkpoint.json: the checkpoint says the output holds every " \
           f"change up to {edited}, but replication slot 's' (at {slot_before})" in err
    assert "an edited checkpoint" in err and "Nothing was written or acknowledged" in err
    assert (out / "capture.jsonl").stat().st_size == size  # nothing written
    assert _ids(out / "capture.jsonl") == [0]
    assert _slot_lsn(pg_conn) == slot_before  # nothing acknowledged


def test_a_legitimately_replayed_checkpoint_still_continues(url: str, pg_conn: Any,
                                                            tmp_path: Path) -> None:
    """The slot behind a true checkpoint (a crash before the slot moved): the units come
    again, are skipped, and the capture goes on."""
    out = tmp_path / "o"
    assert main(_args(url, out, "--create-slot", "--create-publication")) == 0
    pg_conn.run("SELECT pg_copy_logical_replication_slot('s', 'behind')")
    for i in range(3):
        pg_conn.run("INSERT INTO t VALUES (:i, 'x')", i=i)
    assert main(_args(url, out)) == 0
    # the slot put back where it was before those three were delivered
    pg_conn.run("SELECT pg_drop_replication_slot('s')")
    pg_conn.run("SELECT pg_copy_logical_replication_slot('behind', 's')")
    pg_conn.run("SELECT pg_drop_replication_slot('behind')")
    pg_conn.run("INSERT INTO t VALUES (3, 'x')")
    assert main(_args(url, out)) == 0
    assert _ids(out / "capture.jsonl") == [0, 1, 2, 3]


def _pg_ctl(cluster: TempCluster, *args: str) -> None:
    cluster._run([str(cluster.bindir / "pg_ctl"), "-D", str(cluster.datadir), "-w",
                  "-l", str(cluster.logfile), *args])


@pytest.fixture
def own_cluster() -> Iterator[TempCluster]:
    with TempCluster() as cluster:
        yield cluster


def test_a_database_restored_from_a_storage_snapshot_is_refused(
        own_cluster: TempCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The review's case: snapshot the data directory, capture 40 transactions, restore the
    snapshot (same system identifier and timeline), write 60 others: the first of those
    end at LSNs the checkpoint already counts."""
    cluster = own_cluster
    conn = pg8000.native.Connection(**cluster.dsn())
    try:
        conn.run("CREATE TABLE t (id int PRIMARY KEY, v text)")
        conn.run("CREATE PUBLICATION p FOR ALL TABLES")
        conn.run("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
    finally:
        conn.close()
    out = tmp_path / "o"
    assert main(_args(cluster.url(), out)) == 0
    _pg_ctl(cluster, "-m", "fast", "stop")
    saved = tmp_path / "snapshot"
    shutil.copytree(cluster.datadir, saved, symlinks=True)
    subprocess.run(["chown", "-R", "--reference", str(cluster.datadir), str(saved)], check=False)
    _pg_ctl(cluster, "start")
    conn = pg8000.native.Connection(**cluster.dsn())
    try:
        for i in range(40):
            conn.run("INSERT INTO t VALUES (:i, 'before the restore')", i=i)
    finally:
        conn.close()
    assert main(_args(cluster.url(), out)) == 0
    assert _ids(out / "capture.jsonl") == list(range(40))
    checkpoint = json.loads((out / "capture.jsonl.checkpoint.json").read_text())
    _pg_ctl(cluster, "-m", "fast", "stop")
    shutil.rmtree(cluster.datadir)
    shutil.move(saved, cluster.datadir)
    _pg_ctl(cluster, "start")
    conn = pg8000.native.Connection(**cluster.dsn())
    try:
        slot_before = _slot_lsn(conn)
        for i in range(1000, 1060):
            conn.run("INSERT INTO t VALUES (:i, 'after the restore')", i=i)
        # the new transactions reach past the checkpoint: the server's WAL is not behind it
        assert int(conn.run("SELECT pg_current_wal_lsn() - CAST(:cp AS pg_lsn)",
                            cp=checkpoint["lsn"])[0][0]) > 0
        capsys.readouterr()
        assert main(_args(cluster.url(), out)) == 1
        err = capsys.readouterr().err
        assert f"the checkpoint says the output holds every change up to {checkpoint['lsn']}" \
               f", but replication slot 's' (at {slot_before})" in err
        assert "restored from a storage snapshot" in err
        assert _slot_lsn(conn) == slot_before  # nothing acknowledged
    finally:
        conn.close()
    assert _ids(out / "capture.jsonl") == list(range(40))  # nothing written


# ---------------------------------------------------------------- the checkpoint's other fields


def _edit(out: Path, **fields: Any) -> None:
    path = out / "capture.jsonl.checkpoint.json"
    saved = json.loads(path.read_text())
    saved.update(fields)
    path.write_text(json.dumps(saved))


def _three_runs(url: str, pg_conn: Any, out: Path) -> list[int]:
    """Three transactions captured in three runs; the output's size after each."""
    assert main(_args(url, out, "--create-slot", "--create-publication")) == 0
    sizes = []
    for i in range(3):
        pg_conn.run("INSERT INTO t VALUES (:i, 'x')", i=i)
        assert main(_args(url, out)) == 0
        sizes.append((out / "capture.jsonl").stat().st_size)
    return sizes


def test_a_smaller_offset_does_not_cut_committed_changes(url: str, pg_conn: Any,
                                                         tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    out = tmp_path / "o"
    sizes = _three_runs(url, pg_conn, out)
    _edit(out, offset=sizes[0])  # at a line boundary: transactions 1 and 2 would be cut
    capsys.readouterr()
    assert main(_args(url, out)) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "capture.jsonl: the output holds a transaction ending at " in err
    assert f", past the checkpoint's offset {sizes[0]}, although the checkpoint's LSN " in err
    assert "says it was committed: the offset is wrong (an edited checkpoint?); refusing to " \
           "cut committed changes: restore the checkpoint, or start a new output" in err
    _edit(out, offset=sizes[0] + 5)  # inside a line
    assert main(_args(url, out)) == 1
    assert f"the checkpoint's offset {sizes[0] + 5} is not at the end of a line of the " \
           f"output ({sizes[2]} bytes)" in capsys.readouterr().err
    assert (out / "capture.jsonl").stat().st_size == sizes[2]
    assert _ids(out / "capture.jsonl") == [0, 1, 2]


def test_an_uncommitted_tail_is_still_cut(url: str, pg_conn: Any, tmp_path: Path) -> None:
    """What a crash leaves past the offset (a unit written, its checkpoint not) is cut, and
    the slot hands the unit out again, as before."""
    out = tmp_path / "o"
    assert main(_args(url, out, "--create-slot", "--create-publication")) == 0
    for i in range(2):
        pg_conn.run("INSERT INTO t VALUES (:i, 'x')", i=i)
        assert main(_args(url, out)) == 0
    path = out / "capture.jsonl.checkpoint.json"
    saved = path.read_text()
    pg_conn.run("SELECT pg_copy_logical_replication_slot('s', 'behind')")
    pg_conn.run("INSERT INTO t VALUES (2, 'x')")
    assert main(_args(url, out)) == 0
    # the crash: transaction 2 is in the file, but neither the checkpoint nor the slot moved
    path.write_text(saved)
    pg_conn.run("SELECT pg_drop_replication_slot('s')")
    pg_conn.run("SELECT pg_copy_logical_replication_slot('behind', 's')")
    pg_conn.run("SELECT pg_drop_replication_slot('behind')")
    assert main(_args(url, out)) == 0
    assert _ids(out / "capture.jsonl") == [0, 1, 2]


def test_a_running_snapshot_state_does_not_drop_the_streamed_slot(
        url: str, pg_conn: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o"
    sizes = _three_runs(url, pg_conn, out)
    slot_before = _slot_lsn(pg_conn)
    pg_conn.run("INSERT INTO t VALUES (3, 'x')")  # held by the slot, not yet captured
    _edit(out, snapshot={"state": "running", "mode": "initial"})
    capsys.readouterr()
    assert main([*_args(url, out)[:-3], "--snapshot-mode", "initial", "-q"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert (f"the checkpoint says a snapshot is running, but replication slot 's' is at "
            f"{slot_before}, at or before the checkpoint's ") in err
    assert "restore the checkpoint's \"snapshot\" field, or start a new output" in err
    assert _slot_lsn(pg_conn) == slot_before  # the slot is still there, where it was
    assert (out / "capture.jsonl").stat().st_size == sizes[2]


def test_checkpoint_fields_that_contradict_each_other(tmp_path: Path) -> None:
    from pgcdc_events.adapters import CheckpointError, DurableOutput  # noqa: PLC0415

    out = tmp_path / "capture.jsonl"
    base = {"format": "pgcdc-events checkpoint 1", "lsn": None, "offset": 0, "units": 0,
            "changes": 0, "kind": "capture", "slot": "s", "publications": ["p"],
            "options": {}, "snapshot": {"state": "skipped"}}
    check = tmp_path / "capture.jsonl.checkpoint.json"
    for fields, message in (
            ({"offset": 10}, "field 'offset' is 10 but 'lsn' is null"),):
        check.write_text(json.dumps({**base, **fields}))
        output = DurableOutput(out, kind="capture", slot="s", publications=("p",))
        with pytest.raises(CheckpointError, match=message):
            output.open()
