"""Comparing our records with the real connector's, record by record (the referee's rules).

Used by the golden-recording tests and by the differential referee (tools/referee):
both decode a raw capture with :class:`~pgcdc_events.events.decoder.EventDecoder`
and :class:`~pgcdc_events.events.jsonconv.JsonRecordWriter`, then call
:func:`compare_records` with the records Debezium emitted for the same WAL. Ignored
are only the fields that are processing time or run identity by definition (the
envelope's ``ts_ms``/``ts_us``/``ts_ns``, ``source.version``, the
``__debezium.context.runId`` header, the source times of non-transactional
messages read before any transaction, which the connector takes from its clock,
heartbeat records, which it emits on a clock, and in snapshot read events the
snapshot's own transaction, position and time). Every other difference is
reported under a key ``<corpus>/<mode>/<topic>[<op>]<path>``; the differences a
project accepts are the rows of a table whose first column is such a key as a
shell-style glob (:func:`parse_documented`, docs/differences-from-debezium.md).
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pgcdc_events.protocol import Begin, CaptureRow, LogicalMessage, PgOutputReader

__all__ = [
    "DocumentedDifference",
    "compare_records",
    "diff_values",
    "messages_before_first_begin",
    "normalize",
    "parse_documented",
    "record_label",
]

HEARTBEAT_PREFIX = "__debezium-heartbeat"


def normalize(record: dict[str, Any], clock_message: bool = False) -> dict[str, Any]:
    """A copy of ``record`` without the fields that are processing time or run identity.

    ``clock_message``: the record is a non-transactional message whose source time
    the connector took from its clock (no transaction had begun yet).
    """
    out: dict[str, Any] = json.loads(json.dumps(record))
    headers = out.get("headers") or {}
    run = headers.get("__debezium.context.runId")
    if isinstance(run, dict) and "payload" in run:
        run["payload"] = "<run>"
    elif run is not None:
        headers["__debezium.context.runId"] = "<run>"
    payload = _payload(out)
    if isinstance(payload, dict):
        for name in ("ts_ms", "ts_us", "ts_ns"):
            if name in payload and "op" in payload:
                payload[name] = "<now>"
        source = payload.get("source")
        if isinstance(source, dict):
            source["version"] = "<version>"
            if payload.get("op") == "r":
                # a snapshot's read event: each side took its own snapshot (another
                # transaction, slot and moment); tests/events/test_golden_snapshot.py checks
                # what these hold
                for name in ("ts_ms", "ts_us", "ts_ns", "txId", "lsn", "sequence"):
                    source[name] = "<snapshot>"
            if clock_message and payload.get("op") == "m" and source.get("txId") is None:
                for name in ("ts_ms", "ts_us", "ts_ns"):
                    source[name] = "<now>"
    return out


def messages_before_first_begin(capture: Iterable[CaptureRow]) -> int:
    """How many non-transactional messages a capture holds before its first BEGIN."""
    reader = PgOutputReader()
    count = 0
    for row in capture:
        message = reader.read(row.data)
        if isinstance(message, Begin):
            break
        if isinstance(message, LogicalMessage) and not message.transactional:
            count += 1
    return count


def _payload(record: dict[str, Any]) -> Any:
    value = record.get("value")
    return value.get("payload", value) if isinstance(value, dict) and "schema" in value else value


def _is_message(record: dict[str, Any]) -> bool:
    payload = _payload(record)
    return isinstance(payload, dict) and payload.get("op") == "m"


def record_label(record: dict[str, Any]) -> str:
    """``c``/``u``/``d``/``r``/``t``/``m``, a transaction status, or ``tombstone``."""
    payload = _payload(record)
    if payload is None:
        return "tombstone"
    if isinstance(payload, dict):
        return str(payload.get("op") or payload.get("status") or "?")
    return "?"


def diff_values(path: str, ours: Any, theirs: Any, out: dict[str, str]) -> None:
    """Every leaf where ``ours`` and ``theirs`` differ, into ``out`` (path -> text)."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for key in dict.fromkeys([*theirs, *ours]):
            diff_values(f"{path}.{key}", ours.get(key, "<absent>"), theirs.get(key, "<absent>"),
                        out)
        if list(ours) != list(theirs) and set(ours) == set(theirs):
            out[f"{path}.<order>"] = f"key order: ours {list(ours)} theirs {list(theirs)}"
    elif isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            diff_values(f"{path}[{i}]", a, b, out)
    elif _fields(ours) is not None and _fields(theirs) is not None:
        # struct fields of which one side has more: align them by name, "[=name]"
        mine, real = _fields(ours), _fields(theirs)
        assert mine is not None and real is not None
        for name in dict.fromkeys([*real, *mine]):
            diff_values(f"{path}[={name}]", mine.get(name, "<absent>"),
                        real.get(name, "<absent>"), out)
    elif ours != theirs or type(ours) is not type(theirs):
        out[path] = f"ours {json.dumps(ours)[:160]} theirs {json.dumps(theirs)[:160]}"


