"""``pgcdc-events capture`` and ``tail`` end to end against a live server."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pgcdc_events.cli import main
from pgcdc_events.protocol import iter_capture
from pgcdc_events.testing.cluster import TempCluster
from support.records import without_run_fields

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def url(pg_cluster: TempCluster, pg_conn: Any) -> str:
    database = pg_conn.run("SELECT current_database()")[0][0]
    pg_conn.run("CREATE TABLE t (id int PRIMARY KEY, v text)")
    return f"postgresql://{pg_cluster.user}@{pg_cluster.host}:{pg_cluster.port}/{database}"


def _capture(url: str, output: Path, *extra: str) -> int:
    """Capture into ``output``: a directory (it holds capture.jsonl or events.jsonl)."""
    return main(["capture", "--dsn", url, "--slot", "s", "--publication", "p",
                 "--output", f"{output}/", "--snapshot-mode", "no_data", *extra])


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_capture_appends_each_change_once(url: str, pg_conn: Any, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cap"
    assert _capture(url, out, "--create-slot", "--create-publication") == 0
    pg_conn.run("INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 5) g")
    pg_conn.run("UPDATE t SET v = 'u' WHERE id = 1")
    assert _capture(url, out) == 0
    first = _lines(out / "capture.jsonl")
    assert [json.loads(x)["data"][:2] for x in first] == (
        ["42", "52"] + ["49"] * 5 + ["43", "42", "55", "43"])  # B R I*5 C B U C
    assert _capture(url, out) == 0  # nothing new: nothing appended
    assert _lines(out / "capture.jsonl") == first
    checkpoint = json.loads((out / "capture.jsonl.checkpoint.json").read_text())
    assert checkpoint["units"] == 2 and checkpoint["changes"] == 6
    assert checkpoint["offset"] == (out / "capture.jsonl").stat().st_size
    assert checkpoint["options"]["proto_version"] >= 2
    err = capsys.readouterr().err
    assert "6 changes in 2 transactions" in err and "lag" in err


def test_max_changes_stops_at_a_transaction_boundary(url: str, pg_conn: Any,
                                                     tmp_path: Path) -> None:
    out = tmp_path / "o"
    assert _capture(url, out, "--create-slot", "--create-publication", "-q") == 0
    for i in range(5):
        pg_conn.run(f"INSERT INTO t VALUES ({2 * i}, 'a'), ({2 * i + 1}, 'b')")
    assert _capture(url, out, "--max-changes", "3", "-q") == 0
    with open(out / "capture.jsonl", encoding="utf-8") as fh:
        types = [chr(r.data[0]) for r in iter_capture(fh)]
    assert types.count("I") == 4 and types[-1] == "C"  # two whole transactions
    assert _capture(url, out, "-q") == 0
    with open(out / "capture.jsonl", encoding="utf-8") as fh:
        assert [chr(r.data[0]) for r in iter_capture(fh)].count("I") == 10


def test_decode_and_tail(url: str, pg_conn: Any, tmp_path: Path,
                         capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "ev"
    assert _capture(url, out, "--create-slot", "--create-publication", "--decode", "-q") == 0
    pg_conn.run("INSERT INTO t VALUES (1, 'one')")
    pg_conn.run("DELETE FROM t WHERE id = 1")
    # tail on stdout only peeks: twice the same records, the slot stays where it was
    for _ in range(2):
        assert main(["tail", "--dsn", url, "--slot", "s", "--publication", "p", "-q"]) == 0
        records = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
        assert [r["value"]["payload"]["op"] if r["value"] else None for r in records] == [
            "c", "d", None]
    assert _capture(url, out, "--decode", "-q", "-c", "tombstones.on.delete=false") == 0
    events = [json.loads(x) for x in _lines(out / "events.jsonl")]
    assert [e["value"]["payload"]["op"] for e in events] == ["c", "d"]
    assert events[0]["topic"] == "pgcdc.public.t"
    # tail --advance consumes what it printed
    pg_conn.run("INSERT INTO t VALUES (2, 'two')")
    assert main(["tail", "--dsn", url, "--slot", "s", "--publication", "p", "-q",
                 "--advance"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1
    assert main(["tail", "--dsn", url, "--slot", "s", "--publication", "p", "-q"]) == 0
    assert capsys.readouterr().out == ""


def test_errors_are_one_line(url: str, pg_conn: Any, tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    assert _capture(url, tmp_path / "o") == 1
    err = capsys.readouterr().err
    assert "pgcdc-events capture: error: publication(s) 'p' do not exist" in err
    assert "Traceback" not in err
    pg_conn.run("CREATE PUBLICATION p FOR ALL TABLES")
    assert _capture(url, tmp_path / "o") == 1
    err = capsys.readouterr().err
    assert "replication slot 's' does not exist" in err and "--create-slot" in err
    assert _capture(url, tmp_path / "o", "--max-changes", "0") == 1
    assert "--max-changes must be positive" in capsys.readouterr().err
    assert _capture(url, tmp_path / "o", "-c", "topic.prefix=x") == 1
    assert "add --decode" in capsys.readouterr().err


def test_a_recreated_slot_is_a_gap(url: str, pg_conn: Any, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o"
    assert _capture(url, out, "--create-slot", "--create-publication", "-q") == 0
    pg_conn.run("INSERT INTO t VALUES (1, 'x')")
    assert _capture(url, out, "-q") == 0
    pg_conn.run("SELECT pg_drop_replication_slot('s')")
    pg_conn.run("INSERT INTO t VALUES (2, 'lost')")
    assert _capture(url, out, "--create-slot") == 1
    err = capsys.readouterr().err
    assert "past the checkpoint" in err and "never captured" in err


def test_ctrl_c_stops_after_the_current_read(url: str, pg_conn: Any, tmp_path: Path) -> None:
    out = tmp_path / "o"
    assert _capture(url, out, "--create-slot", "--create-publication", "-q") == 0
    proc = subprocess.Popen([sys.executable, "-m", "pgcdc_events", "capture", "--dsn", url,
                             "--slot", "s", "--publication", "p", "--output", f"{out}/",
                             "--snapshot-mode", "no_data", "--follow", "--poll-interval", "0.1"],
                            stderr=subprocess.PIPE, cwd=ROOT)
    try:
        pg_conn.run("INSERT INTO t VALUES (1, 'x')")
        deadline = time.monotonic() + 30
        while not _lines(out / "capture.jsonl") and time.monotonic() < deadline:
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err.decode()
    assert b"stopping after the current read" in err and b"done (stopped)" in err
    assert len(_lines(out / "capture.jsonl")) == 4  # B R I C


def test_capture_decode_writes_what_decode_writes(url: str, pg_conn: Any,
                                                  tmp_path: Path) -> None:
    """``capture --decode`` and ``capture`` then ``decode`` of the same changes: the same
    records, with the key converter's own settings, over more than one write batch."""
    props = ["-c", "key.converter.schemas.enable=false",
             "-c", "provide.transaction.metadata=true"]
    assert _capture(url, tmp_path / "ev", "--create-slot", "--create-publication", "--decode",
                    "-q", *props) == 0
    assert main(["capture", "--dsn", url, "--slot", "s2", "--publication", "p", "--output",
                 f"{tmp_path / 'cap'}/", "--snapshot-mode", "no_data", "--create-slot",
                 "-q"]) == 0
    pg_conn.run("INSERT INTO t SELECT g, repeat('v', g % 7) FROM generate_series(1, 1300) g")
    pg_conn.run("UPDATE t SET v = 'u' WHERE id % 3 = 0")
    pg_conn.run("DELETE FROM t WHERE id % 5 = 0")
    assert _capture(url, tmp_path / "ev", "--decode", "-q", *props) == 0
    assert main(["capture", "--dsn", url, "--slot", "s2", "--publication", "p", "--output",
                 f"{tmp_path / 'cap'}/", "--snapshot-mode", "no_data", "-q"]) == 0
    # capture --decode reads the catalog from its connection: decode is given it
    assert main(["catalog", "--dsn", url, "-o", str(tmp_path / "catalog.json")]) == 0
    assert main(["decode", "--capture", str(tmp_path / "cap" / "capture.jsonl"), "-q",
                 "-o", str(tmp_path / "decoded.jsonl"), "--catalog",
                 str(tmp_path / "catalog.json"), *props]) == 0
    ours = [without_run_fields(x) for x in _lines(tmp_path / "ev" / "events.jsonl")]
    assert len(ours) > 2000
    assert ours == [without_run_fields(x) for x in _lines(tmp_path / "decoded.jsonl")]
    assert ours[1]["key"] == {"id": 1}  # the key converter without schemas


