"""``pgcdc-events spark stream`` keeps Delta Lake tables (its default target): each table of
a real capture (golden recording, truncates and key changes) delivered in rotating files is
a Delta table equal to the batch layer's ``latest_state``, one commit per micro-batch under
the query's application transaction, private files, readable by ``deltalake`` and DuckDB;
with ``--stored-as-scd-type 2`` and ``--track-history-except-column-list`` the table is the
sequence of states of the tracked columns; the AUTO CDC options are checked before Spark
starts, one line per mistake."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("deltalake")

import deltalake
from pyspark.sql import SparkSession

from pgcdc_events.cli import main
from pgcdc_events.events import EventConfig
from pgcdc_events.protocol import CaptureRow, iter_capture
from pgcdc_events.spark import decode_capture
from pgcdc_events.spark._session import to_arrow_table
from pgcdc_events.spark.capture import capture_dataframe
from pgcdc_events.spark.state import latest_state
from support.capture_files import write_files
from support.delta_history import duckdb_with_delta, expected_history, history, table_rows
from support.golden import recordings

RECORDING = next(r for r in recordings("events") if r.mode == "events-txmeta-truncate-notombstones")
DEMO = Path(__file__).resolve().parents[2] / "examples"


def _stream(tmp: Path, capture: Path | None, *options: str, rows: list[CaptureRow] | None = None,
            catalog: str | None = None, config: str | None = None) -> int:
    return main(["spark", "stream", "--input", str(capture or tmp / "in"),
                 "--catalog", catalog or str(DEMO / "demo-catalog.json"),
                 "--config", config or str(DEMO / "connector.properties"),
                 "--output", str(tmp / "out"), "--checkpoint", str(tmp / "cp"),
                 "--trigger", "0.2", "--max-files-per-trigger", "1", "--stop-when-idle", "4",
                 "-q", *options])


@pytest.fixture(scope="module")
def scd1(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The recording streamed in three files by the command with its default target; the
    batch layer's ``latest_state`` of each keyed table."""
    tmp = tmp_path_factory.mktemp("scd1")
    rows = list(RECORDING.capture)
    write_files(tmp / "in", rows, [len(rows) // 3, 2 * len(rows) // 3])
    catalog = tmp / "catalog.json"
    RECORDING.catalog.save(str(catalog))
    props = tmp / "c.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in RECORDING.properties.items()))
    assert _stream(tmp, None, catalog=str(catalog), config=str(props)) == 0
    batch = decode_capture(capture_dataframe(spark, rows),
                           EventConfig.from_properties(RECORDING.properties),
                           catalog=RECORDING.catalog)
    want = {t: to_arrow_table(latest_state(batch.table(t))) for t in batch.tables
            if "key" in batch.table(t).columns}
    batch.unpersist()
    return {"tmp": tmp, "want": want}


def test_each_table_is_a_delta_table_equal_to_the_latest_state(scd1: dict[str, Any]) -> None:
    """Every keyed table, those whose first change comes in a later file too (the one
    query applies each table from the batch its first change is in)."""
    tables = scd1["tmp"] / "out" / "tables"
    assert sorted(p.name for p in tables.iterdir()) == sorted(scd1["want"])
    for name, want in scd1["want"].items():
        table = deltalake.DeltaTable(str(tables / name))
        assert table_rows(table.to_pyarrow_table()) == table_rows(want), name
    assert len(scd1["want"]) >= 2
    first = {name: _first_batch(tables / name) for name in scd1["want"]}
    assert min(first.values()) == 0 and max(first.values()) >= 1, first


def test_no_records_file_unless_asked(scd1: dict[str, Any]) -> None:
    """The targets need no records: without ``--records`` none is written (test_stream's
    ``test_cli_stream`` asks for them)."""
    assert sorted(p.name for p in (scd1["tmp"] / "out").iterdir()) == ["tables"]


def _first_batch(table: Path) -> int:
    """The micro-batch that created a Delta table (its first commit's transaction)."""
    with open(table / "_delta_log" / f"{0:020d}.json", encoding="utf-8") as fh:
        actions = [json.loads(line) for line in fh if line.strip()]
    return int(next(a["txn"]["version"] for a in actions if "txn" in a))


def test_one_commit_per_batch_under_the_query_id(scd1: dict[str, Any]) -> None:
    """Each micro-batch that changed the table is one commit carrying the query's
    application transaction: its id (``pgcdc-events:<query id>``, the one query of the
    pipeline) and the batch id."""
    tables = scd1["tmp"] / "out" / "tables"
    assert sorted(p.name for p in (scd1["tmp"] / "cp").iterdir()) == ["decode"]  # one query
    query_id = json.loads((scd1["tmp"] / "cp" / "decode" / "metadata").read_text())["id"]
    last = []
    for name in scd1["want"]:
        table = deltalake.DeltaTable(str(tables / name))
        version = table.transaction_version(f"pgcdc-events:{query_id}")
        assert version is not None, name
        assert table.version() <= version, name  # no batch took two commits
        last.append(version)
    assert max(last) >= 1  # a table changed by several batches


def test_the_tables_are_private(scd1: dict[str, Any]) -> None:
    """Row data as ``capture`` writes it: files 0600, directories 0700."""
    for root, dirs, files in os.walk(scd1["tmp"] / "out" / "tables"):
        for name in dirs:
            assert stat.S_IMODE(os.stat(os.path.join(root, name)).st_mode) == 0o700, name
        for name in files:
            assert stat.S_IMODE(os.stat(os.path.join(root, name)).st_mode) == 0o600, name


def test_duckdb_reads_the_tables(scd1: dict[str, Any]) -> None:
    duckdb = duckdb_with_delta()
    for name, want in scd1["want"].items():
        path = str(scd1["tmp"] / "out" / "tables" / name)
        assert duckdb.sql(f"SELECT count(*) FROM delta_scan('{path}')").fetchone() == (
            want.num_rows,)


def test_scd_type_2_with_tracked_columns(spark: SparkSession, tmp_path: Path) -> None:
    """``--stored-as-scd-type 2 --track-history-except-column-list tags``: a new version
    when a tracked column changes, the demo's orders' history as the events tell it."""
    with open(DEMO / "demo-capture.jsonl", encoding="utf-8") as fh:
        rows = list(iter_capture(fh))
    write_files(tmp_path / "in", rows, [len(rows) // 2])
    assert _stream(tmp_path, None, "--tables", "public.orders", "--stored-as-scd-type", "2",
                   "--track-history-except-column-list", "tags") == 0
    got = deltalake.DeltaTable(str(tmp_path / "out" / "tables" / "public.orders"))
    from pgcdc_events.cli.decode_cmd import load_config  # noqa: PLC0415
    from pgcdc_events.types.catalog import CatalogSnapshot  # noqa: PLC0415

    batch = decode_capture(capture_dataframe(spark, rows),
                           load_config(str(DEMO / "connector.properties"), []),
                           catalog=CatalogSnapshot.load(str(DEMO / "demo-catalog.json")))
    events = batch.to_arrow(["public.orders"])["public.orders"]
    batch.unpersist()
    columns = [f.name for f in events.schema.field("after").type if f.name != "tags"]
    keep = tuple(columns)
    assert history(got.to_pyarrow_table(), keep) == expected_history(events, keep)
    assert len(history(got.to_pyarrow_table(), keep)) >= 3


@pytest.mark.parametrize(("options", "message"), [
    (["--target", "parquet", "--keys", "id"], "--keys is an AUTO CDC option: it needs "
     "--target delta"),
    (["--buckets", "4"], "--buckets is for --target parquet"),
    (["--track-history-column-list", "a"], "--track-history-* needs --stored-as-scd-type=2"),
    (["--keys", "id,,x"], "--keys 'id,,x': give comma-separated column names"),
    (["--tombstone-retention-seconds", "-1"], "--tombstone-retention-seconds must not be "
     "negative"),
])
def test_options_are_checked_before_spark_starts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        options: list[str], message: str) -> None:
    import pgcdc_events.spark  # noqa: PLC0415

    def session(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("Spark started")

    monkeypatch.setattr(pgcdc_events.spark, "session", session)
    (tmp_path / "in").mkdir()
    assert _stream(tmp_path, None, *options) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"pgcdc-events spark: error: {message}"), err
