"""``decode`` on several processes writes exactly what one decoder writes.

The parallel decoder cuts a capture into chunks of whole transactions and primes each
worker's decoder with a prelude (Relations, Types, the last Begin and Commit). The
independent path is the single decoder of the same run: for every golden recording
(with its connector properties and catalog) and every committed protocol capture
(streamed, two-phase, messages, binary, every proto version), the two outputs must be
equal byte for byte, with chunks of a few lines so that every cut is exercised, and a
small "big transaction" threshold so that transactions decoded in the parent are too.
"""

from __future__ import annotations

import contextlib
import io
import json
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pgcdc_events.cli import _parallel, main
from pgcdc_events.cli._parallel import DecodeJob, run_decode
from pgcdc_events.events import EventConfig
from pgcdc_events.events.chunks import control_messages, plan_chunks
from pgcdc_events.protocol import CaptureError, CaptureRow, Lsn, dump_capture_row
from support.golden import recordings

CAPTURES = Path(__file__).resolve().parents[1] / "protocol" / "captures"
INDEX = json.loads((CAPTURES / "index.json").read_text())["captures"]
RECORDINGS = [r for r in recordings() if not r.meta.get("connector_failed")]
_CLOCK = 1_700_000_000_000_000_000


def _clock() -> int:
    return _CLOCK


def _decode(job: DecodeJob, lines: list[bytes], workers: int, **sizes: int) -> bytes:
    out = io.BytesIO()
    run_decode(job, lines, out, workers=workers, **sizes)
    return out.getvalue()


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


@pytest.mark.parametrize("recording", RECORDINGS, ids=[r.key for r in RECORDINGS])
def test_golden_recordings_decode_the_same_in_parallel(recording) -> None:  # type: ignore[no-untyped-def]
    config = EventConfig.from_properties(recording.properties)
    job = DecodeJob(config, recording.catalog, None, None, None, "run", _clock)
    lines = _lines(recording.path / "capture.jsonl")
    single = _decode(job, lines, 1)
    assert single.count(b"\n") >= len(recording.records) - 20  # not an empty comparison
    assert _decode(job, lines, 2, chunk_lines=3, big_lines=4) == single
    assert _decode(job, lines, 2) == single
    tallies = []
    for workers in (1, 2):
        tally: Counter[tuple[str, str]] = Counter()
        run_decode(job, lines, io.BytesIO(), workers=workers, tally=tally, chunk_lines=3)
        tallies.append(tally)
    assert tallies[0] == tallies[1]
    assert sum(tallies[0].values()) == single.count(b"\n")


@pytest.mark.parametrize("capture", INDEX, ids=[c["name"] for c in INDEX])
def test_protocol_captures_decode_the_same_in_parallel(capture: dict) -> None:  # type: ignore[type-arg]
    config = EventConfig.from_properties({
        "topic.prefix": "p", "provide.transaction.metadata": "true",
        "skipped.operations": "none"})
    streaming = "on" if capture["streaming"] else None
    job = DecodeJob(config, None, capture["proto_version"], streaming, 1 << 20, "run", _clock)
    lines = _lines(CAPTURES / capture["capture"])
    single = _decode(job, lines, 1)
    assert single
    for chunk_lines, big_lines in ((1, 2), (2, 50_000), (5, 3)):
        assert _decode(job, lines, 2, chunk_lines=chunk_lines, big_lines=big_lines) == single


def test_an_error_keeps_what_came_before_and_names_the_line(tmp_path: Path) -> None:
    recording = next(r for r in RECORDINGS if r.corpus == "events")
    config = EventConfig.from_properties(recording.properties)
    job = DecodeJob(config, recording.catalog, None, None, None, "run", _clock)
    lines = _lines(recording.path / "capture.jsonl")
    bad_at = len(lines) - 3
    row = CaptureRow.from_line(lines[bad_at - 1])
    lines[bad_at - 1] = (dump_capture_row(CaptureRow(Lsn(row.lsn), row.xid, b"I\x00"))
                         + "\n").encode()
    outputs = []
    for workers, sizes in ((1, {}), (2, {"chunk_lines": 3})):
        out = io.BytesIO()
        with pytest.raises(CaptureError) as info:
            run_decode(job, lines, out, workers=workers, **sizes)
        assert info.value.line == bad_at
        outputs.append((out.getvalue(), str(info.value)))
    assert outputs[0] == outputs[1]
    assert outputs[0][0].count(b"\n") > 10


