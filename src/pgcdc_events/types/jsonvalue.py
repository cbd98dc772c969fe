"""Connect values to and from the JSON that Kafka's JsonConverter writes.

The rules of ``JsonConverter.convertToJson``: bytes become base64; a
``Decimal`` logical value becomes the base64 of its unscaled two's-complement
bytes (``decimal.format=BASE64``, the default) or a JSON number
(``NUMERIC``); maps with string keys become objects, other maps arrays of
``[key, value]`` pairs; a null field whose schema has a default is written as
the default (``replace.null.with.default=true``, the default).
"""

from __future__ import annotations

import base64
import decimal
import math
from decimal import Decimal
from typing import Any, Final

from pgcdc_events.types.schema import Schema, Struct

__all__ = [
    "DECIMAL_LOGICAL",
    "decimal_from_bytes",
    "decimal_to_bytes",
    "unscaled_value",
    "value_from_json",
    "value_to_json",
]

DECIMAL_LOGICAL: Final = "org.apache.kafka.connect.data.Decimal"
#: Room for any PostgreSQL numeric (131072 digits before the point, 16383 after).
_CONTEXT: Final = decimal.Context(prec=200_000, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)


def decimal_to_bytes(unscaled: int) -> bytes:
    """Big-endian two's-complement bytes of ``unscaled``, as ``BigInteger.toByteArray()``."""
    bits = (~unscaled if unscaled < 0 else unscaled).bit_length()
    return unscaled.to_bytes(bits // 8 + 1, "big", signed=True)


def decimal_from_bytes(raw: bytes, scale: int) -> Decimal:
    """The inverse of :func:`decimal_to_bytes` with the given scale."""
    # the context passed by position: C decimal parses a keyword argument at some cost
    return Decimal(int.from_bytes(raw, "big", signed=True)).scaleb(-scale, _CONTEXT)


def unscaled_value(value: Decimal, scale: int) -> int:
    """``value`` times ``10**scale`` as an integer (digits beyond ``scale`` are truncated)."""
    return int(value.scaleb(scale, _CONTEXT))  # by position: cheaper than context=


def _float(value: float) -> Any:
    if math.isfinite(value):
        return value
    # Jackson writes non-finite doubles as quoted strings (QUOTE_NON_NUMERIC_NUMBERS).
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


def value_to_json(
    schema: Schema,
    value: Any,
    *,
    replace_null_with_default: bool = True,
    decimal_format: str = "BASE64",
) -> Any:
    """Convert a Connect value to its JsonConverter JSON form (a JSON-ready Python value)."""
    if value is None:
        if replace_null_with_default and schema.has_default and schema.default is not None:
            value = schema.default
        else:
            return None
    kind = schema.type
    if schema.name == DECIMAL_LOGICAL:
        scale = int(schema.params.get("scale", "0"))
        if decimal_format == "NUMERIC":
            return value
        return base64.b64encode(decimal_to_bytes(unscaled_value(value, scale))).decode("ascii")
    if kind == "bytes":
        return base64.b64encode(value).decode("ascii")
    if kind in ("float32", "float64"):
        return _float(value)
    if kind == "struct":
        if isinstance(value, Struct):
            pairs = zip(schema.fields or (), value.values, strict=True)
            return {
                f.name: value_to_json(
                    f.schema, v, replace_null_with_default=replace_null_with_default,
                    decimal_format=decimal_format,
                )
                for f, v in pairs
            }
        return {
            f.name: value_to_json(f.schema, value.get(f.name),
                                  replace_null_with_default=replace_null_with_default,
                                  decimal_format=decimal_format)
            for f in schema.fields or ()
        }
    if kind == "array":
        assert schema.items is not None
        items = schema.items
        return [value_to_json(items, v, replace_null_with_default=replace_null_with_default,
                              decimal_format=decimal_format) for v in value]
    if kind == "map":
        assert schema.keys is not None and schema.values is not None
        vs = schema.values
        if schema.keys.type == "string":
            return {k: value_to_json(vs, v, replace_null_with_default=replace_null_with_default,
                                     decimal_format=decimal_format) for k, v in value.items()}
        ks = schema.keys
        return [[value_to_json(ks, k), value_to_json(vs, v)] for k, v in value.items()]
    return value


def value_from_json(schema: Schema, obj: Any) -> Any:
    """Convert JsonConverter JSON back to a Connect value (the inverse of :func:`value_to_json`)."""
    if obj is None:
        return None
    kind = schema.type
    if schema.name == DECIMAL_LOGICAL:
        scale = int(schema.params.get("scale", "0"))
        if isinstance(obj, str):
            return decimal_from_bytes(base64.b64decode(obj), scale)
        return Decimal(str(obj))
    if kind == "bytes":
        return base64.b64decode(obj)
    if kind in ("float32", "float64"):
        return float(obj)
    if kind == "struct":
        return Struct(schema, tuple(value_from_json(f.schema, obj.get(f.name))
                                    for f in schema.fields or ()))
    if kind == "array":
        assert schema.items is not None
        return [value_from_json(schema.items, v) for v in obj]
    if kind == "map":
        assert schema.keys is not None and schema.values is not None
        if isinstance(obj, dict):
            return {k: value_from_json(schema.values, v) for k, v in obj.items()}
        return {value_from_json(schema.keys, k): value_from_json(schema.values, v) for k, v in obj}
    return obj
