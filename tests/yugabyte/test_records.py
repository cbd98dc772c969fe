"""The YugabyteDB connector's records for each replica identity, refereed by its own tests.

Each test ports one test of yugabyte/debezium
``debezium-connector-postgres/src/test/java/io/debezium/connector/postgresql/YugabyteReplicaIdentityIT.java``
on the branch YugabyteDB ships, ``ybdb-debezium-2.5.2``, at commit
52515b4ac54322b14c0d39c56a74e8aef530c61e (named in the test's docstring; the ``...PgOutput``
methods run the connector with ``plugin.name=pgoutput`` and read plain values): the same table, the same statements (as the yboutput
messages YugabyteDB sends for them, see support/yboutput.py) and the same assertions.
``YBVerifyRecord`` (same directory, ``YBVerifyRecord.java``) checks the key as
``key.getStruct(pkField).get("value") == pk`` and then Debezium's ``VerifyRecord``
(op, and ``before``/``after`` present or null by operation).

The other ports here name their source in their docstring: ``YBRecordsStreamProducerIT`` of
yugabyte/debezium at the same commit, and ``YugabyteDBDatatypesTest.shouldWorkWithNullValues``
of yugabyte/debezium-connector-yugabytedb on its default branch ``main`` at
9607fea3cea1425f9df675dd77bea194b0ce98f1.
"""

from __future__ import annotations

from typing import Any

import pytest

from pgcdc_events.errors import ConfigurationError, ProtocolError
from pgcdc_events.events import EventConfig, EventDecoder
from pgcdc_events.events.records import ChangeRecord
from pgcdc_events.events.yugabyte import YugabyteEventDecoder
from pgcdc_events.protocol import Begin, Delete, Insert, Truncate, Update, encode_message
from pgcdc_events.types.catalog import CatalogSnapshot
from support.yboutput import (
    INT4,
    VARCHAR,
    catalog,
    decode,
    relation,
    text,
    transaction,
)

#: CREATE TABLE s1.a (pk SERIAL, aa integer, PRIMARY KEY(pk)) -- YugabyteReplicaIdentityIT
S1_A = [("pk", INT4, -1, True), ("aa", INT4, -1, False)]
#: CREATE TABLE s2.a (pk SERIAL, aa integer, bb varchar(20), PRIMARY KEY(pk))
S2_A = [("pk", INT4, -1, True), ("aa", INT4, -1, False), ("bb", VARCHAR, 24, False)]
S1, S2 = 16401, 16402


def _cell(struct: Any, name: str) -> Any:
    """``struct.getStruct(name)``: the column's cell (``None`` when not sent)."""
    return struct[name]


def _get(struct: Any, name: str, plugin: str) -> Any:
    """``getStruct(name).getInt32("value")`` (or ``getString``) under yboutput -- a cell must
    be there, even for a null value -- and ``struct.get(name)`` under pgoutput."""
    if plugin == "pgoutput":
        return struct[name]
    cell = struct[name]
    assert cell is not None, f"{name}: no cell (getStruct({name!r}) is null)"
    return cell["value"]


def _value(record: ChangeRecord, part: str) -> Any:
    assert record.value is not None
    return record.value[part]


def _is_valid(record: ChangeRecord, op: str, pk: int, plugin: str = "yboutput") -> None:
    """YBVerifyRecord.isValid{Insert,Update,Delete}(record, "pk", pk) under yboutput,
    VerifyRecord's (a plain key) under pgoutput."""
    assert record.key is not None
    assert _get(record.key, "pk", plugin) == pk  # YBVerifyRecord.hasValidKey
    assert _value(record, "op") == op
    if op == "c":
        assert _value(record, "after") is not None and _value(record, "before") is None
    elif op == "u":
        assert _value(record, "after") is not None
    else:
        assert _value(record, "before") is not None and _value(record, "after") is None


def _table_records(records: list[ChangeRecord], table: str) -> list[ChangeRecord]:
    """``recordsForTopic(topicName(table))``, data records only (no tombstones)."""
    return [r for r in records if r.topic == f"test_server.{table}" and r.value is not None]


def _decode(plugin: str, messages: list[tuple[Any, int]], cat: Any = None
            ) -> list[ChangeRecord]:
    """The connector with ``plugin.name``: yboutput bytes to the YugabyteDB decoder, or the
    same messages as pgoutput bytes to the plain decoder (the YugabyteDB connector's
    pgoutput records are the PostgreSQL connector's)."""
    if plugin == "yboutput":
        return decode({}, messages, cat)
    decoder = EventDecoder(EventConfig.from_properties({"topic.prefix": "test_server"}),
                           catalog=cat)
    out: list[ChangeRecord] = []
    for message, lsn in messages:
        out += decoder.feed(encode_message(message), lsn)
    return out


