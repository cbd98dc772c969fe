"""One-dimensional arrays of every mapped element type."""

from __future__ import annotations

from pgcdc_events.types.config import TypeConfig
from pgcdc_events.types.mapping import ValueMapping
from pgcdc_events.types.registry import PgType

__all__ = ["build"]


def build(t: PgType, typmod: int, config: TypeConfig, element: ValueMapping | None
          ) -> ValueMapping | None:
    """The mapping of array type ``t`` whose elements map as ``element``."""
    return None
