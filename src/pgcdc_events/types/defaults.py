"""Column default expressions (``pg_get_expr``) as Connect schema defaults.

Debezium reads a column's default from the catalog and converts it with the
column's own value converter. A literal (``42``, ``'dflt'::text``,
``'2000-01-01'::date``) becomes the default; a function call such as ``now()``
becomes the type's zero value for date/time types, as Debezium's default-value
mappers do, and no default elsewhere (``nextval(...)``); a struct-valued default
is dropped (KAFKA-12694), as Debezium drops it; anything that does not convert
gives no default.
"""

from __future__ import annotations

import re
from typing import Any, Final, Protocol

from pgcdc_events.types.mapping import Converter, ValueMapping
from pgcdc_events.types.registry import PgType
from pgcdc_events.types.schema import NO_DEFAULT, Schema, Struct

__all__ = ["literal_of", "null_fallback", "parse_default"]

_CAST: Final = re.compile(r"::[\w\s.\"\[\]()]+$")
#: What Debezium's default-value mappers substitute for a generated (function) default.
_GENERATED_ZERO: Final[dict[str, str]] = {
    "int2": "0",
    "int4": "0",
    "int8": "0",
    "date": "1970-01-01",
    "timestamp": "1970-01-01 00:00:00",
    "timestamptz": "1970-01-01 00:00:00+00",
    "time": "00:00:00",
    "timetz": "00:00:00+00",
}


def literal_of(expression: str) -> str | None:
    """The literal text of a default expression, or ``None`` when it is not a literal."""
    text = expression.strip()
    while text.startswith("(") and text.endswith(")") and _balanced(text[1:-1]):
        text = text[1:-1].strip()
    if text.startswith("'"):
        end = _closing_quote(text)
        if end is None:
            return None
        rest = text[end + 1:].strip()
        if rest and not _CAST.fullmatch(rest):
            return None
        return text[1:end].replace("''", "'")
    text = _CAST.sub("", text).strip()
    while text.startswith("(") and text.endswith(")") and _balanced(text[1:-1]):
        text = text[1:-1].strip()
    if not text or "(" in text or text.upper() == "NULL":
        return None
    return text


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if depth < 0:
            return False
    return depth == 0


def _closing_quote(text: str) -> int | None:
    i = 1
    while i < len(text):
        if text[i] == "'":
            if i + 1 < len(text) and text[i + 1] == "'":
                i += 2
                continue
            return i
        i += 1
    return None


def parse_default(expression: str, mapping: ValueMapping, pg_type: PgType) -> Any:
    """The schema default for ``expression``, or :data:`NO_DEFAULT`."""
    literal = literal_of(expression)
    if literal is None:
        if "(" not in expression:
            return NO_DEFAULT
        literal = _GENERATED_ZERO.get(pg_type.root.name)
        if literal is None:
            return NO_DEFAULT
    if pg_type.root.name == "bool":  # Boolean.parseBoolean: "true" in any case, else false
        literal = "t" if literal.strip().lower() in ("true", "t") else "f"
    try:
        value = mapping.from_text(literal.encode("utf-8"))
    except Exception:
        return NO_DEFAULT
    if value is None or isinstance(value, Struct):
        return NO_DEFAULT
    return value


#: Zero values (as PostgreSQL text) for a NOT NULL column whose value was not sent.
_ZERO_TEXT: Final[dict[str, str]] = {
    **_GENERATED_ZERO,
    "oid": "0", "float4": "0", "float8": "0", "numeric": "0", "money": "0", "bool": "f",
    "interval": "00:00:00", "uuid": "00000000-0000-0000-0000-000000000000", "bytea": "\\x",
}
_ZERO_BY_SCHEMA: Final[dict[str, Any]] = {
    "int8": 0, "int16": 0, "int32": 0, "int64": 0, "float32": 0.0, "float64": 0.0,
    "boolean": False, "string": "", "bytes": b"",
}


class _Mapped(Protocol):
    @property
    def schema(self) -> Schema: ...

    @property
    def from_text(self) -> Converter: ...


def null_fallback(mapping: _Mapped, pg_type: PgType, optional: bool, default: Any) -> Any:
    """What a column's value becomes when PostgreSQL did not send it, as in Debezium.

    Debezium's converters return ``null`` for an optional column; for a NOT NULL
    column (a non-key column of a delete's old key, say) they return the schema's
    default or else the type's zero value (``0``, ``""``, the epoch...), because a
    required field cannot be ``null`` in a Connect struct.
    """
    if optional:
        return None
    if default is not NO_DEFAULT and default is not None:
        return default
    literal = _ZERO_TEXT.get(pg_type.root.name)
    if literal is not None:
        try:
            return mapping.from_text(literal.encode())
        except Exception:  # fall back to the schema's zero below
            pass
    schema = mapping.schema
    if schema.type == "array":
        return []
    if schema.type == "map":
        return {}
    return _ZERO_BY_SCHEMA.get(schema.type)
