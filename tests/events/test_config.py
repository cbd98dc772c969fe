"""Connector properties: validation, not-applicable reporting, and the rules they drive."""

from __future__ import annotations

import json

import pytest

from pgcdc_events.errors import ConfigurationError
from pgcdc_events.events import EventConfig, EventDecoder, JsonRecordWriter
from pgcdc_events.events.masking import _utf16_prefix, java_serialized_string
from pgcdc_events.events.tables import build_table_schema
from pgcdc_events.properties import parse_properties
from pgcdc_events.protocol import (
    Begin,
    Commit,
    Insert,
    Relation,
    RelationColumn,
    TupleData,
    Update,
)
from pgcdc_events.types.mapper import TypeMapper
from pgcdc_events.types.oids import OID_BY_NAME


def config(**props: str) -> EventConfig:
    return EventConfig.from_properties({"topic.prefix": "p", **{k.replace("_", "."): v
                                                               for k, v in props.items()}})


def test_a_real_connector_configuration_is_accepted() -> None:
    props = parse_properties("""
        name=inventory-connector
        connector.class=io.debezium.connector.postgresql.PostgresConnector
        tasks.max=1
        database.hostname=db
        database.port=5432
        database.user=debezium
        database.password=secret
        database.dbname=inventory
        topic.prefix=dbserver1
        plugin.name=pgoutput
        slot.name=debezium
        publication.autocreate.mode=filtered
        snapshot.mode=initial
        key.converter=org.apache.kafka.connect.json.JsonConverter
        value.converter.schemas.enable=false
        offset.storage.file.filename=/tmp/offsets.dat
        table.include.list=inventory\\\\.customers
    """.splitlines())
    cfg = EventConfig.from_properties(props)
    assert cfg.topic_prefix == "dbserver1" and cfg.database == "inventory"
    assert not cfg.json.schemas_enable
    assert {"database.hostname", "slot.name", "snapshot.mode", "tasks.max"} <= set(
        cfg.not_applicable)
    assert cfg.includes_table("inventory", "customers")
    assert not cfg.includes_table("inventory", "orders")


@pytest.mark.parametrize("props, message", [
    ({"tombstone.on.delete": "false"}, "did you mean tombstones.on.delete"),
    ({"decimal.handling.mode": "exact"}, "allowed: precise, double, string"),
    ({"time.precision.mode": "millis"}, "time.precision.mode"),
    ({"skipped.operations": "c,x"}, "unsupported operation"),
    ({"table.include.list": "a", "table.exclude.list": "b"}, "cannot be used together"),
    ({"plugin.name": "decoderbufs"}, "allowed: pgoutput, yboutput"),
    ({"transforms": "unwrap"}, "changes events"),
    ({"column.mask.hash.NOPE.with.salt.x": "a.b.c"}, "unsupported hash algorithm"),
    ({"column.truncate.to.0.chars": "a.b.c"}, "positive integer"),
    ({"message.key.columns": "justatable"}, "<schema>.<table>:<col>"),
    ({"heartbeat.interval.ms": "-5"}, "non-negative integer"),
    ({"table.include.list": "bad(regex"}, "invalid regular expression"),
    ({"unavailable.value.placeholder": "hex:zz"}, "not valid hex"),
    # misspellings under the pass-through prefixes (database.*, snapshot.*)
    ({"database.dbnmae": "app"}, "did you mean database.dbname\\?"),
    ({"snapshot.mod": "initial"}, "did you mean snapshot.mode"),
])
def test_bad_configurations_name_the_property(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message.replace("(", "\\(")):
        EventConfig.from_properties({"topic.prefix": "p", **props})


def test_pass_through_names_that_extend_a_property_or_name_a_driver_option_are_accepted(
        ) -> None:
    cfg = EventConfig.from_properties({
        "topic.prefix": "p", "snapshot.select.statement.overrides.public.t": "SELECT 1",
        "database.ApplicationName": "cdc", "driver.tcpKeepAlive": "true"})
    assert "database.ApplicationName" in cfg.not_applicable


def test_topic_prefix_is_required() -> None:
    with pytest.raises(ConfigurationError, match=r"topic\.prefix is required"):
        EventConfig.from_properties({})


def test_filters_match_whole_names_case_insensitively() -> None:
    cfg = EventConfig.from_properties({"topic.prefix": "p", "schema.exclude.list": "audit",
                                       "column.exclude.list": "public\\.t\\.sec.*",
                                       "message.prefix.include.list": "app\\..*"})
    assert not cfg.includes_table("AUDIT", "x") and cfg.includes_table("audit2", "x")
    assert not cfg.includes_column("public", "t", "secret")
    assert cfg.includes_column("public", "t", "public_secret")
    assert cfg.includes_message_prefix("app.audit") and not cfg.includes_message_prefix("other")


def test_message_key_columns() -> None:
    cfg = EventConfig.from_properties({"topic.prefix": "p",
                                       "message.key.columns": "s\\.t:a,b; other.x:c"})
    assert cfg.key_columns_for("s", "t") == ("a", "b")
    assert cfg.key_columns_for("other", "x") == ("c",)
    assert cfg.key_columns_for("s", "u") is None


