"""Geometric types: ``point`` and PostGIS ``geometry``/``geography``."""

from __future__ import annotations

from typing import Final

from pgcdc_events.types.mapping import Builder

__all__ = ["BUILDERS"]

BUILDERS: Final[dict[str, Builder]] = {}
