"""More of YBRecordsStreamProducerIT (yugabyte/debezium, debezium-connector-postgres/src/
test/java/io/debezium/connector/postgresql/YBRecordsStreamProducerIT.java), on real
PostgreSQL bytes made yboutput (see test_all_types.as_yboutput): the test's statements run
on PostgreSQL 15; the Relation says CHANGE (YugabyteDB's default) and an UPDATE sends the
key and its SET columns only, as YugabyteDB does.

``before()`` of the Java test: CREATE TABLE test_table (pk SERIAL, text TEXT, PRIMARY
KEY(pk)); CREATE TABLE table_with_interval (id SERIAL PRIMARY KEY, title VARCHAR(512) NOT
NULL, time_limit INTERVAL DEFAULT '60 days'::INTERVAL NOT NULL); INSERT INTO
test_table(text) VALUES ('insert'). Records are YBVerifyRecord-checked (key cell value, op).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from pgcdc_events.events.records import ChangeRecord
from pgcdc_events.protocol import Delete, Insert
from pgcdc_events.types.catalog import fetch_catalog
from support.capture import Capturer
from support.yboutput import INT4, as_yboutput, decode, decode_yb, relation, text, transaction

pytestmark = pytest.mark.usefixtures("pg_cluster")

BEFORE = (
    "CREATE TABLE test_table (pk SERIAL, text TEXT, PRIMARY KEY(pk));"
    "CREATE TABLE table_with_interval (id SERIAL PRIMARY KEY, title VARCHAR(512) NOT NULL, "
    "time_limit INTERVAL DEFAULT '60 days'::INTERVAL NOT NULL);"
    "INSERT INTO test_table(text) VALUES ('insert');"
)


def _setup(conn: Any) -> Capturer:
    for statement in BEFORE.split(";"):
        if statement:
            conn.run(statement)
    return Capturer(conn, tables=["test_table", "table_with_interval"])


def _check(record: ChangeRecord, op: str, key: str, value: int) -> None:
    """YBVerifyRecord.isValid{Insert,Delete,Tombstone}(record, key, value)."""
    assert record.key is not None and record.key[key]["value"] == value
    if op == "tombstone":
        assert record.value is None
        return
    assert record.value is not None and record.value["op"] == op
    if op == "d":
        assert record.value["before"] is not None and record.value["after"] is None
    else:
        assert record.value["after"] is not None


def _statements(conn: Any, sql: str) -> None:
    conn.run("BEGIN")
    for statement in sql.split(";"):
        if statement.strip():
            conn.run(statement)
    conn.run("COMMIT")


@pytest.mark.parametrize("tombstones", [True, False], ids=["tombstones", "withoutTombstone"])
def test_should_receive_changes_for_deletes(pg_conn: Any, tombstones: bool) -> None:
    """shouldReceiveChangesForDeletes and shouldReceiveChangesForDeletesWithoutTombstone
    (tombstones.on.delete=false): INSERT INTO test_table (text) VALUES ('insert2');
    DELETE FROM test_table WHERE pk > 0 -- insert of 2, delete of 1 (+ tombstone), delete
    of 2 (+ tombstone)."""
    capturer = _setup(pg_conn)
    _statements(pg_conn, "INSERT INTO test_table (text) VALUES ('insert2');"
                         "DELETE FROM test_table WHERE pk > 0")
    records = decode_yb(as_yboutput(capturer.changes()),
                        **({} if tombstones else {"tombstones.on.delete": "false"}))
    assert all(r.topic == "test_server.public.test_table" for r in records)
    expected = [("c", 2), ("d", 1), ("tombstone", 1), ("d", 2), ("tombstone", 2)]
    if not tombstones:
        expected = [e for e in expected if e[0] != "tombstone"]
    assert len(records) == len(expected)
    for record, (op, pk) in zip(records, expected, strict=True):
        _check(record, op, "pk", pk)


def test_should_process_interval_delete(pg_conn: Any) -> None:
    """shouldProcessIntervalDelete: two inserts into table_with_interval, DELETE id = 1 --
    inserts of 1 and 2, the delete of 1 and its tombstone."""
    capturer = _setup(pg_conn)
    _statements(pg_conn, "INSERT INTO table_with_interval VALUES (default, 'Foo', default);"
                         "INSERT INTO table_with_interval VALUES (default, 'Bar', default);"
                         "DELETE FROM table_with_interval WHERE id = 1")
    records = decode_yb(as_yboutput(capturer.changes()))
    assert [r.topic for r in records] == ["test_server.public.table_with_interval"] * 4
    for record, (op, pk) in zip(records, [("c", 1), ("c", 2), ("d", 1), ("tombstone", 1)],
                                strict=True):
        _check(record, op, "id", pk)


def test_should_receive_changes_for_updates_with_pk_changes_without_tombstone() -> None:
    """shouldReceiveChangesForUpdatesWithPKChangesWithoutTombstone (tombstones.on.delete=false):
    UPDATE test_table SET text = 'update', pk = 2 -- the delete of 1, then the insert of 2.
    YugabyteDB sends a key change as DELETE + INSERT (see test_records.py), which
    PostgreSQL cannot produce: the stream is built."""
    columns = [("pk", INT4, -1, True), ("text", 25, -1, False)]
    records = decode({"tombstones.on.delete": "false"}, [
        (relation(16420, "public", "test_table", "c", columns), 1),
        *transaction(700, 10, Delete(16420, "K", text("1", None)),
                     Insert(16420, text("2", "update"))),
    ])
    assert len(records) == 2
    _check(records[0], "d", "pk", 1)
    _check(records[1], "c", "pk", 2)


MIXED = (
    "create table public.test_mixed ("
    "  id character varying not null,"
    "  i_key character varying not null,"
    "  c_id character varying not null,"
    "  p_type character varying not null,"
    "  p_id character varying,"
    "  tx_id character varying,"
    "  status character varying not null,"
    "  amount numeric not null,"
    "  currency character varying not null,"
    "  loc character varying,"
    "  quantity numeric,"
    "  o_type character varying,"
    "  o_created_at timestamp without time zone,"
    "  o_updated_at timestamp without time zone,"
    "  dis_details jsonb,"
    "  o_metadata jsonb,"
    "  tx_data jsonb,"
    "  tx_ref_d jsonb,"
    "  rw_d jsonb,"
    "  meta jsonb,"
    "  created_at timestamp without time zone,"
    "  updated_at timestamp without time zone not null,"
    "  deleted_at timestamp without time zone,"
    "  version integer not null default 0,"
    "  primary key (updated_at, id, c_id)"
    ")"
)
# The test's indexes are "using lsm", YugabyteDB's access method; PostgreSQL's default
# (btree) stands in: an index does not change the stream.
MIXED_INDEXES = ("create unique index orders_i_key_key on test_mixed (i_key)",
                 "create index idx_updated_at on test_mixed (updated_at)")
MIXED_INSERT = (
    "insert into test_mixed values ('id_val', 'i_key', 'c_id', 'p_type_val', "
    "'p_id_val', 'ffffff-ffff', 'DONE', 30.5, 'INR', 'JJXX+HR8', 10.0, null, "
    "'2024-08-06 17:30:00', '2024-08-06 17:30:00', '{\"name\":\"Something for display\"}', "
    "'{\"year\": 2000}', '{\"tx_seq\":500}', null, null, null, '2024-08-06 17:30:00', "
    "'2024-08-06 17:30:00', null, 1)"
)
MIXED_UPDATE = ("UPDATE test_mixed SET status = 'NOT AVAILABLE', version = 2 WHERE "
                "id = 'id_val' AND c_id = 'c_id' AND updated_at = '2024-08-06 17:30:00'")
#: assertValueField(insertRecord, "after/<column>/value", ...)
MIXED_INSERTED: dict[str, Any] = {
    "id": "id_val", "i_key": "i_key", "c_id": "c_id", "p_type": "p_type_val",
    "p_id": "p_id_val", "tx_id": "ffffff-ffff", "status": "DONE", "amount": 30.5,
    "currency": "INR", "loc": "JJXX+HR8", "quantity": 10.0, "o_type": None,
    "o_created_at": 1722965400000000, "o_updated_at": 1722965400000000,
    "dis_details": '{"name": "Something for display"}', "o_metadata": '{"year": 2000}',
    "tx_data": '{"tx_seq": 500}', "tx_ref_d": None, "rw_d": None, "meta": None,
    "created_at": 1722965400000000, "updated_at": 1722965400000000, "deleted_at": None,
    "version": 1,
}


def test_verify_operations_for_table_with_mixed_columns_yb_output(pg_conn: Any) -> None:
    """verifyOperationsForTableWithMixedColumnsYbOutput (decimal.handling.mode=double): the
    insert's every column; the update's key columns and SET columns, every other column a
    null cell ("assertValueField(updateRecord, "after/i_key", null)"...)."""
    pg_conn.run(MIXED)
    for statement in MIXED_INDEXES:
        pg_conn.run(statement)
    catalog = fetch_catalog(pg_conn)
    capturer = Capturer(pg_conn, tables=["test_mixed"])
    pg_conn.run(MIXED_INSERT)
    pg_conn.run(MIXED_UPDATE)
    insert, update = decode_yb(as_yboutput(capturer.changes(), [{"status", "version"}]),
                               catalog, **{"decimal.handling.mode": "double"})
    after = insert.value["after"]  # type: ignore[index]
    assert {name: after[name]["value"] for name in MIXED_INSERTED} == MIXED_INSERTED
    after = update.value["after"]  # type: ignore[index]
    assert after["id"]["value"] == "id_val"
    assert after["c_id"]["value"] == "c_id"
    assert after["updated_at"]["value"] == 1722965400000000
    assert after["status"]["value"] == "NOT AVAILABLE"
    assert after["version"]["value"] == 2
    for name in ("i_key", "p_type", "p_id", "tx_id", "amount", "currency", "loc", "quantity",
                 "o_type", "o_created_at", "o_updated_at", "dis_details", "o_metadata",
                 "tx_data", "tx_ref_d", "rw_d", "meta", "created_at", "deleted_at"):
        assert after[name] is None, name


def _values(record: ChangeRecord, part: str, expected: dict[str, Any]) -> None:
    """assertRecordSchemaAndValues under yboutput (AbstractRecordsProducerTest
    .SchemaAndValueField.assertFor: "YB Note: Not asserting for schema"): each field's
    ``getStruct(field).get("value")``; an expected null also accepts a null cell."""
    content = record.value[part]  # type: ignore[index]
    assert content is not None
    for name, want in expected.items():
        cell = content[name]
        actual = None if cell is None else cell["value"]
        assert actual == want, name
        if want is not None:
            assert type(actual) is type(want), name  # "Incorrect value type"


def test_should_receive_changes_for_new_table(pg_conn: Any) -> None:
    """shouldReceiveChangesForNewTable: CREATE SCHEMA s1; CREATE TABLE s1.a (pk SERIAL,
    aa integer, PRIMARY KEY(pk)); INSERT INTO s1.a (aa) VALUES (11) --
    assertRecordInserted("s1.a", PK_FIELD, 1)."""
    capturer = _setup(pg_conn)
    pg_conn.run("CREATE SCHEMA s1")
    pg_conn.run("CREATE TABLE s1.a (pk SERIAL, aa integer, PRIMARY KEY(pk))")
    pg_conn.run("ALTER PUBLICATION pub ADD TABLE s1.a")
    pg_conn.run("INSERT INTO s1.a (aa) VALUES (11)")
    (record,) = decode_yb(as_yboutput(capturer.changes()))
    assert record.topic == "test_server.s1.a"
    _check(record, "c", "pk", 1)


def test_should_receive_changes_for_renamed_table(pg_conn: Any) -> None:
    """shouldReceiveChangesForRenamedTable: ALTER TABLE test_table RENAME TO
    renamed_test_table; INSERT INTO renamed_test_table (text) VALUES ('new') --
    assertRecordInserted("public.renamed_test_table", PK_FIELD, 2)."""
    capturer = _setup(pg_conn)
    _statements(pg_conn, "ALTER TABLE test_table RENAME TO renamed_test_table;"
                         "INSERT INTO renamed_test_table (text) VALUES ('new')")
    (record,) = decode_yb(as_yboutput(capturer.changes()))
    assert record.topic == "test_server.public.renamed_test_table"
    _check(record, "c", "pk", 2)


def test_should_receive_changes_for_default_values(pg_conn: Any) -> None:
    """shouldReceiveChangesForDefaultValues: REPLICA IDENTITY FULL; ADD COLUMN default_column
    TEXT DEFAULT 'default'; INSERT INTO test_table (text) VALUES ('update') -- insert of
    pk 2 with text "update" and default_column "default"."""
    capturer = _setup(pg_conn)
    _statements(pg_conn, "ALTER TABLE test_table REPLICA IDENTITY FULL;"
                         "ALTER TABLE test_table ADD COLUMN default_column TEXT DEFAULT "
                         "'default';"
                         "INSERT INTO test_table (text) VALUES ('update')")
    (record,) = decode_yb(as_yboutput(capturer.changes()), fetch_catalog(pg_conn))
    assert record.topic == "test_server.public.test_table"
    _check(record, "c", "pk", 2)
    _values(record, "after", {"text": "update", "default_column": "default"})


def test_should_receive_changes_for_type_constraints(pg_conn: Any) -> None:
    """shouldReceiveChangesForTypeConstraints, as far as it goes on YugabyteDB ("YB Note:
    Altering column for table part of CDC replication is not allowed": it returns there):
    ADD COLUMN num_val NUMERIC(5,2); REPLICA IDENTITY FULL; UPDATE test_table SET num_val =
    123.45 WHERE pk = 1 -- before num_val null, after Decimal 123.45."""
    capturer = _setup(pg_conn)
    pg_conn.run("ALTER TABLE test_table ADD COLUMN num_val NUMERIC(5,2)")
    pg_conn.run("ALTER TABLE test_table REPLICA IDENTITY FULL")
    catalog = fetch_catalog(pg_conn)
    capturer.changes()  # the connector starts here
    pg_conn.run("UPDATE test_table SET num_val = 123.45 WHERE pk = 1")
    (record,) = decode_yb(as_yboutput(capturer.changes(), [{"num_val"}]), catalog)
    _check(record, "u", "pk", 1)
    _values(record, "before", {"num_val": None})
    _values(record, "after", {"num_val": Decimal("123.45")})


@pytest.mark.parametrize("defaults", [False, True], ids=["NullDefaults", "Defaults"])
def test_should_receive_numeric_type_as_double(pg_conn: Any, defaults: bool) -> None:
    """shouldReceiveNumericTypeAsDoubleWithNullDefaults and ...WithDefaults
    (decimal.handling.mode=double, REPLICA IDENTITY FULL): INSERT (pk) VALUES (1) --
    pk 1 and r_numeric, r_int null (NULL DEFAULT NULL) or 1.0 and 2 (NOT NULL DEFAULT 1/2)."""
    _setup(pg_conn).drop()
    table = "numeric_table_with_defaults" if defaults else "numeric_table_with_n_defaults"
    body = ("r_numeric numeric(19, 4) NOT NULL DEFAULT 1, r_int int4 NOT NULL DEFAULT 2"
            if defaults else
            "r_numeric numeric(19, 4) NULL DEFAULT NULL, r_int int4 NULL DEFAULT NULL")
    pg_conn.run(f"CREATE TABLE {table} (pk int4 PRIMARY KEY NOT NULL, {body})")
    pg_conn.run(f"ALTER TABLE {table} REPLICA IDENTITY FULL")
    catalog = fetch_catalog(pg_conn)
    capturer = Capturer(pg_conn, tables=[table])
    pg_conn.run(f"INSERT INTO {table} (pk) VALUES (1)")
    (record,) = decode_yb(as_yboutput(capturer.changes()), catalog,
                          **{"decimal.handling.mode": "double"})
    _check(record, "c", "pk", 1)
    _values(record, "after", {"pk": 1, "r_numeric": 1.0 if defaults else None,
                              "r_int": 2 if defaults else None})


def test_should_receive_changes_for_updates_with_column_changes(pg_conn: Any) -> None:
    """shouldReceiveChangesForUpdatesWithColumnChanges (REPLICA IDENTITY FULL): ADD COLUMN
    uvc VARCHAR(2), then UPDATE uvc = 'aa' (before uvc null, after "aa"); RENAME uvc TO xvc,
    UPDATE xvc = 'bb' (before "aa", after "bb"); DROP xvc, UPDATE text = 'update' (a valid
    update); ADD COLUMN modtype INTEGER, INSERT (pk, modtype) VALUES (2, 1) (after modtype 1).
    """
    capturer = _setup(pg_conn)
    pg_conn.run("ALTER TABLE test_table ADD COLUMN uvc VARCHAR(2)")
    pg_conn.run("ALTER TABLE test_table REPLICA IDENTITY FULL")
    catalog = fetch_catalog(pg_conn)
    capturer.changes()  # the connector starts here
    pg_conn.run("UPDATE test_table SET uvc ='aa' WHERE pk = 1")
    _statements(pg_conn, "ALTER TABLE test_table RENAME COLUMN uvc to xvc;"
                         "UPDATE test_table SET xvc ='bb' WHERE pk = 1")
    _statements(pg_conn, "ALTER TABLE test_table DROP COLUMN xvc;"
                         "UPDATE test_table SET text ='update' WHERE pk = 1")
    _statements(pg_conn, "ALTER TABLE test_table ADD COLUMN modtype INTEGER;"
                         "INSERT INTO test_table (pk,modtype) VALUES (2,1)")
    first, second, third, insert = decode_yb(as_yboutput(capturer.changes()), catalog)
    _check(first, "u", "pk", 1)
    _values(first, "before", {"uvc": None})
    _values(first, "after", {"uvc": "aa"})
    _check(second, "u", "pk", 1)
    _values(second, "before", {"xvc": "aa"})
    _values(second, "after", {"xvc": "bb"})
    _check(third, "u", "pk", 1)
    _check(insert, "c", "pk", 2)
    _values(insert, "after", {"modtype": 1})


def _source(record: ChangeRecord, db: str, schema: str, table: str) -> None:
    """assertSourceInfo(record, db, schema, table)."""
    source = record.value["source"]  # type: ignore[index]
    assert (source["db"], source["schema"], source["table"]) == (db, schema, table)


def test_should_stream_value_for_alias_like_integer_type(pg_conn: Any) -> None:
    """shouldStreamValudForAliasLikeIntegerType: CREATE DOMAIN integer_alias AS integer;
    CREATE TABLE test_alias_table (pk SERIAL PRIMARY KEY, alias_col integer_alias);
    INSERT (alias_col) VALUES (1234) -- after/pk/value 1, after/alias_col/value 1234."""
    pg_conn.run("CREATE DOMAIN integer_alias AS integer")
    pg_conn.run("CREATE TABLE test_alias_table (pk SERIAL PRIMARY KEY, alias_col integer_alias)")
    catalog = fetch_catalog(pg_conn)
    capturer = Capturer(pg_conn, tables=["test_alias_table"])
    pg_conn.run("INSERT INTO test_alias_table (alias_col) VALUES (1234)")
    (record,) = decode_yb(as_yboutput(capturer.changes()), catalog,
                          **{"table.include.list": "public.test_alias_table"})
    assert record.topic == "test_server.public.test_alias_table"
    _values(record, "after", {"pk": 1, "alias_col": 1234})


@pytest.mark.parametrize("with_default", [False, True],
                         ids=["shouldStreamEnumAsKnownType",
                              "shouldEmitEnumColumnDefaultValuesInSchema"])
def test_should_stream_enum_as_known_type(pg_conn: Any, with_default: bool) -> None:
    """shouldStreamEnumAsKnownType / shouldEmitEnumColumnDefaultValuesInSchema
    (include.unknown.datatypes=true, column.propagate.source.type=public.enum_table.value):
    CREATE TYPE test_type AS ENUM ('V1','V2') and a NOT NULL column of it (with DEFAULT
    'V2' and a data column in the second), one INSERT -- the record of pk 1, source
    yugabyte.public.enum_table, value "V1" (the second: data "V1", value "V2")."""
    pg_conn.run("CREATE TABLE enum_table (pk SERIAL, PRIMARY KEY (pk))")
    pg_conn.run("CREATE TYPE test_type AS ENUM ('V1','V2')")
    if with_default:
        pg_conn.run("ALTER TABLE enum_table ADD COLUMN data varchar(50) NOT NULL")
        pg_conn.run("ALTER TABLE enum_table ADD COLUMN value test_type NOT NULL "
                    "DEFAULT 'V2'::test_type")
    else:
        pg_conn.run("ALTER TABLE enum_table ADD COLUMN value test_type NOT NULL")
    catalog = fetch_catalog(pg_conn)
    capturer = Capturer(pg_conn, tables=["enum_table"])
    pg_conn.run("INSERT INTO enum_table (data) VALUES ('V1')" if with_default else
                "INSERT INTO enum_table (value) VALUES ('V1')")
    (record,) = decode_yb(as_yboutput(capturer.changes()), catalog, **{
        "include.unknown.datatypes": "true", "database.dbname": "yugabyte",
        "column.propagate.source.type": "public.enum_table.value",
        "table.include.list": "public.enum_table"})
    _check(record, "c", "pk", 1)
    _source(record, "yugabyte", "public", "enum_table")
    _values(record, "after", {"pk": 1, **({"data": "V1", "value": "V2"} if with_default
                                          else {"value": "V1"})})