def test_cli_workers_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recording = next(r for r in RECORDINGS if r.corpus == "events")
    outputs = []
    for workers in ("1", "2"):
        out = tmp_path / f"out{workers}.jsonl"
        assert main(["decode", "--capture", str(recording.path / "capture.jsonl"),
                     "--catalog", str(recording.path / "catalog.json"),
                     "--config", str(recording.path / "connector.properties"),
                     "--workers", workers, "-o", str(out), "-q"]) == 0
        outputs.append([json.loads(line)["topic"] for line in out.read_text().splitlines()])
    assert outputs[0] == outputs[1] and outputs[0]
    assert main(["decode", "--capture", str(recording.path / "capture.jsonl"),
                 "--workers", "0"]) == 1
    assert "--workers must be at least 1" in capsys.readouterr().err


def _to_file(job: DecodeJob, lines: list[bytes], path: Path, workers: int, mode: str = "wb",
             **sizes: int) -> bytes:
    with open(path, mode) as out:
        run_decode(job, lines, out, workers=workers, **sizes)
    return path.read_bytes()


@pytest.mark.parametrize("schemas", ["true", "false"])
def test_chunks_are_copied_into_files_and_pipes_in_order(tmp_path: Path, schemas: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The workers' chunk files reach a real file (copy_file_range), a file opened for
    appending (where copy_file_range refuses) and a pipe (sendfile) in order, between
    lines the parent writes (big transactions), and nothing of them is left behind (in a
    temporary directory of this test's: other decodes may run beside it)."""
    spool = tmp_path / "tmp"
    spool.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spool))
    config = EventConfig.from_properties({
        "topic.prefix": "p", "provide.transaction.metadata": "true",
        "converter.schemas.enable": schemas})
    job = DecodeJob(config, None, 1, None, None, "run", _clock)
    lines = _lines(CAPTURES / "basic_v1.jsonl")
    single = _decode(job, lines, 1)
    assert single.count(b"\n") > 40
    assert _to_file(job, lines, tmp_path / "one", 1) == single
    assert _to_file(job, lines, tmp_path / "two", 2, chunk_lines=3, big_lines=4) == single
    (tmp_path / "append").write_bytes(b"before\n")
    assert _to_file(job, lines, tmp_path / "append", 2, "ab", chunk_lines=5) == (
        b"before\n" + single)
    read, write = os.pipe()
    got = bytearray()
    reader = threading.Thread(target=lambda: got.extend(b"".join(iter_read(read))))
    reader.start()
    with open(write, "wb") as out:
        run_decode(job, lines, out, workers=2, chunk_lines=4, big_lines=3)
    reader.join()
    os.close(read)
    assert bytes(got) == single
    assert not list(spool.glob("pgcdc-decode-*/*.jsonl"))


def iter_read(fd: int) -> list[bytes]:
    blocks = []
    while block := os.read(fd, 1 << 16):
        blocks.append(block)
    return blocks


def test_cli_output_is_created_private_and_bad_bytes_name_the_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recording = next(r for r in RECORDINGS if r.corpus == "events")
    out = tmp_path / "out.jsonl"
    assert main(["decode", "--capture", str(recording.path / "capture.jsonl"),
                 "--catalog", str(recording.path / "catalog.json"),
                 "--config", str(recording.path / "connector.properties"),
                 "--workers", "2", "-o", str(out), "-q"]) == 0
    assert out.stat().st_mode & 0o777 == 0o600
    assert out.read_bytes().count(b"\n") > 40
    capture = tmp_path / "bad.jsonl"
    lines = _lines(recording.path / "capture.jsonl")
    capture.write_bytes(b"".join(lines[:4]) + b'{"lsn": "0/1", "xid": \xff}\n')
    assert main(["decode", "--capture", str(capture), "-o", str(tmp_path / "o2")]) == 1
    assert "line 5: not valid JSON (not UTF-8" in capsys.readouterr().err


def _stable(text: str) -> list[tuple[str, object, object]]:
    """Topic, key and value's op of each line (time and run id vary from run to run)."""
    out = []
    for line in text.splitlines():
        record = json.loads(line)
        value = record["value"]
        out.append((record["topic"], record["key"], value and value["payload"]["op"]))
    return out


def test_standard_output_of_text_only_takes_the_same_lines(tmp_path: Path) -> None:
    """Standard output redirected to a text stream (no binary buffer) gets the lines."""
    args = ["decode", "--capture", str(CAPTURES / "basic_v1.jsonl"), "-q", "--workers", "2"]
    out = tmp_path / "out.jsonl"
    assert main([*args, "-o", str(out)]) == 0
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        assert main(args) == 0
    assert len(_stable(text.getvalue())) > 20
    assert _stable(text.getvalue()) == _stable(out.read_text())


