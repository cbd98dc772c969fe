"""Topic names and Debezium's schema-name and field-name adjustment.

``schema.name.adjustment.mode`` and ``field.name.adjustment.mode`` make names valid
Avro names: ``avro`` replaces each invalid character (per UTF-16 code unit, as
Java counts characters) with ``_`` and puts ``_`` before a leading digit;
``avro_unicode`` writes ``_uXXXX`` for invalid characters and for ``_`` itself.
Schema names may contain ``.``; field names may not. Topic names keep only
``[A-Za-z0-9._-]``. The rules were read off the real ``SchemaNameAdjuster`` and
``SchemaTopicNamingStrategy`` of Debezium 3.6.3.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache, lru_cache

__all__ = ["adjuster", "sanitize_topic", "topic_name"]


def _units(text: str) -> list[str]:
    """``text`` as Java sees it: UTF-16 code units (astral characters become surrogate pairs)."""
    out: list[str] = []
    for ch in text:
        code = ord(ch)
        if code > 0xFFFF:
            code -= 0x10000
            out += [chr(0xD800 + (code >> 10)), chr(0xDC00 + (code & 0x3FF))]
        else:
            out.append(ch)
    return out


def _is_letter(ch: str) -> bool:
    return ("a" <= ch <= "z") or ("A" <= ch <= "Z")


def _adjust(name: str, *, unicode: bool, dots: bool) -> str:
    parts: list[str] = []
    for i, ch in enumerate(_units(name)):
        digit = "0" <= ch <= "9"
        if unicode:
            valid = _is_letter(ch) or (digit and i > 0) or (dots and ch == ".")
            parts.append(ch if valid else f"_u{ord(ch):04x}")
        elif i == 0:
            parts.append(ch if _is_letter(ch) or ch == "_" else ("_" + ch if digit else "_"))
        else:
            valid = _is_letter(ch) or digit or ch == "_" or (dots and ch == ".")
            parts.append(ch if valid else "_")
    return "".join(parts)


@cache
def adjuster(mode: str, *, field: bool = False) -> Callable[[str], str]:
    """The name adjuster for ``none``, ``avro`` or ``avro_unicode`` (schema or field names)."""
    if mode == "none":
        return lambda name: name
    unicode = mode == "avro_unicode"
    cache: dict[str, str] = {}

    def adjust(name: str) -> str:
        result = cache.get(name)
        if result is None:
            result = cache[name] = _adjust(name, unicode=unicode, dots=not field)
        return result

    return adjust


@lru_cache(maxsize=4096)  # transaction records ask for theirs at every Begin and Commit
def sanitize_topic(name: str) -> str:
    """Replace characters Kafka does not allow in topic names (per UTF-16 unit) with ``_``."""
    if all(c.isascii() and (c.isalnum() or c in "._-") for c in name):
        return name
    return "".join(c if c.isascii() and (c.isalnum() or c in "._-") else "_" for c in _units(name))


@lru_cache(maxsize=4096)
def topic_name(prefix: str, schema: str, table: str, delimiter: str = ".") -> str:
    """``<topic.prefix>.<schema>.<table>``, sanitized as SchemaTopicNamingStrategy does."""
    return sanitize_topic(delimiter.join((prefix, schema, table)))
