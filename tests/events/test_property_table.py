"""The connector properties are declared once (``PROPERTIES``): the parser, the field defaults,
the generated reference page and the "did you mean" hints agree with that table."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from pgcdc_events.cli import capture_cmd
from pgcdc_events.errors import ConfigurationError
from pgcdc_events.events.config import APPLIED_PROPERTIES, CAPTURE_NOTES, PROPERTIES, EventConfig
from pgcdc_events.types.config import TYPE_PROPERTIES

ROOT = Path(__file__).resolve().parents[2]
FIELDS = attrs.fields_dict(EventConfig)


def test_each_property_sets_a_field_and_its_default_is_the_fields() -> None:
    assert len({p.name for p in PROPERTIES}) == len(PROPERTIES)
    for prop in PROPERTIES:
        if prop.field is None:
            continue
        assert prop.field in FIELDS, prop
        assert prop.parse is not None
        parsed = prop.parse(prop.name, prop.default)
        if prop.field == "topic_prefix":  # required: no default
            assert parsed == "" and FIELDS["topic_prefix"].default is attrs.NOTHING
            continue
        assert parsed == FIELDS[prop.field].default, prop.name


def test_every_field_comes_from_the_table_or_a_named_source() -> None:
    from_table = {p.field for p in PROPERTIES if p.field}
    elsewhere = {"types", "json", "json_key", "json_headers", "mask_with_chars",
                 "mask_with_hash", "truncate_to_chars", "version", "not_applicable",
                 "signal_tables"}  # signal.data.collection, parsed into (schema, table)
    assert set(FIELDS) == from_table | elsewhere
    assert set(TYPE_PROPERTIES) <= {p.name for p in PROPERTIES if p.field is None}


def test_a_value_in_a_properties_file_reaches_its_field() -> None:
    texts = {"tombstones.on.delete": "false", "heartbeat.interval.ms": "250",
             "topic.delimiter": "_", "skipped.operations": "none",
             "schema.name.adjustment.mode": "avro", "database.dbname": "app"}
    config = EventConfig.from_properties({"topic.prefix": "p", **texts})
    assert (config.tombstones_on_delete, config.heartbeat_interval_ms, config.topic_delimiter,
            config.skipped_operations, config.schema_name_adjustment_mode, config.database) == (
        False, 250, "_", frozenset(), "avro", "app")


@pytest.mark.parametrize("typo", ["tombstones.on.delet", "heartbeat.interval.msec",
                                  "skip.message.without.change"])
def test_a_misspelled_property_gets_the_tables_name_as_hint(typo: str) -> None:
    with pytest.raises(ConfigurationError, match="did you mean") as caught:
        EventConfig.from_properties({"topic.prefix": "p", typo: "1"})
    assert any(name in str(caught.value) for name in APPLIED_PROPERTIES)


def test_the_reference_page_shows_each_propertys_default_and_note() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text()
    for prop in PROPERTIES:
        row = next(line for line in page.splitlines() if line.startswith(f"| `{prop.name}` |"))
        assert f"| `{prop.default}` |" in row and prop.doc in row


def test_the_notes_on_what_capture_applies_name_what_it_reads() -> None:
    """docs/configuration.md marks the connector properties ``capture`` applies (beyond
    ``heartbeat.interval.ms``, an applied property): exactly those the command reads."""
    assert set(CAPTURE_NOTES) | {"heartbeat.interval.ms"} == set(capture_cmd._CAPTURE_PROPERTIES)
    heartbeat = next(p for p in PROPERTIES if p.name == "heartbeat.interval.ms")
    assert "capture" in heartbeat.doc and "--decode" in heartbeat.doc
    assert "not applicable" not in heartbeat.doc


def test_the_yboutput_decimal_note_is_what_the_parser_does() -> None:
    note = {p.name: p.doc for p in PROPERTIES}["decimal.handling.mode"]
    assert "yboutput" in note and "`double` by default" in note and "`precise` is refused" in note
    config = EventConfig.from_properties({"topic.prefix": "t", "plugin.name": "yboutput"})
    assert config.types.decimal_handling_mode == "double"
    with pytest.raises(ConfigurationError, match="precise is unsupported"):
        EventConfig.from_properties({"topic.prefix": "t", "plugin.name": "yboutput",
                                     "decimal.handling.mode": "precise"})
