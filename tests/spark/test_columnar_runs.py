"""The column-wise run decoder (``pgcdc_events.spark.columnar``) gives EventDecoder's records.

Every golden capture (real PostgreSQL bytes, every recorded mode) and generated workloads
are decoded by a :class:`RunDecoder` that takes every run it can column-wise (runs of one
message too), in small Arrow batches; the records, runs expanded by
:meth:`ColumnarRun.records`, must be the single decoder's, whole (topic, key, value,
headers, LSN, kind) and as JsonConverter lines (which tell ``true`` from ``1``). The
runs are decoded in the test mode (every value a kernel converts compared with its scalar
converter), and :attr:`RunDecoder.stats` proves the column-wise path and its kernels ran,
and that a run given to the decoder says why.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pytest
from hypothesis import HealthCheck, given, settings

from pgcdc_events.events import EventConfig, EventDecoder, JsonRecordWriter
from pgcdc_events.events.chunks import ChunkDecoder, ChunkError, control_messages, plan_chunks
from pgcdc_events.events.records import ChangeRecord
from pgcdc_events.protocol import CaptureRow
from pgcdc_events.spark.columnar import ColumnarRun, ColumnarStats, RunDecoder
from pgcdc_events.testing import Transaction, op_delete, op_insert, op_update, render, table
from pgcdc_events.testing.strategies import workloads
from pgcdc_events.testing.workload import Workload
from pgcdc_events.types.schema import Struct
from support.golden import Recording, recordings

RECORDINGS = [r for r in recordings("*") if not r.meta.get("connector_failed")]
CLOCK_NS = 1_700_000_000_000_123_456


def run_decode(capture: Sequence[CaptureRow], make: Callable[[], EventDecoder], *,
               batch: int = 7, min_run: int = 1, chunk_messages: int = 1,
               stats: list[ColumnarStats] | None = None) -> tuple[list[ChangeRecord], int]:
    """The records of a capture through a RunDecoder (in its test mode), and how many came
    from runs; the decoder's :class:`ColumnarStats` appended to ``stats``."""
    rows = [(i, int(r.lsn), bytes(r.data)) for i, r in enumerate(capture)]
    snapshot = [r.snapshot for r in capture]
    plan = plan_chunks(control_messages(rows), min_messages=chunk_messages,
                       snapshot={i for i, flag in enumerate(snapshot) if flag})
    runner = RunDecoder(ChunkDecoder(plan, make), min_run=min_run, verify=True)
    out: list[ChangeRecord] = []
    columnar = 0
    for start in range(0, len(rows), batch):
        part = rows[start:start + batch]
        items = runner.feed([plan.chunk_of(r[0]) for r in part], [r[0] for r in part],
                            [r[1] for r in part], pa.array([r[2] for r in part], pa.binary()),
                            snapshot[start:start + batch])
        for item in items:
            if isinstance(item, ColumnarRun):
                records = item.records()
                columnar += len(records)
                out += records
            else:
                out.append(item[2])
    runner.finish()
    if stats is not None:
        stats.append(runner.stats)
    return out, columnar


def canonical(value: Any) -> Any:
    """A value with its Python type spelled out (``True`` is not ``1``, ``Decimal("1.50")``
    not ``Decimal("1.5")``) and NaN equal to itself."""
    if isinstance(value, Struct):
        return ("Struct", repr(value.schema), tuple(canonical(v) for v in value.values))
    if isinstance(value, ChangeRecord):  # schemas by repr: a NaN default is not == itself
        return (value.topic, repr(value.key_schema), canonical(value.key),
                repr(value.value_schema), canonical(value.value),
                tuple((h.name, repr(h.schema), canonical(h.value)) for h in value.headers),
                value.lsn, value.kind)
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(canonical(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((k, canonical(v)) for k, v in value.items()))
    if isinstance(value, (float, Decimal)):
        return (type(value).__name__, repr(value))
    return (type(value).__name__, value)


def _same(got: list[ChangeRecord], want: list[ChangeRecord], config: EventConfig) -> None:
    """Whole records: the same JsonConverter lines, and the same Python values."""
    render_line = JsonRecordWriter.for_config(config).record_line
    assert [render_line(r) for r in got] == [render_line(r) for r in want]
    assert [canonical(r) for r in got] == [canonical(r) for r in want]


def _golden(recording: Recording, stats: list[ColumnarStats] | None = None) -> tuple[int, int]:
    config = EventConfig.from_properties(recording.properties)

    def make() -> EventDecoder:
        return EventDecoder(config, catalog=recording.catalog, clock=lambda: CLOCK_NS,
                            run_id="r")

    want = make().feed_rows(recording.capture)
    got, columnar = run_decode(recording.capture, make, stats=stats)
    _same(got, want, config)
    return columnar, len(want)


@pytest.mark.parametrize("recording", RECORDINGS, ids=[r.key for r in RECORDINGS])
def test_golden_capture_columnar_equals_decoder(recording: Recording) -> None:
    _golden(recording)


def test_golden_captures_take_the_columnar_path() -> None:
    """The golden set exercises the columnar path (not only its fallbacks), and the kernel
    of every vector form, on real PostgreSQL bytes."""
    columnar = total = 0
    stats: list[ColumnarStats] = []
    for recording in RECORDINGS:
        c, t = _golden(recording, stats)
        columnar += c
        total += t
    assert columnar > total // 4, (columnar, total)
    kernels = sum((s.kernels for s in stats), Counter[str]())
    assert set(kernels) == {"IntegerText", "BooleanText", "Utf8Text", "DecimalText",
                            "UtcZonedText"}, kernels
    assert sum(s.runs for s in stats) > 100


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(max_transactions=6, max_ops=8, interleave=False))
def test_generated_workload_columnar_equals_decoder(workload: Workload) -> None:
    decoder = workload.decoder()
    config = decoder.config
    want = workload.records()
    got, _ = run_decode(workload.capture(), workload.decoder, batch=5)
    _same(got, want, config)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(max_transactions=5, max_ops=6, streaming=True, two_phase=True))