PLUGINS = pytest.mark.parametrize("plugin", ["yboutput", "pgoutput"],
                                  ids=["YbOutput", "PgOutput"])


@PLUGINS
def test_should_produce_old_values_with_replica_identity_full(plugin: str) -> None:
    """oldValuesWithReplicaIdentityFullFor{YbOutput,PgOutput}
    (shouldProduceOldValuesWithReplicaIdentityFull(logicalDecoder)): ALTER TABLE s1.a, s2.a
    REPLICA IDENTITY FULL; INSERT_STMT; UPDATE s1.a SET aa = 12345 WHERE pk = 1 -- s1.a's
    insert and update, before aa 1, after aa 12345."""
    records = _decode(plugin, [
        (relation(S1, "s1", "a", "f", S1_A), 1),
        (relation(S2, "s2", "a", "f", S2_A), 2),
        *transaction(700, 10, Insert(S1, text("1", "1")), Insert(S2, text("1", "1", None))),
        *transaction(701, 20, Update(S1, "O", text("1", "1"), text("1", "12345"))),
    ], CatalogSnapshot("yugabyte", "15.2-YB", catalog(S1, "s1", "a", "f", S1_A).tables
                       + catalog(S2, "s2", "a", "f", S2_A).tables))
    insert, update = _table_records(records, "s1.a")
    _is_valid(insert, "c", 1, plugin)
    _is_valid(update, "u", 1, plugin)
    assert _value(update, "after") is not None and _value(update, "before") is not None
    assert _get(_value(update, "before"), "aa", plugin) == 1
    assert _get(_value(update, "after"), "aa", plugin) == 12345


@PLUGINS
def test_should_produce_expected_values_with_replica_identity_default(plugin: str) -> None:
    """replicaIdentityDefaultWith{YbOutput,PgOutput}
    (shouldProduceExpectedValuesWithReplicaIdentityDefault(logicalDecoder)): ALTER TABLE
    s2.a REPLICA IDENTITY DEFAULT; INSERT INTO s2.a VALUES (1, 22, 'random text value');
    UPDATE s2.a SET aa = 12345 WHERE pk = 1. "After field will have entries for all the
    columns." YugabyteDB sends the whole new row under DEFAULT (yb_decode.c,
    YBDecodeUpdate: the omitted case is handled "only for ... CHANGE")."""
    records = _decode(plugin, [
        (relation(S2, "s2", "a", "d", S2_A), 1),
        *transaction(700, 10, Insert(S2, text("1", "22", "random text value"))),
        *transaction(701, 20, Update(S2, None, None, text("1", "12345", "random text value"))),
    ])
    insert, update = _table_records(records, "s2.a")
    _is_valid(insert, "c", 1, plugin)
    _is_valid(update, "u", 1, plugin)
    after = _value(update, "after")
    assert after is not None and _value(update, "before") is None
    assert _get(after, "pk", plugin) == 1
    assert _get(after, "aa", plugin) == 12345
    assert _get(after, "bb", plugin) == "random text value"


def test_should_produce_events_with_values_for_changed_column_with_replica_identity_change(
) -> None:
    """shouldProduceEventsWithValuesForChangedColumnWithReplicaIdentityChange: ALTER TABLE
    s2.a REPLICA IDENTITY CHANGE; INSERT (1, 22, 'random text value'); UPDATE s2.a SET
    aa = 12345 WHERE pk = 1; UPDATE s2.a SET aa = null WHERE pk = 1. "After field will have
    entries for all the changed columns": bb, not sent ('u'), is a null cell; "After field
    will have a null value in place of the column explicitly set as null": aa is a cell
    whose value is null."""
    records = decode({}, [
        (relation(S2, "s2", "a", "c", S2_A), 1),
        *transaction(700, 10, Insert(S2, text("1", "22", "random text value"))),
        *transaction(701, 20, Update(S2, None, None, text("1", "12345", ...))),
        *transaction(702, 30, Update(S2, None, None, text("1", None, ...))),
    ])
    insert, update, update_with_null = _table_records(records, "s2.a")
    _is_valid(insert, "c", 1)
    _is_valid(update, "u", 1)
    _is_valid(update_with_null, "u", 1)
    after = _value(update, "after")
    assert after is not None and _value(update, "before") is None
    assert _get(after, "pk", "yboutput") == 1
    assert _get(after, "aa", "yboutput") == 12345
    assert _cell(after, "bb") is None
    after = _value(update_with_null, "after")
    assert _get(after, "pk", "yboutput") == 1
    assert _get(after, "aa", "yboutput") is None
    assert _cell(after, "bb") is None


