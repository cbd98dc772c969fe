"""Every scenario behind the committed captures, run again on the live server.

tools/make_protocol_captures.py made tests/protocol/captures; here its scenarios run
on this session's throwaway cluster (their own checks assert that each capture holds
what it promises: messages, truncate options, every replica identity, unchanged
TOAST, Type messages, streamed and two-phase transactions...), and every message the
server sends must parse and re-encode byte for byte, and carry the same message
types and column kinds as the committed capture of the same name.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from pgcdc_events.protocol import PgOutputReader, encode_message

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import make_protocol_captures as scenarios  # noqa: E402

INDEX = {e["name"]: e for e in json.loads(
    (ROOT / "tests" / "protocol" / "captures" / "index.json").read_text())["captures"]}


@pytest.fixture(scope="module")
def live_captures(pg_cluster: Any) -> dict[str, Any]:
    """name -> Capture, for every scenario (each in a database of its own, dropped after)."""
    return {c.name: c for c in scenarios.iter_captures(pg_cluster, None)}


def test_every_committed_capture_is_produced_again(live_captures: dict[str, Any]) -> None:
    assert set(live_captures) == set(INDEX)


@pytest.mark.parametrize("name", sorted(INDEX))
def test_live_capture_round_trips_with_the_committed_shape(
        live_captures: dict[str, Any], name: str) -> None:
    capture = live_captures[name]
    reader = PgOutputReader(proto_version=capture.proto_version,
                            streaming="on" if capture.streaming else "off")
    for row in capture.rows:
        assert encode_message(reader.read(row.data)) == row.data, (name, row.lsn)
    entry, live = INDEX[name], scenarios.index_entry(capture)
    for field in ("proto_version", "binary", "messages", "streaming", "two_phase",
                  "message_types", "column_kinds"):
        assert live[field] == entry[field], (name, field)
