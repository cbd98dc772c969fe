"""Debezium signals: the rows of the signalling table (``signal.data.collection``), parsed.

A signal is three strings, ``id``, ``type`` and ``data`` (a JSON object), read from a
row of the signalling table by *position*, as the connector reads them
(``CommonConnectorConfig.parseSignallingMessage``: a row that does not have exactly
three columns is not a signal). :func:`parse_signal` turns them into one of

* :class:`ExecuteSnapshot` (``execute-snapshot``): ``data-collections`` (regular
  expressions of ``schema.table``), ``type`` ``incremental`` (the default) or
  ``blocking``, ``additional-conditions`` (``[{"data-collection": regex, "filter":
  predicate}]``) and ``surrogate-key``;
* :class:`StopSnapshot` (``stop-snapshot``; no collections means all of them);
* :class:`PauseSnapshot` / :class:`ResumeSnapshot` (``pause-snapshot`` /
  ``resume-snapshot``; their data is ignored);
* :class:`LogSignal` (``log``: ``{"message": ...}``);
* :class:`WindowSignal` (``snapshot-window-open`` / ``snapshot-window-close``: the
  watermarks an incremental snapshot writes around each chunk);

or, when the connector would skip the signal with a warning (an unknown type, data
that is not JSON, no ``data-collections``, an unknown snapshot type...), a
:class:`SignalWarning`: a named, one-line result, never an exception, so that one bad
row in the signalling table does not stop streaming. The rules are those of Debezium
3.6 (``ExecuteSnapshot``, ``StopSnapshot``, ``AbstractSnapshotSignal``,
``SignalProcessor.processSignal`` in ``debezium-connector-common``).

One deliberate difference: the singular ``additional-condition`` (a filter for every
collection of the signal, the form Debezium 2.x documented and some guides still
show) is honoured here, with a warning that it is the pre-3.0 spelling; Debezium 3.x
ignores it and snapshots the whole table.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Final, Literal, TypeAlias

import attrs

from pgcdc_events.events.records import ChangeRecord

__all__ = [
    "CLOSE_WINDOW",
    "EXECUTE_SNAPSHOT",
    "LOG",
    "OPEN_WINDOW",
    "PAUSE_SNAPSHOT",
    "RESUME_SNAPSHOT",
    "STOP_SNAPSHOT",
    "AdditionalCondition",
    "ExecuteSnapshot",
    "LogSignal",
    "PauseSnapshot",
    "ResumeSnapshot",
    "Signal",
    "SignalWarning",
    "StopSnapshot",
    "WindowSignal",
    "parse_signal",
    "signal_from_record",
    "signal_from_row",
]

EXECUTE_SNAPSHOT: Final = "execute-snapshot"
STOP_SNAPSHOT: Final = "stop-snapshot"
PAUSE_SNAPSHOT: Final = "pause-snapshot"
RESUME_SNAPSHOT: Final = "resume-snapshot"
OPEN_WINDOW: Final = "snapshot-window-open"
CLOSE_WINDOW: Final = "snapshot-window-close"
LOG: Final = "log"
#: Known to the connector but not acted on by this library.
_SCHEMA_CHANGES: Final = "schema-changes"

SnapshotType: TypeAlias = Literal["incremental", "blocking"]


@attrs.frozen
class AdditionalCondition:
    """A filter for the collections ``data_collection`` matches (a regular expression,
    case-insensitive, matched against the whole ``schema.table``)."""

    data_collection: str
    filter: str

    def matches(self, collection: str) -> bool:
        """Whether this condition applies to ``collection`` (``schema.table``)."""
        return re.fullmatch(self.data_collection, collection, re.IGNORECASE) is not None


@attrs.frozen
class ExecuteSnapshot:
    """``execute-snapshot``: snapshot these collections."""

    id: str
    #: Regular expressions of ``schema.table``, trimmed, in the signal's order.
    data_collections: tuple[str, ...]
    snapshot_type: SnapshotType = "incremental"
    additional_conditions: tuple[AdditionalCondition, ...] = ()
    #: The column to chunk and order by instead of the key (``None``: the key).
    surrogate_key: str | None = None
    #: Warnings about an accepted signal (the pre-3.0 ``additional-condition``).
    warnings: tuple[str, ...] = ()

    def condition_for(self, collection: str) -> str | None:
        """The filter of the first additional condition matching ``collection``, as
        ``AbstractIncrementalSnapshotContext.buildDataCollection`` picks it."""
        for condition in self.additional_conditions:
            if condition.matches(collection):
                return condition.filter
        return None


@attrs.frozen
class StopSnapshot:
    """``stop-snapshot``: stop snapshotting these collections (``None``: all of them)."""

    id: str
    data_collections: tuple[str, ...] | None
    snapshot_type: SnapshotType = "incremental"


@attrs.frozen
class PauseSnapshot:
    """``pause-snapshot``: no new chunk is read until a ``resume-snapshot``."""

    id: str


@attrs.frozen
class ResumeSnapshot:
    """``resume-snapshot``: read chunks again."""

    id: str


@attrs.frozen
class LogSignal:
    """``log``: write ``message`` to the log."""

    id: str
    message: str


@attrs.frozen
class WindowSignal:
    """A watermark of an incremental snapshot's chunk: ``<chunk id>-open`` of type
    ``snapshot-window-open``, ``<chunk id>-close`` of type ``snapshot-window-close``
    (or, with the ``insert_delete`` strategy, the deletion of the ``-open`` row)."""

    id: str
    type: str
    data: str | None = None

    @property
    def opens(self) -> bool:
        """Whether this watermark opens its chunk's window (else it closes it)."""
        return self.type == OPEN_WINDOW


