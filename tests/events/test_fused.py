"""``decode``'s fused path writes what the record path writes, and proves it ran.

The fused path (:mod:`pgcdc_events.events.fused`, :meth:`EventDecoder.fused_row`) writes an
Insert's JSON line from the table's converted values, without source, envelope or record
objects. The independent path is the record path of the same loop (``fused=None``): the
decoder's records through :meth:`JsonRecordWriter.line_parts`, itself checked against
``record_line`` (tests/events/test_json_bytes.py) and Debezium (test_golden.py). Inputs:
every golden recording (real PostgreSQL 15, every type family, with its connector
properties and catalog), and the testing layer's generated tables and workloads (every
column type, TOAST, NULLs, key changes, streamed transactions), each under converter
settings that change what surrounds the payloads. Each comparison also counts the Inserts
the fused path wrote and those it handed to the record path, by reason: together, every
Insert line; and none handed over where nothing calls for it.
"""

from __future__ import annotations

import gc
import io
import json
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgcdc_events.cli._parallel import DecodeJob, _feed_lines, run_decode
from pgcdc_events.events import EventConfig, EventDecoder, JsonRecordWriter
from pgcdc_events.events.fused import FusedLines
from pgcdc_events.protocol import CaptureRow, dump_capture_row
from pgcdc_events.testing.strategies import workloads
from support.golden import CONVERTER_SETTINGS, recordings

RECORDINGS = [r for r in recordings() if not r.meta.get("connector_failed")]
_CLOCK = 1_700_000_000_000_000_000

#: Converter settings that change what surrounds the payloads or how they are written, and
#: no transaction block.
SETTINGS = [*CONVERTER_SETTINGS, {"provide.transaction.metadata": "false"}]


def _ticks() -> object:
    """A clock that moves: a line written with another call's time would differ."""
    now = [_CLOCK]

    def clock() -> int:
        now[0] += 1_234_567
        return now[0]

    return clock


def _fixed() -> int:
    return _CLOCK


def _both(decoders: tuple[EventDecoder, EventDecoder], config: EventConfig,
          lines: list[bytes]) -> tuple[bytes, bytes, FusedLines, Counter[tuple[str, str]],
                                      Counter[tuple[str, str]]]:
    """The lines through the record path and through the fused path (one decoder each),
    the fused path's counts, and both tallies."""
    outs = []
    tallies: list[Counter[tuple[str, str]]] = []
    fused = None
    for decoder, on in zip(decoders, (False, True), strict=True):
        writer = JsonRecordWriter.for_config(config)
        tally: Counter[tuple[str, str]] = Counter()
        fused = FusedLines(writer, decoder.context_headers) if on else None
        if fused is not None:
            fused.tally = tally
        parts: list[bytes] = []
        messages, _, error = _feed_lines(decoder, enumerate(lines, 1), writer, parts.extend,
                                         tally=tally, fused=fused)
        assert error is None
        assert messages == len([line for line in lines if line.strip()])
        outs.append(b"".join(parts))
        tallies.append(tally)
    assert fused is not None
    return outs[0], outs[1], fused, tallies[0], tallies[1]


def _inserts(lines: list[bytes]) -> int:
    """The Insert lines outside a snapshot block (those the fused path is offered)."""
    rows = [CaptureRow.from_line(line) for line in lines if line.strip()]
    return sum(1 for row in rows if row.data[:1] == b"I" and not row.snapshot)


@pytest.mark.parametrize("recording", RECORDINGS, ids=[r.key for r in RECORDINGS])
def test_golden_recordings_write_the_same_lines(recording) -> None:  # type: ignore[no-untyped-def]
    lines = (recording.path / "capture.jsonl").read_bytes().splitlines(keepends=True)
    for overrides in SETTINGS[:2]:
        config = EventConfig.from_properties({**recording.properties, **overrides})
        decoders = tuple(EventDecoder(config, catalog=recording.catalog, clock=_ticks(),
                                      run_id="run") for _ in range(2))
        slow, fast, fused, slow_tally, fast_tally = _both(decoders, config, lines)  # type: ignore[arg-type]
        assert fast == slow
        assert fast_tally == slow_tally
        assert fused.written + sum(fused.fallbacks.values()) == _inserts(lines)
        if "c" not in config.skipped_operations and _inserts(lines):
            assert fused.written, fused.fallbacks  # the fused path ran


