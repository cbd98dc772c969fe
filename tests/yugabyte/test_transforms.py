"""PGCompatible and YBExtractNewRecordState, refereed by the YugabyteDB connectors' tests.

``PGCompatibleTest`` exists in yugabyte/debezium on the branch YugabyteDB ships
(ybdb-debezium-2.5.2 at commit 52515b4ac54322b14c0d39c56a74e8aef530c61e,
debezium-connector-postgres/src/test/java/io/debezium/connector/postgresql/transforms/
yugabytedb/PGCompatibleTest.java) and, the same three tests, in
yugabyte/debezium-connector-yugabytedb (default branch ``main`` at commit
9607fea3cea1425f9df675dd77bea194b0ce98f1,
src/test/java/io/debezium/connector/yugabytedb/transforms/PGCompatibleTest.java); its
fixture is rebuilt here
field for field. ``YBExtractNewRecordState`` is exercised by
YugabyteDBDatatypesTest.testRecordDeleteFieldWithYBExtractNewRecordState
(yugabyte/debezium-connector-yugabytedb at the same commit,
src/test/java/io/debezium/connector/yugabytedb/YugabyteDBDatatypesTest.java).
"""

from __future__ import annotations

import pytest

from pgcdc_events.errors import ConfigurationError
from pgcdc_events.events import EventConfig, EventDecoder
from pgcdc_events.events.records import ChangeRecord
from pgcdc_events.events.yugabyte import yb_envelope_schema
from pgcdc_events.events.yugabyte_transforms import (
    extract_new_record_state,
    pg_compatible,
    pg_compatible_struct,
    yb_extract_new_record_state,
)
from pgcdc_events.protocol import Delete, Insert, Update, encode_message
from pgcdc_events.types.schema import Schema, Struct, struct_schema
from support.yboutput import INT4, VARCHAR, decode, relation, text, transaction

# -- PGCompatibleTest's fixture ----------------------------------------------------------
#: idSchema = struct{value: INT64, set: BOOLEAN} (required)
ID_SCHEMA = struct_schema(None, [("value", Schema("int64")), ("set", Schema("boolean"))])
#: nameSchema = struct{value: OPTIONAL_STRING, set: BOOLEAN}.optional()
NAME_SCHEMA = struct_schema(None, [("value", Schema("string", optional=True)),
                                   ("set", Schema("boolean"))], optional=True)
KEY_SCHEMA = struct_schema(None, [("id", ID_SCHEMA)])
#: valueSchema = struct{id, name, location: nameSchema}.optional()
VALUE_SCHEMA = struct_schema(None, [("id", ID_SCHEMA), ("name", NAME_SCHEMA),
                                    ("location", NAME_SCHEMA)], optional=True)
#: sourceSchema = struct{lsn: INT32, ts_ms: OPTIONAL_INT32, op: STRING}
SOURCE = struct_schema(None, [("lsn", Schema("int32")), ("ts_ms", Schema("int32", optional=True)),
                              ("op", Schema("string"))])
#: Envelope.defineSchema().withName("dummy.Envelope").withRecord(valueSchema)
#: .withSource(sourceSchema): the Debezium 2.5 envelope the YugabyteDB connector uses.
ENVELOPE = yb_envelope_schema("dummy.Envelope", VALUE_SCHEMA, SOURCE)


def _value() -> Struct:
    """createValue(): id {1, true}, name {"yb", true}, location {null, false}."""
    return Struct(VALUE_SCHEMA, (Struct(ID_SCHEMA, (1, True)), Struct(NAME_SCHEMA, ("yb", True)),
                                 Struct(NAME_SCHEMA, (None, False))))


def _payload() -> Struct:
    """createPayload(): envelope.create(createValue(), source{1234, 12836, "c"}, now)."""
    source = Struct(SOURCE, (1234, 12836, "c"))
    return Struct(ENVELOPE, (None, _value(), source, "c", 1_700_000_000_000, None))


def test_pg_compatible_single_level_struct() -> None:
    """PGCompatibleTest.testSingleLevelStruct."""
    _, unwrapped = pg_compatible_struct(VALUE_SCHEMA, _value())
    assert unwrapped["id"] == 1
    assert unwrapped["name"] == "yb"
    assert unwrapped["location"] is None


def test_pg_compatible_payload() -> None:
    """PGCompatibleTest.testPayload."""
    payload = _payload()
    schema, unwrapped = pg_compatible_struct(payload.schema, payload)
    assert schema.type == "struct"
    assert len(schema.fields or ()) == 6
    assert schema.fields[schema.field_index("op")].schema.type == "string"  # type: ignore[index]
    after_schema = schema.fields[schema.field_index("after")].schema  # type: ignore[index]
    assert after_schema.type == "struct"
    assert len(after_schema.fields or ()) == 3
    types = {f.name: f.schema.type for f in after_schema.fields or ()}
    assert types == {"id": "int64", "name": "string", "location": "string"}
    after = unwrapped["after"]
    assert after["id"] == 1
    assert after["name"] == "yb"


def test_pg_compatible_handle_create_rewrite() -> None:
    """PGCompatibleTest.testHandleCreateRewrite: the transform takes no options (its
    configure() ignores delete.handling.mode=rewrite and add.headers=op); the create keeps
    its envelope, unwrapped, with op "c" (both copies assert it)."""
    record = ChangeRecord("dummy", KEY_SCHEMA, Struct(KEY_SCHEMA, (Struct(ID_SCHEMA, (1, True)),)),
                          ENVELOPE, _payload())
    unwrapped = pg_compatible(record)
    assert unwrapped.value is not None
    assert unwrapped.value["after"]["id"] == 1
    assert unwrapped.value["after"]["name"] == "yb"
    assert unwrapped.value["op"] == "c"
    assert unwrapped.key is not None and unwrapped.key["id"] == 1


