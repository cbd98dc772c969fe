"""Spark's typed values equal Debezium's, record for record: an expectation from outside.

Each golden recording's ``debezium.jsonl`` (written by the real connector) is read by
Spark itself: ``from_json`` with the schema the layer generates for the table
(:func:`~pgcdc_events.spark.json_record_type`). Those literal JSON values become the
expected Spark values by the documented unit rules of the semantic flavour, written
here as plain arithmetic on Debezium's numbers (days, ms/µs/ns, base64 unscaled
decimals, ISO-8601 strings), never through the layer's converters. Every table row
``decode_capture`` produces must equal the Debezium record at the same place: op,
key, before, after, source (but ``version``), transaction block; tombstones where
Debezium has them. Differences listed in docs/differences-from-debezium.md (the
mechanism of tests/events/test_golden.py) are allowed.

A sample of recordings runs in the default suite; ``-m slow`` runs all of them.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from decimal import Context, Decimal
from functools import cache
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812

from pgcdc_events.events import EventConfig, JsonRecordWriter
from pgcdc_events.spark import decode_capture, json_record_type, json_type
from pgcdc_events.spark.capture import capture_dataframe
from pgcdc_events.spark.schema import SparkSchemaOptions
from support.golden import Recording, documented_differences, recordings
from support.spark_records import CLOCK_NS, canonical, table_rows

ALL = [r for r in recordings("*") if not r.meta.get("connector_failed")]
SAMPLE = {"types/default", "types/nanos-string-map-istring-base64", "events/events-default",
          "events_defaults/default"}
CASES = [pytest.param(r, marks=() if r.key in SAMPLE else pytest.mark.slow, id=r.key)
         for r in ALL]
_SKIP = object()  # a value the test cannot compute independently (not compared)
_DECIMAL = "org.apache.kafka.connect.data.Decimal"
_VSD = "io.debezium.data.VariableScaleDecimal"
#: Units per microsecond of Debezium's integer time types (negative: per nanosecond).
_MICROS = {
    "io.debezium.time.Timestamp": 1000, "org.apache.kafka.connect.data.Timestamp": 1000,
    "io.debezium.time.MicroTimestamp": 1, "io.debezium.time.NanoTimestamp": -1000,
    "io.debezium.time.Time": 1000, "org.apache.kafka.connect.data.Time": 1000,
    "io.debezium.time.MicroTime": 1, "io.debezium.time.NanoTime": -1000,
    "io.debezium.time.MicroDuration": 1,
}
#: Where the semantic flavour puts 'infinity' and '-infinity' (docs/spark.md, "Infinite dates
#: and timestamps"): the ends of Spark's range, 9999-12-31T23:59:59.999999 and 0001-01-01 in
#: microseconds since 1970; for timestamptz (an instant) one day in.
_TS_ENDS = (253_402_300_799_999_999, -62_135_596_800_000_000)
_INFINITY = {"infinity": _TS_ENDS[0] - 86_400_000_000, "-infinity": _TS_ENDS[1] + 86_400_000_000}
#: Debezium's sentinels for infinities in each integer type's unit (its documentation:
#: pgjdbc's infinity instants; NanoTimestamp's Long.MAX/MIN_VALUE; Date's -5877611-06-22).
_SENTINELS = {
    1000: {9_223_372_036_825_200: _TS_ENDS[0], -9_223_372_036_832_400: _TS_ENDS[1]},
    1: {9_223_372_036_825_200_000: _TS_ENDS[0], -9_223_372_036_832_400_000: _TS_ENDS[1]},
    -1000: {2**63 - 1: _TS_ENDS[0], -(2**63): _TS_ENDS[1]},
}
_DATES = {"io.debezium.time.Date", "org.apache.kafka.connect.data.Date"}
_DATE_ENDS = {2_146_033_979: 2_932_896, -2_147_472_691: -719_162}  # days since 1970
_ZONED = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?Z")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EXACT = Context(prec=100_000)


def _zoned(text: str) -> Any:
    if text in _INFINITY:
        return _INFINITY[text]
    match = _ZONED.fullmatch(text)
    if match is None:
        return _SKIP  # years past 9999 or BC: not checked here
    y, mo, d, h, mi, s, frac = match.groups()
    if int(y) < 1:
        return _SKIP  # year 0000 (1 BC): not checked here
    at = datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), tzinfo=UTC)
    return (at - _EPOCH).days * 86_400_000_000 + (at - _EPOCH).seconds * 1_000_000 + int(
        (frac or "").ljust(6, "0"))


def expected(value: Any, schema: dict[str, Any], flavour: str) -> Any:
    """Debezium's value (as Spark's from_json read it) in the Spark type of ``flavour``."""
    if value is None:
        return None
    name, kind = schema.get("name"), schema["type"]
    if name == _DECIMAL:
        params = schema.get("parameters", {})
        scale = int(params.get("scale", "0"))
        number = (Decimal(int.from_bytes(value, "big", signed=True)).scaleb(-scale, _EXACT)
                  if isinstance(value, bytes) else Decimal(str(value)))
        precision = int(params.get("connect.decimal.precision", "38"))
        return number if 0 <= scale <= precision <= 38 else format(number, "f")
    if name == _VSD:
        if flavour == "literal":
            return value
        # through Decimal: str() of a huge int is capped (sys.get_int_max_str_digits)
        return {"scale": value["scale"],
                "unscaled": str(Decimal(int.from_bytes(value["value"], "big", signed=True)))}
    if flavour == "semantic" and name in _MICROS:
        unit = _MICROS[name]
        if "Timestamp" in name and value in _SENTINELS[unit]:
            return _SENTINELS[unit][value]
        return value * unit if unit > 0 else value // -unit
    if flavour == "semantic" and name in _DATES:
        return _DATE_ENDS.get(value, value)
    if flavour == "semantic" and name == "io.debezium.time.ZonedTimestamp":
        return _zoned(value)
    if kind == "struct":
        return {f["field"]: expected(value.get(f["field"]), f, flavour)
                for f in schema["fields"]}
    if kind == "array":
        return [expected(v, schema["items"], flavour) for v in value]
    if kind == "map":
        return sorted((k, expected(v, schema["values"], flavour)) for k, v in value)
    return value


def _default(schema: dict[str, Any]) -> Any:
    """A field's default as from_json would read it (base64 bytes decoded)."""
    import base64  # noqa: PLC0415

    default = schema.get("default")
    if schema["type"] == "bytes" and isinstance(default, str):
        return base64.b64decode(default)
    if schema["type"] in ("float", "double") and isinstance(default, str):
        return "NaN" if default == "NaN" else float(default)  # as canonical() has them
    return default