@pytest.mark.parametrize("old_kind", ["K", "O"])
def test_change_update_ignores_any_old_tuple(old_kind: str) -> None:
    """Under CHANGE (and DEFAULT) the connector reads no old values for an UPDATE
    (PostgresChangeRecordEmitter.getOldColumnValues, "YB Note: For replica identity CHANGE
    or DEFAULT, there is no old column value available"), whatever old tuple the plug-in
    sent: the same record as in the test above."""
    records = decode({}, [
        (relation(S2, "s2", "a", "c", S2_A), 1),
        *transaction(701, 20, Update(S2, old_kind, text("1", "22", "random text value"),
                                     text("1", "12345", ...))),
    ])
    (update,) = _table_records(records, "s2.a")
    assert _value(update, "before") is None
    assert _cell(_value(update, "after"), "bb") is None  # not filled from the old tuple


@PLUGINS
def test_should_have_before_image_for_deletes_for_replica_identity_full(plugin: str) -> None:
    """beforeImageForDeleteWithReplicaIdentityFullAnd{YbOutput,PgOutput}
    (shouldHaveBeforeImageForDeletesForReplicaIdentityFull(logicalDecoder)): ALTER TABLE
    s2.a REPLICA IDENTITY FULL; INSERT (1, 22, 'random text value'); DELETE FROM s2.a WHERE
    pk = 1. "Before field will have entries for all the columns." """
    records = _decode(plugin, [
        (relation(S2, "s2", "a", "f", S2_A), 1),
        *transaction(700, 10, Insert(S2, text("1", "22", "random text value"))),
        *transaction(701, 20, Delete(S2, "O", text("1", "22", "random text value"))),
    ], catalog(S2, "s2", "a", "f", S2_A))
    insert, delete = _table_records(records, "s2.a")
    _is_valid(insert, "c", 1, plugin)
    _is_valid(delete, "d", 1, plugin)
    before = _value(delete, "before")
    assert _value(delete, "after") is None and before is not None
    assert _get(before, "pk", plugin) == 1
    assert _get(before, "aa", plugin) == 22
    assert _get(before, "bb", plugin) == "random text value"


@pytest.mark.parametrize(("identity", "plugin"), [
    ("d", "yboutput"), ("d", "pgoutput"), ("c", "yboutput")],
    ids=["DefaultAndYbOutput", "DefaultAndPgOutput", "Change"])
def test_should_have_before_image_for_deletes_for_replica_identity_default_and_change(
        identity: str, plugin: str) -> None:
    """beforeImageForDeleteWithReplicaIdentityDefaultAnd{YbOutput,PgOutput}
    (shouldHaveBeforeImageForDeletesForReplicaIdentityDefault(logicalDecoder)) and
    shouldHaveBeforeImageForDeletesForReplicaIdentityChange: INSERT (1, 22, 'random text
    value'); DELETE FROM s2.a WHERE pk = 1. "Before field will have entries only for the
    primary key columns": the old key tuple carries the key and NULL for the others
    (logicalrep_write_delete, 'K'), so under yboutput aa and bb are cells whose value is
    null (``getStruct("aa").getInt32("value")`` is null)."""
    records = _decode(plugin, [
        (relation(S2, "s2", "a", identity, S2_A), 1),
        *transaction(700, 10, Insert(S2, text("1", "22", "random text value"))),
        *transaction(701, 20, Delete(S2, "K", text("1", None, None))),
    ])
    insert, delete = _table_records(records, "s2.a")
    _is_valid(insert, "c", 1, plugin)
    _is_valid(delete, "d", 1, plugin)
    before = _value(delete, "before")
    assert _value(delete, "after") is None and before is not None
    assert _get(before, "pk", plugin) == 1
    assert _get(before, "aa", plugin) is None
    assert _get(before, "bb", plugin) is None


