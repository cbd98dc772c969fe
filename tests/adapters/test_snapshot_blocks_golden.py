"""The initial snapshot written in COPY block lines, read by every reader, against the real
connector (tests/golden/events_snapshot*).

The recordings' captures predate block lines (one Insert a line). Here the corpus is
loaded again into a real server (its part before ``-- @changes``), ``capture
--snapshot-mode initial_only`` writes its snapshot (block lines now), and each reader of
that capture gives the ``r`` events Debezium 3.6.3 recorded for the same rows (topic, key,
before, after, op, schema: what test_golden_snapshot.py compares; the snapshot's own
position, transaction and time are each run's); the same rows written a line a message (the
old format) give byte for byte the same records.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pgcdc_events.cli import main
from pgcdc_events.events import EventConfig, EventDecoder, JsonRecordWriter
from pgcdc_events.protocol import (
    Begin,
    Lsn,
    Relation,
    RelationColumn,
    encode_message,
    iter_capture,
    write_capture,
)
from pgcdc_events.protocol.capture import COPY_MARK, CaptureError, CaptureRow, dump_capture_row
from pgcdc_events.testing.cluster import TempCluster
from pgcdc_events.types.catalog import CatalogSnapshot
from support.golden import Recording, recordings

RECORDINGS = recordings("events_snapshot*")


def _corpus_before_changes(recording: Recording) -> str:
    text = (recording.path / "corpus.sql").read_text()
    return text.split("-- @changes", 1)[0]


def _theirs(recording: Recording) -> list[dict[str, Any]]:
    return [r for r in recording.records
            if r.get("value") is not None and r["value"]["payload"]["op"] == "r"]


def _same_reads(ours: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> None:
    """Topic, key, before/after/op and schema of every r event, in order."""
    reads = [r for r in ours if r.get("value") is not None and r["value"]["payload"]["op"] == "r"]
    assert len(reads) == len(theirs) > 0
    for a, b in zip(reads, theirs, strict=True):
        assert (a["topic"], a["key"]) == (b["topic"], b["key"])
        pa, pb = a["value"]["payload"], b["value"]["payload"]
        assert (pa["before"], pa["after"], pa["op"]) == (pb["before"], pb["after"], pb["op"])
        assert pa["source"]["snapshot"] == pb["source"]["snapshot"]
        assert a["value"]["schema"] == b["value"]["schema"]


@pytest.mark.parametrize("recording", RECORDINGS, ids=[r.key for r in RECORDINGS])
def test_block_lines_decode_to_the_connectors_reads(recording: Recording, pg_cluster: TempCluster,
                                                    pg_conn: Any, tmp_path: Path) -> None:
    pg_conn.run("CREATE EXTENSION IF NOT EXISTS hstore")
    for statement in _corpus_before_changes(recording).split(";\n"):
        if statement.strip() and not all(line.startswith("--") or not line.strip()
                                         for line in statement.splitlines()):
            pg_conn.run(statement)
    pg_conn.run("CREATE PUBLICATION dbz_publication FOR ALL TABLES")
    database = pg_conn.run("SELECT current_database()")[0][0]
    dsn = f"postgresql://{pg_cluster.user}@{pg_cluster.host}:{pg_cluster.port}/{database}"
    out = tmp_path / "out"
    assert main(["capture", "--dsn", dsn, "--slot", "s", "--publication", "dbz_publication",
                 "--output", f"{out}/", "-q", "--create-slot", "--snapshot-mode",
                 "initial_only"]) == 0
    capture = out / "capture.jsonl"
    lines = capture.read_bytes().splitlines(keepends=True)
    # the tables with rows: a block each
    assert sum(COPY_MARK in line for line in lines) == len(
        {r.data[1:5] for r in recording.capture if r.snapshot and r.data[:1] == b"I"})
    rows = list(iter_capture(lines))
    assert sum(r.data[:1] == b"I" for r in rows) == sum(
        r.data[:1] == b"I" for r in recording.capture if r.snapshot)
    # the old format: the same rows a line a message
    old = tmp_path / "old.jsonl"
    with open(old, "w", encoding="utf-8") as fh:
        write_capture(rows, fh)
    assert COPY_MARK not in old.read_bytes()
    catalog = tmp_path / "catalog.json"
    assert main(["catalog", "--dsn", dsn, "--output", str(catalog)]) == 0
    properties = tmp_path / "connector.properties"
    properties.write_text((recording.path / "connector.properties").read_text()
                          .replace(f"database.dbname={recording.properties['database.dbname']}",
                                   f"database.dbname={database}"))
    theirs = _theirs(recording)
    outputs = {}
    for source in (capture, old):
        for workers in ("1", "2"):
            records = tmp_path / f"{source.stem}-{workers}.jsonl"
            assert main(["decode", "--capture", str(source), "--output", str(records), "-q",
                         "--workers", workers, "--catalog", str(catalog), "--config",
                         str(properties)]) == 0
            outputs[source.stem, workers] = records.read_bytes()
            _same_reads([json.loads(x) for x in outputs[source.stem, workers].splitlines()],
                        theirs)
    # the library's own reader (iter_capture), and inspect
    config = EventConfig.from_properties({**recording.properties, "database.dbname": database})
    writer = JsonRecordWriter.for_config(config)
    decoder = EventDecoder(config, catalog=CatalogSnapshot.load(str(catalog)))
    with open(capture, encoding="utf-8") as fh:
        library = [json.loads(writer.record_line(r)) for r in decoder.feed_rows(iter_capture(fh))]
    _same_reads(library, theirs)
    inspected = {}
    for source in (capture, old):
        target = tmp_path / f"{source.stem}.inspect"
        assert main(["inspect", str(source), "--output", str(target)]) == 0
        inspected[source.stem] = target.read_text()
    assert inspected["capture"] == inspected["old"]
    assert inspected["capture"].count('"snapshot": true') == len(rows)


def _line(**fields: Any) -> str:
    line = {"lsn": "0/16B3748", "xid": 742, "data": "not pgoutput", "relation": 16385,
            "columns": 2, "rows": 2, "copy": b"1\ta\n2\t\\N\n".hex(), "snapshot": True}
    line.update(fields)
    return json.dumps({k: v for k, v in line.items() if v is not ...})


def test_a_block_line_after_old_lines_is_named_when_hostile(tmp_path: Path,
                                                            capsys: Any) -> None:
    """decode and inspect on a capture whose third line is a hostile block: one line
    naming line 3 (exit 1), no traceback."""
    begin = CaptureRow(Lsn(0x16B3748), 742, encode_message(Begin(0x16B3748, 0, 742)), True)
    relation = CaptureRow(Lsn(0x16B3748), 742, encode_message(Relation(
        16385, "public", "t", "d", (RelationColumn(1, "id", 23, -1),
                                    RelationColumn(0, "v", 25, -1)))), True)
    capture = tmp_path / "c.jsonl"
    head = dump_capture_row(begin) + "\n" + dump_capture_row(relation) + "\n"
    for bad, words in ((_line(copy=b"1\ta\n2\t\\x41\n".hex()), "escape"),
                       (_line(copy=b"1\ta\n2\n".hex()), "row 2 has 1 values, expected 2"),
                       (_line(copy=b"1\ta\n2\tb".hex(), rows=1), "cut"),
                       (_line(copy="31096"), "hex")):
        capture.write_text(f"{head}{bad}\n")
        with pytest.raises(CaptureError, match="line 3") as info:
            list(iter_capture(capture.read_text().splitlines()))
        assert words in str(info.value) and "\n" not in str(info.value)
        for command in (["decode", "--capture", str(capture), "--output",
                         str(tmp_path / "r.jsonl"), "-q"],
                        ["inspect", str(capture), "--output", str(tmp_path / "i.jsonl")]):
            assert main(command) == 1
            err = capsys.readouterr().err
            assert "line 3" in err and words in err and "Traceback" not in err, (command, err)