def test_a_first_run_does_not_say_continuing(url: str, pg_conn: Any, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Every new output started with "0 transactions, 0 changes so far; continuing after the
    slot's position"; a first run now says nothing of the kind, a later one says where it
    continues."""
    out = tmp_path / "o"
    assert _capture(url, out, "--create-slot", "--create-publication") == 0
    err = capsys.readouterr().err
    assert "so far" not in err and "continuing" not in err, err
    pg_conn.run("INSERT INTO t VALUES (1, 'x')")
    assert _capture(url, out) == 0
    capsys.readouterr()
    checkpoint = json.loads((out / "capture.jsonl.checkpoint.json").read_text())
    assert _capture(url, out) == 0
    assert capsys.readouterr().err.splitlines()[0] == (
        f"pgcdc-events capture: {out}/capture.jsonl: 1 transaction, 1 change so far; "
        f"continuing after {checkpoint['lsn']}")
    pg_conn.run("SELECT pg_create_logical_replication_slot('r', 'pgoutput')")
    files = ["capture", "--dsn", url, "--slot", "r", "--publication", "p", "--output",
             f"{tmp_path}/files/", "--snapshot-mode", "no_data", "--rotate-size", "1"]
    assert main(files) == 0
    err = capsys.readouterr().err
    assert "so far" not in err and "continuing" not in err, err
    pg_conn.run("INSERT INTO t VALUES (2, 'x')")
    assert main(files) == 0
    capsys.readouterr()
    assert main(files) == 0
    checkpoint = json.loads((tmp_path / "files" / "_capture.checkpoint.json").read_text())
    assert capsys.readouterr().err.splitlines()[0] == (
        f"pgcdc-events capture: {tmp_path}/files: 1 file, 1 change so far; continuing after "
        f"{checkpoint['lsn']}")
