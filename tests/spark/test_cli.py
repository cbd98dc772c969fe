"""``pgcdc-events spark decode``: JsonConverter records identical to ``pgcdc-events decode``,
Parquet events and flattened rows, one dataset per table."""

from __future__ import annotations

import glob
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from pgcdc_events.cli import main
from pgcdc_events.events import EventConfig
from pgcdc_events.protocol import iter_capture
from pgcdc_events.spark import decode_capture, read_capture, write_capture_parquet
from pgcdc_events.spark._session import nullable_type
from pgcdc_events.types.catalog import CatalogSnapshot
from support.records import without_run_fields

ROOT = Path(__file__).resolve().parents[2]
CAPTURE = str(ROOT / "examples" / "demo-capture.jsonl")
CATALOG = str(ROOT / "examples" / "demo-catalog.json")


@pytest.mark.parametrize("stored", ["jsonl", "parquet"])
def test_json_output_equals_decode(tmp_path: Path, spark: SparkSession, stored: str) -> None:
    """The same records from the JSON Lines capture (shuffled into chunks) and from it as
    Parquet (read by the tasks themselves, by position)."""
    capture = CAPTURE
    if stored == "parquet":
        capture = str(tmp_path / "capture.parquet")
        with open(CAPTURE, encoding="utf-8") as fh:
            write_capture_parquet(iter_capture(fh), capture, rows_per_group=4)
    reference = tmp_path / "decode.jsonl"
    assert main(["decode", "--capture", CAPTURE, "--catalog", CATALOG, "-o", str(reference),
                 "-q"]) == 0
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for line in reference.read_text().splitlines():
        record = without_run_fields(line)
        by_topic.setdefault(record["topic"], []).append(record)
    out = tmp_path / "spark"
    assert main(["spark", "decode", "--capture", capture, "--catalog", CATALOG,
                 "--output", str(out), "--format", "json", "-q"]) == 0
    written = sorted(p.name for p in out.iterdir())
    assert written == ["public.customers", "public.orders"]
    for table in written:
        lines = [line for part in sorted(glob.glob(str(out / table / "part-*")))
                 for line in Path(part).read_text().splitlines()]
        ours = [without_run_fields(line) for line in lines]
        assert ours == by_topic[f"pgcdc.{table}"], table


def test_parquet_events_and_flattened_rows(tmp_path: Path, spark: SparkSession) -> None:
    events = tmp_path / "events"
    assert main(["spark", "decode", "--capture", CAPTURE, "--catalog", CATALOG,
                 "--output", str(events), "-q"]) == 0
    orders = spark.read.parquet(str(events / "public.orders"))
    assert orders.columns[:4] == ["key", "before", "after", "source"]
    assert sorted(r["op"] for r in orders.select("op").collect()) == ["c", "c", "d", "u"]
    # each table's dataset holds its events DataFrame's rows (but the processing time)
    config = EventConfig.from_properties({"topic.prefix": "pgcdc"})
    decoded = decode_capture(read_capture(spark, CAPTURE), config,
                             catalog=CatalogSnapshot.load(CATALOG))
    for table in decoded.tables:
        written = spark.read.parquet(str(events / table)).drop("ts_ms", "ts_us", "ts_ns")
        direct = decoded.table(table).drop("ts_ms", "ts_us", "ts_ns")
        # Spark reads every Parquet column as nullable
        assert nullable_type(written.schema) == nullable_type(direct.schema), table
        assert sorted(written.collect(), key=lambda r: r["_position"]) == sorted(
            direct.collect(), key=lambda r: r["_position"]), table
    decoded.unpersist()
    flat = tmp_path / "flat"
    assert main(["spark", "decode", "--capture", CAPTURE, "--catalog", CATALOG,
                 "--output", str(flat), "--flatten", "--tables", "public.orders", "-q"]) == 0
    rows = spark.read.parquet(str(flat / "public.orders")).collect()
    assert {r["__op"] for r in rows} == {"c", "u", "d"}
    assert sorted(r["__deleted"] for r in rows) == ["false", "false", "false", "true"]
    assert list(rows[0].asDict())[:3] == ["id", "customer_id", "status"]


def assert_private(path: Path) -> None:
    """Every file under ``path`` is 0600 and every directory 0700 (as ``capture`` writes)."""
    modes = {str(p.relative_to(path)): stat.S_IMODE(p.lstat().st_mode)
             for p in [path, *path.rglob("*")]}
    assert len(modes) > 3
    wrong = {name: oct(mode) for name, mode in modes.items()
             if mode != (0o700 if (path / name).is_dir() else 0o600)}
    assert not wrong, wrong


def test_spark_decode_output_is_private(tmp_path: Path, spark: SparkSession) -> None:
    """Row data is 0600 in 0700 directories, also from a session started before (which
    wrote with its own umask): events, flattened rows, JSON records."""
    for name, extra in (("events", []), ("flat", ["--flatten"]),
                        ("json", ["--format", "json"])):
        out = tmp_path / name
        assert main(["spark", "decode", "--capture", CAPTURE, "--catalog", CATALOG,
                     "--output", str(out), "-q", *extra]) == 0
        assert_private(out)