def test_tables_without_a_primary_key_are_refused_by_name() -> None:
    """"CDC is not supported for tables without primary keys" (the connector's
    documentation, Change event keys): the table is named, quoted."""
    columns = [("pk", INT4, -1, False), ("val", INT4, -1, False)]
    with pytest.raises(ConfigurationError, match=r'table "nopk"\."t3" has no primary key'):
        decode({}, [(relation(16410, "nopk", "t3", "d", columns), 1)])
    with pytest.raises(ConfigurationError, match=r"REPLICA IDENTITY FULL .* catalog snapshot"):
        decode({}, [(relation(16410, "nopk", "t3", "f", columns), 1)])
    # Fed on after the refusal, each change to the table is refused again, by name.
    decoder = YugabyteEventDecoder(EventConfig.from_properties(
        {"topic.prefix": "p", "plugin.name": "yboutput"}))
    with pytest.raises(ConfigurationError, match="has no primary key"):
        decoder.feed(encode_message(relation(16410, "nopk", "t3", "d", columns)), 1)
    assert decoder.yugabyte_table(16410) is None
    decoder.feed(encode_message(Begin(10, 0, 700)), 2)
    with pytest.raises(ConfigurationError, match=r'table "nopk"\."t3" has no primary key'):
        decoder.feed(encode_message(Insert(16410, text("3", "30"))), 3)
    # Filtered out tables are not refused: they are not captured.
    assert decode({"table.include.list": "s2.a"},
                  [(relation(16410, "nopk", "t3", "d", columns), 1)]) == []


def test_the_yboutput_configuration() -> None:
    """plugin.name=yboutput selects this decoder; yb.consistent.snapshot (a YugabyteDB
    connector property, PostgresConnectorConfig.YB_CONSISTENT_SNAPSHOT) is accepted there
    only; skipped.operations may leave t out (PostgresConnectorIT
    .shouldEmitNoEventsForSkippedCreateOperations runs with skipped.operations=u)."""
    cfg = EventConfig.from_properties({"topic.prefix": "p", "plugin.name": "yboutput",
                                       "yb.consistent.snapshot": "true"})
    assert cfg.plugin_name == "yboutput" and "yb.consistent.snapshot" in cfg.not_applicable
    with pytest.raises(ConfigurationError, match="unknown connector property"):
        EventConfig.from_properties({"topic.prefix": "p", "yb.consistent.snapshot": "true"})
    assert EventConfig.from_properties({"topic.prefix": "p", "plugin.name": "yboutput",
                                        "skipped.operations": "u"}).skipped_operations == {"u"}
    with pytest.raises(ConfigurationError, match=r"plugin\.name=yboutput, not pgoutput"):
        YugabyteEventDecoder(EventConfig("p"))
    # and a plain EventDecoder refuses a yboutput configuration rather than ignore it
    yb = EventConfig.from_properties({"topic.prefix": "p", "plugin.name": "yboutput"})
    with pytest.raises(ConfigurationError, match=r"plugin\.name=pgoutput, not yboutput"):
        EventDecoder(yb)


def test_pgoutput_decoder_refuses_a_change_relation() -> None:
    """A yboutput stream read as pgoutput fails at the Relation, with its offset."""
    data = encode_message(relation(S2, "s2", "a", "c", S2_A), yboutput=True)
    with pytest.raises(ProtocolError, match="replica identity d, n, f or i"):
        EventDecoder(EventConfig("p")).feed(data, 1)


#: CREATE TABLE test_table (pk SERIAL, text TEXT, PRIMARY KEY(pk)); INSERT INTO
#: test_table(text) VALUES ('insert') -- YBRecordsStreamProducerIT.before(); the service's
#: default replica identity is CHANGE ("YB Note" in YugabyteReplicaIdentityIT).
TEST_TABLE = [("pk", INT4, -1, True), ("text", 25, -1, False)]
T = 16420


def test_should_receive_changes_for_updates_with_pk_changes() -> None:
    """YBRecordsStreamProducerIT.shouldReceiveChangesForUpdatesWithPKChanges (yugabyte/debezium
    at 52515b4ac, .../postgresql/YBRecordsStreamProducerIT.java): UPDATE test_table SET text = 'update',
    pk = 2 gives a delete of pk 1, its tombstone, then an insert of pk 2.

    Under yboutput the connector never splits an UPDATE (emitUpdateRecord), so these three
    records come from the server sending the key change as a DELETE and an INSERT (in
    YugabyteDB a new primary key is a new row), which is the stream fed here."""
    records = decode({}, [
        (relation(T, "public", "test_table", "c", TEST_TABLE), 1),
        *transaction(700, 10, Delete(T, "K", text("1", None)), Insert(T, text("2", "update"))),
    ])
    delete, tombstone, insert = [r for r in records if r.topic == "test_server.public.test_table"]
    _is_valid(delete, "d", 1)
    assert tombstone.value is None and tombstone.key is not None  # isValidTombstone
    assert tombstone.key["pk"]["value"] == 1
    _is_valid(insert, "c", 2)


