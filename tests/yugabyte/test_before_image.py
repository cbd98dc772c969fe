"""YugabyteDBBeforeImageTest (yugabyte/debezium-connector-yugabytedb, default branch ``main`` at
commit 9607fea3cea1425f9df675dd77bea194b0ce98f1, src/test/java/io/debezium/connector/yugabytedb/
YugabyteDBBeforeImageTest.java): the record shape per before-image mode,
for the modes that are also replica identities of YugabyteDB's logical replication (FULL,
CHANGE, DEFAULT). The test drives the gRPC connector; its expectations are taken as the
records of the same statements, run here on PostgreSQL 15 and decoded as yboutput
(support.yboutput.as_yboutput: CHANGE updates carry the key and their SET columns, a key
change is DELETE + INSERT). Each Java test runs once per stream type
(streamTypeProviderForStreaming: consistent snapshot or not, which changes no record): one
run here.

yugabyte_create_tables.ddl (src/test/resources/, same commit): CREATE TABLE t1 (id INT
PRIMARY KEY, first_name TEXT NOT NULL, last_name VARCHAR(40), hours DOUBLE PRECISION);
formatInsertString: INSERT INTO t1 VALUES (%d, 'Vaibhav', 'Kushwaha', 12.345).
"""

from __future__ import annotations

from typing import Any

import pytest

from pgcdc_events.events.records import ChangeRecord
from pgcdc_events.types.catalog import fetch_catalog
from support.capture import Capturer
from support.yboutput import as_yboutput, decode_yb

pytestmark = pytest.mark.usefixtures("pg_cluster")

T1 = ("CREATE TABLE t1 (id INT PRIMARY KEY, first_name TEXT NOT NULL, last_name VARCHAR(40), "
      "hours DOUBLE PRECISION)")


def _insert(n: int) -> str:
    return f"INSERT INTO t1 VALUES ({n}, 'Vaibhav', 'Kushwaha', 12.345);"


def _run(conn: Any, identity: str, statements: list[str], changed: list[set[str]] | None = None,
         table: str = T1, name: str = "t1") -> list[ChangeRecord]:
    """Create the table with the replica identity (CHANGE: PostgreSQL's DEFAULT sent as c),
    run each statement in its own transaction, decode the stream as yboutput."""
    conn.run(table)
    if identity != "CHANGE":
        conn.run(f"ALTER TABLE {name} REPLICA IDENTITY {identity}")
    cat = fetch_catalog(conn)
    capturer = Capturer(conn, tables=[name])
    for statement in statements:
        if statement.startswith("BEGIN; "):  # "BEGIN; ... COMMIT;" in one execute
            conn.run("BEGIN")
            conn.run(statement.removeprefix("BEGIN; ").removesuffix(" COMMIT;"))
            conn.run("COMMIT")
        else:
            conn.run(statement)
    stream = as_yboutput(capturer.changes(), changed or [],
                         default_is_change=identity == "CHANGE", catalog=cat)
    return decode_yb(stream, cat, **{"table.include.list": f"public.{name}"})


def _value(record: ChangeRecord, path: str) -> Any:
    """assertValueField's path, "before/id/value" or "after": each step a ``getStruct`` of
    the one before, so a missing cell (a column not sent) fails on the way to its
    ``value`` -- a sent NULL is a cell whose value is null."""
    node: Any = record.value
    for part in path.split("/"):
        assert node is not None, f"{path}: null before {part!r} (a cell that is not there)"
        node = node[part]
    return node


def _image(record: ChangeRecord, part: str, id_: int, first: str | None, last: str | None,
           hours: float | None) -> None:
    """assertBeforeImage / assertAfterImage."""
    assert [_value(record, f"{part}/{c}/value") for c in ("id", "first_name", "last_name",
                                                          "hours")] == [id_, first, last, hours]


def _tombstone(record: ChangeRecord) -> None:
    assert record.kind == "tombstone" and record.value is None


