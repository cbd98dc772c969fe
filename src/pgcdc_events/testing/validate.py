"""A validator for Kafka Connect JSON records of Debezium change events (ours or anyone's).

:func:`validate_record` checks one record as ``pgcdc-events decode`` writes it and
as Kafka holds it (``{"topic", "key", "value", "headers"}``, key/value/headers in
JsonConverter form) and returns the problems found, each naming the field:

* with ``schemas.enable=true`` (``{"schema", "payload"}``): the schema is a valid
  Connect schema, and the payload conforms to it (types, ranges, required
  fields, no unknown fields, base64 bytes, logical types' parameters);
* Debezium's envelope rules: ``op`` is one of ``c r u d t m``, ``before``/``after``
  present or null as the op requires, the ``source`` block's fields and their
  types, the ``transaction`` block, key fields matching the row;
  transaction-metadata and heartbeat records have their own shapes.

A record without schemas (``schemas.enable=false``) has nothing to check the
payload against: only the envelope rules apply, and the report says so
(:attr:`Report.schemaless`). Needs no hypothesis.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from decimal import Decimal
from typing import Any, Final, TypeGuard

import attrs

__all__ = ["Problem", "Report", "validate_file", "validate_record"]

_RANGES: Final = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
_TYPES: Final = frozenset({"int8", "int16", "int32", "int64", "float", "double", "boolean",
                           "string", "bytes", "array", "map", "struct"})
_NON_FINITE: Final = frozenset({"NaN", "Infinity", "-Infinity"})
_OPS: Final = frozenset("crudtm")
_SNAPSHOT: Final = frozenset({"true", "first", "first_in_data_collection",
                              "last_in_data_collection", "last", "false", "incremental"})
_ZONED_TS: Final = re.compile(r"[+-]?\d{4,}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)")


@attrs.frozen
class Problem:
    """One problem: the path of the offending field and what is wrong with it."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@attrs.frozen
class Report:
    """What :func:`validate_record` found. ``schemaless`` names the parts (``key``,
    ``value``) that carried no schema, so only Debezium's envelope rules were checked."""

    problems: tuple[Problem, ...]
    schemaless: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """Whether the record is valid."""
        return not self.problems