def test_a_key_changing_update_message_stays_one_update() -> None:
    """Source rule, no YugabyteDB test: PostgresChangeRecordEmitter.emitUpdateRecord emits a
    single update under the new key when ``connectorConfig.plugin().isYBOutput()``, where
    upstream Debezium emits delete + tombstone + create."""
    records = decode({}, [
        (relation(S2, "s2", "a", "f", S2_A), 1),
        *transaction(701, 20, Update(S2, "O", text("1", "22", "x"), text("2", "22", "x"))),
    ], catalog(S2, "s2", "a", "f", S2_A))
    (update,) = _table_records(records, "s2.a")
    _is_valid(update, "u", 2)
    assert _cell(_value(update, "before"), "pk")["value"] == 1
    assert [h.name for h in update.headers if "key" in h.name] == []


def test_unchanged_toast_under_full_is_filled_from_the_old_row() -> None:
    """Source rule, no YugabyteDB test: with an old tuple read (FULL), an unchanged TOAST
    value of the new row takes the old value (PostgresChangeRecordEmitter.columnValues,
    cachedOldToastedValues); without one (CHANGE) the column is a null cell."""
    records = decode({}, [
        (relation(S2, "s2", "a", "f", S2_A), 1),
        *transaction(701, 20, Update(S2, "O", text("1", "22", "long"), text("1", "23", ...))),
    ], catalog(S2, "s2", "a", "f", S2_A))
    (update,) = _table_records(records, "s2.a")
    assert _cell(_value(update, "after"), "bb")["value"] == "long"
    assert _cell(_value(update, "after"), "aa")["value"] == 23


#: CREATE TABLE t1 (id INT PRIMARY KEY, first_name TEXT NOT NULL, last_name VARCHAR(40),
#: hours DOUBLE PRECISION) -- yugabyte/debezium-connector-yugabytedb
#: src/test/resources/yugabyte_create_tables.ddl at 9607fea3cea1425f9df675dd77bea194b0ce98f1
T1 = [("id", INT4, -1, True), ("first_name", 25, -1, False), ("last_name", VARCHAR, 44, False),
      ("hours", 701, -1, False)]


def test_should_work_with_null_values() -> None:
    """YugabyteDBDatatypesTest.shouldWorkWithNullValues (yugabyte/debezium-connector-yugabytedb
    at 9607fea3cea1425f9df675dd77bea194b0ce98f1,
    src/test/java/io/debezium/connector/yugabytedb/YugabyteDBDatatypesTest.java): INSERT INTO
    t1 VALUES (i, 'Vaibhav', 'Kushwaha') for i in 0..99, each its own statement and so its
    own transaction (``TestHelper.execute``); ``after/id/value`` is i and
    ``after/hours/value`` is null: a NULL that was sent is a cell, not a missing one.
    (That connector reads YugabyteDB's gRPC CDC service; its records have the same cells.)"""
    records = decode({}, [
        (relation(16430, "public", "t1", "c", T1), 1),
        *(message for i in range(100) for message in transaction(
            700 + i, 10 + 10 * i, Insert(16430, text(str(i), "Vaibhav", "Kushwaha", None)))),
    ])
    rows = _table_records(records, "public.t1")
    assert len(rows) == 100
    for i, record in enumerate(rows):
        after = _value(record, "after")
        assert after["id"]["value"] == i
        assert after["hours"] is not None and after["hours"]["value"] is None


