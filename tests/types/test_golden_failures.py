"""Recordings in which the real connector fails: what it reported, and what we emit instead.

``types_crash_timetz_seconds`` holds a ``timetz`` whose UTC offset has a seconds part
(``12:00:00+05:30:15``). Debezium 3.6.3 stops on it (every mode) and emits nothing,
so the column-by-column comparison (tests/types/test_golden.py) has nothing to
compare; this checks the failure is still the recorded one and that we convert the
same captured values to their UTC time, computed here independently with ``datetime``.
"""

from __future__ import annotations

import datetime
import json
import re

import pytest

from pgcdc_events.protocol import Insert
from pgcdc_events.types.config import TypeConfig
from pgcdc_events.types.mapper import TypeMapper
from pgcdc_events.types.registry import TypeRegistry
from support.golden import Recording, changes, recordings

CRASHES = recordings("types_crash_timetz_seconds")
_TIMETZ = re.compile(r"(\d\d):(\d\d):(\d\d)([+-])(\d\d)(?::(\d\d))?(?::(\d\d))?")


def _utc(text: str) -> str:
    """ZonedTime of a timetz text, by datetime arithmetic (independent of the mapper)."""
    match = _TIMETZ.fullmatch(text)
    assert match, text
    h, m, s, sign, oh, om, os_ = match.groups()
    offset = datetime.timedelta(hours=int(oh), minutes=int(om or 0), seconds=int(os_ or 0))
    local = datetime.datetime(2000, 1, 2, int(h), int(m), int(s))
    utc = local - offset if sign == "+" else local + offset
    return utc.strftime("%H:%M:%SZ")


@pytest.mark.parametrize("recording", CRASHES, ids=[r.key for r in CRASHES])
def test_connector_fails_and_we_emit_utc(recording: Recording) -> None:
    assert recording.meta["connector_failed"], "the connector no longer fails: compare it"
    assert recording.records == []
    error = json.dumps(recording.meta["error"])
    assert "DateTimeParseException" in error and "12:00:00+05:30:15" in error
    paired, types = changes(recording)
    registry = TypeRegistry(recording.catalog)
    for t in types:
        registry.observe(t)
    mapper = TypeMapper(TypeConfig.from_properties(recording.properties), registry)
    seen = 0
    for change in paired:
        rel, message = change.relation, change.message
        if rel.name != "t_timetz_sec":
            continue
        assert isinstance(message, Insert)
        index = [c.name for c in rel.columns].index("c_timetz")
        mapping = mapper.relation_column(rel.columns[index], table=f"public.{rel.name}",
                                         replica_identity=rel.replica_identity)
        assert mapping is not None
        raw = message.new.values[index]
        assert raw is not None
        assert mapping.convert(raw) == _utc(raw.decode())
        seen += 1
    assert seen == 2
