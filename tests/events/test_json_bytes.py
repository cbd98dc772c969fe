"""The bytes path of the JSON writer writes exactly what ``record_line`` writes.

``JsonRecordWriter.line_parts`` (what ``decode`` writes) renders the topic, schemas
and headers of a record once per topic, schemas and headers, and only the key and
value payloads per record. Independent paths: ``record_line`` (every piece rendered
per record), on every golden recording with its connector properties, on generated
workloads under several converter settings (schemas on and off for the key, value and
headers apart, decimals as numbers); and :func:`json_text` (a plain recursive writer)
for the generated payload writers, with field names that need escaping.
"""

from __future__ import annotations

import json
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgcdc_events.events import EventConfig, EventDecoder, JsonRecordWriter
from pgcdc_events.events.jsonconv import json_text
from pgcdc_events.events.records import ChangeRecord
from pgcdc_events.events.source import SOURCE_SCHEMA
from pgcdc_events.testing.strategies import workloads
from pgcdc_events.types.schema import Schema, Struct, struct_schema
from support.golden import CONVERTER_SETTINGS, recordings

RECORDINGS = [r for r in recordings() if not r.meta.get("connector_failed")]
_CLOCK_NS = 1_700_000_000_000_000_000

SETTINGS = CONVERTER_SETTINGS


def _both(config: EventConfig, records: list[ChangeRecord]) -> tuple[bytes, bytes]:
    """The records through ``line_parts`` (one writer, frames shared) and ``record_line``."""
    fast = JsonRecordWriter.for_config(config)
    parts: list[bytes] = []
    for record in records:
        fast.line_parts(record, parts)
    slow = JsonRecordWriter.for_config(config)
    return b"".join(parts), "".join(slow.record_line(r) + "\n" for r in records).encode()


@pytest.mark.parametrize("recording", RECORDINGS, ids=[r.key for r in RECORDINGS])
def test_golden_records_write_the_same_bytes(recording) -> None:  # type: ignore[no-untyped-def]
    config = EventConfig.from_properties(recording.properties)
    decoder = EventDecoder(config, catalog=recording.catalog, clock=lambda: _CLOCK_NS)
    records = decoder.feed_rows(recording.capture)
    fast, slow = _both(config, records)
    assert fast == slow
    assert fast.count(b"\n") == len(records)
    assert [json.loads(line) for line in fast.splitlines()] == [
        json.loads(JsonRecordWriter.for_config(config).record_line(r)) for r in records]
    # one by one (no frame reused between two records of a line) is the same
    writer = JsonRecordWriter.for_config(config)
    assert b"".join(writer.record_bytes(r) for r in records) == slow


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(workloads(streaming=True, binary=True, long_values=True), st.sampled_from(SETTINGS))
def test_workload_records_write_the_same_bytes(workload, overrides) -> None:  # type: ignore[no-untyped-def]
    props = {"topic.prefix": "w", "provide.transaction.metadata": "true",
             "skipped.operations": "none", **overrides}
    config = EventConfig.from_properties(props)
    records = workload.records(config)
    fast, slow = _both(config, records)
    assert fast == slow
    assert fast.count(b"\n") == len(records)


_NAMES = st.text(alphabet=st.sampled_from(string.ascii_letters + '{}"\\\n\t/:é€😀\x00'),
                 min_size=1, max_size=6)
_VALUES = st.one_of(st.none(), st.integers(-2**63, 2**63 - 1), st.text(max_size=8),
                    st.booleans())


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_NAMES, _VALUES), min_size=1, max_size=6,
                unique_by=lambda item: item[0]))
def test_payload_writer_equals_a_plain_writer(fields) -> None:  # type: ignore[no-untyped-def]
    """Generated f-string writers, against json_text of the same fields as a dict."""
    def schema_of(value: object) -> Schema:
        if isinstance(value, bool):
            return Schema("boolean", True)
        if isinstance(value, int):
            return Schema("int64", True)
        return Schema("string", True)

    schema = struct_schema("s", [(name, schema_of(value)) for name, value in fields])
    value = Struct(schema, tuple(v for _, v in fields))
    expected = json_text({name: v for name, v in fields})
    assert JsonRecordWriter().payload(schema, value) == expected
    nested = struct_schema("n", [("inner", schema), ("n", Schema("int32", True))])
    assert JsonRecordWriter().payload(nested, Struct(nested, (value, 7))) == (
        '{"inner":' + expected + ',"n":7}')


def _pool(value: object) -> list[object]:
    """``value``, and an equal value that is another object (or another value)."""
    if isinstance(value, str):
        return [value, "".join(list(value + "x"))[:-1], value + "é"]
    if isinstance(value, int):
        return [value, int(str(value + 2**70)) - 2**70, value + 1]
    return [value, None]


_SOURCE_VALUES = ("3.6.3.Final", "postgresql", "pgcdc", 1_700_000_000_000, None, "db",
                  '["1","2"]', 1_700_000_000_000_000, 1_700_000_000_000_000_000, "public", "t",
                  742, 2, None, None, None)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 2), min_size=16, max_size=16), min_size=1,
                max_size=12))
def test_source_blocks_reuse_shared_runs_only_for_the_same_values(picks) -> None:  # type: ignore[no-untyped-def]
    """The source block's writer reuses the text of its shared fields (version..db,
    ts_us..txId, xmin..origin_lsn) while they are the same objects: one writer over a
    sequence of blocks whose fields change, or are equal but other objects, writes what a
    new writer writes for each block (no text reused)."""
    pools = [_pool(v) for v in _SOURCE_VALUES]
    writer = JsonRecordWriter()
    for pick in picks:
        values = tuple(pool[i % len(pool)] for pool, i in zip(pools, pick, strict=True))
        block = Struct(SOURCE_SCHEMA, values)
        assert writer.payload(SOURCE_SCHEMA, block) == JsonRecordWriter().payload(
            SOURCE_SCHEMA, block)
    memos = [v for k, v in writer._compiler.namespace.items() if k.startswith("_m")]
    assert len(memos) == 3  # the three runs of shared fields
    assert all(memo[0] for memo in memos)  # each holds the last block's run and its text


def test_one_writer_keeps_the_topics_of_records_with_the_same_schemas_apart() -> None:
    """Transaction records of two topic prefixes share their schemas and their (empty)
    headers: a writer that reuses the last record's frame must
    still write each record's own topic."""
    from pgcdc_events.events.special import transaction_record  # noqa: PLC0415
    from pgcdc_events.events.transactions import TransactionContext  # noqa: PLC0415

    configs = [EventConfig.from_properties({"topic.prefix": prefix})
               for prefix in ("one", "two")]
    txn = TransactionContext(7, 1_700_000_000_000_000, 100)
    records = [transaction_record(config, status, txn, 100, ())
               for status in ("BEGIN", "END") for config in configs]
    assert len({(id(r.key_schema), id(r.value_schema), id(r.headers)) for r in records}) == 1
    fast, slow = _both(configs[0], records)
    assert fast == slow
    assert [json.loads(line)["topic"] for line in fast.splitlines()] == [
        "one.transaction", "two.transaction"] * 2