@contextlib.contextmanager
def _sigint_not_ignored() -> Iterator[None]:
    """A suite started in the background (``cmd &``) ignores SIGINT, and an ignored SIGINT
    stays ignored in the processes it starts (Python then keeps it so): the run went on to
    its end (exit 0) or past the test's 60 s. Handled here, it is the default once the
    child execs, as Ctrl-C from a terminal finds it."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_run_leaves_no_worker_files(tmp_path: Path, sig: signal.Signals) -> None:
    """SIGTERM (or Ctrl-C, to the process group) during a parallel run: one line on
    stderr, no traceback, nothing left in the temporary directory, and the output a
    prefix of the whole (whole lines, then at most part of one)."""
    lines = _lines(CAPTURES / "basic_v1.jsonl")
    first = lines[:4]  # the first transaction, with its Relation; then its rows, again
    capture = tmp_path / "big.jsonl"
    capture.write_bytes(b"".join(first) + b"".join(lines[4:]) * 1500)
    spool = tmp_path / "tmp"
    spool.mkdir()
    # a run that does not stop prints where each of its threads is when aborted
    env = {**os.environ, "TMPDIR": str(spool), "PYTHONFAULTHANDLER": "1"}
    with _sigint_not_ignored():
        proc = subprocess.Popen(
            [sys.executable, "-m", "pgcdc_events.cli", "decode", "--capture", str(capture),
             "-q", "--workers", "2", "-o", str(tmp_path / "out.jsonl")],
            env=env, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 60
    out = tmp_path / "out.jsonl"
    # the workers write into the output itself (a regular file): some of it is there
    while not (out.exists() and out.stat().st_size) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, "the run ended before the signal"
    os.killpg(proc.pid, sig)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGABRT)
        _, err = proc.communicate(timeout=30)
        pytest.fail(f"still running 60 s after {sig.name}:\n{err.decode()[-8000:]}")
    assert proc.returncode == 130
    assert err.decode() == "pgcdc-events decode: interrupted\n"
    assert not list(spool.iterdir())
    # a run id of a run id's length: the lines of both runs are as long
    got = out.read_bytes()
    done = got[:got.rfind(b"\n") + 1]  # whole lines, then at most part of one
    whole = _one_process_prefix(first, lines[4:], 1500, len(done))
    assert done and _without_times(done) == _without_times(whole[:len(done)])


def test_a_killed_worker_is_one_line_naming_what_happened(tmp_path: Path) -> None:
    """A decoding process killed under ``decode --workers 2`` (SIGKILL, as the kernel's
    out-of-memory killer sends): the run stops with one line saying so, no traceback, and
    the output is a prefix of the whole."""
    lines = _lines(CAPTURES / "basic_v1.jsonl")
    capture = tmp_path / "big.jsonl"
    capture.write_bytes(b"".join(lines[:4]) + b"".join(lines[4:]) * 1000)
    out = tmp_path / "out.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pgcdc_events.cli", "decode", "--capture", str(capture),
         "-q", "--workers", "2", "-o", str(out)], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    children: list[int] = []
    while not children and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
        with contextlib.suppress(OSError):
            children = [int(p) for p in Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
                        .read_text().split()]
    assert children, "no decoding process seen before the run ended"
    os.kill(children[0], signal.SIGKILL)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("still running 60 s after a worker was killed")
    message = err.decode()
    assert proc.returncode == 1, message
    assert message.startswith("pgcdc-events decode: error: a decoding process ended before "
                              "its work was done"), message
    assert message.count("\n") == 1 and "Traceback" not in message, message
    got = out.read_bytes() if out.exists() else b""
    done = got[:got.rfind(b"\n") + 1]
    whole = _one_process_prefix(lines[:4], lines[4:], 1000, len(done))
    assert _without_times(done) == _without_times(whole[:len(done)])


def _one_process_prefix(head: list[bytes], unit: list[bytes], times: int, size: int) -> bytes:
    """The start, at least ``size`` bytes of it, of what one process writes for the capture
    ``head + unit * times`` (``unit`` whole transactions: a capture cut after any copy of
    it starts with the same records). Decoding the whole capture took 10 to 16 s a test;
    the killed runs wrote a small part of it."""
    job = DecodeJob(EventConfig.from_properties({"topic.prefix": "pgcdc"}), None, None, None,
                    None, str(uuid.UUID(int=0)), _clock)
    copies = 16
    while True:
        copies = min(copies, times)
        out = _decode(job, head + unit * copies, 1)
        if len(out) >= size or copies == times:
            return out
        copies *= 4


def _without_times(lines: bytes) -> bytes:
    """Lines without what differs from run to run: processing times and the run id."""
    return _RUN_ID.sub(b"run", _TIMES.sub(b"", lines))


_TIMES = re.compile(rb'"ts_[mun]s":[0-9]+')
_RUN_ID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


_PARENT_ONLY = frozenset(b"SEcApbPKr")  # streamed and two-phase: decoded in the parent


def _chunked_alike(recording) -> bool:  # type: ignore[no-untyped-def]
    """Whether ``--workers`` and ``plan_chunks`` chunk the recording's capture alike: no
    snapshot block, streamed or two-phase transaction (decoded in the parent) and no
    non-transactional message (a cut the line reader sees and the control messages not)."""
    rows = [CaptureRow.from_line(line)
            for line in _lines(recording.path / "capture.jsonl") if line.strip()]
    return not any(row.snapshot or row.data[0] in _PARENT_ONLY
                   or (row.data[:1] == b"M" and not row.data[1] & 1) for row in rows)


CHUNKED_ALIKE = [r for r in RECORDINGS if _chunked_alike(r)]


def test_most_recordings_are_chunked_alike() -> None:
    """The comparison below runs on most recordings, not on a filter's leftovers."""
    assert len(CHUNKED_ALIKE) >= 50 and len(RECORDINGS) - len(CHUNKED_ALIKE) <= 20


