"""Every example of docs/yugabytedb.md runs as written (the Spark one: tests/spark)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from pgcdc_events.cli import main
from support.yboutput import blocks, run_python_blocks


def test_the_python_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace = run_python_blocks(spark=False)
    assert namespace["rows"] == {1: {"pk": 1, "aa": 12345, "bb": "random text value"}}
    assert (tmp_path / "yb-capture.jsonl").exists()


def test_the_command_line_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    run_python_blocks(spark=False)  # writes yb-capture.jsonl
    (command,) = blocks("sh")
    argv = shlex.split(command)
    assert argv[0] == "pgcdc-events"
    capsys.readouterr()
    assert main(argv[1:]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and '"op":"u"' in lines[1]
