"""Captures holding incremental snapshot chunk lines, decoded by Spark.

One real capture, made by ``pgcdc-events capture`` on a real PostgreSQL: a signal asks for
two tables while a workload updates, inserts and deletes rows of one of them and of a
third table; the capture reads the chunks as it streams and writes them as chunk lines,
then streams more of the workload. Spark (``decode_capture``, ``pgcdc-events spark
decode``, a Parquet copy) gives the records ``pgcdc-events decode`` gives for it, whole,
with the capture cut into several chunks decoded in parallel around the window's span;
``decode_stream`` gives them too, the capture as rotating files cut inside windows (one
a micro-batch), and ``pgcdc-events spark stream`` keeps Delta tables of them.
"""

from __future__ import annotations

import glob
import io
import itertools
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession

from pgcdc_events.adapters.rotating import capture_file_name
from pgcdc_events.cli import main
from pgcdc_events.cli._parallel import DecodeJob, run_decode
from pgcdc_events.cli.decode_cmd import load_config
from pgcdc_events.events import EventConfig
from pgcdc_events.protocol.capture import read_chunk_line
from pgcdc_events.protocol.lsn import Lsn
from pgcdc_events.spark import decode_capture, read_capture
from pgcdc_events.testing.cluster import TempCluster
from pgcdc_events.types.catalog import CatalogSnapshot
from support.capture_files import stamp
from support.databases import database_url, fresh_database
from support.signals import PROPS, SIGNAL_DDL, MixedWorkload, capture
from support.spark_records import CLOCK_NS, RUN_ID, first_difference, last_rows_per_key

#: The connector properties of every decoding here (the capture's, less its chunk size).
OVERRIDES = [p for p in PROPS if p != "-c"]
CHUNK = ("-c", "incremental.snapshot.chunk.size=20")


