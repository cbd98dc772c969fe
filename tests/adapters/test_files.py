"""Files: output, checkpoint and spill files are private (0600), a temporary is never followed
through a planted symbolic link, a symlinked output is refused, and ``decode`` never writes
over its own input."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from pgcdc_events.adapters import CheckpointError, DurableOutput
from pgcdc_events.cli import main
from pgcdc_events.spill import AttrsEntryCodec, MemoryBudget, SpillList


@pytest.fixture(autouse=True)
def permissive_umask() -> Iterator[None]:
    """The usual 022: a file created 0644 by mistake would show it."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def _output(path: Path) -> DurableOutput:
    out = DurableOutput(path, kind="capture", slot="s", publications=("p",))
    out.open()
    return out


def test_output_and_checkpoint_are_0600(tmp_path: Path) -> None:
    out = _output(tmp_path / "new" / "dir" / "o.jsonl")
    out.write(b'{"x": 1}\n')
    out.commit(100, 1, 1)
    out.close()
    assert _mode(tmp_path / "new" / "dir" / "o.jsonl") == 0o600
    assert _mode(tmp_path / "new" / "dir" / "o.jsonl.checkpoint.json") == 0o600
    assert _mode(tmp_path / "new" / "dir") == 0o700  # created by us: private too


def test_a_planted_temporary_symlink_is_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    out = _output(tmp_path / "o.jsonl")
    (tmp_path / "o.jsonl.checkpoint.json.tmp").symlink_to(victim)
    out.write(b"line\n")
    out.commit(100, 1, 1)
    out.close()
    assert victim.read_text() == "precious\n"
    assert not (tmp_path / "o.jsonl.checkpoint.json.tmp").exists()
    assert '"lsn": "0/64"' in (tmp_path / "o.jsonl.checkpoint.json").read_text()


@pytest.mark.parametrize("which", ["o.jsonl", "o.jsonl.checkpoint.json"])
def test_a_symlinked_output_is_refused(tmp_path: Path, which: str) -> None:
    victim = tmp_path / "victim"
    victim.write_text("")
    (tmp_path / which).symlink_to(victim)
    with pytest.raises(CheckpointError, match="symbolic link"):
        _output(tmp_path / "o.jsonl")
    assert victim.read_text() == ""


def test_capture_refuses_a_symlinked_output(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (tmp_path / "capture.jsonl").symlink_to(victim)
    # refused before any connection is tried (the port is not listening)
    assert main(["capture", "--dsn", "postgresql://u@127.0.0.1:1/db", "--slot", "s",
                 "--publication", "p", "--output", f"{tmp_path}/", "-q"]) == 1
    assert "symbolic link" in capsys.readouterr().err
    assert victim.read_text() == "precious\n"


def test_spill_files_are_private(tmp_path: Path) -> None:
    spill_dir = tmp_path / "spill"
    spill_dir.mkdir()
    spills: SpillList[bytes] = SpillList(AttrsEntryCodec(), MemoryBudget(1, spill_dir=spill_dir))
    spills.append(1, b"x" * 100)
    spills.spill()
    modes = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(spill_dir)):
            modes.append(stat.S_IMODE(os.stat(f"/proc/self/fd/{fd}").st_mode))
    assert modes == [0o600]


def test_decode_refuses_to_write_over_its_input(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    capture = tmp_path / "same.jsonl"
    capture.write_text('{"lsn": "0/10", "xid": null, "data": "4d0000"}\n')
    before = capture.read_bytes()
    (tmp_path / "link.jsonl").symlink_to(capture)
    for output in (capture, tmp_path / "link.jsonl", Path(f"{tmp_path}/./same.jsonl")):
        assert main(["decode", "--capture", str(capture), "--output", str(output)]) == 1
        assert "is the input" in capsys.readouterr().err
        assert capture.read_bytes() == before