def test_source_block() -> None:
    """Source rules, no YugabyteDB test of their values: the fields of
    PostgresSourceInfoStructMaker at the shipping commit (Debezium 2.5 common fields,
    schema, table, txId, lsn, xmin; no origin fields); ``sequence`` as
    SourceInfo.sequence() writes it on the shipping branch (yugabyte/debezium
    ybdb-debezium-2.5.2 at 52515b4ac: ``MAPPER.writeValueAsString`` of the last commit LSN and
    the LSN as strings, ``null`` before any commit; PostgresConnectorIT.getSequence reads it
    back as a JSON array of longs)."""
    records = decode({"database.dbname": "yugabyte"}, [
        (relation(S2, "s2", "a", "c", S2_A), 1),
        *transaction(700, 10, Insert(S2, text("1", "22", "x"))),
        *transaction(701, 20, Insert(S2, text("2", "22", "x"))),
    ])
    first, second = _table_records(records, "s2.a")
    source = first.value["source"]  # type: ignore[index]
    assert [f.name for f in source.schema.fields] == [
        "version", "connector", "name", "ts_ms", "snapshot", "db", "sequence", "schema", "table",
        "txId", "lsn", "xmin"]
    assert source.schema.name == "io.debezium.connector.postgresql.Source"
    assert (source["connector"], source["name"], source["db"], source["schema"],
            source["table"], source["txId"], source["lsn"]) == (
        "postgresql", "test_server", "yugabyte", "s2", "a", 700, 11)
    assert source["sequence"] == '[null,"11"]'
    # the last commit LSN is the first transaction's end LSN (transaction(): Commit at
    # 10 + 1 change + 1 = 12, end LSN 13), as for PostgreSQL records
    assert second.value["source"]["sequence"] == '["13","21"]'  # type: ignore[index]
    envelope = [f.name for f in first.value_schema.fields]  # type: ignore[union-attr]
    assert envelope == ["before", "after", "source", "op", "ts_ms", "transaction"]


def test_replica_identity_nothing() -> None:
    """Source rules, no YugabyteDB record test (under NOTHING the server refuses UPDATE and
    DELETE: YugabyteReplicaIdentityIT.shouldThrowExceptionWithReplicaIdentityNothingOnUpdates
    AndDeletes): inserts are records as under any identity; the primary key comes from the
    catalog (PgOutputMessageDecoder queries it for FULL and NOTHING, the flags being all 0)."""
    records = decode({}, [
        (relation(S2, "s2", "a", "n", S2_A), 1),
        *transaction(700, 10, Insert(S2, text("1", "22", "random text value"))),
        # an UPDATE without old data, were one sent: no before (no old tuple to read)
        *transaction(701, 20, Update(S2, None, None, text("1", "23", "x"))),
    ], catalog(S2, "s2", "a", "n", S2_A))
    insert, update = _table_records(records, "s2.a")
    _is_valid(insert, "c", 1)
    _is_valid(update, "u", 1)
    assert _value(update, "before") is None
    assert _cell(_value(update, "after"), "aa")["value"] == 23
    with pytest.raises(ConfigurationError, match="REPLICA IDENTITY NOTHING"):
        decode({}, [(relation(S2, "s2", "a", "n", S2_A), 1)])


def test_a_unique_index_is_no_primary_key() -> None:
    """TablesWithoutPrimaryKeyIT's nopk.t1 (pk INT UNIQUE, val INT) is keyed by its unique
    index under pgoutput (that test reads plain values, so it runs with pgoutput); under
    yboutput a table without a primary key is refused whatever its indexes ("CDC is not
    supported for tables without primary keys")."""
    from pgcdc_events.types.catalog import (  # noqa: PLC0415
        CatalogColumn,
        CatalogSnapshot,
        CatalogTable,
    )
    columns = [("pk", INT4, -1, False), ("val", INT4, -1, False)]
    unique = CatalogSnapshot("yugabyte", "15.2-YB", (CatalogTable(16440, "nopk", "t1", "d", (
        CatalogColumn("pk", 1, INT4, unique_index_position=1), CatalogColumn("val", 2, INT4))),))
    assert unique.tables[0].event_key == ("pk",) and not unique.tables[0].primary_key
    with pytest.raises(ConfigurationError, match=r'table "nopk"\."t1" has no primary key'):
        decode({}, [(relation(16440, "nopk", "t1", "d", columns), 1)], unique)


@pytest.mark.parametrize("skipped", ["t", "u"])
def test_a_truncate_under_yboutput(skipped: str) -> None:
    """YugabyteDB sends no TRUNCATE (LogicalDecoder.YBOUTPUT.supportsTruncate() is false;
    YBRecordsStreamProducerIT.shouldProcessTruncateMessages is @Ignore'd: "Truncate events
    are unsupported"). One that reaches the decoder is skipped when t is in
    skipped.operations, and refused, naming its table and LSN, when it is not."""
    stream = [(relation(S2, "s2", "a", "c", S2_A), 1),
              *transaction(700, 10, Truncate(0, (S2,)))]
    if skipped == "t":
        assert decode({"skipped.operations": "t"}, stream) == []
        return
    with pytest.raises(ConfigurationError, match=r'TRUNCATE of "s2"\."a" at LSN 0/B'):
        decode({"skipped.operations": "u"}, stream)
