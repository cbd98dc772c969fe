"""The documented examples of the YugabyteDB connector's transformers, for each replica
identity: yugabyte/yugabyte-db docs/content/stable/additional-features/change-data-capture/
using-logical-replication/transformers.md ("YugabyteDB connector transformers").

The page's table and five statements run on the suite's PostgreSQL 15; their pgoutput bytes
are decoded as yboutput (support/yboutput.as_yboutput: identity byte, CHANGE updates send
the key and the SET columns). Each output is compared, as JSON text, with the page's: the
record value for YBExtractNewRecordState, the ``"before":...,"after":...`` fragment of the
payload for PGCompatible. The page applies YBExtractNewRecordState with deletes kept and a
null value ("statement 5: null"), which this library's ``delete_handling_mode="none"`` does.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pgcdc_events.events import EventConfig, JsonRecordWriter
from pgcdc_events.events.records import ChangeRecord
from pgcdc_events.events.yugabyte_transforms import pg_compatible, yb_extract_new_record_state
from pgcdc_events.types.catalog import fetch_catalog
from support.capture import Capturer
from support.yboutput import as_yboutput, decode_yb

pytestmark = pytest.mark.usefixtures("pg_cluster")

STATEMENTS = [
    "INSERT INTO test VALUES (1, 'Vaibhav', 9876)",
    "UPDATE test SET aura = 9999 WHERE id = 1",
    "UPDATE test SET name = 'Vaibhav Kushwaha', aura = 10 WHERE id = 1",
    "UPDATE test SET aura = NULL WHERE id = 1",
    "DELETE FROM test WHERE id = 1",
]
#: The SET list of each UPDATE above (what YugabyteDB sends under CHANGE, with the key).
CHANGED = [{"aura"}, {"name", "aura"}, {"aura"}]

#: "YBExtractNewRecordState", per replica identity.
EXTRACTED = {
    "CHANGE": ['{"id":1,"name":"Vaibhav","aura":9876}', '{"id":1,"aura":9999}',
               '{"id":1,"name":"Vaibhav Kushwaha","aura":10}', '{"id":1,"aura":null}', "null"],
    "DEFAULT": ['{"id":1,"name":"Vaibhav","aura":9876}',
                '{"id":1,"name":"Vaibhav","aura":9999}',
                '{"id":1,"name":"Vaibhav Kushwaha","aura":10}',
                '{"id":1,"name":"Vaibhav Kushwaha","aura":null}', "null"],
    "FULL": ['{"id":1,"name":"Vaibhav","aura":9876}', '{"id":1,"name":"Vaibhav","aura":9999}',
             '{"id":1,"name":"Vaibhav Kushwaha","aura":10}',
             '{"id":1,"name":"Vaibhav Kushwaha","aura":null}', "null"],
}
#: "PGCompatible", per replica identity.
PG_COMPATIBLE = {
    "CHANGE": [
        '"before":null,"after":{"id":1,"name":"Vaibhav","aura":9876}',
        '"before":null,"after":{"id":1,"name":null,"aura":9999}',
        '"before":null,"after":{"id":1,"name":"Vaibhav Kushwaha","aura":10}',
        '"before":null,"after":{"id":1,"name":null,"aura":null}',
        '"before":{"id":1,"name":null,"aura":null},"after":null',
    ],
    "DEFAULT": [
        '"before":null,"after":{"id":1,"name":"Vaibhav","aura":9876}',
        '"before":null,"after":{"id":1,"name":"Vaibhav","aura":9999}',
        '"before":null,"after":{"id":1,"name":"Vaibhav Kushwaha","aura":10}',
        '"before":null,"after":{"id":1,"name":"Vaibhav Kushwaha","aura":null}',
        '"before":{"id":1,"name":null,"aura":null},"after":null',
    ],
    "FULL": [
        '"before":null,"after":{"id":1,"name":"Vaibhav","aura":9876}',
        '"before":{"id":1,"name":"Vaibhav","aura":9876},'
        '"after":{"id":1,"name":"Vaibhav","aura":9999}',
        '"before":{"id":1,"name":"Vaibhav","aura":9999},'
        '"after":{"id":1,"name":"Vaibhav Kushwaha","aura":10}',
        '"before":{"id":1,"name":"Vaibhav Kushwaha","aura":10},'
        '"after":{"id":1,"name":"Vaibhav Kushwaha","aura":null}',
        '"before":{"id":1,"name":"Vaibhav Kushwaha","aura":null},"after":null',
    ],
}
WRITER = JsonRecordWriter.for_config(EventConfig.from_properties({
    "topic.prefix": "p", "value.converter.schemas.enable": "false",
    "key.converter.schemas.enable": "false"}))


def _records(conn: Any, identity: str) -> list[ChangeRecord]:
    conn.run("CREATE TABLE test (id INT PRIMARY KEY, name TEXT, aura INT)")
    if identity == "FULL":
        conn.run("ALTER TABLE test REPLICA IDENTITY FULL")
    catalog = fetch_catalog(conn)
    capturer = Capturer(conn, tables=["test"])
    for statement in STATEMENTS:
        conn.run(statement)
    stream = as_yboutput(capturer.changes(), CHANGED if identity == "CHANGE" else (),
                         default_is_change=identity == "CHANGE")
    return [r for r in decode_yb(stream, catalog) if r.value is not None]  # no tombstones


def _value_json(record: ChangeRecord | None) -> str:
    assert record is not None
    value = json.loads(WRITER.record_line(record))["value"]
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@pytest.mark.parametrize("identity", ["CHANGE", "DEFAULT", "FULL"])
def test_yb_extract_new_record_state_documented_examples(pg_conn: Any, identity: str) -> None:
    records = _records(pg_conn, identity)
    assert len(records) == 5
    out = [_value_json(yb_extract_new_record_state(r, delete_handling_mode="none"))
           for r in records]
    assert out == EXTRACTED[identity]


@pytest.mark.parametrize("identity", ["CHANGE", "DEFAULT", "FULL"])
def test_pg_compatible_documented_examples(pg_conn: Any, identity: str) -> None:
    records = _records(pg_conn, identity)
    for record, fragment in zip(records, PG_COMPATIBLE[identity], strict=True):
        assert fragment in _value_json(pg_compatible(record))
