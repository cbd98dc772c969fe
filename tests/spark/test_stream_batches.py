"""The micro-batch step of ``decode_stream`` (``decode_rows``), without Spark, on every golden
capture: the capture is cut into micro-batches at random rows (inside transactions, inside
streamed ones, between a Relation and the change that needs it), the state goes through
its JSON form between batches, and the records must equal one ``EventDecoder``'s, whole.
With segments (rotating files) delivered out of order, a segment that arrives before the
one it follows is held back: its changes decode once the Relation before them has come.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("pyspark")

from pgcdc_events.events import EventConfig
from pgcdc_events.events.chunks import Cut
from pgcdc_events.protocol import CaptureRow
from pgcdc_events.spark.columnar import MIN_RUN
from pgcdc_events.spark.decode import _Decode
from pgcdc_events.spark.errors import SparkDecodeError
from pgcdc_events.spark.layout import RUN_KIND, TableLayout, catalog_table_schemas
from pgcdc_events.spark.schema import SparkSchemaOptions
from pgcdc_events.spark.stream import StreamState, commit_ms, decode_rows
from pgcdc_events.types.catalog import fetch_catalog
from support.capture import Capturer
from support.golden import Recording, recordings
from support.spark_records import CLOCK_NS, RUN_ID, decoder_lines, first_difference

RECORDINGS = [r for r in recordings("*") if not r.meta.get("connector_failed")]


def _run(rows: list[CaptureRow], recording: Recording, batches: list[list[tuple]],
         index: Callable[[int], int] = lambda position: position, chunk_rows: int = 1
         ) -> tuple[list[str], StreamState]:
    """Decode the micro-batches; ``index`` gives the row of a position."""
    config = EventConfig.from_properties(recording.properties).with_catalog(recording.catalog)
    make = _Decode(config, recording.catalog, lambda: CLOCK_NS, RUN_ID)
    state = StreamState()
    lines: list[str] = []
    flagged = {i for i, r in enumerate(rows) if r.snapshot}  # an initial snapshot's rows
    for batch in batches:
        snapshot = [b[1] for b in batch if index(b[1]) in flagged]
        out, state, _ = decode_rows(state, batch, make, lines=True, snapshot=snapshot,
                                    chunk_rows=chunk_rows)
        lines += [line for b in out for line in b.column("line").to_pylist()]
        # the state survives its JSON form (what the checkpoint holds)
        state = StreamState.from_json(json.loads(json.dumps(state.to_json())), path="x")
    return lines, state


def _want(rows: list[CaptureRow], recording: Recording, state: StreamState) -> list[str]:
    """The decoder's records of the rows before those still pending."""
    config = EventConfig.from_properties(recording.properties)
    done = len(rows) - len(state.pending) - len(state.held)
    return decoder_lines(rows[:done], config, recording.catalog)


@pytest.mark.parametrize("recording", RECORDINGS, ids=[r.key for r in RECORDINGS])
def test_random_micro_batches(recording: Recording) -> None:
    rows = list(recording.capture)
    rng = random.Random(recording.key)
    batches: list[list[tuple]] = []
    i = 0
    while i < len(rows):
        n = rng.choice((1, 2, 3, 5, 8, 40))
        batches.append([(None, i + j, int(r.lsn), r.data) for j, r in enumerate(rows[i:i + n])])
        i += n
    batches.insert(len(batches) // 2, [])  # an empty micro-batch changes nothing
    # chunks of one transaction, or of several (the plan keeps some cuts, and the last)
    got, state = _run(rows, recording, batches, chunk_rows=rng.choice((1, 3, 10)))
    problem = first_difference(got, _want(rows, recording, state))
    assert not problem, problem
    assert len(state.pending) < len(rows) // 2 + 8  # most of the capture was decoded


@pytest.mark.parametrize("recording", RECORDINGS[:6], ids=[r.key for r in RECORDINGS[:6]])
def test_segments_out_of_order(recording: Recording) -> None:
    """Segments of a few rows each, delivered two at a time in swapped pairs: the later one
    (whose changes may need the earlier one's Relation) comes a batch before."""
    rows = list(recording.capture)
    size = 4
    segments = [[(k, (k << 32) | j, int(r.lsn), r.data)
                 for j, r in enumerate(rows[k * size:(k + 1) * size])]
                for k in range((len(rows) + size - 1) // size)]
    order = []
    for k in range(0, len(segments), 2):
        order += [segments[k + 1]] if k + 1 < len(segments) else []
        order += [segments[k]]
    got, state = _run(rows, recording, order,
                      lambda position: (position >> 32) * size + (position & 0xFFFFFFFF))
    assert not state.held
    problem = first_difference(got, _want(rows, recording, state))
    assert not problem, problem


def test_a_stream_that_goes_back_is_refused() -> None:
    recording = RECORDINGS[0]
    rows = list(recording.capture)
    batch = [(None, i, int(r.lsn), r.data) for i, r in enumerate(rows[:5])]
    with pytest.raises(SparkDecodeError, match="the stream goes back"):
        _run(rows, recording, [batch, batch])



@pytest.mark.parametrize("size", [1, 31, 32, 100, 3000])
def test_an_ordinary_transaction_of_any_size_streams(pg_conn: Any, size: int) -> None:
    """A transaction of ``size`` changes to one table (32 and more are decoded column-wise
    into one run): the micro-batch decodes, its commit time (the last cut's commit) is
    the records' ``source.ts_ms`` (issue 22: it was read from the run's Arrow payload as a
    pickle, ``invalid load key``), and the table's events are one decoder's."""
    pg_conn.run("CREATE TABLE big (id int PRIMARY KEY, note text)")
    capturer = Capturer(pg_conn, tables=["big"])
    pg_conn.run("INSERT INTO big SELECT g, 'n' || g FROM generate_series(1, :n) g", n=size)
    rows = capturer.changes()
    catalog = fetch_catalog(pg_conn)
    config = EventConfig.from_properties({"topic.prefix": "s"}).with_catalog(catalog)
    make = _Decode(config, catalog, lambda: CLOCK_NS, RUN_ID)
    out, state, taken = decode_rows(StreamState(), [(None, i, int(r.lsn), r.data)
                                                    for i, r in enumerate(rows)], make)
    assert taken == len(rows) and not state.pending
    kinds = [k for b in out for k in b.column("kind").to_pylist()]
    assert (RUN_KIND in kinds) == (size >= MIN_RUN), kinds
    want = [json.loads(line) for line in decoder_lines(rows, config, catalog)]
    values = [w["value"].get("payload", w["value"]) for w in want
              if w["value"] is not None and w["topic"] == "s.public.big"]
    assert len(values) == size
    assert state.cut is not None and state.prelude.transaction is not None
    assert commit_ms(Cut(state.cut, state.prelude.transaction)) == \
        values[-1]["source"]["ts_ms"]
    layout = TableLayout("public.big", [catalog_table_schemas(catalog, config)["public.big"]],
                         SparkSchemaOptions("literal"))
    events = layout.batch(
        (p, i, k, lsn, pl) for b in out for p, i, k, lsn, pl in zip(
            *(b.column(c).to_pylist() for c in ("position", "index", "kind", "lsn",
                                                 "payload")), strict=True)
        if k in ("change", RUN_KIND))
    assert events.column("after").to_pylist() == [v["after"] for v in values]
