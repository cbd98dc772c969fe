"""``decode_stream`` in Spark: rotating capture files read by Spark's file stream, decoded
micro-batch by micro-batch, equal record for record to ``EventDecoder`` on the same capture;
the query stopped and restarted from its checkpoint goes on where it was, nothing doubled;
the per-table streaming DataFrames equal the batch layer's."""

from __future__ import annotations

import json
import os
import pickle
import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")


from pyspark.sql import SparkSession

from pgcdc_events.cli import main
from pgcdc_events.events import EventConfig
from pgcdc_events.protocol import CaptureRow
from pgcdc_events.spark import decode_capture
from pgcdc_events.spark._session import to_arrow_table
from pgcdc_events.spark.apply import ParquetTarget
from pgcdc_events.spark.capture import capture_dataframe
from pgcdc_events.spark.errors import SparkDecodeError
from pgcdc_events.spark.state import latest_state
from pgcdc_events.spark.stream import (
    StreamState,
    decode_rows,
    decode_stream,
    read_capture_files,
    read_capture_stream,
)
from support.capture_files import write_files
from support.golden import recordings
from support.records import without_run_fields
from support.spark_records import (
    CLOCK_NS,
    RUN_ID,
    decoder_lines,
    first_difference,
    table_rows,
)

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
RECORDING = next(r for r in recordings("events") if r.mode == "events-txmeta-truncate-notombstones")


def records_lines(path: Path, spark: SparkSession) -> list[str]:
    df = spark.read.parquet(str(path / "records"))
    return [r["line"] for r in df.orderBy("position", "index").select("line").collect()]