def test_streamed_and_prepared_workloads_columnar_equals_decoder(workload: Workload) -> None:
    want = workload.records()
    got, _ = run_decode(workload.capture(), workload.decoder, batch=11)
    _same(got, want, workload.decoder().config)


T = table("public.t", {"id": "int8", "name": "text", "amount": "numeric(12,2)", "ok": "bool",
                       "at": "timestamptz", "note": "varchar(20)"}, primary_key="id")


def _rows(n: int) -> list[dict[str, object]]:
    return [{"id": i, "name": f"name {i}", "amount": f"{i * 1.25:.2f}", "ok": i % 2 == 0,
             "at": "2024-03-10 01:30:00.25+00", "note": None if i % 3 else "x"}
            for i in range(1, n + 1)]


@pytest.mark.parametrize("tombstones", ["true", "false"])
def test_long_runs_of_each_operation(tombstones: str) -> None:
    rows = _rows(50)
    ops = ([op_insert(T, r) for r in rows]
           + [op_update(T, r, {**r, "name": "renamed"}) for r in rows]
           + [op_delete(T, {**r, "name": "renamed"}) for r in rows])
    workload = render([T], [Transaction(tuple(ops[:50])), Transaction(tuple(ops[50:]))])
    config = {"tombstones.on.delete": tombstones}
    want = workload.records(config)
    make = lambda: workload.decoder(config)  # noqa: E731
    stats: list[ColumnarStats] = []
    got, columnar = run_decode(workload.capture(), make, batch=1000, min_run=8, stats=stats)
    _same(got, want, make().config)
    assert columnar == len(want)  # every change went column-wise
    # every column of the three runs by its kernel (a delete's non-key columns are null)
    assert stats[0] == ColumnarStats(runs=3, messages=150, kernels=Counter(
        IntegerText=3, Utf8Text=6, DecimalText=3, BooleanText=3, UtcZonedText=3))
    assert [r.kind for r in want].count("tombstone") == (50 if tombstones == "true" else 0)
    assert {r.op for r in want} - {None} == {"c", "u", "d"}


def test_a_bad_message_in_a_run_names_its_position() -> None:
    workload = render([T], [Transaction(tuple(op_insert(T, r) for r in _rows(10)))])
    capture = workload.capture()
    capture[5] = CaptureRow(capture[5].lsn, capture[5].xid, bytes(capture[5].data)[:9])
    with pytest.raises(ChunkError, match=r"^position 5: ProtocolError"):
        run_decode(capture, workload.decoder, batch=1000)


@pytest.mark.parametrize(("config", "reason"), [
    ({"skipped.operations": "c"}, "skipped operation"),
    ({"provide.transaction.metadata": "true"}, "transaction metadata"),
])
def test_a_run_given_to_the_decoder_says_why(config: dict[str, str], reason: str) -> None:
    workload = render([T], [Transaction(tuple(op_insert(T, r) for r in _rows(20)))])
    make = lambda: workload.decoder(config)  # noqa: E731
    stats: list[ColumnarStats] = []
    got, columnar = run_decode(workload.capture(), make, batch=1000, min_run=8, stats=stats)
    _same(got, workload.records(config), make().config)
    assert columnar == 0
    assert stats[0] == ColumnarStats(fallbacks=Counter({reason: 1}))


