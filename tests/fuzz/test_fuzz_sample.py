"""A fast, seeded sample of the fuzzing campaign (tools/fuzz_values.py, tools/fuzz_protocol.py).

The same mutators and checks as the campaign, a few thousand cases per family:
only the library's own exceptions escape, each with its context (message type and
offset; table and column), and the configuration parser's errors name a property.
"""

from __future__ import annotations

import importlib.util
import random
import sys
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest

from pgcdc_events.protocol import Relation, RelationColumn

TOOLS = Path(__file__).resolve().parents[2] / "tools"


@cache
def _tool(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"pgcdc_tools_{name}", TOOLS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


VALUE_FAMILIES = ["arrays", "hstore", "intervals", "timestamps", "numerics", "money",
                  "geometry", "bits", "ranges", "config"]


@pytest.mark.parametrize("family", VALUE_FAMILIES)
def test_value_parsers_sample(family: str) -> None:
    stats, failures, _ = _tool("fuzz_values").run_family(family, 2500, seed=20240601)
    assert failures == []
    assert stats["cases"] == 2500
    if family != "config":  # both outcomes are exercised
        assert stats["converted"] and stats["ConversionError"]


def test_pgoutput_messages_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    tool = _tool("fuzz_protocol")
    monkeypatch.setattr(tool, "seed_messages", lambda generated=2000, f=tool.seed_messages:
                        f(150))
    stats, failures, _ = tool.run_messages(2500, seed=7)
    assert failures == []
    assert stats["parsed"] and stats["ProtocolError"]
    # Both modes ran on every case; they agreed (else a failure): yboutput mode parses
    # what pgoutput mode parses, plus Relations with identity 'c'.
    assert stats["yboutput parsed"] >= stats["parsed"]
    assert stats["yboutput parsed"] + stats["yboutput ProtocolError"] == 5000


def test_a_change_relation_re_encodes_in_yboutput_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression (found by a 30,000-case campaign): a Relation with replica identity 'c'
    parses in yboutput mode and must re-encode in that mode, not be re-encoded as pgoutput
    (which refuses 'c' with an encoder error that names no offset)."""
    tool = _tool("fuzz_protocol")
    from pgcdc_events.protocol import encode_message  # noqa: PLC0415
    change = encode_message(Relation(16385, "s", "t", "c", (RelationColumn(1, "id", 23, -1),)),
                            yboutput=True)
    monkeypatch.setattr(tool, "seed_messages", lambda generated=2000: [change])
    monkeypatch.setattr(tool, "mutate", lambda rng, seeds: seeds[0])
    stats, failures, _ = tool.run_messages(1, seed=1)
    assert failures == []
    assert stats["yboutput parsed"] == 1 and stats["ProtocolError"] == 2


def test_yboutput_modes_disagreement_is_reported() -> None:
    """The cross-mode check of the campaign fails on a parser that reads the modes apart."""
    tool = _tool("fuzz_protocol")
    rel = Relation(1, "s", "t", "d", (RelationColumn(1, "id", 23, -1),))
    assert tool._modes_disagree({False: rel, True: rel}) is None
    assert tool._modes_disagree({True: rel.__class__(1, "s", "t", "c", rel.columns)}) is None
    assert "only yboutput" in tool._modes_disagree({True: rel})
    assert "yboutput mode gave" in tool._modes_disagree({False: rel})


def test_message_sequences_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    tool = _tool("fuzz_protocol")
    monkeypatch.setattr(tool, "seed_messages", lambda generated=2000, f=tool.seed_messages:
                        f(100))
    stats, failures, _ = tool.run_sequences(600, seed=11)
    assert failures == []
    assert stats["records"] and stats["decoder ProtocolError"] and stats["reader ok"]


def test_yboutput_sequences_sample() -> None:
    stats, failures, _ = _tool("fuzz_protocol").run_yboutput_sequences(400, seed=13)
    assert failures == []
    assert stats["records"] and stats["decoder ProtocolError"] and stats["reader ok"]


def test_sequence_mutations_cover_every_kind() -> None:
    """Each sequence mutation of the campaign happens in a sample this size."""
    tool = _tool("fuzz_protocol")
    sessions = tool.capture_sessions()
    rng = random.Random(3)
    lengths = set()
    for _ in range(300):
        seq = tool.mutate_sequence(rng, sessions, [b"E"])
        lengths.add(min(len(seq), 30))
    assert len(lengths) > 10