def test_is_before_getting_published(pg_conn: Any) -> None:
    """isBeforeGettingPublished (FULL): INSERT 1; UPDATE first_name='VKVK', hours=56.78 --
    the insert (no before), the update with the before image and the new row."""
    insert, update = _run(pg_conn, "FULL", [
        _insert(1), "UPDATE t1 SET first_name='VKVK', hours=56.78 where id = 1;"])
    assert _value(insert, "before") is None
    _image(insert, "after", 1, "Vaibhav", "Kushwaha", 12.345)
    _image(update, "before", 1, "Vaibhav", "Kushwaha", 12.345)
    _image(update, "after", 1, "VKVK", "Kushwaha", 56.78)


def test_consecutive_single_shard_transactions(pg_conn: Any) -> None:
    """consecutiveSingleShardTransactions (FULL): INSERT 1; UPDATE last_name; UPDATE
    first_name, last_name, hours -- each update's before is the previous after."""
    insert, first, second = _run(pg_conn, "FULL", [
        _insert(1), "UPDATE t1 SET last_name='some_last_name' where id = 1;",
        "UPDATE t1 SET first_name='V', last_name='K', hours=0.05 where id = 1;"])
    assert _value(insert, "before") is None
    _image(insert, "after", 1, "Vaibhav", "Kushwaha", 12.345)
    _image(first, "before", 1, "Vaibhav", "Kushwaha", 12.345)
    _image(first, "after", 1, "Vaibhav", "some_last_name", 12.345)
    _image(second, "before", 1, "Vaibhav", "some_last_name", 12.345)
    _image(second, "after", 1, "V", "K", 0.05)


@pytest.mark.parametrize("identity", ["CHANGE", "DEFAULT"])
def test_consecutive_single_shard_transactions_for_change_and_default(
        pg_conn: Any, identity: str) -> None:
    """consecutiveSingleShardTransactionsForChange and ...ForDefault: INSERT 1; UPDATE
    last_name; DELETE -- four records (insert, update, delete, tombstone); the update has no
    before, its after id 1 and last_name "some_last_name" (DEFAULT: the whole new row); the
    delete's before id 1, no after."""
    records = _run(pg_conn, identity, [
        _insert(1), "UPDATE t1 SET last_name='some_last_name' where id = 1;",
        "DELETE from t1 WHERE id = 1;"], [{"last_name"}])
    assert len(records) == 4
    insert, update, delete, tombstone = records
    assert _value(insert, "before") is None
    _image(insert, "after", 1, "Vaibhav", "Kushwaha", 12.345)
    assert _value(update, "before") is None
    if identity == "CHANGE":
        assert (_value(update, "after/id/value"), _value(update, "after/last_name/value")) == (
            1, "some_last_name")
    else:
        _image(update, "after", 1, "Vaibhav", "some_last_name", 12.345)
    assert _value(delete, "before/id/value") == 1 and _value(delete, "after") is None
    _tombstone(tombstone)


def test_multi_shard_transactions(pg_conn: Any) -> None:
    """multiShardTransactions (FULL): two inserts, an update of each, two deletes, each in
    a transaction of its own -- "INSERT + INSERT + UPDATE + UPDATE + DELETE + TOMBSTONE +
    DELETE + TOMBSTONE", the before images as the test lists them."""
    records = _run(pg_conn, "FULL", [
        f"BEGIN; {_insert(1)} COMMIT;", f"BEGIN; {_insert(2)} COMMIT;",
        "BEGIN; UPDATE t1 SET hours=98.765 where id = 1; COMMIT;",
        "BEGIN; UPDATE t1 SET first_name='first_name_12345' where id = 2; COMMIT;",
        "DELETE from t1 WHERE id = 1;", "DELETE from t1 WHERE id = 2;"])
    assert len(records) == 8
    assert _value(records[0], "before") is None
    _image(records[0], "after", 1, "Vaibhav", "Kushwaha", 12.345)
    assert _value(records[1], "before") is None
    _image(records[1], "after", 2, "Vaibhav", "Kushwaha", 12.345)
    _image(records[2], "before", 1, "Vaibhav", "Kushwaha", 12.345)
    _image(records[2], "after", 1, "Vaibhav", "Kushwaha", 98.765)
    _image(records[3], "before", 2, "Vaibhav", "Kushwaha", 12.345)
    _image(records[3], "after", 2, "first_name_12345", "Kushwaha", 12.345)
    _image(records[4], "before", 1, "Vaibhav", "Kushwaha", 98.765)
    assert _value(records[4], "after") is None
    _tombstone(records[5])
    _image(records[6], "before", 2, "first_name_12345", "Kushwaha", 12.345)
    assert _value(records[6], "after") is None
    _tombstone(records[7])


