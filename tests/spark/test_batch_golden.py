"""The functions the Spark tasks run, on every golden capture, without Spark.

The capture is cut into chunks of a few messages each (every chunk decoded by a decoder
primed with its prelude); the records must equal one ``EventDecoder``'s, whole, and every
table's rows must convert in both flavours with batches cut small.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pgcdc_events.events import EventConfig
from support.golden import Recording, recordings

RECORDINGS = [r for r in recordings("*") if not r.meta.get("connector_failed")]


@pytest.mark.parametrize("recording", RECORDINGS, ids=[r.key for r in RECORDINGS])
@pytest.mark.parametrize("flavour", ["literal", "semantic"])
def test_golden_capture(recording: Recording, flavour: str,
                        arrow_matches_decoder: Callable[..., Any]) -> None:
    config = EventConfig.from_properties(recording.properties)
    arrow_matches_decoder(recording.capture, config, recording.catalog, flavour=flavour,
                          batch_size=7)