@pytest.fixture(scope="module")
def recorded(pg_cluster: TempCluster, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[Path]:
    """The capture file (see the module docstring), in a database of its own."""
    with fresh_database(pg_cluster, "sparkchunks") as (conn, name):
        yield _record(conn, database_url(pg_cluster, name),
                      tmp_path_factory.mktemp("chunks") / "cap.jsonl")


def _record(conn: Any, url: str, cap: Path) -> Path:
    conn.run(SIGNAL_DDL)
    conn.run("CREATE TABLE w (id int PRIMARY KEY, v int, s text)")
    conn.run("INSERT INTO w SELECT g, g, 's' || g FROM generate_series(1, 300) g")
    # read by the snapshot, never changed: no Relation message of it in the capture
    conn.run("CREATE TABLE q (id int PRIMARY KEY, name text, at timestamptz)")
    conn.run("INSERT INTO q SELECT g, 'n' || g, timestamptz '2024-01-01' + g * interval '1h' "
             "FROM generate_series(1, 45) g")
    conn.run("CREATE TABLE other (id int PRIMARY KEY, n int)")
    assert capture(url, cap, "--create-slot", "--create-publication", *CHUNK) == 0
    # the stream before the snapshot: transactions the parallel chunks before the span hold
    for n in range(40):
        conn.run("INSERT INTO other VALUES (:k, :n)", k=100 + n, n=n)
    with MixedWorkload(url, keys=330, at_least=40,
                       also="INSERT INTO other VALUES (:n % 17, :n % 17) ON CONFLICT (id) "
                            "DO UPDATE SET n = other.n + 1"):
        time.sleep(0.05)
        conn.run("INSERT INTO debezium_signal VALUES ('ad-hoc-s', 'execute-snapshot', :d)",
                 d=json.dumps({"data-collections": ["public.w", "public.q"]}))
        assert capture(url, cap, *CHUNK) == 0
    # the stream after the snapshot: transactions the parallel chunks after the span hold
    for n in range(60):
        conn.run("UPDATE other SET n = n + 100 WHERE id = :k", k=n % 17)
    assert capture(url, cap, *CHUNK) == 0
    checkpoint = json.loads(Path(f"{cap}.checkpoint.json").read_text())
    assert "incremental" not in checkpoint  # the snapshot finished within the capture
    assert main(["catalog", "--dsn", url, "-o", str(cap.parent / "catalog.json")]) == 0
    return cap


def _reference(cap: Path, config: EventConfig, catalog: CatalogSnapshot | None = None
               ) -> list[str]:
    """The records ``pgcdc-events decode`` writes (its own code, one decoder), with the
    processing time and run id of the Spark side (and ``--catalog``'s ``catalog``)."""
    out = io.BytesIO()
    if catalog is not None:
        config = config.with_catalog(catalog)
    job = DecodeJob(config, catalog, None, None, 64 << 20, RUN_ID, clock=lambda: CLOCK_NS)
    with open(cap, "rb") as src:
        run_decode(job, src, out, workers=1)
    return out.getvalue().decode().splitlines()


def _chunk_positions(cap: Path) -> list[int]:
    return [i for i, line in enumerate(cap.read_text().splitlines())
            if read_chunk_line(line) is not None]


@pytest.mark.parametrize("stored", ["jsonl", "parquet"])
def test_decode_capture_gives_decode_records(spark: SparkSession, recorded: Path,
                                             tmp_path: Path, stored: str) -> None:
    """Every record, whole and in order, equals ``decode``'s; the capture is cut into
    chunks decoded in parallel before and after the one holding the windows."""
    config = load_config(None, OVERRIDES)
    want = _reference(recorded, config)
    ops = {json.loads(x)["value"]["payload"]["op"] for x in want
           if json.loads(x)["topic"] == "pgcdc.public.q"}
    assert ops == {"r"}  # q's rows came only from the chunk lines
    assert len(_chunk_positions(recorded)) > 10
    frame = read_capture(spark, str(recorded))
    if stored == "parquet":  # the DataFrame's columns as a Parquet dataset, read back
        frame.write.parquet(str(tmp_path / "cap.parquet"))
        frame = read_capture(spark, str(tmp_path / "cap.parquet"))
    decoded = decode_capture(frame, config, chunk_messages=40, clock=lambda: CLOCK_NS,
                             run_id=RUN_ID, lines=True, tombstones=True)
    try:
        got = [r["line"] for r in decoded.records.orderBy("position", "index")
               .select("line").collect()]
        problem = first_difference(got, want)
        assert not problem, problem
        assert decoded.source is not None
        window = decoded.source.make.window
        assert window is not None and 0 < window < decoded.plan.chunks - 1, \
            (window, decoded.plan.chunks)
        # each table's events, the snapshotted table that no change touched too
        assert set(decoded.tables) >= {"public.w", "public.q", "public.other"}
        for table in ("public.w", "public.q"):
            lines = [r["value"] for r in decoded.json_lines(table).collect()]
            assert lines == [x for x in want if json.loads(x)["topic"] == f"pgcdc.{table}"]
        q = decoded.table("public.q").orderBy("_position").collect()
        assert [r["after"]["id"] for r in q] == list(range(1, 46))
        assert {r["source"]["snapshot"] for r in q} == {"incremental"}
    finally:
        decoded.unpersist()


def _normalized(line: str) -> dict[str, Any]:
    """A record without what is processing time or run identity by definition (an ``r``
    event's ``source.ts_ms`` is the time it was read)."""
    record = json.loads(line)
    payload = (record["value"] or {}).get("payload") or {}
    for name in ("ts_ms", "ts_us", "ts_ns"):
        payload.pop(name, None)
        if payload.get("op") == "r":
            payload["source"].pop(name, None)
    record["headers"].pop("__debezium.context.runId", None)
    return record  # type: ignore[no-any-return]


def test_spark_decode_cli_gives_decode_records(spark: SparkSession, recorded: Path,
                                               tmp_path: Path) -> None:
    """What a user runs: ``pgcdc-events spark decode`` writes each table's records as
    ``pgcdc-events decode`` writes them."""
    reference = tmp_path / "decode.jsonl"
    assert main(["decode", "--capture", str(recorded), "-o", str(reference), "-q",
                 *PROPS]) == 0
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for line in reference.read_text().splitlines():
        record = _normalized(line)
        by_topic.setdefault(record["topic"], []).append(record)
    out = tmp_path / "spark"
    assert main(["spark", "decode", "--capture", str(recorded), "--output", str(out),
                 "--format", "json", "-q", *PROPS]) == 0
    written = sorted(p.name for p in out.iterdir())
    assert {"public.w", "public.q", "public.other"} <= set(written)
    for table in written:
        lines = [line for part in sorted(glob.glob(str(out / table / "part-*")))
                 for line in Path(part).read_text().splitlines()]
        assert [_normalized(line) for line in lines] == by_topic[f"pgcdc.{table}"], table


def _rotating(cap: Path, directory: Path, files: int) -> list[str]:
    """The capture's lines as rotating capture files (as ``capture --rotate-every`` names
    them): one, or cut at ``files`` evenly spaced lines (inside transactions) and, for two
    windows, right after the chunk line and every three lines to the window's close (its
    watermarks in other files, commits in the window at a file's end). Returns the file
    names."""
    lines = cap.read_text().splitlines(keepends=True)
    directory.mkdir()
    cuts = {0, len(lines)}
    if files > 1:
        chunked = _chunk_positions(cap)
        # after the chunk lines of two windows, and every three lines to their closes
        cuts |= {p + k for p in chunked[1:3] for k in range(1, 20, 3)}
        cuts |= {len(lines) * k // files for k in range(1, files)}
    names = []
    for seq, (lo, hi) in enumerate(itertools.pairwise(sorted(cuts))):
        part = lines[lo:hi]
        name = capture_file_name(seq, int(Lsn.parse(json.loads(part[-1])["lsn"])))
        (directory / name).write_text("".join(part))
        stamp(directory / name)  # in order, for Spark's file source
        names.append(name)
    return names


@pytest.mark.parametrize("files", [1, 5])
def test_decode_stream_gives_decode_records(spark: SparkSession, recorded: Path,
                                            tmp_path: Path, files: int) -> None:
    """``decode_stream`` of the capture as rotating files, one a micro-batch: every record,
    whole and in order, equals ``decode``'s. With more files the windows span micro-batches
    (a batch decodes up to the last cut where no chunk is in flight; the rest, chunk lines
    with their text, waits in the state), with one, every window is in one batch."""
    from pgcdc_events.spark.stream import decode_stream, read_capture_stream  # noqa: PLC0415

    config = load_config(None, OVERRIDES)
    catalog = CatalogSnapshot.load(str(recorded.parent / "catalog.json"))
    want = _reference(recorded, config, catalog)
    names = _rotating(recorded, tmp_path / "in", files)
    assert (len(names) == 1) == (files == 1)
    stream = decode_stream(
        read_capture_stream(spark, str(tmp_path / "in"), max_files_per_trigger=1), config,
        catalog=catalog, path=str(tmp_path / "out"), checkpoint=str(tmp_path / "cp"), lines=True,
        clock=lambda: CLOCK_NS, run_id=RUN_ID, chunk_messages=20)
    stream.start()
    assert stream.query is not None
    try:
        stream.query.processAllAvailable()
    finally:
        stream.stop()
    assert len([b for b in stream.batches if not b.skipped]) >= len(names)
    got = [r["line"] for r in spark.read.parquet(str(tmp_path / "out" / "records"))
           .orderBy("position", "index").select("line").collect()]
    problem = first_difference(got, want)
    assert not problem, problem
    if files > 1:  # a window was held: some batch ended before the batch's last commit
        assert any(b.pending for b in stream.batches)


def test_a_malformed_chunk_line_is_named_before_spark_starts(recorded: Path,
                                                             tmp_path: Path) -> None:
    """``check_capture`` (what ``spark decode`` runs before the JVM) takes chunk lines and
    names one that does not parse, by line."""
    from pgcdc_events.spark import SparkDecodeError  # noqa: PLC0415
    from pgcdc_events.spark.capture import check_capture  # noqa: PLC0415

    assert check_capture(str(recorded)) == "jsonl"
    lines = recorded.read_text().splitlines(keepends=True)
    first = _chunk_positions(recorded)[0]
    bad = json.loads(lines[first])
    del bad["chunk"]["rows"]
    lines[first] = json.dumps(bad) + "\n"
    broken = tmp_path / "broken.jsonl"
    broken.write_text("".join(lines))
    with pytest.raises(SparkDecodeError, match=f"line {first + 1}: an incremental snapshot "
                       "chunk line with its id, table and rows"):
        check_capture(str(broken))


def test_spark_stream_keeps_delta_tables_of_the_snapshot(spark: SparkSession, recorded: Path,
                                                        tmp_path: Path) -> None:
    """What a user runs: ``pgcdc-events spark stream`` of the capture as rotating files,
    a file a micro-batch, into Delta tables: each snapshotted table holds the rows the
    last event per key of ``decode``'s records gives (``q``, read only by the snapshot:
    every row; ``w``: the rows the workload left, read or changed)."""
    deltalake = pytest.importorskip("deltalake")
    config = load_config(None, OVERRIDES)
    catalog = CatalogSnapshot.load(str(recorded.parent / "catalog.json"))
    want = _reference(recorded, config, catalog)
    _rotating(recorded, tmp_path / "in", 5)
    properties = tmp_path / "connector.properties"
    properties.write_text("signal.data.collection=public.debezium_signal\n")
    assert main(["spark", "stream", "--input", str(tmp_path / "in"), "--config",
                 str(properties), "--catalog", str(recorded.parent / "catalog.json"),
                 "--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "cp"),
                 "--max-files-per-trigger", "1", "--trigger", "0.2",
                 "--stop-when-idle", "5", "-q"]) == 0
    for table, columns in (("w", ("id", "v", "s")), ("q", ("id", "name"))):
        expected = last_rows_per_key(want, f"pgcdc.public.{table}", columns)
        delta = deltalake.DeltaTable(str(tmp_path / "out" / "tables" / f"public.{table}"))
        got = sorted(tuple(r[c] for c in columns) for r in delta.to_pyarrow_table().to_pylist())
        assert got == expected, table
        if table == "q":
            assert [r[0] for r in got] == list(range(1, 46))
