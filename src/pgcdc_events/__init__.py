"""pgcdc-events: Debezium-compatible change events from PostgreSQL's pgoutput stream.

The package is layered; each layer is a subpackage usable on its own:
:mod:`pgcdc_events.protocol` (pgoutput bytes to messages), and the layers
above it.
"""

from __future__ import annotations

from pgcdc_events.errors import ConfigurationError, ConversionError, PgCdcError, ProtocolError

__version__ = "0.1.0"

__all__ = [
    "ConfigurationError",
    "ConversionError",
    "PgCdcError",
    "ProtocolError",
    "__version__",
]
