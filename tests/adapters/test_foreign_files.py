"""Files found where an output goes: one another user planted (or anyone may write) is
refused, never adopted; a stale lock file, whoever left it, does not block.

The review's cases: an empty 0666 file owned by another user, in a shared sticky directory,
received the captured rows; a lock file planted by another user blocked every capture.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pgcdc_events.adapters import CheckpointError, DurableOutput
from pgcdc_events.cli import main

NOBODY = 65534
OTHER = 1  # daemon: neither this process nor nobody
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="planting another user's file needs root")


@pytest.fixture
def shared() -> Iterator[Path]:
    """A shared sticky directory, as /tmp is (outside pytest's private 0700 tree)."""
    path = Path(tempfile.mkdtemp(prefix="pgcdc-shared-"))
    path.chmod(0o1777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _capture(out: Path) -> list[str]:
    # never connects: the output is opened (and refused) first
    return ["capture", "--dsn", "postgresql://u@127.0.0.1:1/db", "--slot", "s",
            "--publication", "p", "--output", f"{out}/" if out.is_dir() else str(out), "-q"]


@ROOT_ONLY
def test_an_output_planted_by_another_user_is_refused(shared: Path,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    out = shared / "capture.jsonl"
    out.touch()
    out.chmod(0o666)
    os.chown(out, NOBODY, NOBODY)
    assert main(_capture(out)) == 1
    err = capsys.readouterr().err
    assert err == (f"pgcdc-events capture: error: {out}: the output belongs to another user "
                   f"(uid {NOBODY}; this process runs as uid 0); refusing to use a file someone "
                   "else created (in a shared directory it could be read or changed by them): "
                   "remove it, or choose another path\n")
    assert out.stat().st_size == 0


@pytest.mark.parametrize(("mode", "who"), [(0o666, "group and others"), (0o620, "its group")])
def test_an_output_others_may_write_is_refused(tmp_path: Path, mode: int, who: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "capture.jsonl"
    out.touch()
    out.chmod(mode)
    assert main(_capture(out)) == 1
    assert capsys.readouterr().err == (
        f"pgcdc-events capture: error: {out}: the output is writable by {who} (mode "
        f"{mode:04o}); refusing to use it: chmod 600 it, or choose another path\n")


def test_a_checkpoint_others_may_write_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "capture.jsonl"
    output = DurableOutput(out, kind="capture", slot="s", publications=("p",))
    output.open()
    output.commit(0x1000, 1, 1)
    output.close()
    output.checkpoint_path.chmod(0o646)
    with pytest.raises(CheckpointError, match="the checkpoint is writable by group and others"):
        DurableOutput(out, kind="capture", slot="s", publications=("p",)).open()


def _as_nobody(action: Callable[[], None]) -> str:
    """Run ``action`` in a child process as user nobody; its error text ('' on success)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read)
        text = b""
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            action()
        except BaseException as exc:  # reported to the parent
            text = f"{type(exc).__name__}: {exc}".encode() or b"?"
        os.write(write, text)
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as fh:
        text = fh.read().decode()
    os.waitpid(pid, 0)
    return text


@ROOT_ONLY
def test_a_stale_lock_file_of_another_user_does_not_block(shared: Path) -> None:
    lock = shared / "capture.jsonl.lock"
    lock.write_text("12345\n")
    lock.chmod(0o644)
    os.chown(lock, OTHER, OTHER)

    def capture() -> None:
        output = DurableOutput(shared / "capture.jsonl", kind="capture", slot="s",
                               publications=("p",))
        output.open()
        output.write(b"x\n")
        output.commit(0x1000, 1, 1)
        output.close()

    assert _as_nobody(capture) == ""
    assert (shared / "capture.jsonl").read_bytes() == b"x\n"
    assert (shared / "capture.jsonl").stat().st_uid == NOBODY


@ROOT_ONLY
def test_a_lock_file_nobody_may_read_is_named(shared: Path) -> None:
    lock = shared / "capture.jsonl.lock"
    lock.write_text("12345\n")
    lock.chmod(0o600)
    os.chown(lock, OTHER, OTHER)

    def capture() -> None:
        DurableOutput(shared / "capture.jsonl", kind="capture", slot="s",
                      publications=("p",)).open()

    assert _as_nobody(capture) == (
        f"CheckpointError: {lock}: cannot open the lock file: Permission denied (it belongs to "
        f"uid {OTHER}): remove it, or choose another output")


# ---------------------------------------------------------------- one layout per directory


def test_a_single_file_output_is_refused_in_a_rotating_directory(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It was accepted, and the rotating capture then refused to run in its own directory."""
    from pgcdc_events.adapters.rotating import RotatingOutput  # noqa: PLC0415

    rotating = RotatingOutput(tmp_path, slot="s", publications=("p",), every=0)
    rotating.open()
    rotating.write(b'{"lsn": "0/1000", "xid": null, "data": "4d"}\n')
    rotating.commit(0x1000, 1, 1)
    rotating.close()
    before = sorted(p.name for p in tmp_path.iterdir())
    for extra in ((), ("--decode",)):
        assert main([*_capture(tmp_path), *extra]) == 1
        assert capsys.readouterr().err == (
            f"pgcdc-events capture: error: {tmp_path} holds rotating capture files "
            "(_capture.checkpoint.json); a single-file output needs a path of its own: "
            "continue that directory with --rotate-every or --rotate-size, or choose another "
            "--output\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # not even a lock file
    # and the rotating capture can still open its directory
    RotatingOutput(tmp_path, slot="s", publications=("p",), every=0).open()