#: CREATE TABLE t1 (id INT PRIMARY KEY, first_name TEXT NOT NULL, last_name VARCHAR(40),
#: hours DOUBLE PRECISION) -- yugabyte_create_tables.ddl of debezium-connector-yugabytedb
#: at 9607fea3cea1425f9df675dd77bea194b0ce98f1
T1 = [("id", INT4, -1, True), ("first_name", 25, -1, False), ("last_name", VARCHAR, 44, False),
      ("hours", 701, -1, False)]


def _t1_records() -> list[ChangeRecord]:
    """insertRecords(1), updateRecords(1), deleteRecords(1) of YugabyteDBDatatypesTest under
    CHANGE: INSERT INTO t1 VALUES (0, 'Vaibhav', 'Kushwaha', 30); UPDATE t1 SET hours = 10
    WHERE id = 0; DELETE FROM t1 WHERE id = 0 -- 3 records and a tombstone."""
    return decode({}, [
        (relation(16430, "public", "t1", "c", T1), 1),
        *transaction(700, 10, Insert(16430, text("0", "Vaibhav", "Kushwaha", "30"))),
        *transaction(701, 20, Update(16430, None, None, text("0", ..., ..., "10"))),
        *transaction(702, 30, Delete(16430, "K", text("0", None, None, None))),
    ])


def test_record_delete_field_with_yb_extract_new_record_state() -> None:
    """YugabyteDBDatatypesTest.testRecordDeleteFieldWithYBExtractNewRecordState:
    drop.tombstones=false, delete.handling.mode=rewrite; 1 insert + 1 update + 1 delete +
    1 tombstone, and every record but the last (the tombstone, whose value is null) has a
    ``__deleted`` field in its transformed value."""
    records = _t1_records()
    assert len(records) == 4
    for record in records[:-1]:
        out = yb_extract_new_record_state(record, delete_handling_mode="rewrite",
                                          drop_tombstones=False)
        assert out is not None and out.value is not None
        assert out.value.get("__deleted") is not None
    tombstone = yb_extract_new_record_state(records[-1], delete_handling_mode="rewrite",
                                            drop_tombstones=False)
    assert tombstone is not None and tombstone.value is None


def test_yb_extract_new_record_state_omits_columns_not_sent() -> None:
    """Source rule (YBExtractNewRecordState.makeUpdatedSchema adds a cell's field only when
    its value is non-null; getUpdatedValueAndSchema puts only those): the CHANGE update
    keeps id and hours only, in its schema and its value; the key is unwrapped too."""
    insert, update, delete, _ = _t1_records()
    out = yb_extract_new_record_state(update)
    assert out is not None and out.value is not None and out.key is not None
    assert out.value.as_dict() == {"id": 0, "hours": 10.0}
    assert [f.name for f in out.value_schema.fields or ()] == ["id", "hours"]  # type: ignore[union-attr]
    assert out.value_schema is not None and not out.value_schema.optional  # copySchemaBasics
    assert out.key.as_dict() == {"id": 0}
    full = yb_extract_new_record_state(insert)
    assert full is not None and full.value is not None
    assert full.value.as_dict() == {"id": 0, "first_name": "Vaibhav", "last_name": "Kushwaha",
                                    "hours": 30.0}
    assert yb_extract_new_record_state(delete) is None  # delete.handling.mode=drop (default)


def test_pg_compatible_keeps_every_column_and_nulls_those_not_sent() -> None:
    """Source rule (PGCompatible class comment: "set the columns to null which are not
    updated"): the same CHANGE update, as a PostgreSQL consumer reads it."""
    _, update, _, _ = _t1_records()
    out = pg_compatible(update)
    assert out.value is not None and out.key is not None
    assert out.value["after"].as_dict() == {"id": 0, "first_name": None, "last_name": None,
                                            "hours": 10.0}
    assert out.value["before"] is None and out.value["op"] == "u"
    assert out.value["source"] == update.value["source"]  # type: ignore[index]
    assert out.key.as_dict() == {"id": 0}
    # Independent path: the unwrapped row schema is the one a pgoutput stream of the same
    # table gets from EventDecoder (cells replaced by their value schemas, nothing else).
    pg = EventDecoder(EventConfig("test_server"))
    pg.feed(encode_message(relation(16430, "public", "t1", "d", T1)), 1)
    plain = pg.table(16430)
    assert plain is not None
    after = out.value_schema.fields[1].schema  # type: ignore[union-attr, index]
    assert after.fields == plain.value_schema.fields
    assert out.key_schema is not None and out.key_schema.fields == plain.key_schema.fields  # type: ignore[union-attr]


def test_extract_new_record_state_modes() -> None:
    insert, _, delete, tombstone = _t1_records()
    assert extract_new_record_state(tombstone) is None
    assert extract_new_record_state(tombstone, drop_tombstones=False) is tombstone
    kept = extract_new_record_state(delete, delete_handling_mode="none")
    assert kept is not None and kept.value is None
    rewritten = extract_new_record_state(delete, delete_handling_mode="rewrite")
    assert rewritten is not None and rewritten.value is not None
    assert rewritten.value["__deleted"] == "true"
    assert rewritten.value["id"] == Struct(rewritten.value_schema.fields[0].schema, (0, True))  # type: ignore[union-attr, index]
    with pytest.raises(ConfigurationError, match=r"delete\.handling\.mode"):
        extract_new_record_state(insert, delete_handling_mode="keep")  # type: ignore[arg-type]