@attrs.frozen
class SignalWarning:
    """A signal the connector skips: ``code`` names the problem, ``message`` is one
    line naming the signal by its id."""

    id: str | None
    type: str | None
    code: str
    message: str

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


Signal: TypeAlias = (ExecuteSnapshot | StopSnapshot | PauseSnapshot | ResumeSnapshot
                     | LogSignal | WindowSignal)


def _warning(id_: str | None, type_: str | None, code: str, message: str) -> SignalWarning:
    # one line, whatever the user put in the row
    return SignalWarning(id_, type_, code, " ".join(message.split()))


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


_JSON: Final = json.JSONDecoder()


def parse_signal(signal_id: str | None, signal_type: str | None, data: str | None
                 ) -> Signal | SignalWarning:
    """The signal of one row of the signalling table (its three columns), or the
    warning the connector would log and skip it with."""
    id_, type_ = signal_id, signal_type
    name = f"signal {id_!r}"
    if type_ in (OPEN_WINDOW, CLOSE_WINDOW):
        return WindowSignal(id_ or "", type_, data)
    if type_ not in _PARSERS:
        if type_ == _SCHEMA_CHANGES:
            return _warning(id_, type_, "unsupported-type",
                            f"{name} has type 'schema-changes', which pgcdc-events does not act on")
        return _warning(id_, type_, "unknown-type",
                        f"{name} has been received but the type {type_!r} is not recognized")
    rest = ""
    if data is None or data == "":
        document: Any = {}
    else:
        try:
            # the first JSON value, as the connector's reader (Jackson) takes it: text
            # after it is left out (named in a warning below), not a reason to refuse
            document, end = _JSON.raw_decode(data, len(data) - len(data.lstrip()))
            rest = data[end:].strip()
        except ValueError as error:
            return _warning(id_, type_, "unparseable-data",
                            f"{name} has been received but the data {_clip(data)!r} cannot be "
                            f"parsed: {error}")
        if not isinstance(document, dict):
            return _warning(id_, type_, "unparseable-data",
                            f"{name} has been received but the data {_clip(data)!r} is not a "
                            "JSON object")
    signal = _PARSERS[type_](id_ or "", type_, document)
    if rest and isinstance(signal, ExecuteSnapshot):
        # seed 003's first example: '{..., "type":"incremental"}, "additional-condition":...}'
        # (tests/golden/events_seed003: 3.6.3 snapshots the tables whole, silently)
        signal = attrs.evolve(signal, warnings=(
            *signal.warnings, f"execute-snapshot signal {id_!r}: the text after the data's "
            f"JSON object, {_clip(rest)!r}, is ignored, as the connector ignores it"))
    return signal


