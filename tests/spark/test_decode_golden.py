"""Spark decoding of every golden capture equals the event layer's records, field for field.

Marked slow (a Spark decode per recording); the default run checks the same decoder on
every recording in-process (test_batch_golden.py) and the Spark jobs on live captures.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pgcdc_events.events import EventConfig
from support.golden import Recording, recordings

EVENTS = [r for r in recordings("events*") if not r.meta.get("connector_failed")]
TYPES = [r for r in recordings("types*") if not r.meta.get("connector_failed")]


@pytest.mark.slow
@pytest.mark.parametrize("recording", EVENTS, ids=[r.key for r in EVENTS])
def test_events_corpus(recording: Recording, spark_matches_decoder: Callable[..., Any]) -> None:
    config = EventConfig.from_properties(recording.properties)
    spark_matches_decoder(recording.capture, config, recording.catalog)


@pytest.mark.slow
@pytest.mark.parametrize("recording", TYPES, ids=[r.key for r in TYPES])
def test_types_corpus(recording: Recording, spark_matches_decoder: Callable[..., Any]) -> None:
    config = EventConfig.from_properties(recording.properties)
    spark_matches_decoder(recording.capture, config, recording.catalog)
