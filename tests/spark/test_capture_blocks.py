"""Spark batch on a capture whose initial snapshot is in COPY block lines (what `capture`
writes): ``read_capture`` gives each block's rows a row each, and ``spark decode`` gives per
table the records of ``pgcdc-events decode``."""

from __future__ import annotations

import contextlib
import glob
import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from pgcdc_events.cli import main
from pgcdc_events.events import EventConfig
from pgcdc_events.protocol import iter_capture
from pgcdc_events.protocol.capture import COPY_MARK
from pgcdc_events.spark import SparkDecodeError, read_capture
from pgcdc_events.spark.stream import decode_stream, read_capture_files, read_capture_stream
from pgcdc_events.testing.cluster import TempCluster
from pgcdc_events.types.catalog import CatalogSnapshot
from support.records import without_run_fields

CORPUS = (Path(__file__).resolve().parents[1] / "golden" / "events_snapshot" / "snapshot-initial"
          / "corpus.sql")


def _load_corpus(pg_cluster: TempCluster, pg_conn: Any) -> tuple[str, str]:
    """The snapshot corpus's tables and rows in the test database, all published as
    ``p``: the database's URL and the corpus's changes, to run after the snapshot."""
    pg_conn.run("CREATE EXTENSION IF NOT EXISTS hstore")
    before, changes = CORPUS.read_text().split("-- @changes", 1)
    for statement in before.split(";\n"):
        if any(line.strip() and not line.startswith("--") for line in statement.splitlines()):
            pg_conn.run(statement)
    pg_conn.run("CREATE PUBLICATION p FOR ALL TABLES")
    database = pg_conn.run("SELECT current_database()")[0][0]
    return (f"postgresql://{pg_cluster.user}@{pg_cluster.host}:{pg_cluster.port}/{database}",
            changes)


def test_block_lines_read_and_decode_as_decode_does(tmp_path: Path, spark: SparkSession,
                                                   pg_cluster: TempCluster, pg_conn: Any) -> None:
    dsn, changes = _load_corpus(pg_cluster, pg_conn)
    out = tmp_path / "out"
    assert main(["capture", "--dsn", dsn, "--slot", "s", "--publication", "p", "--output",
                 f"{out}/", "-q", "--create-slot", "--snapshot-mode", "initial_only"]) == 0
    for statement in changes.split(";\n"):  # then the stream's changes
        if statement.strip():
            pg_conn.run(statement)
    assert main(["capture", "--dsn", dsn, "--slot", "s", "--publication", "p", "--output",
                 f"{out}/", "-q"]) == 0
    capture = out / "capture.jsonl"
    assert COPY_MARK in capture.read_bytes()
    with open(capture, encoding="utf-8") as fh:
        rows = list(iter_capture(fh))
    frame = read_capture(spark, str(capture)).orderBy("position").collect()
    assert [(r.lsn, bytes(r.data), r.snapshot) for r in frame] == [
        (str(r.lsn), r.data, r.snapshot) for r in rows]
    # the file in parts of 1 KB: each task expands the block lines of its part, its rows
    # numbered from their line's place in the file
    before = spark.conf.get("spark.sql.files.maxPartitionBytes")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "1024")
    try:
        assert spark.read.text(str(capture)).rdd.getNumPartitions() > 2
        parted = read_capture(spark, str(capture)).orderBy("position").collect()
    finally:
        spark.conf.set("spark.sql.files.maxPartitionBytes", before)
    assert [(r.lsn, bytes(r.data), r.snapshot) for r in parted] == [
        (str(r.lsn), r.data, r.snapshot) for r in rows]
    assert len({r.position for r in parted}) == len(rows)
    catalog = tmp_path / "catalog.json"
    assert main(["catalog", "--dsn", dsn, "--output", str(catalog)]) == 0
    options = ["--catalog", str(catalog), "-q"]
    reference = tmp_path / "decode.jsonl"
    assert main(["decode", "--capture", str(capture), "-o", str(reference), *options]) == 0
    by_table: dict[str, list[dict[str, Any]]] = {}
    last = ""
    for line in reference.read_text().splitlines():
        record = without_run_fields(line)
        source = ((record["value"] or {}).get("payload") or {}).get("source")
        if record["value"] is None:
            by_table[last].append(record)
        elif source is not None:
            last = f"{source['schema']}.{source['table']}"
            by_table.setdefault(last, []).append(record)
    assert sum(r["value"] is not None and r["value"]["payload"]["op"] == "r"
               for rs in by_table.values() for r in rs) == 16
    spark_out = tmp_path / "spark"
    assert main(["spark", "decode", "--capture", str(capture), "--output", str(spark_out),
                 "--format", "json", *options]) == 0
    written = sorted(p.name for p in spark_out.iterdir())
    assert written == sorted(by_table)
    for table in written:
        lines = [line for part in sorted(glob.glob(str(spark_out / table / "part-*")))
                 for line in Path(part).read_text().splitlines()]
        assert [without_run_fields(line) for line in lines] == by_table[table], table