@pytest.mark.parametrize("recording", CHUNKED_ALIKE, ids=[r.key for r in CHUNKED_ALIKE])
def test_workers_cut_where_spark_chunks_are_cut(recording, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """``--workers`` and Spark's ``plan_chunks`` take their cuts from one planner: on a real
    capture that both chunk alike (no snapshot block, streamed or two-phase transaction,
    or non-transactional message, which only the line reader sees), the chunks the workers
    get end exactly at the plan's cuts, and the output is the single decoder's."""
    lines = _lines(recording.path / "capture.jsonl")
    rows = [(n, CaptureRow.from_line(line)) for n, line in enumerate(lines, 1) if line.strip()]
    config = EventConfig.from_properties(recording.properties)
    job = DecodeJob(config, recording.catalog, None, None, None, "run", _clock)
    ends: list[int] = []  # the last line of every chunk sent to a worker
    send = _parallel._Splitter.send

    def spy(self: _parallel._Splitter) -> None:
        ends.append(self.chunk_first + len(self.chunk) - 1)
        send(self)

    monkeypatch.setattr(_parallel._Splitter, "send", spy)
    assert _decode(job, lines, 2, chunk_lines=7) == _decode(job, lines, 1)
    plan = plan_chunks(control_messages((n, int(row.lsn), bytes(row.data)) for n, row in rows),
                       min_messages=7)
    assert plan.boundaries
    # the last chunk ends at the last cut, or at the capture's end
    tail = () if plan.boundaries[-1] == len(lines) else (len(lines),)
    assert tuple(ends) == plan.boundaries + tail


@pytest.mark.parametrize("turns", ["taken", "missed"])
def test_workers_write_a_regular_file_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               turns: str) -> None:
    """A regular output file: the workers write their chunks into it themselves, each at
    its place, after what the file held (its position) and between the lines the parent
    writes (big transactions); a chunk whose turn has not come when it is decoded goes to
    a file that the parent copies in its turn (``missed``: every chunk, forced). The same
    bytes as one decoder, for every protocol capture and the events recordings; a chunk
    that ends in an error ends the output where one decoder's ends."""
    outputs: list[_parallel._Output] = []

    class Output(_parallel._Output):
        def __init__(self, out: Any) -> None:
            super().__init__(out)
            outputs.append(self)

    monkeypatch.setattr(_parallel, "_Output", Output)
    if turns == "missed":  # (before the workers are forked: theirs too)
        monkeypatch.setattr(_parallel._InPlace, "write", lambda *args, **kwargs: None)
    jobs = []
    for capture in INDEX:
        config = EventConfig.from_properties({
            "topic.prefix": "p", "provide.transaction.metadata": "true",
            "skipped.operations": "none"})
        streaming = "on" if capture["streaming"] else None
        jobs.append((DecodeJob(config, None, capture["proto_version"], streaming, 1 << 20,
                               "run", _clock), _lines(CAPTURES / capture["capture"])))
    for recording in RECORDINGS:
        if recording.corpus == "events":
            jobs.append((DecodeJob(EventConfig.from_properties(recording.properties),
                                   recording.catalog, None, None, None, "run", _clock),
                         _lines(recording.path / "capture.jsonl")))
    for number, (job, lines) in enumerate(jobs):
        single = _decode(job, lines, 1)
        path = tmp_path / f"{number}.jsonl"
        with open(path, "wb") as out:
            out.write(b"before\n")
            run_decode(job, lines, out, workers=2, chunk_lines=2, big_lines=5)
            out.write(b"after\n")
        assert path.read_bytes() == b"before\n" + single + b"after\n", number
    in_place = sum(o.chunks_in_place for o in outputs)
    copied = sum(o.chunks_copied for o in outputs)
    if turns == "missed":
        assert in_place == 0 and copied > 100
    else:
        assert in_place > 100, (in_place, copied)  # (a chunk decoded early is copied)
    job, lines = jobs[-1]
    bad_at = len(lines) // 2  # chunks after it are being decoded: they must write nothing
    row = CaptureRow.from_line(lines[bad_at - 1])
    lines[bad_at - 1] = (dump_capture_row(CaptureRow(Lsn(row.lsn), row.xid, b"I\x00"))
                         + "\n").encode()
    single_out = io.BytesIO()
    with pytest.raises(CaptureError):
        run_decode(job, lines, single_out, workers=1)
    with open(tmp_path / "error.jsonl", "wb") as out, pytest.raises(CaptureError) as info:
        run_decode(job, lines, out, workers=2, chunk_lines=3)
    assert info.value.line == bad_at
    assert (tmp_path / "error.jsonl").read_bytes() == single_out.getvalue()
    assert single_out.getvalue().count(b"\n") > 10