def signal_from_row(values: Sequence[str | None]) -> Signal | SignalWarning:
    """:func:`parse_signal` of a signalling-table row given as its column values, read by
    position (the table must have exactly three columns: id, type, data)."""
    if len(values) != 3:
        return _warning(None, None, "not-a-signal-row",
                        f"the signal row {_clip(repr(tuple(values)))} should have 3 fields but "
                        f"has {len(values)}")
    return parse_signal(values[0], values[1], values[2])


def signal_from_record(record: ChangeRecord, *, insert_delete: bool = False
                       ) -> Signal | SignalWarning | None:
    """The signal a change event of the signalling table carries, as the connector's
    source channel reads it (``SignalRecord.buildSignalRecordFromChangeEventSource``):
    an insert (``c``) is a signal; with the ``insert_delete`` watermarking strategy a
    delete (``d``) is the close watermark of the ``-open`` row it deletes (its id with
    ``open`` replaced by ``close``). Anything else (updates, tombstones, deletes under
    ``insert_insert``) is not a signal: ``None``."""
    value = record.value
    op = record.op
    if value is None or op not in ("c", "d") or (op == "d" and not insert_delete):
        return None
    row = value["after" if op == "c" else "before"]
    if row is None:
        return _warning(None, None, "not-a-signal-row",
                        f"the signal event on {record.topic} has no "
                        f"{'after' if op == 'c' else 'before'} row")
    values = tuple(row.values)
    if len(values) != 3:
        return signal_from_row(values)
    if op == "d":
        id_, _, data = values
        return WindowSignal((id_ or "").replace("open", "close"), CLOSE_WINDOW, data)
    return signal_from_row(values)


# -- the actions' parsers -----------------------------------------------------------


def _data_collections(id_: str, type_: str, data: dict[str, Any], *, required: bool
                      ) -> tuple[str, ...] | SignalWarning | None:
    """``data-collections`` trimmed; ``None`` when missing or empty (a warning when
    ``required``); a warning when not an array of strings."""
    value = data.get("data-collections")
    if not isinstance(value, list) or not value:  # Document.getArray: null unless an array
        if required:
            return _warning(id_, type_, "missing-data-collections",
                            f"{type_} signal {id_!r} has arrived but the requested field "
                            "'data-collections' is missing from data or is empty")
        return None
    if not all(isinstance(v, str) for v in value):
        return _warning(id_, type_, "invalid-data-collections",
                        f"{type_} signal {id_!r} contains a non-string data collection in "
                        f"'data-collections': {_clip(json.dumps(value))}")
    return tuple(v.strip() for v in value)


def _snapshot_type(id_: str, type_: str, data: dict[str, Any]) -> SnapshotType | SignalWarning:
    """``type``: ``incremental`` unless given (a non-string counts as not given, as
    ``Document.getString`` reads it); case-insensitive."""
    value = data.get("type")
    if not isinstance(value, str):
        return "incremental"
    upper = value.upper()  # SnapshotType.valueOf(typeStr.toUpperCase())
    if upper == "INCREMENTAL":
        return "incremental"
    if upper == "BLOCKING":
        return "blocking"
    return _warning(id_, type_, "unknown-snapshot-type",
                    f"{type_} signal {id_!r}: detected an unexpected snapshot type {value!r}; "
                    "the signal will be skipped")


def _regex(id_: str, type_: str, pattern: str, what: str) -> SignalWarning | None:
    try:
        re.compile(pattern)
    except re.error as error:
        return _warning(id_, type_, "invalid-regex",
                        f"{type_} signal {id_!r}: {what} {pattern!r} is not a valid regular "
                        f"expression: {error}")
    return None


