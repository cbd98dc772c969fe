"""The record validator: accepts every golden Debezium record, rejects mutated ones precisely."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pgcdc_events.cli import main
from pgcdc_events.testing import factories, table, validate_record
from support.golden import GOLDEN, recordings

RECORDINGS = recordings("*")


def _records() -> list[tuple[str, int, dict[str, Any]]]:
    out = []
    for rec in RECORDINGS:
        for i, record in enumerate(rec.records, 1):
            out.append((rec.key, i, record))
    return out


ALL = _records()


#: Debezium records that carry a value listed in docs/differences-from-debezium.md as not
#: representing what PostgreSQL stored, by recording corpus and the rejected value: the
#: enum default 'it''s' kept with its doubled quote (no label of the enum).
DOCUMENTED_INVALID = {("events_defaults", "\"it''s\" is not one of the allowed values")}


def _documented(key: str, problems: list[str]) -> bool:
    corpus = key.split("/", maxsplit=1)[0]
    return all(any(c == corpus and text in p for c, text in DOCUMENTED_INVALID)
               for p in problems)


def test_every_golden_debezium_record_is_accepted() -> None:
    rejected = [(key, line, [str(p) for p in validate_record(r).problems])
                for key, line, r in ALL if not validate_record(r).ok]
    rejected = [(key, line, problems) for key, line, problems in rejected
                if not _documented(key, problems)]
    corpora = {key.split("/")[0] for key, _, _ in ALL}
    print(f"{len(ALL)} golden records from {len(RECORDINGS)} recordings "
          f"({', '.join(sorted(corpora))}) accepted")
    assert len(ALL) > 1000
    assert not rejected, rejected[:10]


def test_golden_records_all_carry_schemas() -> None:
    """converter.schemas.enable=false in wide-converter-plain is overridden by the key, value
    and header converters' own schemas.enable=true: every golden record carries schemas, so
    every payload is checked against one."""
    plain = next(r for r in RECORDINGS if r.mode == "wide-converter-plain")
    assert plain.properties["converter.schemas.enable"] == "false"
    assert all(not validate_record(r).schemaless for _, _, r in ALL)


def _first(op: str) -> dict[str, Any]:
    for _, _, r in ALL:
        value = r.get("value")
        if value and value["payload"].get("op") == op and (
                op == "m" or r["topic"].startswith("pgcdc.public")):
            return copy.deepcopy(r)
    raise AssertionError(op)


def _field(record: dict[str, Any], side: str, wanted: str) -> str:
    """The name of the first field of ``side`` whose Connect type is ``wanted``."""
    for member in next(f for f in record["value"]["schema"]["fields"]
                       if f["field"] == side)["fields"]:
        if member["type"] == wanted and not member.get("name"):
            return str(member["field"])
    raise AssertionError(wanted)


def _mutate_int(r: dict[str, Any]) -> None:
    r["value"]["payload"]["after"][_field(r, "after", "int32")] = "12"


def _overflow(r: dict[str, Any]) -> None:
    r["value"]["payload"]["after"][_field(r, "after", "int32")] = 2**31


MUTATIONS: dict[str, tuple[str, Callable[[dict[str, Any]], None], str, str]] = {
    "unknown op": ("c", lambda r: r["value"]["payload"].update(op="x"), "value.payload.op",
                   "expected one of c, r, u, d, t, m"),
    "create with a before": ("c", lambda r: r["value"]["payload"].update(
        before=r["value"]["payload"]["after"]), "value.payload.before", "must be null for op 'c'"),
    "create without after": ("c", lambda r: r["value"]["payload"].update(after=None),
                             "value.payload.after", "must not be null for op 'c'"),
    "delete without before": ("d", lambda r: r["value"]["payload"].update(before=None),
                              "value.payload.before", "must not be null for op 'd'"),
    "string for an int32": ("c", _mutate_int, "value.payload.after.", "expected int32"),
    "int32 overflow": ("c", _overflow, "value.payload.after.", "out of range for int32"),
    "missing source field": ("c", lambda r: r["value"]["payload"]["source"].pop("db"),
                             "value.payload.source.db", "required field missing"),
    "unknown field": ("c", lambda r: r["value"]["payload"]["after"].update(bogus=1),
                      "value.payload.after.bogus", "field not in the schema"),
    "bad snapshot": ("c", lambda r: r["value"]["payload"]["source"].update(snapshot="maybe"),
                     "value.payload.source.snapshot", "not one of the allowed values"),
    "ts_us disagrees": ("c", lambda r: r["value"]["payload"]["source"].update(ts_us=5),
                        "value.payload.source.ts_us", "disagrees with ts_ms"),
    "bad sequence": ("c", lambda r: r["value"]["payload"]["source"].update(sequence="[1]"),
                     "value.payload.source.sequence", "two LSN strings"),
    "unknown schema type": ("c", lambda r: r["value"]["schema"].update(type="integer"),
                            "value.schema.type", "unknown Connect type"),
    "key differs from row": ("c", lambda r: r["key"]["payload"].update(
        {k: (v + 1 if isinstance(v, int) else v + "x") for k, v in r["key"]["payload"].items()}),
        "key.payload.", "differs from the row's"),
    "topic of another connector": ("c", lambda r: r.update(topic="other.public.t"), "topic",
                                   "not under the connector name"),
    "bad base64": ("m", lambda r: r["value"]["payload"]["message"].update(content="%%%"),
                   "value.payload.message.content", "not valid base64"),
}


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_mutated_golden_records_are_rejected_at_the_field(name: str) -> None:
    op, mutate, path, message = MUTATIONS[name]
    record = _first(op)
    assert validate_record(record).ok
    mutate(record)
    problems = validate_record(record).problems
    assert problems, name
    assert any(p.path.startswith(path) and message in p.message for p in problems), problems


def test_mutations_of_every_golden_record_are_rejected() -> None:
    """Every golden change event with its op replaced, and every one with a payload field
    dropped from after/before, is rejected."""
    checked = 0
    for _, _, r in ALL:
        value = r.get("value")
        if not value or value["payload"].get("op") not in ("c", "u", "d"):
            continue
        bad = copy.deepcopy(r)
        bad["value"]["payload"]["op"] = "q"
        assert not validate_record(bad).ok
        side = "before" if value["payload"]["op"] == "d" else "after"
        row = bad["value"]["payload"][side]
        required = [m["field"] for m in next(
            f for f in value["schema"]["fields"] if f["field"] == side)["fields"]
            if not m.get("optional") and "default" not in m]
        if required:
            bad = copy.deepcopy(r)
            bad["value"]["payload"][side].pop(required[0])
            problems = validate_record(bad).problems
            assert any(p.path == f"value.payload.{side}.{required[0]}" for p in problems)
        checked += 1
        assert row is not None
    assert checked > 300


def test_schemaless_records_get_the_envelope_rules_only() -> None:
    t = table("public.t", {"id": "int4", "v": "text"}, primary_key="id")
    props = {"topic.prefix": "pgcdc", "converter.schemas.enable": "false"}
    record = factories.insert(t, {"id": 1, "v": "x"}, json=True, config=props)
    assert "schema" not in record["value"]
    report = validate_record(record)
    assert report.ok and report.schemaless == ("key", "value")
    record["value"]["op"] = "d"
    assert [str(p) for p in validate_record(record).problems] == [
        "value.before: must not be null for op 'd'", "value.after: must be null for op 'd'"]


def test_cli_validate_reports_line_and_field(tmp_path: Path, capsys: Any) -> None:
    good = (GOLDEN / "events" / "events-default" / "debezium.jsonl").read_text().splitlines()
    bad = json.loads(good[0])
    bad["value"]["payload"]["op"] = "z"
    path = tmp_path / "records.jsonl"
    path.write_text("\n".join([good[1], json.dumps(bad), good[2], "{not json"]) + "\n")
    assert main(["validate", str(path)]) == 1
    out, err = capsys.readouterr()
    assert f"{path}:2: value.payload.op: expected one of c, r, u, d, t, m" in out
    assert f"{path}:4: <line>: not valid JSON" in out
    assert ":1:" not in out and ":3:" not in out
    assert "4 records, 2 invalid" in err
    ok = tmp_path / "ok.jsonl"
    ok.write_text("\n".join(good) + "\n")
    assert main(["validate", "-q", str(ok)]) == 0


def test_cli_validate_notes_schemaless_records(tmp_path: Path, capsys: Any) -> None:
    t = table("public.t", {"id": "int4"}, primary_key="id")
    record = factories.insert(t, {"id": 1}, json=True,
                      config={"topic.prefix": "pgcdc", "converter.schemas.enable": "false"})
    path = tmp_path / "plain.jsonl"
    path.write_text(json.dumps(record) + "\n")
    assert main(["validate", str(path)]) == 0
    assert "only Debezium's envelope rules were checked" in capsys.readouterr().err


def _numeric_decimal_record(payload_text: str) -> str:
    """A JsonConverter record (decimal.format=NUMERIC) whose value is a scale-2 Decimal, with
    the number written exactly as ``payload_text``."""
    schema = {"type": "bytes", "optional": False, "name": "org.apache.kafka.connect.data.Decimal",
              "version": 1, "parameters": {"scale": "2", "connect.decimal.precision": "10"}}
    return ('{"topic": "t", "key": null, "value": {"schema": ' + json.dumps(schema)
            + ', "payload": ' + payload_text + '}}')


@pytest.mark.parametrize(("text", "ok"), [
    ("12.34", True), ("12.3", True), ("12.340", True), ("12", True), ("0.00", True),
    ("1E+3", True), ("-99999999.99", True),
    ("12.345", False), ("0.001", False), ("-1.005", False), ("1.2345678901234567890123", False),
])
def test_a_numeric_decimal_is_checked_against_its_scale(text: str, ok: bool) -> None:
    problems = [p for p in validate_record(_numeric_decimal_record(text)).problems
                if p.path == "value.payload" and "expected an object" not in p.message]
    assert (problems == []) is ok, problems
    if not ok:
        assert "scale 2" in problems[0].message and text in problems[0].message


def test_a_numeric_decimal_in_a_dict_is_checked_too() -> None:
    record = json.loads(_numeric_decimal_record("12.345"))  # floats, as json.loads gives them
    assert [p.message for p in validate_record(record).problems if "scale" in p.message] == [
        "12.345 has more decimal places than the Decimal's scale 2"]