def test_files_decoded_as_one_decoder(spark: SparkSession, tmp_path: Path) -> None:
    rows = list(RECORDING.capture)
    config = EventConfig.from_properties(RECORDING.properties)
    files, out, checkpoint = tmp_path / "files", tmp_path / "out", tmp_path / "cp"
    # cut inside transactions: a file here holds part of one (the Kafka layout's case)
    half = len(rows) // 2
    write_files(files, rows[:half], [3, 7, half // 2])

    def start() -> Any:
        # the files read in the Python tasks (read_capture_files: the fast path)
        stream = decode_stream(read_capture_files(spark, str(files), max_files_per_trigger=1),
                               config, catalog=RECORDING.catalog, path=str(out),
                               checkpoint=str(checkpoint), clock=lambda: CLOCK_NS,
                               run_id=RUN_ID, lines=True)
        stream.start()
        return stream

    stream = start()
    assert stream.query is not None
    stream.query.processAllAvailable()
    first = len(stream.batches)
    stream.stop()
    # more files while the query is down; restarted from its checkpoint
    assert write_files(files, rows[half:], [5, 9], first=4) == 7
    stream = start()
    assert stream.query is not None
    stream.query.processAllAvailable()
    assert first >= 4 and len(stream.batches) >= 2
    assert stream.files_parsed.value == 3  # the restarted query's files, in Python
    want = decoder_lines(rows, config, RECORDING.catalog)
    problem = first_difference(records_lines(out, spark), want)
    assert not problem, problem

    # each table's streaming DataFrame equals the batch layer's table, row for row
    batch = decode_capture(capture_dataframe(spark, rows), config, catalog=RECORDING.catalog,
                           clock=lambda: CLOCK_NS, run_id=RUN_ID)
    for table in batch.tables:
        got: list[Any] = []
        query = (stream.table(table).writeStream
                 .foreachBatch(lambda df, _id, got=got: got.extend(
                     table_rows(_arrow(df)) if df.count() else []))
                 .option("checkpointLocation", str(tmp_path / f"cp-{table}")).start())
        query.processAllAvailable()
        query.stop()
        expected = table_rows(batch.to_arrow([table])[table])
        got.sort(key=lambda r: (r["_position"]["message"], r["_position"]["index"]))
        assert [_strip(r) for r in got] == [_strip(r) for r in expected], table
    batch.unpersist()
    stream.stop()


def _arrow(df: Any) -> Any:
    return to_arrow_table(df)


def _strip(row: dict[str, Any]) -> dict[str, Any]:
    """A row without its position (the stream's positions are segment << 32 | line)."""
    return {k: v for k, v in row.items() if k != "_position"}


def test_a_column_the_catalog_lacks_fails_the_table_query(spark: SparkSession,
                                                          tmp_path: Path) -> None:
    rows = list(RECORDING.capture)
    config = EventConfig.from_properties(RECORDING.properties)
    catalog = RECORDING.catalog
    write_files(tmp_path / "f", rows, [])
    stream = decode_stream(read_capture_stream(spark, str(tmp_path / "f")), config,
                           catalog=catalog, path=str(tmp_path / "o"),
                           checkpoint=str(tmp_path / "c"))
    stream.start()
    assert stream.query is not None
    stream.query.processAllAvailable()
    stream.stop()
    # a layout missing one column stands for a catalog taken before ADD COLUMN
    table = next(t for t in stream.tables if len(stream.layout(t).value_fields) > 1)
    layout = stream.layout(table)
    dropped = layout.value_fields.pop()
    stream.layout = lambda name: layout  # type: ignore[method-assign]
    query = (stream.table(table).writeStream.format("memory").queryName("strict_check")
             .option("checkpointLocation", str(tmp_path / "c2")).start())
    with pytest.raises(Exception, match=f"{table}.{dropped.name}"):
        query.processAllAvailable()
    query.stop()


def test_a_batch_dataframe_is_refused(spark: SparkSession, tmp_path: Path) -> None:
    config = EventConfig.from_properties(RECORDING.properties)
    with pytest.raises(SparkDecodeError, match="streaming DataFrame"):
        decode_stream(capture_dataframe(spark, list(RECORDING.capture)), config,
                      catalog=RECORDING.catalog, path=str(tmp_path), checkpoint=str(tmp_path))


def test_state_is_under_the_checkpoint(spark: SparkSession, tmp_path: Path) -> None:
    rows = list(RECORDING.capture)
    config = EventConfig.from_properties(RECORDING.properties)
    write_files(tmp_path / "f", rows, [5])
    stream = decode_stream(read_capture_stream(spark, str(tmp_path / "f")), config,
                           catalog=RECORDING.catalog, path=str(tmp_path / "o"),
                           checkpoint=str(tmp_path / "c"))
    stream.start()
    assert stream.query is not None
    stream.query.processAllAvailable()
    stream.stop()
    states = sorted(os.listdir(tmp_path / "c" / "_decoder"))
    assert states and all(s.startswith("state-") for s in states)
    state = json.loads((tmp_path / "c" / "_decoder" / states[-1]).read_text())
    assert state["segment"] == 2 and not state["held"]
    # the files read in the Python tasks (read_capture_files) give the same records, at
    # the same positions, and the same state as the lines read in the JVM; here a file a
    # micro-batch, the second segment first (held until the first comes)
    first = sorted((tmp_path / "f").glob("capture-*.jsonl"))[0]
    later = first.stat().st_mtime + 10
    os.utime(first, (later, later))
    fast = decode_stream(read_capture_files(spark, str(tmp_path / "f"),
                                            max_files_per_trigger=1), config,
                         catalog=RECORDING.catalog, path=str(tmp_path / "o2"),
                         checkpoint=str(tmp_path / "c2"), clock=lambda: CLOCK_NS,
                         run_id=RUN_ID)
    fast.start()
    assert fast.query is not None
    fast.query.processAllAvailable()
    fast.stop()
    assert fast.files_parsed.value == 2
    assert [b.pending for b in fast.batches] == [len(rows) - 5, 0]  # segment 1 held
    fast_states = sorted(os.listdir(tmp_path / "c2" / "_decoder"))
    assert json.loads((tmp_path / "c2" / "_decoder" / fast_states[-1]).read_text()) == state

    def records(path: Path) -> list[tuple[Any, ...]]:
        df = spark.read.parquet(str(path / "records"))
        return [(r["position"], r["index"], r["lsn"], r["kind"], r["table"], r["op"])
                for r in df.orderBy("position", "index").collect()]

    assert records(tmp_path / "o2") == records(tmp_path / "o")
    # each record at its message's own position: segment << 32 | the line's index in the
    # file (segment 0: the first 5 rows): a message of its kind, with its LSN, is there
    at = {i: r for i, r in enumerate(rows[:5])} | {(1 << 32) + i: r
                                                  for i, r in enumerate(rows[5:])}
    # (an Update that changes the key makes a delete and a create)
    ops = {"c": (b"I", b"U"), "u": (b"U",), "d": (b"D", b"U"), "t": (b"T",)}
    made = records(tmp_path / "o")
    assert [(r, at[r[0]].data[:1]) for r in made if r[5] in ops
            and at[r[0]].data[:1] not in ops[r[5]]] == [], made
    assert [r for r in made if int(at[r[0]].lsn) != r[2]] == [], made  # the line's LSN


def test_cli_stream(spark: SparkSession, tmp_path: Path,
                    capsys: pytest.CaptureFixture[str]) -> None:
    """``pgcdc-events spark stream`` (in this process: the session is the run's) follows the
    files, prints a progress line per micro-batch and leaves each table's Parquet directory
    equal to the batch layer's latest state."""
    rows = list(RECORDING.capture)
    write_files(tmp_path / "f", rows, [len(rows) // 3, 2 * len(rows) // 3])
    catalog = tmp_path / "catalog.json"
    RECORDING.catalog.save(str(catalog))
    props = tmp_path / "c.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in RECORDING.properties.items()))
    assert main(["spark", "stream", "--input", str(tmp_path / "f"), "--catalog", str(catalog),
                 "--config", str(props), "--output", str(tmp_path / "o"),
                 "--checkpoint", str(tmp_path / "cp"), "--trigger", "0.2", "--target", "parquet", "--buckets", "2",
                 "--max-files-per-trigger", "1", "--stop-when-idle", "4", "--records"]) == 0
    err = capsys.readouterr().err
    progress = [line for line in err.splitlines() if ": batch " in line]
    assert len(progress) >= 3, err
    assert re.search(r"batch \d+: [\d,]+ rows, [\d,]+ records, \d+ waiting; lsn [0-9A-F]+/"
                     r"[0-9A-F]+, lag [^,]+, [\d.]+ s", progress[-1]), progress
    config = EventConfig.from_properties(RECORDING.properties)
    batch = decode_capture(capture_dataframe(spark, rows), config, catalog=RECORDING.catalog)
    compared = 0
    for table in batch.tables:
        if "key" not in batch.table(table).columns:
            continue
        got = to_arrow_table(spark.read.option("mergeSchema", "true").parquet(
            str(tmp_path / "o" / "tables" / table))) \
            if (tmp_path / "o" / "tables" / table).exists() else None
        want = to_arrow_table(latest_state(batch.table(table)))
        assert sorted(map(str, got.to_pylist() if got is not None else [])) == \
            sorted(map(str, want.to_pylist())), table
        compared += 1
    batch.unpersist()
    assert compared >= 2
    # asked for with --records: the records, one file per micro-batch that made some
    parts = sorted((tmp_path / "o" / "records").glob("part-*.parquet"))
    assert len(parts) == len([p for p in progress if " 0 records," not in p]) >= 1, parts
    assert spark.read.parquet(str(tmp_path / "o" / "records")).count() > 0


def test_a_capture_that_begins_with_a_snapshot(spark: SparkSession, tmp_path: Path) -> None:
    """A capture that begins with an initial snapshot (what ``capture`` writes by default),
    in files cut inside the snapshot block: its rows are read (``r``) events, first, then
    the stream's; the records are ``pgcdc-events decode``'s, whole (but the processing time
    and the run id)."""
    golden = GOLDEN / "events_snapshot" / "snapshot-initial"
    recording = next(r for r in recordings("events_snapshot") if r.corpus == "events_snapshot")
    rows = list(recording.capture)
    flagged = [i for i, r in enumerate(rows) if r.snapshot]
    assert flagged and flagged[0] == 0
    write_files(tmp_path / "f", rows, [2, len(flagged) // 2, len(flagged) + 3])
    reference = tmp_path / "decode.jsonl"
    assert main(["decode", "--capture", str(golden / "capture.jsonl"), "-o", str(reference),
                 "--catalog", str(golden / "catalog.json"),
                 "--config", str(golden / "connector.properties"), "-q"]) == 0
    want = [without_run_fields(line) for line in reference.read_text().splitlines()]
    assert any((r["value"] or {}).get("payload", {}).get("op") == "r" for r in want)
    stream = decode_stream(read_capture_stream(spark, str(tmp_path / "f")),
                           EventConfig.from_properties(recording.properties),
                           catalog=recording.catalog, path=str(tmp_path / "o"),
                           checkpoint=str(tmp_path / "c"), lines=True)
    stream.start()
    assert stream.query is not None
    stream.query.processAllAvailable()
    stream.stop()
    got = [without_run_fields(line) for line in records_lines(tmp_path / "o", spark)]
    assert got == want


DEMO = Path(__file__).resolve().parents[2] / "examples"


def _stream_cli(tmp_path: Path, rows: list[CaptureRow],
                capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    tmp_path.mkdir()
    write_files(tmp_path / "in", rows, [len(rows) // 2])
    code = main(["spark", "stream", "--input", str(tmp_path / "in"),
                 "--catalog", str(DEMO / "demo-catalog.json"),
                 "--config", str(DEMO / "connector.properties"),
                 "--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "cp"),
                 "--trigger", "0.2", "--stop-when-idle", "20", "-q"])
    return code, capsys.readouterr().err.splitlines()


def test_spark_stream_failures_are_one_line_with_their_cause(
        spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """What a user sees when a micro-batch fails: one line, the library's own error (here a
    message cut inside its tuple) with where it happened, exit status 1; and an error that
    is not the library's (what the column-wise runs' pickle error was) with its class and
    message, not ``Return Message: Traceback (most recent call last):``."""
    import attrs  # noqa: PLC0415

    from pgcdc_events.cli.decode_cmd import load_config  # noqa: PLC0415
    from pgcdc_events.protocol.capture import iter_capture  # noqa: PLC0415
    from pgcdc_events.spark import stream as stream_module  # noqa: PLC0415
    from pgcdc_events.spark.decode import _Decode  # noqa: PLC0415
    from pgcdc_events.types.catalog import CatalogSnapshot  # noqa: PLC0415

    with open(DEMO / "demo-capture.jsonl", encoding="utf-8") as fh:
        rows = list(iter_capture(fh))
    at = next(i for i, r in enumerate(rows) if r.data[:1] == b"I")
    rows[at] = attrs.evolve(rows[at], data=rows[at].data[:7])  # cut inside its tuple
    # the library's own error for these rows, as decode_rows raises it
    config = load_config(str(DEMO / "connector.properties"), [])
    catalog = CatalogSnapshot.load(str(DEMO / "demo-catalog.json"))
    with pytest.raises(Exception) as raised:
        decode_rows(StreamState(), [(0, i, int(r.lsn), r.data) for i, r in enumerate(rows)],
                    _Decode(config.with_catalog(catalog), catalog, lambda: 0, "r"),
                    snapshot=[])
    cause = raised.value
    assert "pgcdc_events" in type(cause).__module__
    code, err = _stream_cli(tmp_path / "a", rows, capsys)
    assert (code, err) == (1, [
        f"pgcdc-events spark: error: the decoding query failed at micro-batch 0: "
        f"{type(cause).__name__}: {cause}"])

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise pickle.UnpicklingError("invalid load key, '\\xff'.")

    monkeypatch.setattr(stream_module, "plan_batch", broken)
    code, err = _stream_cli(tmp_path / "b", rows, capsys)
    assert (code, err) == (1, [
        "pgcdc-events spark: error: the decoding query failed at micro-batch 0: "
        "UnpicklingError: invalid load key, '\\xff'."])


@pytest.mark.parametrize("reader", [read_capture_stream, read_capture_files])
def test_a_file_name_without_a_sequence_is_named(spark: SparkSession, tmp_path: Path,
                                                 reader: Any) -> None:
    """A file the reader's glob takes (``capture-*.jsonl``) but whose name holds no
    sequence and LSN fails the query in one line naming it, in the same words on both
    paths, where Spark's ANSI cast of an empty sequence failed naming neither."""
    rows = list(RECORDING.capture)
    write_files(tmp_path / "f", rows, [5])
    first = sorted((tmp_path / "f").glob("capture-*.jsonl"))[0]
    first.rename(first.with_name("capture-12-XYZ.jsonl"))
    stream = decode_stream(reader(spark, str(tmp_path / "f")),
                           EventConfig.from_properties(RECORDING.properties),
                           catalog=RECORDING.catalog, path=str(tmp_path / "o"),
                           checkpoint=str(tmp_path / "c"))
    stream.start()
    assert stream.query is not None
    with pytest.raises(Exception) as failure:
        stream.query.processAllAvailable()
    stream.stop()
    line = next(x for x in str(failure.value).splitlines() if "micro-batch 0" in x)
    assert re.search(r"failed at micro-batch 0: \S+: (\[USER_RAISED_EXCEPTION\] )?"
                     r"capture-12-XYZ\.jsonl: not a capture file name \(capture-<10-digit "
                     r"sequence>-<16 hex digits of LSN>\.jsonl, as capture --rotate-every "
                     r"names them\): no segment", line), line
    assert not (tmp_path / "o" / "records").exists() or not any(
        (tmp_path / "o" / "records").iterdir())


@pytest.mark.parametrize("bad", ["head", "after-head"])
def test_a_bad_line_in_a_file_read_in_python_is_named(spark: SparkSession, tmp_path: Path,
                                                      bad: str) -> None:
    """read_capture_files' fast path: a line the protocol reader refuses fails the query
    in one line naming the file, the line and its position, and nothing of its
    micro-batch is applied, written or kept in the state: a line bad from its head, and a
    data message's line bad only after its type byte (a control job that read only the
    heads would pass it on: docs/spark.md, "Measured and not kept"). The counter: the
    files read in Python by the jobs that ended."""
    rows = list(RECORDING.capture)
    config = EventConfig.from_properties(RECORDING.properties)
    write_files(tmp_path / "f", rows, [4])
    second = sorted((tmp_path / "f").glob("capture-*.jsonl"))[1]
    lines = second.read_text().splitlines(keepends=True)
    # a data message's line (an Insert, Update or Delete), so that the plan is the same
    index = next(i for i, r in enumerate(rows[4:]) if r.data[:1] in (b"I", b"U", b"D"))
    lines[index] = ('{"lsn": "0/16B3748", "xid": null, "data": "4zz"}\n' if bad == "head"
                    else '{"lsn": "0/16B3748", "xid": null, "data": "49zz"}\n')  # not hex
    second.write_text("".join(lines))
    later = second.stat().st_mtime + 10  # after the first file: its own micro-batch
    os.utime(second, (later, later))
    stream = decode_stream(read_capture_files(spark, str(tmp_path / "f"),
                                              max_files_per_trigger=1), config,
                           catalog=RECORDING.catalog, path=str(tmp_path / "o"),
                           checkpoint=str(tmp_path / "c"))
    table = stream.tables[0]
    target = ParquetTarget(str(tmp_path / "t"))
    stream.apply(table, target)
    stream.start()
    assert stream.query is not None
    with pytest.raises(Exception, match=f"micro-batch 1: SparkDecodeError: position "
                                        f"{(1 << 32) + index}: {second.name}: "
                                        f"line {index + 1}: 'data' as a hex string"
                       ) as failure:
        stream.query.processAllAvailable()
    assert "\n" not in str(failure.value).split("SparkDecodeError: ", 1)[-1].split("\n")[0]
    assert len(stream.batches) == 1  # batch 0, the first file; nothing of batch 1:
    assert target.last_batch() == 0
    assert sorted(p.name for p in (tmp_path / "o" / "records").iterdir()) == [
        "part-000000000000.parquet"]
    assert sorted(os.listdir(tmp_path / "c" / "_decoder")) == ["state-000000000000.json"]
    assert stream.files_parsed.value == 1
    stream.stop()
