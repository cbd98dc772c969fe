"""Change records as JSON lines, compared between two runs."""

from __future__ import annotations

import json
from typing import Any

#: The envelope's processing times: when the record was made, different in every run.
TIMES = ("ts_ms", "ts_us", "ts_ns")
RUN_ID = "__debezium.context.runId"


def without_run_fields(line: str | dict[str, Any]) -> dict[str, Any]:
    """A record (a JsonConverter line, or its parsed object, changed in place) without what
    is processing time or run identity by definition: the envelope's ``ts_ms``/``ts_us``/
    ``ts_ns``, the source block's times of a non-transactional message (it happens when
    it is read), and the run id header. Schemas on or off, tombstones and records without
    headers alike."""
    record: dict[str, Any] = json.loads(line) if isinstance(line, str) else line
    value = record.get("value")
    payload = value.get("payload", value) if isinstance(value, dict) else None
    if isinstance(payload, dict):
        for name in TIMES:
            payload.pop(name, None)
        source = payload.get("source")
        if payload.get("op") == "m" and isinstance(source, dict) and source.get("txId") is None:
            for name in TIMES:
                source.pop(name, None)
    headers = record.get("headers")
    if isinstance(headers, dict):
        headers.pop(RUN_ID, None)
    return record