def test_an_update_with_its_old_tuple_goes_to_the_decoder() -> None:
    full = table("public.f", {"id": "int8", "name": "text"}, primary_key="id",
                 replica_identity="full")
    rows = [{"id": i, "name": f"n{i}"} for i in range(20)]
    workload = render([full], [Transaction(tuple(
        op_update(full, r, {**r, "name": "renamed"}) for r in rows))])
    stats: list[ColumnarStats] = []
    got, columnar = run_decode(workload.capture(), workload.decoder, batch=1000, min_run=8,
                               stats=stats)
    _same(got, workload.records(), workload.decoder().config)
    assert columnar == 0 and stats[0].fallbacks == Counter({"old tuple": 1})


def test_a_value_outside_its_form_takes_the_scalar_converter() -> None:
    """A NaN among a run's numerics: the decimal kernel declines the column (counted), the
    scalar converter takes it once per distinct value, the run stays column-wise; a masked
    column has its mask on top of the converter: no kernel."""
    rows = _rows(20)
    rows[11] = {**rows[11], "amount": "NaN"}
    workload = render([T], [Transaction(tuple(op_insert(T, r) for r in rows))])
    config = {"column.mask.with.4.chars": "public.t.name"}
    make = lambda: workload.decoder(config)  # noqa: E731
    stats: list[ColumnarStats] = []
    got, columnar = run_decode(workload.capture(), make, batch=1000, min_run=8, stats=stats)
    _same(got, workload.records(config), make().config)
    assert columnar == 20
    assert stats[0] == ColumnarStats(runs=1, messages=20, scalar=1, kernels=Counter(
        IntegerText=1, Utf8Text=1, BooleanText=1, UtcZonedText=1),
        kernel_fallbacks=Counter(DecimalText=1))


def _not_null_run(*columns: str) -> tuple[Any, list[dict[str, object]], int, ColumnarStats]:
    """A run of 20 inserts into a table of ``id`` and ``columns`` of :data:`T` (NOT NULL),
    decoded column-wise and compared with the single decoder's records: the table, its
    rows, the records that came from runs and the run decoder's stats."""
    types = {"amount": "numeric(12,2)", "at": "timestamptz"}
    strict = table("public.s", {"id": "int8", **{c: types[c] for c in columns}},
                   primary_key="id", not_null=columns)
    rows = [{k: r[k] for k in ("id", *columns)} for r in _rows(20)]
    workload = render([strict], [Transaction(tuple(op_insert(strict, r) for r in rows))])
    stats: list[ColumnarStats] = []
    got, columnar = run_decode(workload.capture(), workload.decoder, batch=1000, min_run=8,
                               stats=stats)
    _same(got, workload.records(), workload.decoder().config)
    return strict, rows, columnar, stats[0]


def test_not_null_columns_take_their_kernels_and_keep_their_check() -> None:
    """A NOT NULL ``timestamptz`` or ``numeric`` column has the check that its value has a
    representation on top of its converter (``events.tables._required``): the kernel still
    converts the run (counted), its output checked; a NaN in the NOT NULL numeric (no
    representation in ``precise`` mode) leaves the column to the scalar converter, whose
    check refuses it, and the run to the decoder, whose error is the single decoder's."""
    strict, rows, columnar, stats = _not_null_run("amount", "at")
    assert columnar == 20
    assert stats == ColumnarStats(runs=1, messages=20, kernels=Counter(
        IntegerText=1, DecimalText=1, UtcZonedText=1))
    rows[11] = {**rows[11], "amount": "NaN"}
    bad = render([strict], [Transaction(tuple(op_insert(strict, r) for r in rows))])
    with pytest.raises(ChunkError) as single:
        run_decode(bad.capture(), bad.decoder, batch=1000, min_run=1000)
    with pytest.raises(ChunkError) as runs:
        run_decode(bad.capture(), bad.decoder, batch=1000, min_run=8)
    assert str(runs.value) == str(single.value)
    assert "NOT NULL" in str(runs.value)


def test_a_kernel_null_in_a_not_null_column_gives_the_run_to_the_decoder(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """No kernel of the library makes a null of a value today; one that would (a value
    with no representation) in a NOT NULL column must leave the run to the decoder, whose
    rules decide (here: the value, which the scalar converter has)."""
    from pgcdc_events.spark import vectorized  # noqa: PLC0415
    from pgcdc_events.types.temporal import UtcZonedText  # noqa: PLC0415

    real = vectorized.KERNELS[UtcZonedText]
    monkeypatch.setitem(vectorized.KERNELS, UtcZonedText, lambda form, raw, target: pa.array(
        [None, *real(form, raw, target).to_pylist()[1:]], target))
    _, _, columnar, stats = _not_null_run("at")
    assert columnar == 0
    assert stats.fallbacks == Counter({"a value its converter makes null": 1})