def test_rotating_files_with_block_lines_stream_as_decode_does(
        tmp_path: Path, spark: SparkSession, pg_cluster: TempCluster, pg_conn: Any) -> None:
    """``capture --rotate-size`` (the snapshot's block lines in the first file, the
    stream's changes in the next), streamed by ``decode_stream``: the records of
    ``pgcdc-events decode`` of the files one after the other, whole (but the processing
    time and run id)."""
    dsn, changes = _load_corpus(pg_cluster, pg_conn)
    files = tmp_path / "files"
    command = ["capture", "--dsn", dsn, "--slot", "s", "--publication", "p", "--output",
               f"{files}/", "-q", "--rotate-size", "0.000001"]
    assert main([*command, "--create-slot", "--snapshot-mode", "initial_only"]) == 0
    for statement in changes.split(";\n"):
        if statement.strip():
            pg_conn.run(statement)
    assert main(command) == 0
    names = sorted(p.name for p in files.glob("capture-*.jsonl"))
    assert len(names) >= 2 and COPY_MARK in (files / names[0]).read_bytes()
    whole = tmp_path / "whole.jsonl"
    whole.write_bytes(b"".join((files / name).read_bytes() for name in names))
    catalog = tmp_path / "catalog.json"
    assert main(["catalog", "--dsn", dsn, "--output", str(catalog)]) == 0
    reference = tmp_path / "decode.jsonl"
    assert main(["decode", "--capture", str(whole), "-o", str(reference), "--catalog",
                 str(catalog), "-q"]) == 0
    want = [without_run_fields(line) for line in reference.read_text().splitlines()]
    assert sum(r["value"] is not None and r["value"]["payload"]["op"] == "r"
               for r in want) == 16
    # the lines read in the JVM (read_capture_stream), and the files in the Python tasks
    # (read_capture_files: spark stream's path)
    for name, reader in (("lines", read_capture_stream), ("files", read_capture_files)):
        stream = decode_stream(reader(spark, str(files)),
                               EventConfig.from_properties({"topic.prefix": "pgcdc"}),
                               catalog=CatalogSnapshot.load(str(catalog)),
                               path=str(tmp_path / f"o-{name}"),
                               checkpoint=str(tmp_path / f"c-{name}"), lines=True)
        stream.start()
        assert stream.query is not None
        stream.query.processAllAvailable()
        stream.stop()
        assert stream.files_parsed.value == (len(names) if name == "files" else 0)
        df = spark.read.parquet(str(tmp_path / f"o-{name}" / "records"))
        got = [r["line"] for r in df.orderBy("position", "index").select("line").collect()]
        assert [without_run_fields(line) for line in got] == want, name