def _conditions(id_: str, type_: str, data: dict[str, Any]
                ) -> tuple[AdditionalCondition, ...] | SignalWarning:
    value = data.get("additional-conditions")
    if value is None:
        return ()
    if not isinstance(value, list):  # Document.getArray: treated as absent by Debezium
        return _warning(id_, type_, "invalid-additional-conditions",
                        f"{type_} signal {id_!r}: 'additional-conditions' must be an array of "
                        '{"data-collection": ..., "filter": ...} objects')
    out = []
    for item in value:
        collection = item.get("data-collection") if isinstance(item, dict) else None
        filter_ = item.get("filter") if isinstance(item, dict) else None
        if not isinstance(collection, str) or not isinstance(filter_, str):
            return _warning(id_, type_, "invalid-additional-conditions",
                            f"{type_} signal {id_!r}: each additional condition needs a string "
                            "'data-collection' and a string 'filter', got "
                            f"{_clip(json.dumps(item))}")
        bad = _regex(id_, type_, collection, "the additional condition's data-collection")
        if bad is not None:
            return bad
        out.append(AdditionalCondition(collection, filter_))
    return tuple(out)


def _execute(id_: str, type_: str, data: dict[str, Any]) -> Signal | SignalWarning:
    collections = _data_collections(id_, type_, data, required=True)
    if isinstance(collections, SignalWarning):
        return collections
    assert collections is not None
    for pattern in collections:
        bad = _regex(id_, type_, pattern, "the data collection")
        if bad is not None:
            return bad
    snapshot_type = _snapshot_type(id_, type_, data)
    if isinstance(snapshot_type, SignalWarning):
        return snapshot_type
    conditions = _conditions(id_, type_, data)
    if isinstance(conditions, SignalWarning):
        return conditions
    warnings: list[str] = []
    legacy = data.get("additional-condition")
    if isinstance(legacy, str) and legacy.strip():
        # Debezium 2.x (ExecuteSnapshot.getAdditionalConditions until 3.0): for an
        # incremental snapshot the singular filter applies to every collection and takes
        # the place of 'additional-conditions'. 3.x ignores the field silently.
        if snapshot_type == "incremental":
            conditions = (AdditionalCondition(".*", legacy),)
            warnings.append(
                f"execute-snapshot signal {id_!r} uses 'additional-condition', the pre-3.0 "
                "spelling that Debezium 3.x ignores; pgcdc-events applies it to every "
                "collection of the signal (write 'additional-conditions': "
                '[{"data-collection": ..., "filter": ...}])')
        else:
            warnings.append(
                f"execute-snapshot signal {id_!r} uses 'additional-condition', the pre-3.0 "
                "spelling, which only ever applied to incremental snapshots: ignored")
    surrogate = data.get("surrogate-key")
    surrogate_key = surrogate if isinstance(surrogate, str) and surrogate.strip() else None
    return ExecuteSnapshot(id_, collections, snapshot_type, conditions, surrogate_key,
                           tuple(warnings))


def _stop(id_: str, type_: str, data: dict[str, Any]) -> Signal | SignalWarning:
    collections = _data_collections(id_, type_, data, required=False)
    if isinstance(collections, SignalWarning):
        return collections
    snapshot_type = _snapshot_type(id_, type_, data)
    if isinstance(snapshot_type, SignalWarning):
        return snapshot_type
    if snapshot_type != "incremental":
        # StopSnapshot.arrived acts on INCREMENTAL only (a blocking one cannot be stopped)
        return _warning(id_, type_, "not-incremental",
                        f"stop-snapshot signal {id_!r} asks to stop a {snapshot_type} snapshot; "
                        "only incremental snapshots can be stopped")
    return StopSnapshot(id_, collections, snapshot_type)


def _pause(id_: str, type_: str, data: dict[str, Any]) -> Signal | SignalWarning:
    return PauseSnapshot(id_)


def _resume(id_: str, type_: str, data: dict[str, Any]) -> Signal | SignalWarning:
    return ResumeSnapshot(id_)


def _log(id_: str, type_: str, data: dict[str, Any]) -> Signal | SignalWarning:
    message = data.get("message")
    if not isinstance(message, str) or not message:
        return _warning(id_, type_, "missing-message",
                        f"logging signal {id_!r} has arrived but the requested field 'message' "
                        "is missing from data")
    return LogSignal(id_, message)


_PARSERS: Final = {
    EXECUTE_SNAPSHOT: _execute,
    STOP_SNAPSHOT: _stop,
    PAUSE_SNAPSHOT: _pause,
    RESUME_SNAPSHOT: _resume,
    LOG: _log,
}
