"""YBRecordsStreamProducerIT.verifyAllWorkingTypesInATableWithYbOutput, on real PostgreSQL bytes.

yugabyte/debezium (branch ybdb-debezium-2.5.2 at commit 52515b4ac54322b14c0d39c56a74e8aef530c61e)
debezium-connector-postgres/src/test/java/io/debezium/connector/postgresql/
YBRecordsStreamProducerIT.java, ``verifyAllWorkingTypesInATable(YBOUTPUT)``: one INSERT of
every type into ``all_types`` and one assertion per column on ``after/<column>/value``.

The column values on the wire are the types' text output, which YugabyteDB (a PostgreSQL
fork) writes as PostgreSQL does: the INSERT runs on the test's real PostgreSQL 15 and its
pgoutput bytes are decoded as yboutput, the only change being the Relation's replica
identity, ``c`` (CHANGE, the default of YugabyteDB's service, "YB Note" in
YugabyteReplicaIdentityIT). The server's time zone was +05:30: the test expects the
tstzrange '(2017-07-04 12:30:30 UTC, ...)' back as "2017-07-04 18:00:30+05:30", so the
slot is read in Asia/Kolkata.
"""

from __future__ import annotations

import struct
from decimal import Decimal
from typing import Any

import pytest

from support.capture import Capturer
from support.yboutput import as_yboutput, decode_yb

CREATE = (
    "CREATE TABLE all_types (id serial PRIMARY KEY, bigintcol bigint, "
    "bitcol bit(5), varbitcol varbit(5), booleanval boolean, "
    "byteaval bytea, ch char(5), vchar varchar(25), cidrval cidr, "
    "dt date, dp double precision, inetval inet, intervalval interval, "
    "jsonval json, jsonbval jsonb, mc macaddr, mc8 macaddr8, mn money, "
    "rl real, si smallint, i4r int4range, i8r int8range, "
    "nr numrange, tsr tsrange, tstzr tstzrange, dr daterange, txt text, "
    "tm time, tmtz timetz, ts timestamp, tstz timestamptz, uuidval uuid)"
)
# The Java string literal, unescaped once: E'\\\\001' in Java source is E'\\001' in SQL.
INSERT = (
    "INSERT INTO all_types (bigintcol, bitcol, varbitcol, booleanval, byteaval, ch, vchar, "
    "cidrval, dt, dp, inetval, intervalval, jsonval, jsonbval, mc, mc8, mn, rl, si, i4r, i8r, "
    "nr, tsr, tstzr, dr, txt, tm, tmtz, ts, tstz, uuidval) VALUES (123456, '11011', '10101', "
    "FALSE, E'\\\\001', 'five5', 'sample_text', '10.1.0.0/16', '2022-02-24', 12.345, "
    "'127.0.0.1', '2020-03-10 00:00:00'::timestamp-'2020-02-10 00:00:00'::timestamp, "
    "'{\"a\":\"b\"}', '{\"a\":\"b\"}', '2C:54:91:88:C9:E3', '22:00:5c:03:55:08:01:02', "
    "'$100.5', 32.145, 12, '(1, 10)', '(100, 200)', '(10.45, 21.32)', "
    "'(1970-01-01 00:00:00, 2000-01-01 12:00:00)', "
    "'(2017-07-04 12:30:30 UTC, 2021-07-04 12:30:30+05:30)', '(2019-10-07, 2021-10-07)', "
    "'text to verify behaviour', '12:47:32', '12:00:00+05:30', '2021-11-25 12:00:00.123456', "
    "'2021-11-25 12:00:00+05:30', 'ffffffff-ffff-ffff-ffff-ffffffffffff')"
)

#: assertValueField(record, "after/<column>/value", expected), in the test's order.
EXPECTED: dict[str, Any] = {
    "bigintcol": 123456,
    "bitcol": bytes([27]),
    "varbitcol": bytes([21]),
    "booleanval": False,
    "byteaval": bytes.fromhex("01"),
    "ch": "five5",
    "vchar": "sample_text",
    "cidrval": "10.1.0.0/16",
    "dt": 19047,
    "dp": 12.345,
    "inetval": "127.0.0.1",
    "intervalval": 2505600000000,
    "jsonval": '{"a":"b"}',
    "jsonbval": '{"a": "b"}',
    "mc": "2c:54:91:88:c9:e3",
    "mc8": "22:00:5c:03:55:08:01:02",
    "mn": 100.50,
    "rl": 32.145,
    "si": 12,
    "i4r": "[2,10)",
    "i8r": "[101,200)",
    "nr": "(10.45,21.32)",
    "tsr": '("1970-01-01 00:00:00","2000-01-01 12:00:00")',
    "tstzr": '("2017-07-04 18:00:30+05:30","2021-07-04 12:30:30+05:30")',
    "dr": "[2019-10-08,2021-10-07)",
    "txt": "text to verify behaviour",
    "tm": 46052000000,
    "tmtz": "06:30:00Z",
    "ts": 1637841600123456,
    "tstz": "2021-11-25T06:30:00.000000Z",
    "uuidval": "ffffffff-ffff-ffff-ffff-ffffffffffff",
}


def _same(actual: Any, expected: Any) -> bool:
    """assertValueField's comparison: numbers by value (money arrives as a Decimal, real
    as the float32 value widened), everything else by equality."""
    if isinstance(expected, float):
        if isinstance(actual, Decimal):
            return actual == Decimal(str(expected))
        return actual == expected or actual == struct.unpack("f", struct.pack("f", expected))[0]
    return bool(actual == expected)


