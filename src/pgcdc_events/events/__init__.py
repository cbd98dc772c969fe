"""The envelope builder: Debezium change events from pgoutput messages.

Build an :class:`EventConfig` (from Debezium connector properties with
:meth:`EventConfig.from_properties`), feed an :class:`EventDecoder` the messages
of a stream with their LSNs, and get :class:`ChangeRecord` objects back;
:class:`JsonRecordWriter` serializes them as Kafka's JsonConverter does.
"""

from __future__ import annotations

from pgcdc_events.events.config import EventConfig, JsonConverterConfig
from pgcdc_events.events.decoder import EventDecoder
from pgcdc_events.events.jsonconv import JsonRecordWriter, record_to_json
from pgcdc_events.events.metrics import StreamingMetrics
from pgcdc_events.events.naming import adjuster, topic_name
from pgcdc_events.events.records import ChangeRecord, Header
from pgcdc_events.events.source import SOURCE_SCHEMA
from pgcdc_events.events.tables import TableSchema, build_table_schema

__all__ = [
    "SOURCE_SCHEMA",
    "ChangeRecord",
    "EventConfig",
    "EventDecoder",
    "Header",
    "JsonConverterConfig",
    "JsonRecordWriter",
    "StreamingMetrics",
    "TableSchema",
    "adjuster",
    "build_table_schema",
    "record_to_json",
    "topic_name",
]