class _StartedError(Exception):
    pass


@pytest.mark.parametrize("command", ["decode", "stream"])
@pytest.mark.parametrize("ui", [False, True])
def test_the_session_has_no_open_web_ui(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        command: str, ui: bool) -> None:
    """The session each command starts: no web UI (it has no authentication and can kill
    jobs) unless --spark-ui, which binds it to 127.0.0.1 with its kill links off; Hadoop's
    writers create private files."""
    import pgcdc_events.spark  # noqa: PLC0415

    seen: dict[str, Any] = {}

    def session(master: str | None, app: str, **kwargs: Any) -> Any:
        seen.update(kwargs["conf"], env=os.environ.get("SPARK_LOCAL_IP"))
        raise _StartedError

    monkeypatch.setattr(pgcdc_events.spark, "session", session)
    monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)
    args = (["decode", "--capture", CAPTURE, "--output", str(tmp_path / "o")]
            if command == "decode" else
            ["stream", "--input", str(tmp_path), "--output", str(tmp_path / "o"),
             "--checkpoint", str(tmp_path / "c")])
    try:
        with pytest.raises(_StartedError):
            main(["spark", *args, "--catalog", CATALOG, "-q", *(["--spark-ui"] if ui else [])])
    finally:
        os.environ.pop("SPARK_LOCAL_IP", None)
    assert seen["spark.ui.enabled"] == ("true" if ui else "false")
    assert seen["spark.ui.killEnabled"] == "false"
    assert seen["env"] == ("127.0.0.1" if ui else None)
    assert seen["spark.hadoop.fs.permissions.umask-mode"] == "077"
    if ui:  # a cluster's driver stays reachable: Spark's own binding
        seen.clear()
        with pytest.raises(_StartedError):
            main(["spark", *args, "--catalog", CATALOG, "-q", "--spark-ui",
                  "--master", "spark://cluster:7077"])
        assert seen["spark.ui.enabled"] == "true" and seen["env"] is None