class _Checker:
    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def add(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message))

    # -- schemas ------------------------------------------------------------------------
    def schema(self, schema: Any, path: str) -> bool:
        """Check a schema in JsonConverter form; False when it cannot be used."""
        if not isinstance(schema, Mapping):
            self.add(path, f"a schema must be a JSON object, got {_show(schema)}")
            return False
        kind = schema.get("type")
        if kind not in _TYPES:
            self.add(f"{path}.type", f"unknown Connect type {_show(kind)}")
            return False
        ok = True
        for key, expected in (("optional", bool), ("name", str), ("version", int),
                              ("doc", str)):
            if key in schema and schema[key] is not None and not isinstance(
                    schema[key], expected):
                self.add(f"{path}.{key}", f"expected {expected.__name__}, got "
                         f"{_show(schema[key])}")
        params = schema.get("parameters")
        if params is not None and not (isinstance(params, Mapping) and all(
                isinstance(v, str) for v in params.values())):
            self.add(f"{path}.parameters", "expected an object of strings")
        if kind == "struct":
            fields = schema.get("fields")
            if not isinstance(fields, list):
                self.add(f"{path}.fields", "a struct schema needs a list of fields")
                return False
            seen: set[str] = set()
            for i, member in enumerate(fields):
                name = member.get("field") if isinstance(member, Mapping) else None
                if not isinstance(name, str):
                    self.add(f"{path}.fields[{i}].field", "missing field name")
                    ok = False
                    continue
                if name in seen:
                    self.add(f"{path}.fields[{i}].field", f"duplicate field {name!r}")
                seen.add(name)
                ok = self.schema(member, f"{path}.fields[{i}]") and ok
        elif kind == "array":
            ok = self.schema(schema.get("items"), f"{path}.items")
        elif kind == "map":
            ok = self.schema(schema.get("keys"), f"{path}.keys") and self.schema(
                schema.get("values"), f"{path}.values")
        if schema.get("name") == "org.apache.kafka.connect.data.Decimal":
            scale = (params or {}).get("scale") if isinstance(params, Mapping) else None
            if scale is None or not str(scale).lstrip("-").isdigit():
                self.add(f"{path}.parameters.scale", "a Decimal needs an integer scale")
        return ok

    # -- payloads -------------------------------------------------------------------------
    def payload(self, schema: Mapping[str, Any], value: Any, path: str) -> None:  # noqa: C901
        """Check a payload against its (valid) schema."""
        if value is None:
            if not schema.get("optional", False) and "default" not in schema:
                self.add(path, "null for a required field")
            return
        kind = schema["type"]
        name = schema.get("name")
        if kind in _RANGES:
            if not _is_int(value):
                self.add(path, f"expected {kind}, got {_show(value)}")
                return
            bits = _RANGES[kind]
            if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
                self.add(path, f"{value} is out of range for {kind}")
        elif kind in ("float", "double"):
            if not (_is_number(value) or value in _NON_FINITE):
                self.add(path, f"expected {kind}, got {_show(value)}")
        elif kind == "boolean":
            if not isinstance(value, bool):
                self.add(path, f"expected boolean, got {_show(value)}")
        elif kind == "string":
            if not isinstance(value, str):
                self.add(path, f"expected string, got {_show(value)}")
                return
            self.semantic_string(name, schema, value, path)
        elif kind == "bytes":
            if name == "org.apache.kafka.connect.data.Decimal" and _is_number(value):
                scale = int((schema.get("parameters") or {})["scale"])  # checked with the schema
                if not _fits_scale(value, scale):  # decimal.format=NUMERIC
                    self.add(path, f"{_show(value)} has more decimal places than the Decimal's"
                             f" scale {scale}")
                return
            if not isinstance(value, str):
                self.add(path, f"expected bytes as a base64 string, got {_show(value)}")
                return
            try:
                base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                self.add(path, f"not valid base64: {_show(value)}")
        elif kind == "array":
            if not isinstance(value, list):
                self.add(path, f"expected an array, got {_show(value)}")
                return
            for i, item in enumerate(value):
                self.payload(schema["items"], item, f"{path}[{i}]")
        elif kind == "map":
            self.map(schema, value, path)
        else:
            self.struct(schema, value, path)

    def semantic_string(self, name: Any, schema: Mapping[str, Any], value: str, path: str
                        ) -> None:
        params = schema.get("parameters") or {}
        if name == "io.debezium.data.Enum" and "allowed" in params:
            allowed = params["allowed"].split(",") if params["allowed"] else []
            if value not in allowed and value not in params["allowed"]:  # labels may hold ","
                self.add(path, f"{_show(value)} is not one of the allowed values "
                         f"{params['allowed']!r}")
        elif (name == "io.debezium.time.ZonedTimestamp" and not _ZONED_TS.fullmatch(value)
              and not value.startswith("__debezium") and value not in ("infinity", "-infinity")):
            self.add(path, f"not an ISO-8601 zoned timestamp: {_show(value)}")

    def map(self, schema: Mapping[str, Any], value: Any, path: str) -> None:
        keys, values = schema["keys"], schema["values"]
        if keys.get("type") == "string":
            if not isinstance(value, Mapping):
                self.add(path, f"expected an object (map with string keys), got {_show(value)}")
                return
            for k, v in value.items():
                self.payload(values, v, f"{path}[{k!r}]")
            return
        if not isinstance(value, list):
            self.add(path, f"expected a list of [key, value] pairs, got {_show(value)}")
            return
        for i, pair in enumerate(value):
            if not (isinstance(pair, list) and len(pair) == 2):
                self.add(f"{path}[{i}]", "expected a [key, value] pair")
                continue
            self.payload(keys, pair[0], f"{path}[{i}][0]")
            self.payload(values, pair[1], f"{path}[{i}][1]")

    def struct(self, schema: Mapping[str, Any], value: Any, path: str) -> None:
        if not isinstance(value, Mapping):
            self.add(path, f"expected a struct (JSON object), got {_show(value)}")
            return
        fields = {m["field"]: m for m in schema["fields"]}
        for name, member in fields.items():
            if name not in value:
                if not member.get("optional", False) and "default" not in member:
                    self.add(f"{path}.{name}", "required field missing")
                continue
            self.payload(member, value[name], f"{path}.{name}")
        for name in value:
            if name not in fields:
                self.add(f"{path}.{name}", "field not in the schema")

    # -- Debezium's rules -------------------------------------------------------------------
    def envelope(self, payload: Mapping[str, Any], key: Any, path: str, key_path: str,  # noqa: C901
                 topic: Any) -> None:
        op = payload.get("op")
        if op not in _OPS:
            self.add(f"{path}.op", f"expected one of c, r, u, d, t, m; got {_show(op)}")
            return
        if op == "m":
            message = payload.get("message")
            if not isinstance(message, Mapping) or "prefix" not in message:
                self.add(f"{path}.message", "a message event needs message.prefix/content")
        else:
            for side in ("before", "after"):
                if side not in payload:
                    self.add(f"{path}.{side}", "required field missing")
            before, after = payload.get("before"), payload.get("after")
            rules = {"c": (False, True), "r": (False, True), "u": (None, True),
                     "d": (True, False), "t": (False, False)}[op]
            for side, value, wanted in (("before", before, rules[0]), ("after", after,
                                                                       rules[1])):
                if wanted is True and value is None:
                    self.add(f"{path}.{side}", f"must not be null for op {op!r}")
                elif wanted is False and value is not None:
                    self.add(f"{path}.{side}", f"must be null for op {op!r}")
            row = after if op in ("c", "r", "u") else before
            if isinstance(key, Mapping) and isinstance(row, Mapping):
                for name, kv in key.items():
                    if name in row and row[name] != kv:
                        self.add(f"{key_path}.{name}", f"key {_show(kv)} differs from the "
                                 f"row's {_show(row[name])} ({'after' if op != 'd' else 'before'}"
                                 f".{name})")
        self.source(payload.get("source"), f"{path}.source", topic)
        if "ts_ms" in payload and payload["ts_ms"] is not None and not _is_int(
                payload["ts_ms"]):
            self.add(f"{path}.ts_ms", f"expected int64, got {_show(payload['ts_ms'])}")
        block = payload.get("transaction")
        if block is not None:
            if not isinstance(block, Mapping):
                self.add(f"{path}.transaction", "expected an object or null")
            else:
                if not isinstance(block.get("id"), str):
                    self.add(f"{path}.transaction.id", "expected a string")
                for name in ("total_order", "data_collection_order"):
                    v = block.get(name)
                    if not (_is_int(v) and v >= 1):
                        self.add(f"{path}.transaction.{name}",
                                 f"expected a positive integer, got {_show(v)}")

    def source(self, source: Any, path: str, topic: Any) -> None:  # noqa: C901
        if not isinstance(source, Mapping):
            self.add(path, "the source block is missing")
            return
        for name in ("version", "connector", "name", "db"):
            if not isinstance(source.get(name), str):
                self.add(f"{path}.{name}", f"expected a string, got {_show(source.get(name))}")
        if not _is_int(source.get("ts_ms")):
            self.add(f"{path}.ts_ms", f"expected int64, got {_show(source.get('ts_ms'))}")
        for finer, factor in (("ts_us", 1000), ("ts_ns", 1_000_000)):
            v = source.get(finer)
            if v is None:
                continue
            if not _is_int(v):
                self.add(f"{path}.{finer}", f"expected int64, got {_show(v)}")
            elif _is_int(source.get("ts_ms")) and v // factor != source["ts_ms"]:
                self.add(f"{path}.{finer}", f"{v} disagrees with ts_ms {source['ts_ms']}")
        snapshot = source.get("snapshot")
        if snapshot is not None and snapshot not in _SNAPSHOT:
            self.add(f"{path}.snapshot", f"{_show(snapshot)} is not a snapshot marker")
        if source.get("connector") == "postgresql":
            for name in ("schema", "table"):
                if not isinstance(source.get(name), str):
                    self.add(f"{path}.{name}", f"expected a string, got "
                             f"{_show(source.get(name))}")
            for name in ("txId", "lsn", "xmin", "origin_lsn"):
                v = source.get(name)
                if v is not None and not (_is_int(v) and v >= 0):
                    self.add(f"{path}.{name}", f"expected a non-negative int64, got {_show(v)}")
            seq = source.get("sequence")
            if seq is not None:
                self.sequence(seq, f"{path}.sequence")
        logical = source.get("name")
        if isinstance(topic, str) and isinstance(logical, str) and logical and not (
                topic.startswith(_sanitized(logical))):
            self.add("topic", f"{topic!r} is not under the connector name {logical!r}")

    def sequence(self, seq: Any, path: str) -> None:
        try:
            parsed = json.loads(seq) if isinstance(seq, str) else None
        except (ValueError, RecursionError):
            parsed = None
        if not (isinstance(parsed, list) and len(parsed) == 2 and all(
                v is None or (isinstance(v, str) and v.isdigit()) for v in parsed)):
            self.add(path, f"expected a JSON array of two LSN strings, got {_show(seq)}")

    def transaction_record(self, payload: Mapping[str, Any], path: str) -> None:
        status = payload.get("status")
        if status not in ("BEGIN", "END"):
            self.add(f"{path}.status", f"expected BEGIN or END, got {_show(status)}")
        if not isinstance(payload.get("id"), str):
            self.add(f"{path}.id", "expected a string")
        if not _is_int(payload.get("ts_ms")):
            self.add(f"{path}.ts_ms", "expected int64")
        if status == "END":
            if not _is_int(payload.get("event_count")):
                self.add(f"{path}.event_count", "an END record needs an event count")
            collections = payload.get("data_collections")
            if not isinstance(collections, list):
                self.add(f"{path}.data_collections", "an END record lists its collections")
            else:
                total = 0
                for i, c in enumerate(collections):
                    if not (isinstance(c, Mapping) and isinstance(c.get("data_collection"), str)
                            and _is_int(c.get("event_count"))):
                        self.add(f"{path}.data_collections[{i}]",
                                 "expected {data_collection, event_count}")
                    else:
                        total += c["event_count"]
                if _is_int(payload.get("event_count")) and total != payload["event_count"]:
                    self.add(f"{path}.event_count", f"{payload['event_count']} is not the sum "
                             f"of the collections' counts ({total})")