def _hold_the_turn_and_die(place: Any) -> None:
    place.cond.acquire()
    os.kill(os.getpid(), signal.SIGKILL)


def test_the_parent_does_not_wait_for_ever_on_a_dead_workers_lock(tmp_path: Path) -> None:
    """A worker killed in the instant it holds the output's turn lock leaves it held: the
    parent, in its turn to copy a chunk, sees the worker gone and raises what a broken
    pool raises, instead of waiting for ever."""
    from concurrent.futures.process import BrokenProcessPool  # noqa: PLC0415

    context = multiprocessing.get_context("fork")
    chunk = tmp_path / "chunk.jsonl"
    chunk.write_bytes(b"{}\n")
    with open(tmp_path / "out.jsonl", "wb") as out:
        place = _parallel._InPlace(context, out.fileno(), 0)
        holder = context.Process(target=_hold_the_turn_and_die, args=(place,))
        holder.start()
        holder.join(30)
        assert holder.exitcode == -signal.SIGKILL
        raised: list[BaseException] = []

        def copy() -> None:
            try:
                place.copy(str(chunk), 3, failed=False, alive=holder.is_alive)
            except BaseException as exc:  # handed to the test's thread
                raised.append(exc)

        waiter = threading.Thread(target=copy, daemon=True)
        waiter.start()
        waiter.join(20)
        assert not waiter.is_alive(), "the parent still waits for the dead worker's lock"
        assert len(raised) == 1 and isinstance(raised[0], BrokenProcessPool), raised


def test_the_splitter_passes_row_changes_on_by_their_head_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Cutting the capture, the parent tells a canonical Insert, Update or Delete line by
    one match (``ROW_CHANGE_HEAD``) and passes it on unread: it did so for every such line
    of the protocol captures that the workers decode (no streamed or two-phase
    transaction), and for no other line; the output is one decoder's (above)."""
    splitters: list[_parallel._Splitter] = []
    run = _parallel._Splitter.run

    def spy(self: _parallel._Splitter, numbered: Any) -> None:
        splitters.append(self)
        run(self, numbered)

    monkeypatch.setattr(_parallel._Splitter, "run", spy)
    config = EventConfig.from_properties({"topic.prefix": "p", "skipped.operations": "none"})
    checked = 0
    for capture in INDEX:
        if set(capture["message_types"]) & set("SEcAKPrpb"):  # decoded in the parent
            continue
        lines = _lines(CAPTURES / capture["capture"])
        rows = [CaptureRow.from_line(line) for line in lines if line.strip()]
        expected = sum(1 for row in rows if row.data[:1] in (b"I", b"U", b"D"))
        job = DecodeJob(config, None, capture["proto_version"], None, None, "run", _clock)
        assert _decode(job, lines, 2, chunk_lines=3) == _decode(job, lines, 1)
        assert splitters[-1].row_lines == expected, capture["name"]
        checked += expected
    assert checked > 100
