"""Kafka Connect JsonConverter output for records, byte-compatible with what Debezium writes.

With ``schemas.enable=true`` a key, value or header is ``{"schema":…,"payload":…}``;
with ``false`` only the payload. A tombstone's value and a missing key are JSON
``null``. Output is compact, as Jackson writes it, with doubles in Java's
``Double.toString`` form. The JSON text of every schema is computed once and
reused for every record that carries it.
"""

from __future__ import annotations

import base64
import json
import math
from decimal import Decimal
from typing import Any

from pgcdc_events.events.config import JsonConverterConfig
from pgcdc_events.events.records import ChangeRecord
from pgcdc_events.types.javafmt import jackson_string, java_double
from pgcdc_events.types.jsonvalue import DECIMAL_LOGICAL, decimal_to_bytes, unscaled_value
from pgcdc_events.types.schema import Schema, Struct

__all__ = ["JsonRecordWriter", "json_text", "record_to_json"]

_dumps = jackson_string


def json_text(obj: Any) -> str:
    """Compact JSON of plain data as Jackson writes it (Java doubles, plain BigDecimals)."""
    if obj is None:
        return "null"
    if obj is True:
        return "true"
    if obj is False:
        return "false"
    if isinstance(obj, str):
        return jackson_string(obj)
    if isinstance(obj, int):
        return str(obj)
    if isinstance(obj, float):
        return java_double(obj) if math.isfinite(obj) else '"' + java_double(obj) + '"'
    if isinstance(obj, Decimal):
        return _decimal_numeric(obj, max(0, -int(obj.as_tuple().exponent)))
    if isinstance(obj, dict):
        return "{" + ",".join(f"{jackson_string(k)}:{json_text(v)}" for k, v in obj.items()) + "}"
    if isinstance(obj, (list, tuple)):
        return "[" + ",".join(json_text(v) for v in obj) + "]"
    raise TypeError(f"cannot write {type(obj).__name__} as JSON")


class JsonRecordWriter:
    """Serializes records as JsonConverter does, caching each schema's JSON text."""

    def __init__(self, config: JsonConverterConfig | None = None) -> None:
        self.config = config or JsonConverterConfig()
        self._schema_text: dict[int, tuple[Schema, str]] = {}

    def schema_text(self, schema: Schema) -> str:
        """The compact JSON of ``schema`` (cached per schema object)."""
        cached = self._schema_text.get(id(schema))
        if cached is None or cached[0] is not schema:
            cached = (schema, json_text(schema.to_json(decimal_format=self.config.decimal_format)))
            self._schema_text[id(schema)] = cached
        return cached[1]

    def converted(self, schema: Schema | None, value: Any) -> str:
        """One converted key, value or header as JSON text."""
        if schema is None or (value is None and not self.config.schemas_enable):
            return "null" if value is None else self.payload(schema, value)
        if value is None:
            return "null"
        payload = self.payload(schema, value)
        if not self.config.schemas_enable:
            return payload
        return f'{{"schema":{self.schema_text(schema)},"payload":{payload}}}'

    def payload(self, schema: Schema | None, value: Any) -> str:
        """The JSON text of a payload under its schema."""
        parts: list[str] = []
        self._write(schema, value, parts)
        return "".join(parts)

    def _write(self, schema: Schema | None, value: Any, out: list[str]) -> None:
        if (value is None and schema is not None and self.config.replace_null_with_default
                and schema.has_default and schema.default is not None):
            value = schema.default
        if value is None:
            out.append("null")
            return
        if schema is None:
            out.append(json_text(value))
            return
        kind = schema.type
        if kind == "struct":
            assert isinstance(value, Struct)
            out.append("{")
            first = True
            for field, item in zip(schema.fields or (), value.values, strict=True):
                if not first:
                    out.append(",")
                first = False
                out.append(_dumps(field.name))
                out.append(":")
                self._write(field.schema, item, out)
            out.append("}")
        elif schema.name == DECIMAL_LOGICAL:
            scale = int(schema.params.get("scale", "0"))
            if self.config.decimal_format == "NUMERIC":
                out.append(_decimal_numeric(value, scale))
            else:
                raw = decimal_to_bytes(unscaled_value(value, scale))
                out.append('"' + base64.b64encode(raw).decode("ascii") + '"')
        elif kind == "string":
            out.append(_dumps(value))
        elif kind in ("int8", "int16", "int32", "int64"):
            out.append(str(int(value)))
        elif kind == "boolean":
            out.append("true" if value else "false")
        elif kind in ("float32", "float64"):
            if math.isfinite(value):
                out.append(java_double(value))
            else:
                out.append('"' + java_double(value) + '"')
        elif kind == "bytes":
            out.append('"' + base64.b64encode(value).decode("ascii") + '"')
        elif kind == "array":
            out.append("[")
            for i, item in enumerate(value):
                if i:
                    out.append(",")
                self._write(schema.items, item, out)
            out.append("]")
        elif kind == "map":
            assert schema.keys is not None
            if schema.keys.type == "string":
                out.append("{")
                for i, (k, v) in enumerate(value.items()):
                    if i:
                        out.append(",")
                    out.append(_dumps(k))
                    out.append(":")
                    self._write(schema.values, v, out)
                out.append("}")
            else:
                out.append("[")
                for i, (k, v) in enumerate(value.items()):
                    if i:
                        out.append(",")
                    out.append("[")
                    self._write(schema.keys, k, out)
                    out.append(",")
                    self._write(schema.values, v, out)
                    out.append("]")
                out.append("]")
        else:
            out.append(json_text(value))

    def record_line(self, record: ChangeRecord) -> str:
        """The record as one line of ``decode`` output: topic, key, value and headers."""
        headers = ",".join(f"{_dumps(h.name)}:{self.converted(h.schema, h.value)}"
                           for h in record.headers)
        return (f'{{"topic":{_dumps(record.topic)},'
                f'"key":{self.converted(record.key_schema, record.key)},'
                f'"value":{self.converted(record.value_schema, record.value)},'
                f'"headers":{{{headers}}}}}')


def _decimal_numeric(value: Decimal, scale: int) -> str:
    """A decimal as Jackson writes a BigDecimal node (``toString``: plain, or E notation)."""
    quantized = Decimal(unscaled_value(value, scale)).scaleb(-scale)
    sign, digits, exponent = quantized.as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    adjusted = len(text) - 1 - scale
    if scale >= 0 and adjusted >= -6:
        if scale == 0:
            body = text
        elif len(text) > scale:
            body = f"{text[:-scale]}.{text[-scale:]}"
        else:
            body = "0." + text.rjust(scale, "0")
    else:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        body = f"{mantissa}E{'+' if adjusted >= 0 else ''}{adjusted}"
    return ("-" if sign and any(digits) else "") + body


def record_to_json(record: ChangeRecord, config: JsonConverterConfig | None = None
                   ) -> dict[str, Any]:
    """The record as a JSON-ready dict (``{"topic", "key", "value", "headers"}``)."""
    writer = JsonRecordWriter(config)
    return json.loads(writer.record_line(record))  # type: ignore[no-any-return]
