"""Kafka Connect JsonConverter output for records, byte-compatible with what Debezium writes.

With ``schemas.enable=true`` a key, value or header is ``{"schema":…,"payload":…}``;
with ``false`` only the payload. A tombstone's value and a missing key are JSON
``null``. Output is compact, as Jackson writes it, with doubles in Java's
``Double.toString`` form and strings escaped as Jackson escapes them.

Speed comes from doing per schema what can be done per schema: the JSON text of
each schema is rendered once, and each struct schema gets a payload writer
generated as Python source (one expression per field, defaults and null handling
resolved in advance). :meth:`JsonRecordWriter.source_for` shows that source.
"""

from __future__ import annotations

import base64
import math
import weakref
from collections.abc import Callable, Iterable
from decimal import Decimal
from json.encoder import encode_basestring
from typing import Any, Final

from pgcdc_events.events.config import JsonConverterConfig
from pgcdc_events.events.records import ChangeRecord, Header
from pgcdc_events.events.source import SHARED_FIELD_NAMES, SOURCE_SCHEMA
from pgcdc_events.types.javafmt import jackson_string, java_double, upper_escape
from pgcdc_events.types.jsonvalue import DECIMAL_LOGICAL, decimal_to_bytes, unscaled_value
from pgcdc_events.types.schema import Field, Schema

__all__ = ["Fixed", "Input", "JsonRecordWriter", "jackson_string", "json_text",
           "record_to_json"]

_b64 = base64.b64encode
Writer = Callable[[Any], str]
#: key schema, value schema, headers (identities checked), key writer, line start, value
#: writer, between key and value, line end (writers None: no fast path for these schemas),
#: topic (the one the frame was made for: an identity check for the last frame used), and
#: a tombstone's line after its key (``"value":null`` and the headers)
_Frame = tuple[Any, Any, Any, "Writer | None", bytes, "Writer | None", bytes, bytes, str, bytes]
#: What no record's frame is: the last frame used before the first record.
_NO_FRAME: _Frame = (object(), None, None, None, b"", None, b"", b"", "", b"")