def _sanitized(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, Decimal)) and not isinstance(value, bool)


def _fits_scale(value: int | float | Decimal, scale: int) -> bool:
    """Whether ``value`` is a number with at most ``scale`` decimal places (trailing zeros
    aside), as a Connect Decimal of that scale must be."""
    number = value if isinstance(value, Decimal) else Decimal(repr(value))
    if not number.is_finite():
        return False
    _, digits, exponent = number.as_tuple()
    assert isinstance(exponent, int)
    end = len(digits)
    while exponent < -scale and end > 1 and digits[end - 1] == 0:
        end -= 1
        exponent += 1
    return exponent >= -scale or not any(digits)


def _show(value: Any) -> str:
    if isinstance(value, (bytes, Decimal)):
        text = repr(value) if isinstance(value, bytes) else str(value)
    else:
        text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _converted(checker: _Checker, obj: Any, path: str) -> tuple[Any, bool]:
    """The payload of a converted key/value/header and whether it carried a schema."""
    if isinstance(obj, Mapping) and set(obj) == {"schema", "payload"}:
        if checker.schema(obj["schema"], f"{path}.schema"):
            checker.payload(obj["schema"], obj["payload"], f"{path}.payload")
        return obj["payload"], True
    return obj, obj is None


def validate_record(record: Any) -> Report:  # noqa: C901
    """Check one ``{"topic", "key", "value", "headers"}`` record (a dict, or its JSON text)."""
    checker = _Checker()
    if isinstance(record, (str, bytes)):
        try:
            record = json.loads(record, parse_float=Decimal)  # a Decimal's digits as written
        except ValueError as exc:
            return Report((Problem("<line>", f"not valid JSON: {exc}"),))
        except RecursionError:
            return Report((Problem("<line>", "not valid JSON: nested too deeply"),))
    if not isinstance(record, Mapping):
        return Report((Problem("<record>", "expected a JSON object"),))
    for name in ("topic", "key", "value"):
        if name not in record:
            checker.add(name, "missing")
    unknown = set(record) - {"topic", "key", "value", "headers", "partition", "offset",
                             "timestamp"}
    for name in sorted(unknown):
        checker.add(name, "not a record field")
    topic = record.get("topic")
    if "topic" in record and not (isinstance(topic, str) and topic):
        checker.add("topic", f"expected a non-empty string, got {_show(topic)}")
    schemaless = []
    key, key_schema = _converted(checker, record.get("key"), "key")
    value, value_schema = _converted(checker, record.get("value"), "value")
    if not key_schema:
        schemaless.append("key")
    if not value_schema:
        schemaless.append("value")
    headers = record.get("headers", {})
    if not isinstance(headers, Mapping):
        checker.add("headers", "expected an object")
    else:
        for name, header in headers.items():
            _converted(checker, header, f"headers[{name!r}]")
    key_path = "key.payload" if key_schema and record.get("key") is not None else "key"
    value_path = "value.payload" if value_schema and record.get("value") is not None else "value"
    if value is None:
        pass  # a tombstone (tables without a key get key-less ones)
    elif not isinstance(value, Mapping):
        checker.add(value_path, "expected an object (a change event, transaction record or"
                    f" heartbeat), got {_show(value)}")
    elif "op" in value:
        checker.envelope(value, key, value_path, key_path, topic)
    elif "status" in value and "id" in value:
        checker.transaction_record(value, value_path)
    elif isinstance(key, Mapping) and "serverName" in key:
        if not _is_int(value.get("ts_ms")):
            checker.add(f"{value_path}.ts_ms", "a heartbeat needs ts_ms")
    else:
        checker.add(f"{value_path}.op", "required field missing (not a change event, "
                    "transaction record or heartbeat)")
    return Report(tuple(checker.problems), tuple(schemaless))


def validate_file(lines: Iterable[str]) -> Iterator[tuple[int, Report]]:
    """``(line number, report)`` for every non-blank line of a records file."""
    for number, line in enumerate(lines, 1):
        if line.strip():
            yield number, validate_record(line)
