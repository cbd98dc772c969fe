"""Change records as JSON lines, compared between two runs."""

from __future__ import annotations

import json
from typing import Any


def without_run_fields(line: str) -> dict[str, Any]:
    """A record (a JsonConverter line) without what is processing time or run identity by
    definition: the envelope's ``ts_ms``/``ts_us``/``ts_ns`` and the run id header."""
    record = json.loads(line)
    value = record["value"]
    payload = value.get("payload") if isinstance(value, dict) else None
    if isinstance(payload, dict):
        for name in ("ts_ms", "ts_us", "ts_ns"):
            payload.pop(name, None)
    record["headers"].pop("__debezium.context.runId", None)
    return record  # type: ignore[no-any-return]