class Fixed:
    """An input of :meth:`JsonRecordWriter.line_writer`: a field's value known when the
    writer is generated (its text is written then, by the field schema's rule)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"Fixed({self.value!r})"


#: A field's input in a generated writer: the name of a local holding its value, a
#: :class:`Fixed` value, or a struct's inputs (written inline).
Input = str | Fixed | tuple[Any, ...]


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
        return _double(obj)
    if isinstance(obj, Decimal):
        return _decimal_numeric(obj, max(0, -int(obj.as_tuple().exponent)))
    if isinstance(obj, dict):
        return "{" + ",".join(f"{jackson_string(k)}:{json_text(v)}" for k, v in obj.items()) + "}"
    if isinstance(obj, (list, tuple)):
        return "[" + ",".join(json_text(v) for v in obj) + "]"
    raise TypeError(f"cannot write {type(obj).__name__} as JSON")


def _double(value: float) -> str:
    return java_double(value) if math.isfinite(value) else '"' + java_double(value) + '"'


def _bytes(value: bytes) -> str:
    return f'"{_b64(value).decode("ascii")}"'


def _bool(value: Any) -> str:
    return "true" if value else "false"


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


class _Compiler:
    """Generates one payload writer per schema, sharing helpers through a namespace."""

    def __init__(self, config: JsonConverterConfig) -> None:
        self.config = config
        self.namespace: dict[str, Any] = {
            "_s": jackson_string, "_d": _double, "_b": _bytes, "_bool": _bool, "_str": str,
            "_e": encode_basestring, "_u": upper_escape,
            "_dtb": decimal_to_bytes, "_unscaled": unscaled_value,
        }
        self.sources: dict[int, tuple[Schema, str, str]] = {}
        self._writers: dict[int, tuple[Schema, Writer]] = {}
        self.lines = 0  # line writers generated (their names and their memos' names)

    def writer(self, schema: Schema) -> Writer:
        """The payload writer of ``schema`` (a non-null value in, JSON text out)."""
        cached = self._writers.get(id(schema))
        if cached is not None and cached[0] is schema:
            return cached[1]
        name = f"_w{len(self._writers)}"
        self._writers[id(schema)] = (schema, _placeholder)  # recursion guard
        source = self._source(schema, name)
        exec(compile(source, f"<pgcdc json writer {schema.name or schema.type}>", "exec"),
             self.namespace)
        fn: Writer = self.namespace[name]
        self._writers[id(schema)] = (schema, fn)
        self.sources[id(schema)] = (schema, name, source)
        return fn

    def _value(self, schema: Schema, var: str) -> str:
        """An expression writing the non-null value ``var`` of ``schema``."""
        kind = schema.type
        if schema.name == DECIMAL_LOGICAL:
            scale = int(schema.params.get("scale", "0"))
            if self.config.decimal_format != "NUMERIC":  # BASE64, without a helper's frame
                return f"_b(_dtb(_unscaled({var}, {scale})))"
            helper = f"_dec{scale}_{self.config.decimal_format}"
            if helper not in self.namespace:
                self.namespace[helper] = _decimal_writer(scale, self.config.decimal_format)
            return f"{helper}({var})"
        if kind in ("int8", "int16", "int32", "int64"):
            return f"_str({var})"
        if kind == "string":  # jackson_string, inlined: strings are most of a record
            return f"(_u(r) if '\\\\u' in (r := _e({var})) else r)"
        if kind == "boolean":
            return f"('true' if {var} else 'false')"
        if kind in ("float32", "float64"):
            return f"_d({var})"
        if kind == "bytes":
            return f"_b({var})"
        sub = self.writer(schema)
        key = f"_sub{id(schema)}"
        self.namespace[key] = sub
        return f"{key}({var})"

    def _null(self, schema: Schema) -> str:
        """The JSON text written for a null of ``schema`` (its default, with replacement)."""
        if self.config.replace_null_with_default and schema.has_default \
                and schema.default is not None:
            return JsonRecordWriter(self.config).payload(schema.with_(default=None),
                                                         schema.default)
        return "null"

    def _source(self, schema: Schema, name: str) -> str:
        kind = schema.type
        lines = [f"def {name}(v):"]
        if kind == "struct":
            fields = schema.fields or ()
            if not fields:
                lines.append("    return '{}'")
            else:
                # the values unpacked into locals, each written to a local, then one
                # f-string (a single allocation, where a chain of + builds one a field)
                names = tuple(f"x{i}" for i in range(len(fields)))
                lines.append(f"    {', '.join(names)}{',' if len(fields) == 1 else ''} = v.values")
                body = self.struct_text(schema, names, lines, "    ", name[2:])
                lines.append("    return f" + repr(body))
        elif kind == "array":
            assert schema.items is not None
            null = repr(self._null(schema.items))
            item = self._value(schema.items, "x")
            lines.append(f"    return '[' + ','.join({null} if x is None else {item} "
                         "for x in v) + ']'")
        elif kind == "map":
            assert schema.keys is not None and schema.values is not None
            null = repr(self._null(schema.values))
            value = self._value(schema.values, "y")
            if schema.keys.type == "string":
                lines.append(f"    return '{{' + ','.join(_s(k) + ':' + ({null} if y is None "
                             f"else {value}) for k, y in v.items()) + '}}'")
            else:
                key = self._value(schema.keys, "k")
                lines.append(f"    return '[' + ','.join('[' + {key} + ',' + ({null} if y is None"
                             f" else {value}) + ']' for k, y in v.items()) + ']'")
        else:
            lines.append(f"    return {self._value(schema, 'v')}")
        return "\n".join(lines) + "\n"


    def struct_text(self, schema: Schema, inputs: tuple[Input, ...], lines: list[str],
                    indent: str, tag: str, prefix: str = "") -> str:
        """Lines (appended to ``lines`` at ``indent``) and the f-string body that write a
        non-null struct of ``schema`` whose fields' values are ``inputs``, one a field: the
        name of a local holding the value (written by its schema's rule, null included), a
        :class:`Fixed` value (written now, by the same rule), or a tuple of inputs (a
        struct field written inline). ``tag`` names this writer's memos, ``prefix`` its
        locals (both unique within one generated function)."""
        fields = schema.fields or ()
        if len(inputs) != len(fields):
            raise ValueError(f"{len(inputs)} inputs for the {len(fields)} fields of "
                             f"{schema.name or schema.type}")
        if not fields:
            return "{{}}"
        runs = dict(_shared_runs(schema))
        parts = []
        i = 0
        while i < len(fields):
            held_at = [j for j in range(i, runs.get(i, i)) if isinstance(inputs[j], str)]
            if held_at:  # a run of shared fields: its text reused (_shared_runs)
                end = runs[i]
                memo = f"_m{tag}_{i}"
                self.namespace[memo] = [()]
                held = ", ".join(str(inputs[j]) for j in held_at)
                checks = " and ".join(f"{inputs[j]} is m[{n}]" for n, j in enumerate(held_at))
                z = f"{prefix}z{i}"
                lines.append(f"{indent}m = {memo}[0]")
                lines.append(f"{indent}if m and {checks}:")
                lines.append(f"{indent}    {z} = m[{len(held_at)}]")
                lines.append(f"{indent}else:")
                text = self._fields(fields, range(i, end), inputs, lines, indent + "    ",
                                    tag, prefix)
                lines.append(f"{indent}    {z} = f{text!r}")
                lines.append(f"{indent}    {memo}[0] = ({held}, {z})")
                parts.append(f"{{{z}}}")
                i = end
            else:
                parts.append(self._fields(fields, (i,), inputs, lines, indent, tag, prefix))
                i += 1
        return "".join(parts) + "}}"

    def _fields(self, fields: tuple[Field, ...], at: Iterable[int], inputs: tuple[Input, ...],
                lines: list[str], indent: str, tag: str, prefix: str) -> str:
        """Lines setting ``<prefix>y<i>`` to each field's JSON text (from its input, see
        :meth:`struct_text`), and the f-string body writing those fields with their names
        and separators."""
        parts = []
        for i in at:
            field = fields[i]
            name = _fstring_literal(("{" if i == 0 else ",") + jackson_string(field.name) + ":")
            given = inputs[i]
            if isinstance(given, Fixed):
                parts.append(name + _fstring_literal(self.fixed(field.schema, given.value)))
                continue
            if isinstance(given, tuple):  # a struct field, inline (never null)
                parts.append(name + self.struct_text(field.schema, given, lines, indent,
                                                     f"{tag}_{i}", f"{prefix}{i}_"))
                continue
            null = repr(self._null(field.schema))
            value = self._value(field.schema, given)
            conversion = ""
            if value == f"_str({given})":  # an integer: str() by the f-string's !s
                value, conversion = given, "!s"
            y = f"{prefix}y{i}"
            lines.append(f"{indent}{y} = {null} if {given} is None else {value}")
            parts.append(name + f"{{{y}{conversion}}}")
        return "".join(parts)

    def fixed(self, schema: Schema, value: Any) -> str:
        """The JSON text of ``value`` under ``schema`` (by :meth:`_value`'s rule)."""
        if value is None:
            return self._null(schema)
        return str(eval(self._value(schema, "v"), self.namespace, {"v": value}))


#: The names of the fields whose values are shared by many records, by struct schema
#: name (the source block's: :data:`~pgcdc_events.events.source.SHARED_FIELD_NAMES`).
_SHARED: Final = {SOURCE_SCHEMA.name: SHARED_FIELD_NAMES}
_PLAIN_TYPES: Final = frozenset({"int8", "int16", "int32", "int64", "string", "boolean"})


def _shared_runs(schema: Schema) -> list[tuple[int, int]]:
    """``(start, end)`` of each run of two or more adjacent fields of ``schema`` whose values
    are shared by many records (``_SHARED``) and immutable (integers, strings, booleans):
    their writer renders such a run once and reuses its text while the run's values are the
    same objects as the last time (an identity check, so the text is always that of the
    values; a run that changes costs the check)."""
    shared = _SHARED.get(schema.name or "")
    if not shared:
        return []
    runs: list[tuple[int, int]] = []
    start = None
    fields = schema.fields or ()
    for i, field in enumerate((*fields, None)):
        ok = (field is not None and field.name in shared and field.schema.type in _PLAIN_TYPES
              and field.schema.name != DECIMAL_LOGICAL)
        if ok and start is None:
            start = i
        elif not ok and start is not None:
            if i - start >= 2:
                runs.append((start, i))
            start = None
    return runs


def _fstring_literal(text: str) -> str:
    """``text`` as the literal part of an f-string (braces doubled)."""
    return text.replace("{", "{{").replace("}", "}}")


def _placeholder(value: Any) -> str:
    raise RuntimeError("recursive schema")


def _decimal_writer(scale: int, decimal_format: str) -> Writer:
    if decimal_format == "NUMERIC":
        return lambda value: _decimal_numeric(value, scale)
    return lambda value: _bytes(decimal_to_bytes(unscaled_value(value, scale)))


class JsonRecordWriter:
    """Serializes records as JsonConverter does; schema JSON and payload writers are cached."""

    def __init__(self, config: JsonConverterConfig | None = None, *,
                 key: JsonConverterConfig | None = None,
                 headers: JsonConverterConfig | None = None) -> None:
        self.config = config or JsonConverterConfig()
        self._schema_text: dict[int, tuple[Schema, str]] = {}
        self._compiler = _Compiler(self.config)
        self._headers: dict[int, tuple[tuple[Header, ...], str]] = {}
        self._frames: dict[tuple[str, int, int, int], _Frame] = {}
        self._last_frame = _NO_FRAME
        #: The generated source of each line writer still in use (:meth:`line_writer`).
        self.line_sources: weakref.WeakKeyDictionary[Callable[..., None], str] = \
            weakref.WeakKeyDictionary()
        self._key = self if key is None or key == self.config else JsonRecordWriter(key)
        self._header_writer = (self if headers is None or headers == self.config
                               else JsonRecordWriter(headers))

    @classmethod
    def for_config(cls, config: Any) -> JsonRecordWriter:
        """A writer with an :class:`EventConfig`'s key, value and header converter options."""
        return cls(config.json, key=config.json_key, headers=config.json_headers)

    def schema_text(self, schema: Schema) -> str:
        """The compact JSON of ``schema`` (cached per schema object)."""
        cached = self._schema_text.get(id(schema))
        if cached is None or cached[0] is not schema:
            cached = (schema, json_text(schema.to_json(decimal_format=self.config.decimal_format)))
            self._schema_text[id(schema)] = cached
        return cached[1]

    def payload(self, schema: Schema | None, value: Any) -> str:
        """The JSON text of a payload under its schema."""
        if value is None:
            return "null" if schema is None else self._compiler._null(schema)
        if schema is None:
            return json_text(value)
        return self._compiler.writer(schema)(value)

    def converted(self, schema: Schema | None, value: Any) -> str:
        """One converted key, value or header as JSON text."""
        if value is None:
            return "null"
        payload = self.payload(schema, value)
        if schema is None:
            return payload
        before, after = self._envelope(schema)
        return f"{before}{payload}{after}"

    def source_for(self, schema: Schema) -> str:
        """The generated Python source of ``schema``'s payload writer (for debugging)."""
        self._compiler.writer(schema)
        return "\n".join(src for s, _, src in self._compiler.sources.values())

    def _header_text(self, headers: tuple[Header, ...]) -> str:
        cached = self._headers.get(id(headers))
        if cached is not None and cached[0] is headers:
            return cached[1]
        convert = self._header_writer.converted
        text = ",".join(f"{jackson_string(h.name)}:{convert(h.schema, h.value)}"
                        for h in headers)
        if len(self._headers) < 4096:
            self._headers[id(headers)] = (headers, text)
        return text

    def line_parts(self, record: ChangeRecord, parts: list[bytes]) -> None:
        """Append the record's :meth:`record_line`, UTF-8 and with its newline, to ``parts``
        as pieces (``b"".join(parts)`` is the lines). The pieces around the key and value
        payloads (topic, schemas, headers) are rendered once per topic, schemas and
        headers, and shared from record to record."""
        key, value = record.key, record.value
        key_schema, value_schema, headers = record.key_schema, record.value_schema, record.headers
        frame = self._last_frame  # most records are of the same topic as the one before
        if (frame[0] is not key_schema or frame[1] is not value_schema
                or frame[2] is not headers or frame[8] is not record.topic):
            found = self._frames.get((record.topic, id(key_schema), id(value_schema),
                                      id(headers)))
            if (found is None or found[0] is not key_schema or found[1] is not value_schema
                    or found[2] is not headers):
                found = self._frame(record)
            self._last_frame = frame = found
        key_writer, value_writer = frame[3], frame[5]
        if key is None or key_writer is None or value_writer is None:
            parts.append(self.record_line(record).encode() + b"\n")
        elif value is None:  # a tombstone: its value is null, not an envelope
            parts += (frame[4], key_writer(key).encode(), frame[9])
        else:
            parts += (frame[4], key_writer(key).encode(), frame[6],
                      value_writer(value).encode(), frame[7])

    def record_bytes(self, record: ChangeRecord) -> bytes:
        """:meth:`record_line` as UTF-8, with its newline."""
        parts: list[bytes] = []
        self.line_parts(record, parts)
        return b"".join(parts)

    def _frame(self, record: ChangeRecord) -> _Frame:
        """The constant pieces of the records of one topic, schemas and headers, and the
        key and value payload writers (None when either schema is: no fast path)."""
        key_schema, value_schema, headers = record.key_schema, record.value_schema, record.headers
        frame: _Frame
        if key_schema is None or value_schema is None:
            frame = (key_schema, value_schema, headers, None, b"", None, b"", b"", record.topic,
                     b"")
        else:
            start, between, end, tombstone_end = self._line_frame(record.topic, key_schema,
                                                                  value_schema, headers)
            frame = (key_schema, value_schema, headers,
                     self._key._compiler.writer(key_schema), start.encode(),
                     self._compiler.writer(value_schema), between.encode(), end.encode(),
                     record.topic, tombstone_end.encode())
        if len(self._frames) >= 4096:
            self._frames.clear()
        self._frames[record.topic, id(key_schema), id(value_schema), id(headers)] = frame
        return frame

    def _line_frame(self, topic: str, key_schema: Schema, value_schema: Schema,
                    headers: tuple[Header, ...]) -> tuple[str, str, str, str]:
        """The text of a line of ``topic`` before its key payload, between the key's and
        the value's payloads, after the value's, and after the key of a tombstone."""
        key_open, key_close = self._key._envelope(key_schema)
        value_open, value_close = self._envelope(value_schema)
        header = self._header_text(headers)
        return (f'{{"topic":{jackson_string(topic)},"key":{key_open}',
                f'{key_close},"value":{value_open}',
                f'{value_close},"headers":{{{header}}}}}\n',
                f'{key_close},"value":null,"headers":{{{header}}}}}\n')

    def line_writer(self, topic: str, key_schema: Schema, value_schema: Schema,
                    headers: tuple[Header, ...], params: tuple[str, ...],
                    preamble: tuple[str, ...], value: tuple[Input, ...]
                    ) -> Callable[..., None]:
        """A generated function of ``(parts, *params)`` that appends to ``parts`` the line
        of a record of ``topic`` with these schemas and headers, in the pieces
        :meth:`line_parts` appends (the text around the payloads shared from line to line),
        straight from the values, with no struct or record: its key struct is
        ``params[0]`` (never null), its value a struct of ``value_schema`` whose fields'
        inputs are ``value`` (see :meth:`_Compiler.struct_text`: the names of locals, set
        by ``params`` or the ``preamble`` lines, :class:`Fixed` values, nested structs'
        inputs). Every field is written by the rule its schema's writer uses."""
        compiler = self._compiler
        number = compiler.lines
        compiler.lines += 1
        name = f"_line{number}"
        # the text around the payloads and the key's writer are the closure's, not the
        # namespace's: a line writer dropped (FusedLines keeps a bounded number) frees them
        lines = ["def _make_line(_ls, _lb, _le, _kw):",
                 f"  def {name}(parts, {', '.join(params)}):",
                 *(f"    {p}" for p in preamble)]
        body = compiler.struct_text(value_schema, value, lines, "    ", f"l{number}", "v")
        lines.append(f"    parts += (_ls, _kw({params[0]}).encode(), _lb, f{body!r}.encode(), "
                     "_le)")
        lines.append(f"  return {name}")
        source = "\n".join(lines) + "\n"
        namespace = compiler.namespace
        exec(compile(source, f"<pgcdc json line {topic}>", "exec"), namespace)
        start, between, end, _ = self._line_frame(topic, key_schema, value_schema, headers)
        fn: Callable[..., None] = namespace.pop("_make_line")(
            start.encode(), between.encode(), end.encode(),
            self._key._compiler.writer(key_schema))
        self.line_sources[fn] = source
        return fn

    def _envelope(self, schema: Schema) -> tuple[str, str]:
        """The text before and after a payload of ``schema`` in :meth:`converted`."""
        if not self.config.schemas_enable:
            return "", ""
        return f'{{"schema":{self.schema_text(schema)},"payload":', "}"

    def record_line(self, record: ChangeRecord) -> str:
        """The record as one line of ``decode`` output: topic, key, value and headers."""
        return (f'{{"topic":{jackson_string(record.topic)},'
                f'"key":{self._key.converted(record.key_schema, record.key)},'
                f'"value":{self.converted(record.value_schema, record.value)},'
                f'"headers":{{{self._header_text(record.headers)}}}}}')


def record_to_json(record: ChangeRecord, config: JsonConverterConfig | None = None
                   ) -> dict[str, Any]:
    """The record as a JSON-ready dict (``{"topic", "key", "value", "headers"}``)."""
    import json  # noqa: PLC0415 - only this convenience needs it

    writer = JsonRecordWriter(config)
    return json.loads(writer.record_line(record))  # type: ignore[no-any-return]