def test_the_fused_path_runs_where_nothing_calls_for_the_record_path() -> None:
    """Inserts into tables with keys, in ordinary transactions: all written fused, none
    handed over (a broken fused path that fell back every time would pass the others)."""
    recording = next(r for r in RECORDINGS if r.key == "types/default")
    lines = (recording.path / "capture.jsonl").read_bytes().splitlines(keepends=True)
    config = EventConfig.from_properties(recording.properties)
    decoders = tuple(EventDecoder(config, catalog=recording.catalog, clock=_ticks(),
                                  run_id="run") for _ in range(2))
    slow, fast, fused, _, _ = _both(decoders, config, lines)  # type: ignore[arg-type]
    assert fast == slow
    assert fused.written == _inserts(lines) > 5
    assert not fused.fallbacks


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(workloads(streaming=True, long_values=True, extensions=True), st.sampled_from(SETTINGS))
def test_generated_tables_write_the_same_lines(workload, overrides) -> None:  # type: ignore[no-untyped-def]
    config = EventConfig.from_properties({
        "topic.prefix": "w", "provide.transaction.metadata": "true",
        "skipped.operations": "none", **overrides})
    lines = [dump_capture_row(row).encode() for row in workload.capture()]
    decoders = tuple(EventDecoder(config, catalog=workload.catalog, clock=_ticks(),
                                  proto_version=workload.proto_version,
                                  streaming=workload.streaming, run_id="run")
                     for _ in range(2))
    slow, fast, fused, slow_tally, fast_tally = _both(decoders, config, lines)  # type: ignore[arg-type]
    assert fast == slow
    assert fast_tally == slow_tally
    assert fused.written + sum(fused.fallbacks.values()) == _inserts(lines)
    assert set(fused.fallbacks) <= {"a streamed or prepared transaction",
                                    "a table without a key"}


def test_what_the_fused_path_leaves_is_counted_by_reason() -> None:
    recording = next(r for r in RECORDINGS if r.key == "types/default")
    lines = (recording.path / "capture.jsonl").read_bytes().splitlines(keepends=True)
    config = EventConfig.from_properties({**recording.properties, "skipped.operations": "c"})
    decoders = tuple(EventDecoder(config, catalog=recording.catalog, clock=_ticks(),
                                  run_id="run") for _ in range(2))
    slow, fast, fused, _, _ = _both(decoders, config, lines)  # type: ignore[arg-type]
    assert fast == slow
    assert fused.written == 0
    assert fused.fallbacks == {"a skipped operation (skipped.operations)": _inserts(lines)}


@pytest.mark.parametrize("workers", [1, 2])
def test_decode_writes_the_same_with_and_without_the_fused_path(workers: int) -> None:
    """Whole runs (``run_decode``, one process and two workers) against the record path."""
    for recording in RECORDINGS[:6]:
        config = EventConfig.from_properties(recording.properties)
        lines = (recording.path / "capture.jsonl").read_bytes().splitlines(keepends=True)
        outs = []
        for fused in (False, True):
            # (a moving clock in one process; the workers' clocks are their own)
            clock = _ticks() if workers == 1 else _fixed
            job = DecodeJob(config, recording.catalog, None, None, None, "run", clock,  # type: ignore[arg-type]
                            fused=fused)
            out = io.BytesIO()
            tally: Counter[tuple[str, str]] = Counter()
            run_decode(job, lines, out, workers=workers, tally=tally, chunk_lines=3)
            outs.append((out.getvalue(), tally))
        assert outs[0] == outs[1]
        assert [json.loads(line) for line in outs[1][0].splitlines()]


def test_line_writers_are_kept_while_in_use(tmp_path: Path) -> None:
    """A line writer's source is kept for debugging, and dropped with it (a capture of
    many table versions does not keep every one's text around the payloads)."""
    recording = RECORDINGS[0]
    config = EventConfig.from_properties(recording.properties)
    decoder = EventDecoder(config, catalog=recording.catalog, clock=_ticks(), run_id="run")
    writer = JsonRecordWriter.for_config(config)
    fused = FusedLines(writer, decoder.context_headers)
    lines = (recording.path / "capture.jsonl").read_bytes().splitlines(keepends=True)
    _feed_lines(decoder, enumerate(lines, 1), writer, lambda parts: None, fused=fused)
    assert fused.written
    sources = list(writer.line_sources.values())
    assert sources and all("parts +=" in source for source in sources)
    fused.use(config)
    gc.collect()
    assert not writer.line_sources
