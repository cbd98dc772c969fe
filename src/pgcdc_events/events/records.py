"""The records the decoder emits: what a Kafka Connect source record would hold."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import attrs

from pgcdc_events._frozen import factory
from pgcdc_events.types.schema import Schema, Struct

__all__ = ["ChangeRecord", "Header", "make_record"]


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


#: ``make_record(topic, key_schema, key, value_schema, value, headers, lsn, kind)`` (every
#: field, in order) is that :class:`ChangeRecord`, built without going through
#: ``__init__`` (see :mod:`pgcdc_events._frozen`): for code that builds many.
make_record: Final[Callable[[str, Schema | None, Struct | None, Schema | None, Struct | None,
                             tuple[Header, ...], int, str], ChangeRecord]] = factory(ChangeRecord)
