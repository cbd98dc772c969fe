"""The envelope builder: Debezium change events from pgoutput messages.

Build an :class:`EventConfig` (from Debezium connector properties with
:meth:`EventConfig.from_properties`), feed an :class:`EventDecoder` the messages
of a stream with their LSNs, and get :class:`ChangeRecord` objects back;
:class:`JsonRecordWriter` serializes them as Kafka's JsonConverter does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pgcdc_events.events.config import EventConfig, JsonConverterConfig
from pgcdc_events.events.decoder import EventDecoder
from pgcdc_events.events.jsonconv import JsonRecordWriter, record_to_json
from pgcdc_events.events.metrics import StreamingMetrics
from pgcdc_events.events.naming import adjuster, topic_name
from pgcdc_events.events.records import ChangeRecord, Header
from pgcdc_events.events.source import SOURCE_SCHEMA
from pgcdc_events.events.tables import TableSchema, build_table_schema

if TYPE_CHECKING:
    from pgcdc_events.events.incremental import (
        ChunkWindow,
        IncrementalSnapshotContext,
        IncrementalSnapshotError,
        SnapshotCollection,
        expand_data_collections,
    )
    from pgcdc_events.events.signals import (
        ExecuteSnapshot,
        LogSignal,
        PauseSnapshot,
        ResumeSnapshot,
        SignalWarning,
        StopSnapshot,
        WindowSignal,
        parse_signal,
        signal_from_record,
    )
    from pgcdc_events.events.snapshot_sql import ChunkQuery, ChunkQueryBuilder, ChunkTable

#: The incremental-snapshot names, by module: imported when first used (``decode`` and
#: ``capture`` without signals never load them; start-up time counts in what users run).
_LAZY: dict[str, str] = {
    **dict.fromkeys(("ChunkWindow", "IncrementalSnapshotContext", "IncrementalSnapshotError",
                     "SnapshotCollection", "expand_data_collections"), "incremental"),
    **dict.fromkeys(("ExecuteSnapshot", "LogSignal", "PauseSnapshot", "ResumeSnapshot",
                     "SignalWarning", "StopSnapshot", "WindowSignal", "parse_signal",
                     "signal_from_record"), "signals"),
    **dict.fromkeys(("ChunkQuery", "ChunkQueryBuilder", "ChunkTable"), "snapshot_sql"),
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib  # noqa: PLC0415 - only for the lazy names

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "SOURCE_SCHEMA",
    "ChangeRecord",
    "ChunkQuery",
    "ChunkQueryBuilder",
    "ChunkTable",
    "ChunkWindow",
    "EventConfig",
    "EventDecoder",
    "ExecuteSnapshot",
    "Header",
    "IncrementalSnapshotContext",
    "IncrementalSnapshotError",
    "JsonConverterConfig",
    "JsonRecordWriter",
    "LogSignal",
    "PauseSnapshot",
    "ResumeSnapshot",
    "SignalWarning",
    "SnapshotCollection",
    "StopSnapshot",
    "StreamingMetrics",
    "TableSchema",
    "WindowSignal",
    "adjuster",
    "build_table_schema",
    "expand_data_collections",
    "parse_signal",
    "record_to_json",
    "signal_from_record",
    "topic_name",
]


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
