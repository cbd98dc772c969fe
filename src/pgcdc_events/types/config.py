"""The handling modes that shape Connect schemas and values, named as Debezium names them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal

import attrs

from pgcdc_events.errors import ConfigurationError
from pgcdc_events.types.javaregex import JavaPattern, compile_java

__all__ = [
    "DEFAULT_PLACEHOLDER",
    "TYPE_PROPERTIES",
    "TypeConfig",
    "parse_bool",
    "parse_patterns",
    "split_patterns",
]

TimePrecisionMode = Literal[
    "adaptive", "adaptive_time_microseconds", "connect", "isostring", "microseconds",
    "nanoseconds",
]
DecimalHandlingMode = Literal["precise", "double", "string"]
HstoreHandlingMode = Literal["json", "map"]
IntervalHandlingMode = Literal["numeric", "string"]
BinaryHandlingMode = Literal["bytes", "base64", "base64-url-safe", "hex"]

DEFAULT_PLACEHOLDER: Final = "__debezium_unavailable_value"

_CHOICES: Final[dict[str, tuple[str, ...]]] = {
    "time.precision.mode": ("adaptive", "adaptive_time_microseconds", "connect", "isostring",
                            "microseconds", "nanoseconds"),
    "decimal.handling.mode": ("precise", "double", "string"),
    "hstore.handling.mode": ("json", "map"),
    "interval.handling.mode": ("numeric", "string"),
    "binary.handling.mode": ("bytes", "base64", "base64-url-safe", "hex"),
}

#: Every connector property this layer reads, with its default.
TYPE_PROPERTIES: Final[dict[str, str]] = {
    "time.precision.mode": "adaptive",
    "decimal.handling.mode": "precise",
    "hstore.handling.mode": "json",
    "interval.handling.mode": "numeric",
    "binary.handling.mode": "bytes",
    "money.fraction.digits": "2",
    "unavailable.value.placeholder": DEFAULT_PLACEHOLDER,
    "include.unknown.datatypes": "false",
    "pgcdc.map.unsupported.types": "false",
    "column.propagate.source.type": "",
    "datatype.propagate.source.type": "",
}


def parse_patterns(text: str, name: str | None = None) -> tuple[JavaPattern, ...]:
    """Debezium's comma-separated regular expressions (``\\,`` escapes a comma), in Java's
    syntax, matched against whole names without case and in linear time
    (:func:`~pgcdc_events.types.javaregex.compile_java`)."""
    return tuple(compile_java(part, name) for part in split_patterns(text, name))


_JAVA_TRIM: Final = "".join(map(chr, range(33)))  # what Java's String.trim() removes


def split_patterns(text: str, name: str | None = None) -> list[str]:
    """Split a list of regular expressions as Debezium's ``Strings.RegExSplitter`` does:
    at each comma not escaped by a backslash (a backslash escapes any character, so
    ``\\\\,`` still splits), each part trimmed, then ``\\,`` becomes ``,``."""
    parts, start, index = [], 0, 0
    while index < len(text):
        char = text[index]
        if char == "\\":
            if index + 1 == len(text):
                where = f"{name}: " if name else ""
                raise ConfigurationError(
                    f"{where}unterminated escape sequence at the end of {text!r}")
            index += 1
        elif char == ",":
            parts.append(text[start:index])
            start = index + 1
        index += 1
    parts.append(text[start:])
    return [part.strip(_JAVA_TRIM).replace("\\,", ",") for part in parts if part]


def parse_bool(name: str, value: str) -> bool:
    """Read a boolean property the way Kafka's ConfigDef does (``true``/``false``)."""
    lowered = value.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise ConfigurationError(f"{name}: expected true or false, got {value!r}")


@attrs.frozen
class TypeConfig:
    """How PostgreSQL values become Connect values; the defaults are Debezium's.

    ``map_unsupported_types`` (property ``pgcdc.map.unsupported.types``) is ours: map
    array columns whose types Debezium 3.6 drops (``money[]``, ``interval[]``,
    ``point[]``...) with their element's mapping instead of dropping them too.
    """

    time_precision_mode: TimePrecisionMode = "adaptive"
    decimal_handling_mode: DecimalHandlingMode = "precise"
    hstore_handling_mode: HstoreHandlingMode = "json"
    interval_handling_mode: IntervalHandlingMode = "numeric"
    binary_handling_mode: BinaryHandlingMode = "bytes"
    money_fraction_digits: int = 2
    unavailable_value_placeholder: bytes = DEFAULT_PLACEHOLDER.encode()
    include_unknown_datatypes: bool = False
    column_propagate_source_type: tuple[JavaPattern, ...] = ()
    datatype_propagate_source_type: tuple[JavaPattern, ...] = ()
    map_unsupported_types: bool = False

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> TypeConfig:
        """Read the properties of :data:`TYPE_PROPERTIES` (others are ignored here)."""
        values: dict[str, object] = {}
        for name, choices in _CHOICES.items():
            if name in props:
                value = props[name].strip().lower()
                if value not in choices:
                    raise ConfigurationError(
                        f"{name}: unsupported value {props[name]!r}; allowed: {', '.join(choices)}"
                    )
                values[name.replace(".", "_")] = value
        if "money.fraction.digits" in props:
            try:
                digits = int(props["money.fraction.digits"])
            except ValueError:
                digits = -1
            if digits < 0:
                raise ConfigurationError("money.fraction.digits: expected a non-negative integer, "
                                         f"got {props['money.fraction.digits']!r}")
            values["money_fraction_digits"] = digits
        if "unavailable.value.placeholder" in props:
            values["unavailable_value_placeholder"] = placeholder_bytes(
                props["unavailable.value.placeholder"])
        if "pgcdc.map.unsupported.types" in props:
            values["map_unsupported_types"] = parse_bool(
                "pgcdc.map.unsupported.types", props["pgcdc.map.unsupported.types"])
        if "include.unknown.datatypes" in props:
            values["include_unknown_datatypes"] = parse_bool(
                "include.unknown.datatypes", props["include.unknown.datatypes"])
        for name in ("column.propagate.source.type", "datatype.propagate.source.type"):
            if name in props:
                values[name.replace(".", "_")] = parse_patterns(props[name], name)
        return cls(**values)  # type: ignore[arg-type]

    @property
    def placeholder_text(self) -> str:
        """The placeholder as a string: its bytes as UTF-8, invalid sequences replaced (as Java)."""
        return self.unavailable_value_placeholder.decode("utf-8", "replace")


def placeholder_bytes(text: str) -> bytes:
    """``unavailable.value.placeholder`` as bytes; ``hex:`` introduces raw octets."""
    if text.startswith("hex:"):
        try:
            return bytes.fromhex(text[4:])
        except ValueError:
            raise ConfigurationError(
                f"unavailable.value.placeholder: {text!r} is not valid hex after 'hex:'"
            ) from None
    return text.encode("utf-8")