def _same(ours: Any, want: Any) -> bool:
    if want is _SKIP:
        return True
    if isinstance(want, dict) and isinstance(ours, dict):
        return all(_same(ours.get(k), v) for k, v in want.items())
    if isinstance(want, list) and isinstance(ours, list):
        if want and isinstance(want[0], tuple):
            ours = sorted(ours)
        return len(ours) == len(want) and all(_same(a, b) for a, b in zip(ours, want,
                                                                          strict=True))
    if isinstance(want, tuple) and isinstance(ours, tuple):
        return _same(list(ours), list(want))
    return (bool(ours == want) and type(ours) is type(want)) or (
        isinstance(ours, (int, float, Decimal)) and isinstance(want, (int, float, Decimal))
        and not isinstance(ours, bool) and ours == want)


@cache
def _schema(text: str) -> dict[str, Any]:
    return json.loads(text)  # type: ignore[no-any-return]


def differences(spark: SparkSession, recording: Recording, flavour: str) -> tuple[int, dict]:  # noqa: C901
    """Compared records, and every difference keyed as tests/events/test_golden.py keys them."""
    config = EventConfig.from_properties(recording.properties)
    decoded = decode_capture(capture_dataframe(spark, recording.capture), config,
                             catalog=recording.catalog, flavour=flavour,  # type: ignore[arg-type]
                             tombstones=True, clock=lambda: CLOCK_NS)
    ours_tables = decoded.to_arrow()
    decoded.unpersist()
    lines = spark.read.text(str(recording.path / "debezium.jsonl")).select(
        F.monotonically_increasing_id().alias("n"),
        F.from_json("value", "topic string, key string, value string").alias("r"))
    writer = JsonRecordWriter.for_config(config)
    diffs: dict[str, str] = {}
    compared = 0
    for table in decoded.tables:
        versions = decoded.versions[table]
        latest = versions[-1]
        topic = latest.topic
        value_type = json_record_type(latest.envelope_schema, config.json, wrapped=True)
        columns = ["n", F.from_json("r.value", value_type).alias("v")]
        if latest.key_schema is not None:
            key_type = json_record_type(latest.key_schema, config.json_key, wrapped=True)
            columns.append(F.from_json(F.col("r.key"), key_type).alias("k"))
        theirs = lines.filter(F.col("r.topic") == topic).select(*columns)
        from pgcdc_events.spark._session import to_arrow_table  # noqa: PLC0415

        theirs_table = to_arrow_table(theirs.orderBy("n"))
        their_rows = [dict(zip(theirs_table.column_names, values, strict=True)) for values in
                      zip(*(canonical(theirs_table.column(c)) for c in theirs_table.column_names),
                          strict=True)]
        our_rows = table_rows(ours_tables[table])
        if len(our_rows) != len(their_rows):
            diffs[f"{recording.key}/{topic}[count]"] = (f"ours {len(our_rows)}, "
                                                        f"theirs {len(their_rows)}")
        # a column whose JSON type changed across the table's versions is read with the
        # latest type only: not compared (the ALTER TABLE cases are compared whole, as
        # records, with the event layer's by tests/spark/conftest.py)
        changed = {f.name for v in versions[:-1] for f in v.value_schema.fields or ()
                   if f.name not in {g.name for g in latest.value_schema.fields or ()}
                   or json_type(f.schema, config.json) != json_type(
                       latest.value_schema.field(f.name).schema, config.json)}
        fallback_value = _schema(writer.schema_text(latest.envelope_schema))
        fallback_key = (_schema(writer.schema_text(latest.key_schema))
                        if latest.key_schema is not None else None)
        for ours, real in zip(our_rows, their_rows, strict=False):
            compared += 1
            envelope = real["v"]
            label = "tombstone" if envelope is None else str(envelope["payload"]["op"])
            where = f"{recording.key}/{topic}[{label}]"
            if envelope is None:
                if ours["_kind"] != "tombstone":
                    diffs[f"{where}.<kind>"] = f"ours {ours['_kind']} {ours['op']}, theirs a tombstone"
                continue
            payload = envelope["payload"]
            schema = _schema(envelope["schema"]) if envelope["schema"] else fallback_value
            fields = {f["field"]: f for f in schema["fields"]}
            if ours["op"] != payload["op"]:
                diffs[f"{where}.value.payload.op"] = f"ours {ours['op']} theirs {payload['op']}"
                continue
            for part in ("before", "after"):
                row_schema = fields[part]
                got, row = ours[part], payload[part]
                if row is None or got is None:
                    if (row is None) != (got is None):
                        diffs[f"{where}.value.payload.{part}"] = f"ours {got} theirs {row}"
                    continue
                first = row_schema["fields"][0]["field"] if row_schema["fields"] else None
                row_id = row.get(first) if first is not None else "?"
                for f in row_schema["fields"]:
                    name = f["field"]
                    if name in changed:
                        continue
                    want = expected(row.get(name), f, flavour)
                    mine = got.get(name)
                    if mine is None and want is not None and "default" in f and \
                            config.json.replace_null_with_default and \
                            _same(want, expected(_default(f), f, flavour)):
                        continue  # JsonConverter wrote the default for a NULL
                    if not _same(mine, want):
                        # keyed as both golden tests key their cases
                        text = f"ours {mine!r:.120} theirs {want!r:.120}"
                        other = f"{recording.key}/{latest.table_name}.{name}[id={row_id}]"
                        diffs[f"{where}.value.payload.{part}.{name}\t{other}\t{other} value"
                              ] = text
            source = payload["source"]
            source_fields = {f["field"]: f for f in fields["source"]["fields"]}
            for name, want in source.items():
                mine = ours["source"].get(name)
                if mine is None and config.json.replace_null_with_default and \
                        want == _default(source_fields[name]):
                    continue  # JsonConverter wrote the default for a null
                if name != "version" and mine != want:
                    diffs[f"{where}.value.payload.source.{name}"] = (
                        f"ours {ours['source'].get(name)!r} theirs {want!r}")
            if payload.get("transaction") != ours["transaction"]:
                diffs[f"{where}.value.payload.transaction"] = (
                    f"ours {ours['transaction']} theirs {payload.get('transaction')}")
            if fallback_key is not None and "k" in real:
                if real["k"] is None:  # no key (a truncate)
                    want_key = None
                else:
                    key_schema = (_schema(real["k"]["schema"]) if real["k"]["schema"]
                                  else fallback_key)
                    want_key = expected(real["k"]["payload"], key_schema, flavour)
                if not _same(ours.get("key"), want_key):
                    path = f"{where}.key" if real["k"] is None else f"{where}.key.payload"
                    diffs[path] = f"ours {ours.get('key')} theirs {want_key}"
    return compared, diffs


@pytest.mark.parametrize("flavour", ["semantic", "literal"])
@pytest.mark.parametrize("recording", CASES)
def test_spark_values_equal_debeziums(spark: SparkSession, recording: Recording,
                                      flavour: str) -> None:
    options = SparkSchemaOptions(flavour)  # type: ignore[arg-type]
    assert options.flavour == flavour
    compared, diffs = differences(spark, recording, flavour)
    documented = documented_differences(recording.corpus)
    unlisted = {k: v for k, v in diffs.items()
                if not any(d.matches(key) for key in k.split("\t") for d in documented)}
    assert compared > 0
    assert not unlisted, "\n".join(f"{k}: {v}" for k, v in sorted(unlisted.items())[:60]) + (
        f"\n... {len(unlisted)} undocumented differences over {compared} records")