@pytest.mark.usefixtures("pg_cluster")
def test_verify_all_working_types_in_a_table_with_yb_output(pg_conn: Any) -> None:
    pg_conn.run(CREATE)
    capturer = Capturer(pg_conn, tables=["all_types"])
    pg_conn.run(INSERT)
    pg_conn.run("SET TimeZone = 'Asia/Kolkata'")
    (record,) = decode_yb(as_yboutput(capturer.changes()))
    after = record.value["after"]  # type: ignore[index]
    mismatches = {name: (after[name]["value"], want) for name, want in EXPECTED.items()
                  if not _same(after[name]["value"], want)}
    assert mismatches == {}
    assert record.key["id"]["value"] == 1  # type: ignore[index]


#: verifyUpdatesForColumnsOfAllTypes: "Update each column one by one", then
#: assertColumnInUpdate(columnsInAllTypes, records.get(i), "after/<column>", expected).
UPDATES: list[tuple[str, str, Any]] = [
    ("bigintcol", "234567", 234567),
    ("bitcol", "'11111'", bytes([31])),
    ("varbitcol", "'00011'", bytes([3])),
    ("booleanval", "TRUE", True),
    ("byteaval", "null", None),
    ("ch", "'four4'", "four4"),
    ("vchar", "'sample_text_updated'", "sample_text_updated"),
    ("cidrval", "'192.0.2.0/24'", "192.0.2.0/24"),
    ("dt", "'2024-08-06'", 19941),
    ("dp", "23.456", 23.456),
    ("inetval", "'192.168.1.1'", "192.168.1.1"),
    ("intervalval",
     "'2020-03-11 00:00:00'::timestamp-'2020-02-10 00:00:00'::timestamp", 2592000000000),
    ("jsonval", "'{\"c\":\"d\",\"e\":123}'", '{"c":"d","e":123}'),
    ("jsonbval", "'{\"c\":\"d\",\"e\":123}'", '{"c": "d", "e": 123}'),
    ("mc", "'2c:54:91:99:c9:e3'", "2c:54:91:99:c9:e3"),
    ("mc8", "'22:00:5c:3d:55:08:01:02'", "22:00:5c:3d:55:08:01:02"),
    ("mn", "'$200.5'", 200.50),
    ("rl", "44.556", 44.556),
    ("si", "11", 11),
    ("i4r", "'(10, 100)'", "[11,100)"),
    ("i8r", "'(200, 10000)'", "[201,10000)"),
    ("nr", "'(12.35, 56.78)'", "(12.35,56.78)"),
    ("tsr", "'(2000-01-01 00:00:00, 2000-01-02 00:00:00)'",
     '("2000-01-01 00:00:00","2000-01-02 00:00:00")'),
    ("tstzr", "'(2000-01-01 00:05:30+05:30, 2000-01-02 00:00:00 UTC)'",
     '("2000-01-01 00:05:30+05:30","2000-01-02 05:30:00+05:30")'),
    ("dr", "'(2000-01-01, 2000-01-03)'", "[2000-01-02,2000-01-03)"),
    ("txt", "'updated text to verify behaviour'", "updated text to verify behaviour"),
    ("tm", "'14:15:16'", 51316000000),
    ("tmtz", "'05:30:00+05:30'", "00:00:00Z"),
    ("ts", "'2024-08-06 12:00:00.123456'", 1722945600123456),
    ("tstz", "'2024-08-06 12:00:00+05:30'", "2024-08-06T06:30:00.000000Z"),
    ("uuidval", "'ffffffff-ffff-ffff-ffff-123456789abc'", "ffffffff-ffff-ffff-ffff-123456789abc"),
]


@pytest.mark.usefixtures("pg_cluster")
def test_verify_updates_for_columns_of_all_types_for_yb_output(pg_conn: Any) -> None:
    """YBRecordsStreamProducerIT.verifyUpdatesForColumnsOfAllTypesForYbOutput: the INSERT of
    the test above, then one UPDATE per column (each its own transaction, as
    TestHelper.execute commits); under CHANGE each update's ``after`` has the key and the
    updated column, and every other column (those whose name is not contained in the
    asserted path, as the test's ``column.contains(columnName)`` reads) is a null cell."""
    pg_conn.run(CREATE)
    capturer = Capturer(pg_conn, tables=["all_types"])
    pg_conn.run(INSERT)
    for column, sql, _ in UPDATES:
        pg_conn.run(f"UPDATE all_types SET {column} = {sql} WHERE id = 1")
    pg_conn.run("SET TimeZone = 'Asia/Kolkata'")
    records = decode_yb(as_yboutput(capturer.changes(), [{c} for c, _, _ in UPDATES]))
    insert, *updates = records
    assert insert.value["op"] == "c"  # type: ignore[index]
    assert len(updates) == 31
    for record, (column, _, expected) in zip(updates, UPDATES, strict=True):
        assert record.key["id"]["value"] == 1  # type: ignore[index]  # isValidUpdate
        assert record.value["op"] == "u"  # type: ignore[index]
        after = record.value["after"]  # type: ignore[index]
        path = f"after/{column}"
        for other in EXPECTED:
            if other not in path:
                assert after[other] is None, (column, other)
        assert after[column] is not None and _same(after[column]["value"], expected), column
