"""Rotating capture files (``capture --rotate-every/--rotate-size``): the capture is killed
(SIGKILL) at each step of a file's rotation and at random moments, restarted, and in the end
the files, in name order, hold every change exactly once: their union decodes, record for
record, as the referee slot read once (the harness of ``test_delivery``), and the files
present agree with the checkpoint."""

from __future__ import annotations

import json
import os
import random
import signal
import stat
import time
from pathlib import Path
from typing import Any

import pytest

from adapters import test_delivery
from adapters.test_delivery import Workload, capture_args, start_capture, verify
from pgcdc_events.adapters.errors import CheckpointError
from pgcdc_events.adapters.rotating import (
    RotatingOutput,
    capture_file_name,
    parse_capture_file_name,
)
from pgcdc_events.protocol import Lsn, iter_capture
from pgcdc_events.testing.cluster import TempCluster

cluster = test_delivery.cluster  # the fixture: a cluster of its own with the referee slot
ROTATE = ("--rotate-every", "0.2", "--rotate-size", "0.02")

CRASH_WRAPPER = test_delivery.crash_wrapper("from pgcdc_events.adapters import rotating, stream", '''
    Out = rotating.RotatingOutput
    finalize, store, rename = Out._finalize, Out._store, os.rename
    if point == "torn-write":  # half a unit reaches the temporary file
        write = Out.write
        def torn(self, data):
            write(self, data)
            if passing():
                os.write(self._segment(), bytes(self._buffer[:len(self._buffer) // 2]))
                die()
        Out.write = torn
    elif point == "before-checkpoint":  # the file is fsynced, the checkpoint not written
        def synced(self, cp):
            if cp.lsn is not None and passing():
                die()
            return store(self, cp)
        Out._store = synced
    elif point == "before-rename":  # the checkpoint counts a file still hidden
        def renamed(src, dst, *a, **k):
            if str(src).endswith(".tmp") and ".capture-" in str(src) and passing():
                die()
            return rename(src, dst, *a, **k)
        rotating.os.rename = renamed
    elif point == "before-advance":  # the file is in place, the slot not acknowledged
        advance = stream.StreamReader.advance
        def advanced(self, lsn):
            if passing():
                die()
            return advance(self, lsn)
        stream.StreamReader.advance = advanced
''')


def union(directory: Path, into: Path) -> int:
    """Concatenate the capture files in name order into ``into/capture.jsonl`` (what
    ``verify`` reads), checking that the files agree with the checkpoint; the file count."""
    names = sorted(p.name for p in directory.iterdir() if not p.name.startswith((".", "_")))
    assert not [p.name for p in directory.iterdir() if p.name.startswith(".")], \
        "a temporary file was left behind"
    parsed = [parse_capture_file_name(n) for n in names]
    assert None not in parsed, names
    checkpoint = json.loads((directory / "_capture.checkpoint.json").read_text())
    assert [p[0] for p in parsed if p] == list(range(len(names))) == \
        list(range(checkpoint["offset"]))
    into.mkdir(exist_ok=True)
    with open(into / "capture.jsonl", "w", encoding="utf-8") as out:
        last = None
        for name, (_, end) in zip(names, parsed, strict=True):  # type: ignore[misc]
            path = directory / name
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
            text = path.read_text()
            rows = list(iter_capture(text.splitlines()))
            assert rows and text.endswith("\n")
            assert last is None or end > last
            last = end
            out.write(text)
    assert checkpoint["lsn"] == (str(Lsn(last)) if last is not None else None)
    return len(names)


def finish(cluster: TempCluster, output: Path) -> None:
    """One more run without --follow: exits 0 and finalizes what it wrote."""
    proc = start_capture(capture_args(cluster, output, *ROTATE))
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()


CRASH_POINTS = ["torn-write", "before-checkpoint", "before-rename", "before-advance"]


def test_sigkill_at_each_step_of_a_rotation(cluster: TempCluster, tmp_path: Path) -> None:
    """For each step of a rotation the capture dies there on its 1st and 3rd pass, is
    restarted, and in the end the files in name order are the referee's changes, once."""
    workload = Workload(cluster, seed=5, big_every=10)
    conn = workload.connect()
    script = tmp_path / "crash.py"
    script.write_text(CRASH_WRAPPER)
    output = tmp_path / "rot"
    crashes = 0
    try:
        for point in CRASH_POINTS:
            for nth in (1, 3):
                for _ in range(20):
                    try:
                        workload.step(conn)
                    except Exception:
                        conn.run("ROLLBACK")
                proc = start_capture(capture_args(cluster, output, "--rotate-size", "0.03"),
                                     {"CRASH_AT": point, "CRASH_NTH": str(nth)}, script)
                _, err = proc.communicate(timeout=300)
                if proc.returncode == -signal.SIGKILL:
                    crashes += 1
                else:
                    assert proc.returncode == 0, err.decode()
        for gid in workload.prepared:
            conn.run(f"COMMIT PREPARED '{gid}'")
    finally:
        conn.close()
    assert crashes >= 6
    finish(cluster, output)
    files = union(output, tmp_path / "union")
    figures = verify(cluster, tmp_path / "union")
    assert files > 4 and figures["streamed"] > 0


