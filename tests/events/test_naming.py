"""Name adjustment and topic names equal what Debezium's own code produces.

tests/golden/naming.json was written by tools/debezium_names (the real SchemaNameAdjuster,
FieldNameAdjuster and SchemaTopicNamingStrategy of Debezium 3.6.3).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pgcdc_events.events.naming import adjuster, topic_name

GOLDEN = json.loads((Path(__file__).resolve().parents[1] / "golden" / "naming.json").read_text())


@pytest.mark.parametrize("kind", ["schema:avro", "schema:avro_unicode", "field:avro",
                                  "field:avro_unicode"])
def test_adjusters_match_debezium(kind: str) -> None:
    target, mode = kind.split(":")
    adjust = adjuster(mode, field=target == "field")
    assert {name: adjust(name) for name in GOLDEN[kind]} == GOLDEN[kind]


def test_topic_names_match_debezium() -> None:
    ours = {key: topic_name("my-server", *key.split("\x00")) for key in GOLDEN["topic"]}
    assert ours == GOLDEN["topic"]


def test_none_mode_keeps_names() -> None:
    assert adjuster("none")("Sales Ö") == "Sales Ö"