def _fields(value: Any) -> dict[str, Any] | None:
    """A Connect struct's field list by field name (``None`` for any other value)."""
    if not isinstance(value, list) or not all(
            isinstance(f, dict) and isinstance(f.get("field"), str) for f in value):
        return None
    return {f["field"]: f for f in value}


def compare_records(ours: Sequence[dict[str, Any]], theirs: Sequence[dict[str, Any]], key: str,
                    capture: Sequence[CaptureRow] = (), *,
                    heartbeat_prefix: str = HEARTBEAT_PREFIX) -> dict[str, str]:
    """Every difference between two record streams, keyed ``<key>/<topic>[<op>]<path>``.

    Records are compared topic by topic in emission order; the order across topics
    is compared by (topic, op) and reported once at its first difference
    (``<key>/<order>``), a count mismatch as ``<key>/<topic>[count]``. ``capture``
    is the raw capture both streams came from (for the messages read before any
    transaction, whose source time is the connector's clock).
    """
    diffs: dict[str, str] = {}
    real = [r for r in theirs if not str(r.get("topic", "")).startswith(heartbeat_prefix)]
    mine_all = [r for r in ours if not str(r.get("topic", "")).startswith(heartbeat_prefix)]
    order_ours = [(r["topic"], record_label(r)) for r in mine_all]
    order_theirs = [(r["topic"], record_label(r)) for r in real]
    if order_ours != order_theirs:
        at = next((i for i, (a, b) in enumerate(zip(order_ours, order_theirs, strict=False))
                   if a != b), min(len(order_ours), len(order_theirs)))
        diffs[f"{key}/<order>"] = (f"first difference at record {at}: ours "
                                   f"{order_ours[at:at + 1]} theirs {order_theirs[at:at + 1]}")
    by_ours: dict[str, list[dict[str, Any]]] = {}
    by_theirs: dict[str, list[dict[str, Any]]] = {}
    for rec in mine_all:
        by_ours.setdefault(rec["topic"], []).append(rec)
    for rec in real:
        by_theirs.setdefault(rec["topic"], []).append(rec)
    clock_messages_total = messages_before_first_begin(capture)
    for topic in dict.fromkeys([*by_theirs, *by_ours]):
        mine, them = by_ours.get(topic, []), by_theirs.get(topic, [])
        if len(mine) != len(them):
            diffs[f"{key}/{topic}[count]"] = f"ours {len(mine)} records, theirs {len(them)}"
        clock_messages = clock_messages_total
        for a, b in zip(mine, them, strict=False):
            found: dict[str, str] = {}
            clock = _is_message(b) and clock_messages > 0
            clock_messages -= clock
            diff_values("", normalize(a, clock), normalize(b, clock), found)
            label = record_label(b)
            for path, text in found.items():
                diffs[f"{key}/{topic}[{label}]{path}"] = text
    return diffs


@dataclass(frozen=True)
class DocumentedDifference:
    """One row of a differences table: a glob over difference keys, and its line."""

    case: str  # e.g. "types/*/t_scalar.c_name" or "events_rename/*/pgcdc.public.rn_a[[]c].key"
    line: int

    def matches(self, key: str) -> bool:
        return fnmatch.fnmatchcase(key, self.case)


_ROW = re.compile(r"\|\s*`([^`]+)`\s*\|")


def parse_documented(text: str, corpus_glob: str = "*") -> list[DocumentedDifference]:
    """The rows of the tables in ``text`` whose first cell is a backticked case whose
    corpus (its first ``/`` segment) matches ``corpus_glob`` (either way round)."""
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        match = _ROW.match(line)
        segment = match.group(1).split("/", 1)[0] if match else ""
        if match and (fnmatch.fnmatchcase(segment, corpus_glob)
                      or fnmatch.fnmatchcase(corpus_glob, segment)):
            out.append(DocumentedDifference(match.group(1), number))
    return out