def test_sigkill_while_following(cluster: TempCluster, tmp_path: Path) -> None:
    """A following capture with rotation, killed at random moments under a workload."""
    rng = random.Random(17)
    workload = Workload(cluster, 17)
    workload.start()
    output = tmp_path / "rot"
    proc = start_capture(capture_args(cluster, output, "--follow", *ROTATE))
    kills = 0
    try:
        for _ in range(8):
            time.sleep(rng.uniform(0.2, 1.2))
            proc.kill()
            proc.wait()
            kills += 1
            proc = start_capture(capture_args(cluster, output, "--follow", *ROTATE))
    finally:
        workload.finish()
    time.sleep(3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()
    finish(cluster, output)
    files = union(output, tmp_path / "union")
    figures = verify(cluster, tmp_path / "union")
    assert kills == 8 and files > 5 and figures["transactions"] > 50


def test_files_disagreeing_with_the_checkpoint_are_refused(tmp_path: Path) -> None:
    out = RotatingOutput(tmp_path, slot="s", publications=("p",), size=1)
    out.open()
    out.bind({}, {})
    out.write(b'{"lsn": "0/10", "xid": 1, "data": "00"}\n')
    out.commit(0x20, 1, 1)
    assert out.settle() == 0x20  # size 1: due at once
    out.write(b'{"lsn": "0/30", "xid": 2, "data": "00"}\n')
    out.commit(0x40, 1, 1)
    out.close()
    names = sorted(os.listdir(tmp_path))
    assert names == ["_capture.checkpoint.json", "_capture.lock",
                     capture_file_name(0, 0x20), capture_file_name(1, 0x40)]
    os.unlink(tmp_path / capture_file_name(0, 0x20))
    with pytest.raises(CheckpointError, match="file number 0 is missing"):
        RotatingOutput(tmp_path, slot="s", publications=("p",), size=1).open()


def test_a_file_counted_but_not_renamed_is_renamed_on_open(tmp_path: Path) -> None:
    out = RotatingOutput(tmp_path, slot="s", publications=("p",), every=3600)
    out.open()
    out.bind({}, {})
    out.write(b'{"lsn": "0/10", "xid": 1, "data": "00"}\n')
    out.commit(0x20, 1, 1)
    assert out.settle() is None  # not due: nothing may be acknowledged
    real_rename = os.rename

    def crash(src: object, dst: object) -> None:
        raise KeyboardInterrupt  # stands for a death between checkpoint and rename

    os.rename = crash  # type: ignore[assignment]
    try:
        with pytest.raises(KeyboardInterrupt):
            out.settle(force=True)
    finally:
        os.rename = real_rename
    out._unlock()
    again = RotatingOutput(tmp_path, slot="s", publications=("p",), every=3600)
    checkpoint = again.open()
    assert again.recovered == [capture_file_name(0, 0x20)]
    assert checkpoint.lsn == 0x20 and checkpoint.offset == 1
    assert (tmp_path / capture_file_name(0, 0x20)).read_bytes().startswith(b'{"lsn": "0/10"')
    again.close()


def test_a_snapshot_is_finalized_at_once(tmp_path: Path) -> None:
    """The snapshot's end goes into a file and the checkpoint at once, whatever the period:
    a checkpoint still saying "running" would make a reconnection take it again."""
    out = RotatingOutput(tmp_path, slot="s", publications=("p",), every=3600)
    out.open()
    out.mark_snapshot({"state": "running"})
    out.write(b'{"lsn": "0/10", "xid": 1, "data": "00", "snapshot": true}\n')
    out.commit(0x10, 1, 1, snapshot={"state": "done", "lsn": "0/10"})
    assert out.checkpoint.snapshot_state == "done" and out.checkpoint.lsn == 0x10
    assert (tmp_path / capture_file_name(0, 0x10)).exists()
    out.close()


def test_rotate_size_bounds_each_file(pg_cluster: TempCluster, pg_conn: Any,
                                      tmp_path: Path) -> None:
    """``--rotate-size`` was checked only when a read was committed: one read of 60
    transactions went into a single file 20 times the size. A file is now finalized at the
    end of the transaction that reached the size: it exceeds it by at most that one."""
    from pgcdc_events.cli import main  # noqa: PLC0415
    from pgcdc_events.protocol import Insert, PgOutputReader  # noqa: PLC0415

    conn = pg_conn
    database = conn.run("SELECT current_database()")[0][0]
    url = f"postgresql://{pg_cluster.user}@{pg_cluster.host}:{pg_cluster.port}/{database}"
    conn.run("CREATE TABLE t (id int PRIMARY KEY, v text)")
    out = tmp_path / "files"
    args = ["capture", "--dsn", url, "--slot", "s", "--publication", "p", "--output",
            f"{out}/", "--snapshot-mode", "no_data", "-q", "--rotate-size", "0.002"]
    assert main([*args, "--create-slot", "--create-publication"]) == 0
    for i in range(60):
        conn.run("INSERT INTO t VALUES (:i, repeat('v', 200))", i=i)
    assert main(args) == 0
    files = sorted(p for p in out.iterdir() if parse_capture_file_name(p.name))
    reader = PgOutputReader()
    ids: list[int] = []
    biggest_unit = 0
    for path in files:
        with open(path, encoding="utf-8") as fh:
            lines = fh.readlines()
        unit = 0
        for row, line in zip(iter_capture(lines), lines, strict=True):
            unit += len(line)
            message = reader.read(row.data)
            if isinstance(message, Insert):
                ids.append(int(message.new.values[0] or b""))
            if row.data[:1] == b"C":
                biggest_unit, unit = max(biggest_unit, unit), 0
    assert ids == list(range(60))
    assert len(files) >= 60 * 300 // 2000
    sizes = [p.stat().st_size for p in files]
    assert max(sizes) < 2000 + biggest_unit, sizes
