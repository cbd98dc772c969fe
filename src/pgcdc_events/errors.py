"""The library's exception hierarchy: every error it raises derives from :class:`PgCdcError`."""

from __future__ import annotations

__all__ = [
    "ConfigurationError",
    "ConversionError",
    "PgCdcError",
    "ProtocolError",
]


class PgCdcError(Exception):
    """Base class of every exception pgcdc-events raises on purpose."""


class ProtocolError(PgCdcError, ValueError):
    """Bytes that are not a valid pgoutput message, frame or message sequence.

    ``message_type`` is the type byte as a one-character string (``None`` when the
    input ended before it), ``offset`` the byte offset inside the message where
    parsing failed, and ``expected`` what the parser was looking for.
    """

    def __init__(
        self,
        expected: str,
        *,
        message_type: str | None = None,
        offset: int | None = None,
        detail: str | None = None,
    ) -> None:
        self.expected = expected
        self.message_type = message_type
        self.offset = offset
        self.detail = detail
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.message_type is not None:
            where.append(f"message {self.message_type!r}")
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        prefix = (", ".join(where) + ": ") if where else ""
        text = f"{prefix}{self.expected}"
        if self.detail:
            text += f" ({self.detail})"
        return text


class ConversionError(PgCdcError, ValueError):
    """A column value that does not parse as its declared PostgreSQL type.

    ``table`` (``schema.table``), ``column``, ``type_name`` and ``value`` (the raw
    bytes) are set when the error comes from converting a row's column; ``lsn`` is
    the WAL position of the change when the event decoder raised it.
    """

    table: str | None = None
    column: str | None = None
    type_name: str | None = None
    value: bytes | None = None
    lsn: int | None = None


class ConfigurationError(PgCdcError, ValueError):
    """An unknown, misspelled, unsupported or conflicting configuration property."""