def test_update_with_null_values(pg_conn: Any) -> None:
    """updateWithNullValues (FULL): UPDATE last_name=null, hours=null -- the insert (no
    before), the before image and an after whose last_name and hours values are null."""
    insert, update = _run(pg_conn, "FULL", [
        _insert(1), "UPDATE t1 SET last_name=null, hours=null where id = 1;"])
    assert _value(insert, "before") is None
    _image(insert, "after", 1, "Vaibhav", "Kushwaha", 12.345)
    _image(update, "before", 1, "Vaibhav", "Kushwaha", 12.345)
    _image(update, "after", 1, "Vaibhav", None, None)


def test_modify_primary_key(pg_conn: Any) -> None:
    """modifyPrimaryKey (FULL): INSERT 1; UPDATE last_name, hours; UPDATE id = 404 -- the
    insert, the update, then "a delete record along with a tombstone and one insert record":
    five records."""
    records = _run(pg_conn, "FULL", [
        _insert(1), "UPDATE t1 SET last_name='some_last_name', hours=98.765 where id = 1;",
        "UPDATE t1 SET id = 404 WHERE id = 1;"])
    assert len(records) == 5
    assert _value(records[0], "before") is None
    _image(records[0], "after", 1, "Vaibhav", "Kushwaha", 12.345)
    _image(records[1], "before", 1, "Vaibhav", "Kushwaha", 12.345)
    _image(records[1], "after", 1, "Vaibhav", "some_last_name", 98.765)
    _image(records[2], "before", 1, "Vaibhav", "some_last_name", 98.765)
    assert _value(records[2], "after") is None
    _tombstone(records[3])
    assert _value(records[4], "before") is None
    _image(records[4], "after", 404, "Vaibhav", "some_last_name", 98.765)


def test_operations_on_table_with_default_values(pg_conn: Any) -> None:
    """operationsOnTableWithDefaultValues (FULL): table_with_defaults (defaults
    'first_name_d', 'last_name_d', 12.345); INSERT (1); two UPDATEs -- the defaults in the
    insert and each update's before."""
    insert, first, second = _run(pg_conn, "FULL", [
        "INSERT INTO table_with_defaults VALUES (1);",
        "UPDATE table_with_defaults SET first_name='updated_first_name' WHERE id = 1",
        "UPDATE table_with_defaults SET first_name='updated_first_name_2',"
        " last_name='updated_last_name', hours=98.765 WHERE id = 1"],
        table="CREATE TABLE table_with_defaults (id INT PRIMARY KEY, first_name TEXT"
              " DEFAULT 'first_name_d', last_name VARCHAR(40) DEFAULT 'last_name_d',"
              " hours DOUBLE PRECISION DEFAULT 12.345)", name="table_with_defaults")
    assert _value(insert, "before") is None
    _image(insert, "after", 1, "first_name_d", "last_name_d", 12.345)
    _image(first, "before", 1, "first_name_d", "last_name_d", 12.345)
    _image(first, "after", 1, "updated_first_name", "last_name_d", 12.345)
    _image(second, "before", 1, "updated_first_name", "last_name_d", 12.345)
    _image(second, "after", 1, "updated_first_name_2", "updated_last_name", 98.765)
