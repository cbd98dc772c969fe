"""The one I/O adapter the library ships: reading a replication slot with pg8000.

:class:`StreamReader` streams a logical slot over a replication connection
(holding it: the server refuses other readers); :class:`SlotReader` peeks at it
through PostgreSQL's SQL decoding functions. Both hand out complete units
(:class:`Unit`: a transaction, a non-transactional message).
:class:`DurableOutput` appends them to a locked file with a checkpoint beside
it; :func:`run_capture` ties the two together with the rule that delivers every
change exactly once: write, ``fsync``, checkpoint, and only then acknowledge
(advance) the slot. pg8000 is imported only when a connection is opened
(``pip install 'pgcdc-events[pg]'``). See docs/operations.md.
"""

from __future__ import annotations

from pgcdc_events.adapters.capture import (
    CaptureSink,
    CaptureStats,
    EventSink,
    Sink,
    run_capture,
)
from pgcdc_events.adapters.checkpoint import (
    Checkpoint,
    DurableOutput,
    Output,
    StreamOutput,
    output_paths,
)
from pgcdc_events.adapters.connection import ConnectionSettings, parse_conninfo, parse_dsn
from pgcdc_events.adapters.errors import (
    AuthenticationError,
    CheckpointAheadError,
    CheckpointError,
    ConnectionLostError,
    ConnectionSecurityError,
    DeliveryGapError,
    OutputLockedError,
    PrivilegeError,
    PublicationNotFoundError,
    ServerConfigError,
    SlotBusyError,
    SlotError,
    SlotLostError,
    SlotMovedError,
    SlotNotFoundError,
    SnapshotError,
)
from pgcdc_events.adapters.pg8000 import (
    BatchInfo,
    DecodingOptions,
    ResolvedOptions,
    SlotInfo,
    SlotReader,
    SlotStatus,
)
from pgcdc_events.adapters.snapshot import (
    DEFAULT_SNAPSHOT_MODE,
    SNAPSHOT_MODES,
    SnapshotResult,
    read_snapshot,
)
from pgcdc_events.adapters.stream import StreamReader
from pgcdc_events.adapters.units import CaptureRowCodec, Unit, UnitAssembler

__all__ = [
    "DEFAULT_SNAPSHOT_MODE",
    "SNAPSHOT_MODES",
    "AuthenticationError",
    "BatchInfo",
    "CaptureRowCodec",
    "CaptureSink",
    "CaptureStats",
    "Checkpoint",
    "CheckpointAheadError",
    "CheckpointError",
    "ConnectionLostError",
    "ConnectionSecurityError",
    "ConnectionSettings",
    "DecodingOptions",
    "DeliveryGapError",
    "DurableOutput",
    "EventSink",
    "Output",
    "OutputLockedError",
    "PrivilegeError",
    "PublicationNotFoundError",
    "ResolvedOptions",
    "ServerConfigError",
    "Sink",
    "SlotBusyError",
    "SlotError",
    "SlotInfo",
    "SlotLostError",
    "SlotMovedError",
    "SlotNotFoundError",
    "SlotReader",
    "SlotStatus",
    "SnapshotError",
    "SnapshotResult",
    "StreamOutput",
    "StreamReader",
    "Unit",
    "UnitAssembler",
    "output_paths",
    "parse_conninfo",
    "parse_dsn",
    "read_snapshot",
    "run_capture",
]
