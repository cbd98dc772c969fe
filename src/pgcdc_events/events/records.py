"""The records the decoder emits: what a Kafka Connect source record would hold."""

from __future__ import annotations

from typing import Any

import attrs

from pgcdc_events.types.schema import Schema, Struct

__all__ = ["ChangeRecord", "Header"]


@attrs.frozen
class Header:
    """A record header: name, Connect schema and value."""

    name: str
    schema: Schema
    value: Any


@attrs.frozen
class ChangeRecord:
    """One record: topic, key and value (each with its Connect schema), and headers.

    ``value`` is ``None`` for a tombstone; ``key`` is ``None`` for tables without a
    key, truncate events and heartbeats of some kinds. ``lsn`` is the WAL position
    the record came from (for offsets), ``kind`` says what produced it:
    ``change``, ``tombstone``, ``truncate``, ``message``, ``transaction`` or
    ``heartbeat``.
    """

    topic: str
    key_schema: Schema | None
    key: Struct | None
    value_schema: Schema | None
    value: Struct | None
    headers: tuple[Header, ...] = ()
    lsn: int = 0
    kind: str = "change"

    @property
    def op(self) -> str | None:
        """The envelope's ``op`` (``c``, ``u``, ``d``, ``t``, ``m``, ``r``) if the value has one."""
        if self.value is None:
            return None
        return self.value.get("op")  # type: ignore[no-any-return]

    def header(self, name: str) -> Any:
        """The value of header ``name`` (``KeyError`` when absent)."""
        for h in self.headers:
            if h.name == name:
                return h.value
        raise KeyError(name)
