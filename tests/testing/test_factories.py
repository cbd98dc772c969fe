"""Factories and table definitions: one call per event, defaults, and catalogs both ways."""

from __future__ import annotations

import datetime
import uuid
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings

from pgcdc_events.errors import ConfigurationError
from pgcdc_events.testing import (
    catalog_for,
    delete,
    insert,
    message,
    op_delete,
    op_insert,
    op_update,
    table,
    tables_from_catalog,
    transaction,
    truncate,
    update,
    validate_record,
)
from pgcdc_events.testing.strategies import tables
from pgcdc_events.testing.tables import TableDef
from pgcdc_events.types.catalog import fetch_catalog

ACCOUNTS = table("bank.accounts", {"id": "bigint", "owner": "text", "balance": "numeric(12,2)",
                                   "opened": "date", "tags": "text[]", "seen": "timestamptz"},
                 primary_key="id", not_null=["owner"])


def test_insert_is_one_create_event_with_defaults() -> None:
    record = insert(ACCOUNTS, {"id": 7, "owner": "Ada", "balance": Decimal("10.50"),
                               "opened": datetime.date(1815, 12, 10), "tags": ["a", None]})
    assert record.op == "c" and record.topic == "pgcdc.bank.accounts"
    assert record.key.as_dict() == {"id": 7}
    after = record.value["after"].as_dict()
    assert after["owner"] == "Ada" and after["tags"] == ["a", None] and after["seen"] is None
    assert after["opened"] == (datetime.date(1815, 12, 10) - datetime.date(1970, 1, 1)).days
    source = record.value["source"].as_dict()
    assert (source["txId"], source["lsn"], source["ts_ms"]) == (1000, 0x1000038, 1704067200001)
    assert (source["schema"], source["table"]) == ("bank", "accounts")


def test_defaults_can_be_set() -> None:
    when = datetime.datetime(2025, 5, 1, 12, 0, tzinfo=datetime.timezone.utc)
    record = insert(ACCOUNTS, {"id": 1, "owner": "x"}, lsn=0x5000000, xid=42, commit_time=when,
                    config={"topic.prefix": "shop"})
    source = record.value["source"]
    assert (source["txId"], source["lsn"], source["ts_ms"]) == (42, 0x5000000,
                                                                int(when.timestamp() * 1000))
    assert record.topic == "shop.bank.accounts"


def test_update_delete_truncate_message() -> None:
    before = {"id": 1, "owner": "Ada", "balance": 5}
    u = update(ACCOUNTS, before, balance=Decimal("7.25"))
    assert u.op == "u" and u.value["before"] is None  # REPLICA IDENTITY DEFAULT sends no old row
    assert u.value["after"]["balance"] == Decimal("7.25")
    d = delete(ACCOUNTS, before)
    assert d.op == "d" and d.value["before"].as_dict()["id"] == 1
    full = table("public.audit", {"id": "int4", "v": "text"}, replica_identity="full")
    d_full = delete(full, {"id": 1, "v": "x"})
    assert d_full.key is None and d_full.value["before"].as_dict() == {"id": 1, "v": "x"}
    t = truncate(ACCOUNTS)
    assert t.op == "t" and t.key is None
    m = message("audit", "hello", transactional=False)
    assert m.value["message"].as_dict() == {"prefix": "audit", "content": b"hello"}
    assert m.value["source"]["txId"] is None
    assert message("audit", b"\x00").value["source"]["txId"] == 1000


def test_key_changes_need_a_transaction() -> None:
    before = {"id": 1, "owner": "Ada"}
    with pytest.raises(ConfigurationError, match="2 events"):
        update(ACCOUNTS, before, id=2)
    records = transaction(op_update(ACCOUNTS, before, id=2))
    assert [(r.kind, r.op) for r in records] == [("change", "d"), ("tombstone", None),
                                                 ("change", "c")]
    assert records[0].header("__debezium.newkey").as_dict() == {"id": 2}


def test_transaction_with_metadata_as_json() -> None:
    t = table("bank.accounts", {"id": "bigint", "owner": "text"}, primary_key="id")
    records = transaction(op_insert(t, {"id": 1, "owner": "a"}),
                          op_update(t, {"id": 1, "owner": "a"}, owner="b"),
                          op_delete(t, {"id": 1, "owner": "b"}),
                          config={"topic.prefix": "pgcdc", "provide.transaction.metadata": "true"},
                          json=True)
    assert [r["topic"] for r in records] == ["pgcdc.transaction", *["pgcdc.bank.accounts"] * 4,
                                             "pgcdc.transaction"]
    assert records[-1]["value"]["payload"]["event_count"] == 3
    assert all(validate_record(r).ok for r in records)


