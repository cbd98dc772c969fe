"""YugabyteDB-shaped workloads (pgcdc_events.testing.yugabyte) and ``pgcdc-events decode``.

The workloads' final state comes from their operations, the records from the decoder
over their yboutput bytes: folding the records the way a YugabyteDB consumer must (a
cell that was not sent keeps the column's value) gives back the state.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings

from pgcdc_events.cli import main
from pgcdc_events.events import EventConfig, JsonRecordWriter
from pgcdc_events.events.records import ChangeRecord
from pgcdc_events.events.yugabyte_transforms import pg_compatible
from pgcdc_events.protocol import dump_capture_row
from pgcdc_events.testing.yugabyte import YbColumn, YbOp, YugabyteWorkload, yugabyte_workloads


def fold(records: list[ChangeRecord]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """A YugabyteDB-aware consumer: rows by key; a null cell (not sent) keeps the value."""
    rows: dict[tuple[Any, ...], dict[str, Any]] = {}
    for record in records:
        if record.value is None:
            continue
        assert record.key is not None
        key = tuple(cell["value"] for cell in record.key.values)
        value = record.value
        if value["op"] == "d":
            del rows[key]
            continue
        after = value["after"]
        row = rows.setdefault(key, {})
        for name, cell in zip(after, after.values, strict=True):
            if cell is not None:
                row[name] = cell["value"]
            else:
                assert value["op"] == "u"  # only an update leaves a column out
    return rows


@settings(max_examples=60, deadline=None)
@given(yugabyte_workloads())
def test_folding_the_records_gives_the_workloads_state(workload: YugabyteWorkload) -> None:
    assert fold(workload.records()) == workload.state


def _change_workload() -> YugabyteWorkload:
    columns = (YbColumn("pk", "integer", key=True), YbColumn("aa", "integer"),
               YbColumn("bb", "text"))
    return YugabyteWorkload("public", "t", columns, (
        (YbOp("insert", (1,), {"pk": 1, "aa": 22, "bb": "random text value"}),),
        (YbOp("update", (1,), {"aa": 12345}),),
        (YbOp("update", (1,), {"bb": None}),),
    ))


def test_a_change_update_read_as_postgresql_loses_the_columns_not_sent() -> None:
    """Why the cells exist: PGCompatible's null for "not sent" is the null of "set to NULL"."""
    workload = _change_workload()
    records = [r for r in workload.records() if r.value is not None]
    assert fold(records) == workload.state == {(1,): {"pk": 1, "aa": 12345, "bb": None}}
    after = [pg_compatible(r).value["after"].as_dict() for r in records]  # type: ignore[index]
    assert after[1] == {"pk": 1, "aa": 12345, "bb": None}  # bb was not sent, not NULL
    assert after[2] == {"pk": 1, "aa": None, "bb": None}  # aa was not sent; bb set to NULL
    assert records[2].value["after"]["aa"] is None  # type: ignore[index]
    assert records[2].value["after"]["bb"] == records[2].value["after"]["bb"].__class__(  # type: ignore[index]
        records[2].value["after"]["bb"].schema, (None, True))  # type: ignore[index]


def _stable(line: str) -> dict[str, Any]:
    record = json.loads(line)
    record["headers"].pop("__debezium.context.runId", None)
    if record.get("value"):
        record["value"]["payload"].pop("ts_ms", None)
    return record


@settings(max_examples=10, deadline=None)
@given(yugabyte_workloads(identities=("c",)))
def test_decode_accepts_the_yboutput_configuration(workload: YugabyteWorkload) -> None:
    """``pgcdc-events decode -c plugin.name=yboutput`` writes the library's records."""
    import tempfile  # noqa: PLC0415 - hypothesis tests cannot take tmp_path
    with tempfile.TemporaryDirectory() as tmp:
        capture, out = Path(tmp) / "capture.jsonl", Path(tmp) / "out.jsonl"
        capture.write_text("".join(dump_capture_row(r) + "\n"
                                   for r in workload.capture_rows()))
        catalog = Path(tmp) / "catalog.json"
        workload.catalog().save(str(catalog))  # as records() decodes: source.db is its database
        assert main(["decode", "--capture", str(capture), "--catalog", str(catalog),
                     "-c", "plugin.name=yboutput", "-c", "topic.prefix=yb", "-q",
                     "-o", str(out)]) == 0
        ours = [_stable(line) for line in out.read_text(encoding="utf-8").split("\n") if line]
    writer = JsonRecordWriter.for_config(EventConfig.from_properties(
        {"topic.prefix": "yb", "plugin.name": "yboutput"}))
    assert ours == [_stable(writer.record_line(r)) for r in workload.records()]


def test_decode_without_yboutput_names_the_capture_line(tmp_path: Path,
                                                          capsys: Any) -> None:
    capture = tmp_path / "capture.jsonl"
    capture.write_text("".join(dump_capture_row(r) + "\n"
                               for r in _change_workload().capture_rows()))
    assert main(["decode", "--capture", str(capture), "-q"]) != 0
    assert "line 2" in capsys.readouterr().err
