"""The envelope builder: Debezium change events from pgoutput messages.

Build an :class:`EventConfig` (from Debezium connector properties with
:meth:`EventConfig.from_properties`), feed an :class:`EventDecoder` the messages
of a stream with their LSNs, and get :class:`ChangeRecord` objects back;
:class:`JsonRecordWriter` serializes them as Kafka's JsonConverter does.
"""

from __future__ import annotations

from pgcdc_events.events.config import EventConfig, JsonConverterConfig
from pgcdc_events.events.decoder import EventDecoder
from pgcdc_events.events.incremental import (
    ChunkWindow,
    IncrementalSnapshotContext,
    IncrementalSnapshotError,
    SnapshotCollection,
    expand_data_collections,
)
from pgcdc_events.events.jsonconv import JsonRecordWriter, record_to_json
from pgcdc_events.events.metrics import StreamingMetrics
from pgcdc_events.events.naming import adjuster, topic_name
from pgcdc_events.events.records import ChangeRecord, Header
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
from pgcdc_events.events.source import SOURCE_SCHEMA
from pgcdc_events.events.tables import TableSchema, build_table_schema

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