def test_stream_target_password_from_a_dsn_file_and_the_password_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """--target-dsn-file and PGPASSFILE, as capture's --dsn-file: no secret on the command
    line; an unreadable file is one line naming the option, before Spark starts."""
    import pgcdc_events.spark  # noqa: PLC0415
    from pgcdc_events.cli import spark_stream_cmd  # noqa: PLC0415

    passfile = tmp_path / "pgpass"
    passfile.write_text("db.example:5433:shop:app:s3cret\n")
    passfile.chmod(0o600)
    dsn = tmp_path / "target.dsn"
    dsn.write_text("host=db.example port=5433 dbname=shop user=app\n")
    monkeypatch.setenv("PGPASSFILE", str(passfile))
    monkeypatch.delenv("PGPASSWORD", raising=False)
    seen: list[Any] = []
    original = spark_stream_cmd.target_settings
    monkeypatch.setattr(spark_stream_cmd, "target_settings",
                        lambda args: seen.append(original(args)) or seen[-1])

    def session(*args: Any, **kwargs: Any) -> Any:
        raise _StartedError

    monkeypatch.setattr(pgcdc_events.spark, "session", session)
    argv = ["spark", "stream", "--input", str(tmp_path), "--output", str(tmp_path / "o"),
            "--checkpoint", str(tmp_path / "c"), "--catalog", CATALOG, "-q",
            "--target-dsn-file", str(dsn)]
    with pytest.raises(_StartedError):
        main(argv)
    (settings,) = seen
    assert (settings.host, settings.port, settings.dbname, settings.user) == (
        "db.example", 5433, "shop", "app")
    assert settings.password == "s3cret" and str(passfile) in settings.password_source
    assert not any("s3cret" in a for a in argv)
    assert main([*argv[:-1], str(tmp_path / "missing.dsn")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--target-dsn-file" in err[0] and "missing.dsn" in err[0], err


def test_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["spark", "decode", "--capture", str(tmp_path / "missing.jsonl"),
                 "--output", str(tmp_path / "out"), "-q"]) == 1
    assert "no capture at" in capsys.readouterr().err


NOT_CAPTURES = {
    "csv": ("id,name\n1,a\n2,b\n", "line 1: not valid JSON"),
    "empty": ("", "holds no messages"),
    "blank": ("\n\n  \n", "holds no messages"),
    "garbage": ('{"lsn": "0/1", "xid": 1, "data": "42"}\nnot json at all\n', "line 2"),
    "no data": ('{"lsn": "0/1", "xid": 1}\n', "line 1"),
    "binary": ("\x00\xff\xfe garbage", "not a capture"),
}


@pytest.mark.parametrize("case", sorted(NOT_CAPTURES))
def test_input_that_is_not_a_capture(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     case: str) -> None:
    """Refused before the JVM starts: exit status 1, one line naming the file."""
    text, reason = NOT_CAPTURES[case]
    path = tmp_path / "input.jsonl"
    path.write_bytes(text.encode("latin-1"))
    assert main(["spark", "decode", "--capture", str(path), "--output",
                 str(tmp_path / "out"), "-q"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(path) in err[0] and reason in err[0], err
    assert not (tmp_path / "out").exists()


def test_read_capture_refuses_what_is_not_a_capture(tmp_path: Path, spark: SparkSession) -> None:
    from pgcdc_events.spark import SparkDecodeError, read_capture  # noqa: PLC0415

    csv = tmp_path / "table.csv"
    csv.write_text("id,name\n1,a\n")
    with pytest.raises(SparkDecodeError, match="not a capture"):
        read_capture(spark, str(csv))
    parquet = tmp_path / "other.parquet"
    spark.createDataFrame([(1, "a")], "id long, name string").write.parquet(str(parquet))
    with pytest.raises(SparkDecodeError, match="no column 'lsn', 'data', 'position'"):
        read_capture(spark, str(parquet))


def _start_cli(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "pgcdc_events.cli", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYSPARK_PYTHON": sys.executable})


def _finish(proc: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    try:
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_quiet_prints_nothing_and_errors_are_one_line(tmp_path: Path) -> None:
    """In a process of its own (a JVM of its own): -q silences Spark's log lines and
    progress bars; a message the decoder refuses is one line, not a Java stack trace.
    (The two commands run side by side: each JVM's start-up is most of its time; the
    other outputs' privacy is test_spark_decode_output_is_private's.)"""
    lines = Path(CAPTURE).read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if '"data": "49' in line)  # an Insert
    bad = json.loads(lines[at])
    bad["data"] = bad["data"][:14]  # cut inside its tuple
    lines[at] = json.dumps(bad)
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join(lines) + "\n")
    started = [
        _start_cli("spark", "decode", "--capture", CAPTURE, "--catalog", CATALOG,
                   "--output", str(tmp_path / "out"), "-q", "--master", "local[1]"),
        _start_cli("spark", "decode", "--capture", str(broken), "--catalog", CATALOG,
                   "--output", str(tmp_path / "out2"), "-q", "--master", "local[1]")]
    ok, failed = (_finish(proc) for proc in started)
    assert ok.returncode == 0, ok.stderr
    assert ok.stderr == "" and ok.stdout == ""
    assert_private(tmp_path / "out")
    assert failed.returncode == 1
    err = failed.stderr.strip().splitlines()
    assert len(err) == 1, failed.stderr[:3000]
    assert f"position {at}" in err[0] and "ProtocolError" in err[0], err[0]


GOLDEN_SNAPSHOT = (Path(__file__).resolve().parents[1] / "golden" / "events_snapshot"
                   / "snapshot-initial" / "capture.jsonl")


def test_a_capture_with_a_snapshot_decodes_as_decode_does(tmp_path: Path,
                                                          spark: SparkSession) -> None:
    """A capture that starts with an initial snapshot (what `capture` writes by default):
    its rows are read (``r``) events, first, then the stream's: per table, the records of
    `pgcdc-events decode`, whole (but the processing time and run id)."""
    golden = GOLDEN_SNAPSHOT.parent
    options = ["--catalog", str(golden / "catalog.json"), "--config",
               str(golden / "connector.properties"), "-q"]
    reference = tmp_path / "decode.jsonl"
    assert main(["decode", "--capture", str(GOLDEN_SNAPSHOT), "-o", str(reference),
                 *options]) == 0
    by_table: dict[str, list[dict[str, Any]]] = {}
    last = ""
    for line in reference.read_text().splitlines():
        record = without_run_fields(line)
        payload = (record["value"] or {}).get("payload") or {}
        source = payload.get("source") if isinstance(payload, dict) else None
        if record["value"] is None:  # a tombstone follows its delete
            by_table[last].append(record)
        elif source is not None:
            last = f"{source['schema']}.{source['table']}"
            by_table.setdefault(last, []).append(record)
    assert any(r["value"]["payload"]["op"] == "r" for rs in by_table.values() for r in rs)
    out = tmp_path / "spark"
    assert main(["spark", "decode", "--capture", str(GOLDEN_SNAPSHOT), "--output", str(out),
                 "--format", "json", *options]) == 0
    written = sorted(p.name for p in out.iterdir())
    assert written == sorted(by_table)
    for table in written:
        lines = [line for part in sorted(glob.glob(str(out / table / "part-*")))
                 for line in Path(part).read_text().splitlines()]
        assert [without_run_fields(line) for line in lines] == by_table[table], table


def test_stream_refuses_a_checkpoint_of_one_query_per_table(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
        ) -> None:
    """A checkpoint written when ``spark stream`` ran one query per table (its ``tables/``):
    refused in one line before Spark starts (its tables' queries may be behind the decoding
    one, whose batches the one query would not apply again)."""
    import pgcdc_events.spark  # noqa: PLC0415

    def session(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("Spark started")

    monkeypatch.setattr(pgcdc_events.spark, "session", session)
    (tmp_path / "c" / "tables" / "public.orders").mkdir(parents=True)
    assert main(["spark", "stream", "--input", str(tmp_path), "--output", str(tmp_path / "o"),
                 "--checkpoint", str(tmp_path / "c"), "--catalog", CATALOG, "-q"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "one query per table" in err[0] and str(tmp_path / "c") in err[0]