@pytest.mark.parametrize(("sql", "value", "text"), [
    ("bool", True, "t"),
    ("int2", -3, "-3"),
    ("float8", 1.5, "1.5"),
    ("numeric", Decimal("-1.250"), "-1.250"),
    ("numeric(6,2)", 12, "12.00"),
    ("money", Decimal("2.50"), "$2.50"),
    ("date", datetime.date(2000, 1, 2), "2000-01-02"),
    ("timestamp", datetime.datetime(2000, 1, 1, 0, 0, 1), "2000-01-01 00:00:01"),
    ("timestamptz", datetime.datetime(2000, 1, 1, 5, 30, tzinfo=datetime.timezone(
        datetime.timedelta(hours=5, minutes=30))), "2000-01-01 00:00:00+00"),
    ("time", datetime.time(1, 2, 3), "01:02:03"),
    ("timetz", datetime.time(1, 2, 3, tzinfo=datetime.timezone.utc), "01:02:03+00"),
    ("interval", datetime.timedelta(days=1, seconds=1), "1 day 00:00:01"),
    ("bytea", b"\x00\xff", "\\x00ff"),
    ("uuid", uuid.UUID(int=1), "00000000-0000-0000-0000-000000000001"),
    ("jsonb", {"b": [1, 2.5], "a": None}, '{"a": null, "b": [1, 2.5]}'),
    ("int4[]", [1, None], "{1,NULL}"),
    ("text[]", ["a b", ""], '{"a b",""}'),
])
def test_python_values_mean_what_their_text_form_means(sql: str, value: Any, text: str
                                                       ) -> None:
    """A Python value gives the same event as PostgreSQL's text form of it."""
    t = table("public.v", {"id": "int4", "c": sql}, primary_key="id")
    from_python = insert(t, {"id": 1, "c": value}, json=True)["value"]["payload"]["after"]
    from_text = insert(t, {"id": 1, "c": text}, json=True)["value"]["payload"]["after"]
    assert from_python == from_text
    assert from_python["c"] is not None


def test_factory_records_are_valid() -> None:
    """Deletes of tables with NOT NULL columns outside the key included (PostgreSQL sends only
    the key; the decoder fills those columns as Debezium does)."""
    row = {"id": 1, "owner": "Ada", "tags": ["x"]}
    for record in (insert(ACCOUNTS, row, json=True), delete(ACCOUNTS, row, json=True),
                   update(ACCOUNTS, row, owner="Bo", json=True), truncate(ACCOUNTS, json=True),
                   message("p", b"\x00", json=True)):
        assert validate_record(record).ok, validate_record(record).problems


def test_bad_values_are_reported() -> None:
    with pytest.raises(ConfigurationError, match="no column"):
        insert(ACCOUNTS, {"nope": 1})
    with pytest.raises(ConfigurationError, match="cannot use"):
        insert(ACCOUNTS, {"id": object()})
    with pytest.raises(ConfigurationError, match="6 columns"):
        insert(ACCOUNTS, [1, 2])


def test_declarative_tables() -> None:
    t = table("Sales Ö.Order Items", [("Line", "integer"), ("qty", "smallint"),
                                       ("state", "mood")],
              primary_key=["Line"], replica_identity="index", identity_columns=["Line"],
              enums={"mood": ["new", "done"]})
    assert (t.schema, t.name, t.replica_identity) == ("Sales Ö", "Order Items", "i")
    rel = t.relation()
    assert [c.is_key for c in rel.columns] == [True, False, False]
    assert [c.type_oid for c in rel.columns][:2] == [23, 21]
    assert [m.name for m in t.type_messages()] == ["mood"]
    with pytest.raises(ConfigurationError, match="no column"):
        table("t", {"a": "int4"}, primary_key="b")


@given(tables(extensions=True))
@settings(max_examples=100, database=None)
def test_tables_survive_a_catalog_round_trip(t: TableDef) -> None:
    (back,) = tables_from_catalog(catalog_for([t]))
    assert back == t


def test_generated_tables_match_the_server_catalog(pg_conn: Any) -> None:
    """create_sql on the server, then the server's own catalog snapshot, read back as
    table definitions: the same tables (types, modifiers, NOT NULL, keys, identity)."""
    for extension in ("hstore", "citext", "ltree", "postgis"):
        pg_conn.run(f"CREATE EXTENSION IF NOT EXISTS {extension}")
    made: list[TableDef] = []

    @given(tables(extensions=True))
    @settings(max_examples=25, database=None, deadline=None)
    def collect(t: TableDef) -> None:
        if all((t.schema, t.name) != (m.schema, m.name) for m in made):
            made.append(t)

    collect()
    for t in made:
        for statement in t.create_sql():
            pg_conn.run(statement)
    snapshot = fetch_catalog(pg_conn)
    for t in made:
        (back,) = tables_from_catalog(snapshot, [t.qualified])
        assert back.columns == t.columns, t
        assert (back.primary_key, back.replica_identity, back.identity_columns) == (
            t.primary_key, t.replica_identity, t.identity_columns)
        assert dict(back.enums) == dict(t.enums)


def test_bare_bit_and_char_are_one_long_as_on_the_server(pg_conn: Any) -> None:
    """``bit`` and ``char`` without a length are ``bit(1)`` and ``char(1)`` in a column (a
    bare bit read as unlimited made Bits of a Boolean column); ``bpchar`` stays unlimited."""
    t = table("bare", {"id": "int4", "b": "bit", "c": "char", "p": "bpchar"}, primary_key="id")
    for statement in t.create_sql():
        pg_conn.run(statement)
    (back,) = tables_from_catalog(fetch_catalog(pg_conn), [t.qualified])
    assert [c.type_modifier for c in back.types()] == [c.type_modifier for c in t.types()] == [
        -1, 1, 5, -1]


@given(tables(relation_id=17_000), tables(relation_id=17_000))
@settings(max_examples=200, database=None)
def test_enums_of_different_labels_have_different_names(a: TableDef, b: TableDef) -> None:
    """A server keeps the first enum of a name (``CREATE TYPE`` guarded by duplicate_object),
    so generated enum names must not be shared by different label lists, also not by tables
    of the same relation OID (table_sets numbers every workload's tables alike)."""
    for name, labels in a.enums:
        assert dict(b.enums).get(name, labels) == labels