def _damaged(line: bytes) -> bytes:
    """A COPY block line whose second row has one value too many (a tab more): what no
    ``COPY TO`` writes, hand-made (PostgreSQL cannot produce it)."""
    obj = json.loads(line)
    text = bytes.fromhex(obj["copy"])
    rows = text.split(b"\n")
    rows[1] = rows[1] + b"\tone too many"
    obj["copy"] = b"\n".join(rows).hex()
    return json.dumps(obj).encode() + b"\n"


def test_a_hostile_block_line_in_a_stream_is_named(
        tmp_path: Path, spark: SparkSession, pg_cluster: TempCluster, pg_conn: Any,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A rotating file whose COPY block line holds a row that is not COPY text: ``spark
    stream`` fails in one line naming the file, the line, its position and the row, as
    ``decode`` names them, where it gave Spark's generic message."""
    dsn, _ = _load_corpus(pg_cluster, pg_conn)
    files = tmp_path / "files"
    assert main(["capture", "--dsn", dsn, "--slot", "s", "--publication", "p", "--output",
                 f"{files}/", "-q", "--rotate-size", "0.000001", "--create-slot",
                 "--snapshot-mode", "initial_only"]) == 0
    names = sorted(p.name for p in files.glob("capture-*.jsonl"))
    first = files / names[0]
    lines = first.read_bytes().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if COPY_MARK in line
              and len(bytes.fromhex(json.loads(line)["copy"]).split(b"\n")) > 2)
    lines[at] = _damaged(lines[at])
    first.write_bytes(b"".join(lines))
    catalog = tmp_path / "catalog.json"
    assert main(["catalog", "--dsn", dsn, "--output", str(catalog)]) == 0
    assert main(["decode", "--capture", str(first), "-o", str(tmp_path / "d.jsonl"),
                 "--catalog", str(catalog), "-q"]) == 1
    said = capsys.readouterr().err.strip()
    assert f"line {at + 1}: " in said and "row 2 has" in said, said
    reason = said[said.index(f"line {at + 1}: "):]
    code = main(["spark", "stream", "--input", str(files), "--catalog", str(catalog),
                 "--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "cp"),
                 "--trigger", "0.2", "--stop-when-idle", "20", "-q"])
    err = capsys.readouterr().err.splitlines()
    assert code == 1
    assert len(err) == 1 and "Traceback" not in err[0], err
    segment = int(names[0].split("-")[1])
    assert f"position {(segment << 32) + at}: {names[0]}: {reason}" in err[0], (err, reason)
    with contextlib.suppress(Exception):
        spark.streams.resetTerminated()


def test_a_hostile_block_line_past_the_checked_lines_is_named(
        tmp_path: Path, spark: SparkSession, pg_cluster: TempCluster, pg_conn: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A block line past the lines ``check_capture`` reads before Spark starts (one here)
    is expanded in a task: the job fails naming the file, the line and the row, as the
    driver's check names them."""
    import pgcdc_events.spark.capture as spark_capture  # noqa: PLC0415

    dsn, _ = _load_corpus(pg_cluster, pg_conn)
    out = tmp_path / "out"
    assert main(["capture", "--dsn", dsn, "--slot", "s", "--publication", "p", "--output",
                 f"{out}/", "-q", "--create-slot", "--snapshot-mode", "initial_only"]) == 0
    lines = (out / "capture.jsonl").read_bytes().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if COPY_MARK in line
              and len(bytes.fromhex(json.loads(line)["copy"]).split(b"\n")) > 2)
    assert at > 0
    lines[at] = _damaged(lines[at])
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"".join(lines))
    with pytest.raises(SparkDecodeError, match=f"line {at + 1}: .*row 2 has 3 values"):
        spark_capture.check_capture(str(bad))
    monkeypatch.setattr(spark_capture, "CHECKED_LINES", 1)
    frame = read_capture(spark, str(bad))
    with pytest.raises(Exception, match=f"{bad}: line {at + 1}: .*row 2 has 3 values"):
        frame.collect()
