"""``pgcdc-events inspect``: JSON per message, errors with line and offset, no tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pgcdc_events.cli import main

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "demo-capture.jsonl"


def test_inspect_demo_capture(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(DEMO)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(lines) == len(DEMO.read_text().splitlines())
    first_insert = next(x for x in lines if x["type"] == "Insert")
    assert first_insert["new"]["name"] == "Ada Lovelace"
    assert first_insert["lsn"].count("/") == 1
    message = next(x for x in lines if x["type"] == "LogicalMessage")
    assert message["prefix"] == "audit" and message["content"] == "two orders placed"
    delete = next(x for x in lines if x["type"] == "Delete")
    assert delete["old"]["customer_id"] is None and delete["old_kind"] == "K"


def test_inspect_markers_for_binary_and_toast(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                              ) -> None:
    toast = ROOT / "tests" / "protocol" / "captures" / "toast.jsonl"
    assert main(["inspect", str(toast)]) == 0
    out = capsys.readouterr().out
    assert '{"unchanged_toast": true}' in out
    binary = ROOT / "tests" / "protocol" / "captures" / "binary.jsonl"
    assert main(["inspect", str(binary)]) == 0
    assert '{"binary": "' in capsys.readouterr().out


def test_bad_line_names_line_and_offset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = DEMO.read_text().splitlines()
    broken = json.loads(lines[2])
    broken["data"] = broken["data"][:-6]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([lines[0], lines[1], json.dumps(broken)]) + "\n")
    assert main(["inspect", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "line 3" in err and "offset" in err and "Traceback" not in err


@pytest.mark.parametrize("content, expected", [
    ("not json\n", "line 1: not valid JSON"),
    ('{"lsn": "x", "xid": 1, "data": "42"}\n', "'lsn' in X/Y form"),
    ('{"lsn": "0/1", "xid": 1, "data": "zz"}\n', "'data' as a hex string"),
])
def test_malformed_capture_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                 content: str, expected: str) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(content)
    assert main(["inspect", str(bad)]) == 1
    assert expected in capsys.readouterr().err


def test_missing_file_is_reported_without_traceback() -> None:
    proc = subprocess.run([sys.executable, "-m", "pgcdc_events", "inspect", "/nonexistent.jsonl"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 1
    assert "No such file" in proc.stderr and "Traceback" not in proc.stderr


def test_non_utf8_input_is_an_error_not_a_traceback(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"lsn": "0/1", "xid": 1, "data": "42\xff"}\n')
    assert main(["inspect", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "not UTF-8" in err and "Traceback" not in err
