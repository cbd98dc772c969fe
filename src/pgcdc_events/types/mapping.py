"""What a type family produces for a column: its Connect schema and value converters."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from pgcdc_events.types.config import TypeConfig
from pgcdc_events.types.registry import PgType
from pgcdc_events.types.schema import Schema

__all__ = ["Builder", "Converter", "ValueMapping"]

#: Turns one value's bytes (text output or binary send format) into a Connect value.
Converter = Callable[[bytes], Any]


@attrs.frozen
class ValueMapping:
    """How values of one column type become Connect values.

    ``schema`` is the bare schema (the mapper adds optionality, the default and
    source-type parameters). ``from_text`` converts the type's text output and
    ``from_binary`` its binary send format (``None`` when unsupported: the column
    then needs text tuples). ``toast`` is the value standing in for an unchanged
    TOASTed value that the server did not send.
    """

    schema: Schema
    from_text: Converter
    from_binary: Converter | None = None
    toast: Any = None


#: A type family's builder: the mapping for a (root) type and modifier under a configuration,
#: or ``None`` when the type is not mapped (Debezium drops such columns).
Builder = Callable[[PgType, int, TypeConfig], "ValueMapping | None"]
