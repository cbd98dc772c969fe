"""What a type family produces for a column: its Connect schema and value converters.

A family may also declare, next to its scalar text converter, the *vector form* of a
column's text values (:class:`VectorForm`): a small frozen description, in data, of what
the text looks like and what value it gives ("a decimal integer as int16", "fixed-scale
numeric text"), built from the same parameters the scalar converter is built from. The
core imports no numpy or pyarrow, so the vectorized kernels live with their only user,
Spark (:mod:`pgcdc_events.spark.vectorized`, one kernel per form class); a kernel must
give, for every value it accepts, exactly what the mapping's ``from_text`` gives, and
tests hold it to that on every value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from pgcdc_events.types.config import TypeConfig
from pgcdc_events.types.registry import PgType
from pgcdc_events.types.schema import Schema

__all__ = ["Builder", "Converter", "ValueMapping", "VectorForm"]

#: Turns one value's bytes (text output or binary send format) into a Connect value.
Converter = Callable[[bytes], Any]


@attrs.frozen
class VectorForm:
    """The vector form of a column's text values: a family's declaration that a kernel may
    convert them column-wise. Subclasses (one per form, in the family's module, beside the
    scalar converter) hold only the parameters the scalar converter was built from."""


@attrs.frozen
class ValueMapping:
    """How values of one column type become Connect values.

    ``schema`` is the bare schema (the mapper adds optionality, the default and
    source-type parameters). ``from_text`` converts the type's text output and
    ``from_binary`` its binary send format (``None`` when unsupported: the column
    then needs text tuples). ``toast`` is the value standing in for an unchanged
    TOASTed value that the server did not send. ``vector`` is the vector form of the
    text values (``None``: they convert one by one, by ``from_text``).
    """

    schema: Schema
    from_text: Converter
    from_binary: Converter | None = None
    toast: Any = None
    vector: VectorForm | None = None


#: A type family's builder: the mapping for a (root) type and modifier under a configuration,
#: or ``None`` when the type is not mapped (Debezium drops such columns).
Builder = Callable[[PgType, int, TypeConfig], "ValueMapping | None"]
