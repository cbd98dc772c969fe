"""Column default expressions (``pg_get_expr``) as Connect schema defaults.

The rules are those of Debezium 3.6.3's ``PostgresDefaultValueConverter``, which
reads a default for only a few types, by the column type's own name:

* integers, ``numeric``, floats, ``bool``, ``bit``/``varbit``, ``text``/``varchar``/
  ``bpchar``, ``json``/``jsonb``/``xml``, ``uuid``, ``date``, ``time``,
  ``timestamp``, ``timestamptz``, ``interval`` and enums. Every other type
  (arrays, domains, ``bytea``, ``money``, ``oid``, ``name``, ``"char"``, ranges,
  network types, ``timetz``, hstore, citext, ltree, tsvector, geometry...) has no
  default, whatever the expression.
* The literal is the first single-quoted string of the expression with its
  doubled quotes undone (``'a'::text || 'b'::text`` gives ``a``), or the whole
  expression when it holds no quote (``42``; ``(1 + 2)`` then fails to parse and
  gives no default).
* An expression that starts as a function call (``now()``, ``lower('ABC')``,
  ``nextval(...)``, ``(now())::date``) or is one of ``CURRENT_DATE``,
  ``CURRENT_TIME``, ``CURRENT_TIMESTAMP``, ``LOCALTIME``, ``LOCALTIMESTAMP`` gives
  the type's placeholder instead: ``0``, ``false``, ``""``, ``{}``, the epoch, the
  nil UUID, a zero interval.
* An enum default is the label quoted in ``'label'::type``, and only when the cast
  names the enum without quoting (``'open'::"bug.status"`` gives none). Debezium
  keeps a label's doubled quotes (``'it''s'`` gives ``it''s``, no label of the
  enum); we undo them, as for every other literal (a listed difference).
* A value whose schema is a struct (a ``numeric`` without scale in precise mode)
  gives no default (KAFKA-12694).

The literal then converts as a value of the column would, so it follows the
handling modes; a ``timestamptz`` default keeps the fraction digits it was
written with, even beyond the column's precision.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any, Final, Protocol

from pgcdc_events.types.mapping import Converter, ValueMapping
from pgcdc_events.types.numeric import numeric_modifier
from pgcdc_events.types.registry import PgType
from pgcdc_events.types.schema import NO_DEFAULT, Schema, Struct

__all__ = ["extract_literal", "null_fallback", "parse_default"]

_LITERAL: Final = re.compile(r"'([^']*(?:''[^']*)*)'")
#: Debezium's ``^[(]?[A-Za-z0-9_.]+\((?:.+(?:, ?.+)*)?\)`` (matched at the start), whose
#: argument group matches any text on one line: the same language without the nested
#: quantifiers, which backtrack exponentially on an unclosed call.
_FUNCTION: Final = re.compile("[(]?[A-Za-z0-9_.]+\\([^\n\r\u0085\u2028\u2029]*\\)")
_CURRENT: Final = frozenset({"current_timestamp", "current_time", "current_date", "localtime",
                             "localtimestamp"})
_INTEGER: Final = re.compile(r"[+-]?[0-9]+")
_DECIMAL: Final = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_FLOAT: Final = re.compile(
    r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)[fFdD]?")
_INT_RANGE: Final = {"int2": 1 << 15, "int4": 1 << 31, "int8": 1 << 63}
#: Per type name: the placeholder of a generated default, as PostgreSQL text for our
#: converters (Debezium's own placeholders: "0", "0.0", "false", "", "{}", "1970-01-01",
#: "00:00", "epoch"...).
_PLACEHOLDER: Final[dict[str, str]] = {
    "bit": "00", "varbit": "0", "bool": "false", "bpchar": "", "varchar": "", "text": "",
    "numeric": "0.0", "float4": "0.0", "float8": "0.0", "int2": "0", "int4": "0", "int8": "0",
    "json": "{}", "jsonb": "{}", "xml": "", "uuid": "00000000-0000-0000-0000-000000000000",
    "date": "1970-01-01", "time": "00:00:00", "timestamp": "1970-01-01 00:00:00",
    "timestamptz": "1970-01-01 00:00:00+00", "interval": "00:00:00",
}


def extract_literal(expression: str) -> str | None:
    """The literal Debezium reads from a default expression (see the module docstring).

    ``None`` when the expression is ``NULL::...`` or holds an unterminated quote.
    """
    if "'" not in expression:
        return None if expression.startswith("NULL::") else expression
    match = _LITERAL.search(expression)
    return match.group(1).replace("''", "'") if match else None


def _generated(expression: str) -> bool:
    return bool(_FUNCTION.match(expression)) or expression.lower() in _CURRENT


def _type_name_parts(text: str) -> list[str] | None:
    """``schema.name`` as written after a cast, double-quoted parts unquoted
    (``"Mixed Enum"`` -> ``["Mixed Enum"]``); ``None`` when malformed."""
    parts: list[str] = []
    i = 0
    while i <= len(text):
        if i < len(text) and text[i] == '"':
            end = i + 1
            part = []
            while True:
                close = text.find('"', end)
                if close < 0:
                    return None
                part.append(text[end:close])
                if text[close + 1:close + 2] == '"':
                    part.append('"')
                    end = close + 2
                    continue
                break
            parts.append("".join(part))
            i = close + 1
        else:
            end = text.find(".", i)
            end = len(text) if end < 0 else end
            if '"' in text[i:end] or end == i:
                return None
            parts.append(text[i:end])
            i = end
        if i == len(text):
            return parts
        if text[i] != ".":
            return None
        i += 1
    return None


def _enum_literal(expression: str, pg_type: PgType) -> str | None:
    at = expression.rfind("::")
    if at < 0:
        return None
    parts = _type_name_parts(expression[at + 2:])
    # a type name holding a dot ("bug.status") gets no default from the connector (its
    # type registry does not resolve it); other quoted names ("Mixed Enum") do
    if not parts or len(parts) > 2 or any("." in part for part in parts):
        return None
    name, namespace = parts[-1], parts[0] if len(parts) == 2 else ""
    if name != pg_type.name or (namespace and namespace != pg_type.namespace):
        return None
    literal = expression[:at]
    if len(literal) >= 2 and literal[0] == "'" and literal[-1] == "'":
        # Debezium keeps the doubled quotes ('it''s' gives "it''s"), a string that is
        # no label of the enum; we undo them (docs/differences-from-debezium.md)
        return literal[1:-1].replace("''", "'")
    return None


def _literal_for(expression: str, pg_type: PgType, type_modifier: int) -> str | bool | None:
    """The raw default of ``expression`` for a column of ``pg_type`` (``None``: no default)."""
    if pg_type.kind == "enum":
        return _enum_literal(expression, pg_type)
    name = pg_type.name
    if pg_type.kind != "base" or name not in _PLACEHOLDER:
        return None
    expression = expression.strip()
    if name in ("bool", "numeric", "float4", "float8", "int2", "int4", "int8") and (
            expression.startswith("NULL::")):
        return None
    literal = _PLACEHOLDER[name] if _generated(expression) else extract_literal(expression)
    if literal is None:
        return None
    if name == "bool":  # Boolean.parseBoolean
        return literal.lower() == "true"
    if name == "bit" and len(literal) == 1:
        return literal == "1"
    if name in _INT_RANGE:
        if not _INTEGER.fullmatch(literal):
            return None
        bound = _INT_RANGE[name]
        return literal if -bound <= int(literal) < bound else None
    if name == "numeric":
        if not _DECIMAL.fullmatch(literal):
            return None
        # more fraction digits than the column's scale: the connector's decimal conversion
        # refuses it in every decimal mode (numeric(6,2) DEFAULT 1.555 has no default)
        exponent = Decimal(literal).as_tuple().exponent
        if type_modifier != -1 and isinstance(exponent, int) and (
                -exponent > numeric_modifier(type_modifier)[1]):
            return None
    if name in ("float4", "float8"):
        if not _FLOAT.fullmatch(literal):
            return None
        return literal.rstrip("fFdD")
    return literal


def parse_default(expression: str, mapping: ValueMapping, pg_type: PgType,
                  type_modifier: int = -1) -> Any:
    """The schema default of a column of ``pg_type`` (with ``type_modifier``) for
    ``expression``, or :data:`NO_DEFAULT`."""
    literal = _literal_for(expression, pg_type, type_modifier)
    if literal is None:
        return NO_DEFAULT
    if isinstance(literal, bool):
        if mapping.schema.type != "boolean":
            return NO_DEFAULT
        return literal
    try:
        value = mapping.from_text(literal.encode("utf-8"))
    except Exception:
        return NO_DEFAULT
    if value is None or isinstance(value, Struct):
        return NO_DEFAULT
    return value


#: Zero values (as PostgreSQL text) for a NOT NULL column whose value was not sent.
_ZERO_TEXT: Final[dict[str, str]] = {
    "int2": "0", "int4": "0", "int8": "0", "date": "1970-01-01",
    "timestamp": "1970-01-01 00:00:00", "timestamptz": "1970-01-01 00:00:00+00",
    "time": "00:00:00", "timetz": "00:00:00+00", "oid": "0", "float4": "0", "float8": "0",
    "numeric": "0", "money": "0.00", "bool": "f", "point": "(0,0)",
    "interval": "00:00:00", "bytea": "\\x",
}
# (no uuid: the connector's zero of a uuid column is the string zero "", recording
# events_referee; the nil UUID it declares is only the placeholder of a generated default)
#: The zero of a PostGIS column: an empty GEOMETRYCOLLECTION as WKB, no SRID.
_EMPTY_COLLECTION_WKB: Final = bytes.fromhex("010700000000000000")
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
    schema = mapping.schema
    root = pg_type.root.name
    if root == "hstore" and schema.type == "string":
        return "{}"  # an empty hstore in json mode
    if root in ("geometry", "geography") and schema.type == "struct":
        return Struct(schema, (_EMPTY_COLLECTION_WKB, None))
    if root == "timestamptz" and schema.type == "string":
        # the connector's zero instant, without the column's fraction digits
        return "1970-01-01T00:00:00Z"
    literal = _ZERO_TEXT.get(root)
    if literal is not None:
        try:
            return mapping.from_text(literal.encode())
        except Exception:  # fall back to the schema's zero below
            pass
    if schema.type == "array":
        return []
    if schema.type == "map":
        return {}
    return _ZERO_BY_SCHEMA.get(schema.type)