def test_utf16_truncation_and_java_serialization() -> None:
    assert _utf16_prefix("héllo", 2) == "hé"
    assert _utf16_prefix("a😀b", 3) == "a😀"
    assert _utf16_prefix("a😀b", 2) == "a"  # a character that does not fit whole is left out
    # Bytes read off MaskStrings' V1 strategy for the same strings.
    assert java_serialized_string("ada@example.org").hex() == (
        "aced000574000f616461406578616d706c652e6f7267")
    assert java_serialized_string("héllo ✓").hex() == "aced000574000a68c3a96c6c6f20e29c93"


def test_skip_messages_without_change() -> None:
    relation = Relation(1, "public", "t", "f", (RelationColumn(1, "id", 23, -1),
                                                 RelationColumn(1, "v", 25, -1)))
    row = TupleData.from_text(("1", "a"))
    changed = TupleData.from_text(("1", "b"))
    for skip, expected in (("true", ["u"]), ("false", ["u", "u"])):
        decoder = EventDecoder(config(skip_messages_without_change=skip))
        decoder.handle(Begin(10, 0, 5), 1)
        decoder.handle(relation, 1)
        ops = [r.op for m in (Update(1, "O", row, row), Update(1, "O", row, changed))
               for r in decoder.handle(m, 2)]
        decoder.handle(Commit(0, 10, 11, 0), 3)
        assert ops == expected


def test_map_unsupported_types_property() -> None:
    for value, mapped in (("false", False), ("true", True)):
        cfg = EventConfig.from_properties({"topic.prefix": "p",
                                           "pgcdc.map.unsupported.types": value})
        column = TypeMapper(cfg.types).column("m", OID_BY_NAME["_money"])
        assert (column is not None) is mapped


def test_masks_apply_to_character_columns_only_and_follow_the_column_length() -> None:
    relation = Relation(1, "s", "t", "d", (
        RelationColumn(1, "id", 23, -1),
        RelationColumn(0, "code", 1043, 10 + 4),      # varchar(10)
        RelationColumn(0, "short", 1042, 2 + 4),       # char(2)
        RelationColumn(0, "u", 2950, -1),              # uuid: not a character column
    ))
    cfg = EventConfig.from_properties({
        "topic.prefix": "p",
        "column.mask.hash.SHA-256.with.salt.x": "s\\.t\\.code",
        "column.truncate.to.3.chars": "s\\.t\\.short,s\\.t\\.id",
        "column.mask.with.4.chars": "s\\.t\\.u",
    })
    table = build_table_schema(relation, TypeMapper(cfg.types), cfg)
    fields = {f.name: f.schema for f in table.value_schema.fields or ()}
    assert fields["code"].params == {"masked": "true"}
    assert fields["short"].params == {}  # a char(2) is never longer than 3: no truncateLength
    assert fields["u"].params == {} and fields["id"].params == {}
    row = table.row(TupleData.from_text(("1", "abc", "xy", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")))
    assert len(row[1]) == 10 and all(c in "0123456789abcdef" for c in row[1])
    assert row[2] == "xy" and row[3] == "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"


def test_converter_options_per_role_and_typos() -> None:
    cfg = EventConfig.from_properties({"topic.prefix": "p", "converter.schemas.enable": "true",
                                       "key.converter.schemas.enable": "false",
                                       "header.converter.decimal.format": "NUMERIC"})
    assert cfg.json.schemas_enable and not cfg.json_key.schemas_enable
    assert cfg.json_headers.decimal_format == "NUMERIC" and cfg.json.decimal_format == "BASE64"
    assert not any(n.endswith("schemas.enable") for n in cfg.not_applicable)
    with pytest.raises(ConfigurationError, match=r"did you mean value\.converter\.schemas\.enable"):
        EventConfig.from_properties({"topic.prefix": "p",
                                     "value.converter.schemas.enabel": "false"})


def test_key_converter_options_shape_the_key_json() -> None:
    cfg = EventConfig.from_properties({"topic.prefix": "p", "key.converter.schemas.enable": "false"})
    decoder = EventDecoder(cfg, clock=lambda: 1)
    relation = Relation(1, "public", "t", "d", (RelationColumn(1, "id", 23, -1),))
    decoder.handle(Begin(10, 0, 5), 1)
    decoder.handle(relation, 1)
    (record,) = decoder.handle(Insert(1, TupleData.from_text(("7",))), 2)
    line = json.loads(JsonRecordWriter.for_config(cfg).record_line(record))
    assert line["key"] == {"id": 7}
    assert set(line["value"]) == {"schema", "payload"}


def test_extended_headers_can_be_turned_off() -> None:
    names = [h.name for h in EventDecoder(EventConfig.from_properties(
        {"topic.prefix": "p"})).context_headers]
    assert names == ["__debezium.context.connectorLogicalName", "__debezium.context.taskId",
                     "__debezium.context.connectorName", "__debezium.context.runId"]
    off = EventConfig.from_properties({"topic.prefix": "p", "extended.headers.enabled": "false"})
    assert EventDecoder(off).context_headers == ()
    assert "extended.headers.enabled" not in off.not_applicable
