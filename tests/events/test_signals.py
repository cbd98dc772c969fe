"""Signals of the signalling table, parsed as the connector parses them.

Ports cite ``debezium/debezium``: ``refs/heads/3.6`` (commit 6f830f234f, the newest 3.6
commit stored; there is no v3.6.3.Final tag in the mirror) unless a test names
another commit. ``SnapshotSignalDataCollectionsTest`` and ``SnapshotSignalArrivedTest``
exist only after 3.6 (commit 0ae4be8c4f, dbz#798); in 3.6.3 the same malformed
signals fail with a NullPointerException that ``SignalProcessor.processSignal`` logs as
"Action ... failed", so the outcome (a warning, nothing done) is the same.
"""

from __future__ import annotations

from typing import Any

import pytest

from pgcdc_events.events import EventConfig, EventDecoder
from pgcdc_events.events.signals import (
    AdditionalCondition,
    ExecuteSnapshot,
    LogSignal,
    PauseSnapshot,
    ResumeSnapshot,
    SignalWarning,
    StopSnapshot,
    WindowSignal,
    parse_signal,
    signal_from_record,
    signal_from_row,
)
from pgcdc_events.types.catalog import fetch_catalog
from support.capture import Capturer

COMMON = "debezium-connector-common/src/test/java/io/debezium/pipeline/signal"


def warning(result: object, code: str) -> SignalWarning:
    assert isinstance(result, SignalWarning), result
    assert result.code == code, result
    assert "\n" not in result.message
    return result


# -- SignalProcessorTest (3.6) ------------------------------------------------------------


def test_should_execute_log() -> None:
    """debezium/debezium ``debezium-connector-common/src/test/java/io/debezium/pipeline/signal/
    SignalProcessorTest.java`` ``shouldExecuteLog``: a ``log`` signal carries its message."""
    assert parse_signal("log1", "log", '{"message": "signallog {}"}') == \
        LogSignal("log1", "signallog {}")


def test_should_ignore_invalid_signal_type() -> None:
    """debezium/debezium ``.../signal/SignalProcessorTest.java`` ``shouldIgnoreInvalidSignalType``:
    the log line "Signal 'log1' has been received but the type 'invalidType' is not recognized"."""
    result = warning(parse_signal("log1", "invalidType", '{"message": "signallog {}"}'),
                     "unknown-type")
    assert "'log1' has been received but the type 'invalidType' is not recognized" in \
        result.message


def test_should_ignore_unparseable_data() -> None:
    """debezium/debezium ``.../signal/SignalProcessorTest.java`` ``shouldIgnoreUnparseableData``:
    "Signal 'log1' has been received but the data '{"message: "signallog"}' cannot be parsed"."""
    result = warning(parse_signal("log1", "log", '{"message: "signallog"}'), "unparseable-data")
    assert "'log1' has been received but the data '{\"message: \"signallog\"}' cannot be " \
        "parsed" in result.message


def test_should_register_additional_action() -> None:
    """debezium/debezium ``.../signal/SignalProcessorTest.java`` ``shouldRegisterAdditionalAction``
    registers a ``custom`` action; pgcdc-events has no action registry, so a ``custom``
    signal is an unknown type (the test's other half, ``onlyEnabledConnectorShouldExecute``,
    is about channels: not a parsing rule, not ported)."""
    warning(parse_signal("log1", "custom", '{"v": 5}'), "unknown-type")


def test_a_log_signal_needs_a_message() -> None:
    """``Log.arrived`` (3.6): "Logging signal ... has arrived but the requested field
    'message' is missing from data"."""
    warning(parse_signal("l", "log", "{}"), "missing-message")
    warning(parse_signal("l", "log", None), "missing-message")


# -- SourceSignalChannelTest (3.6), against real rows -------------------------------------------


def _signal_records(pg_conn: Any, statements: list[str], *, columns: str) -> list[Any]:
    pg_conn.run(f"CREATE TABLE debezium_signal ({columns})")
    pg_conn.run("ALTER TABLE debezium_signal REPLICA IDENTITY FULL")
    cap = Capturer(pg_conn)
    for statement in statements:
        pg_conn.run(statement)
    decoder = EventDecoder(EventConfig(topic_prefix="x"), catalog=fetch_catalog(pg_conn))
    return [r for r in decoder.feed_rows(cap.changes()) if r.kind in ("change", "tombstone")]


def test_should_execute_from_envelope(pg_conn: Any) -> None:
    """debezium/debezium ``.../signal/SourceSignalChannelTest.java`` ``shouldExecuteFromEnvelope``:
    the three columns are read by position whatever their names (col1, col2, col3); the
    data is ``{"v": 5}``."""
    records = _signal_records(pg_conn, ["""INSERT INTO debezium_signal VALUES
        ('log1', 'custom', '{"v": 5}')"""], columns="col1 text, col2 text, col3 text")
    assert len(records) == 1
    result = signal_from_record(records[0])
    warning(result, "unknown-type")  # 'custom' is not an action of ours
    row = records[0].value["after"]
    assert tuple(row.values) == ("log1", "custom", '{"v": 5}')


def test_should_ignore_invalid_envelope(pg_conn: Any) -> None:
    """debezium/debezium ``.../signal/SourceSignalChannelTest.java`` ``shouldIgnoreInvalidEnvelope``:
    a signalling table of two columns gives no signal ("should have 3 fields but has 2")."""
    records = _signal_records(pg_conn, ["INSERT INTO debezium_signal VALUES ('log1', 'custom')"],
                              columns="col1 text, col2 text")
    result = warning(signal_from_record(records[0]), "not-a-signal-row")
    assert "should have 3 fields but has 2" in result.message
    assert signal_from_row(["log1", "custom"]) == result


def test_signals_from_a_real_signal_table(pg_conn: Any) -> None:
    """The documented signalling table (``signalling.adoc``: id varchar(42) PRIMARY KEY,
    type varchar(32) NOT NULL, data varchar(2048)); only inserts are signals, and with
    ``insert_delete`` the deletion of a ``-open`` row closes its window
    (``SignalRecord.buildSignalRecordFromChangeEventSource``; ``EventDispatcher``'s
    ``isASignalEventToProcess``)."""
    records = _signal_records(pg_conn, [
        """INSERT INTO debezium_signal (id, type, data) VALUES ('ad-hoc-1', 'execute-snapshot',
         '{"data-collections": ["public.products"], "type": "incremental",
           "additional-conditions": [{"data-collection": "public.products",
                                      "filter": "color=''blue''"}],
           "surrogate-key": "sku"}')""",
        "INSERT INTO debezium_signal VALUES ('c0ffee-open', 'snapshot-window-open', "
        "'{\"openWindowTimestamp\": \"2026-01-01T00:00:00Z\"}')",
        "UPDATE debezium_signal SET data = NULL WHERE id = 'ad-hoc-1'",
        "DELETE FROM debezium_signal WHERE id = 'c0ffee-open'",
        "INSERT INTO debezium_signal VALUES ('p', 'pause-snapshot', NULL)",
        "INSERT INTO debezium_signal VALUES ('r', 'resume-snapshot', '')",
    ], columns="id varchar(42) PRIMARY KEY, type varchar(32) NOT NULL, data varchar(2048) NULL")
    ops = [r.op for r in records]
    assert ops == ["c", "c", "u", "d", None, "c", "c"]  # the delete has its tombstone
    insert_insert = [signal_from_record(r) for r in records]
    execute = ExecuteSnapshot("ad-hoc-1", ("public.products",), "incremental",
                              (AdditionalCondition("public.products", "color='blue'"),), "sku")
    assert insert_insert == [
        execute, WindowSignal("c0ffee-open", "snapshot-window-open",
                              '{"openWindowTimestamp": "2026-01-01T00:00:00Z"}'),
        None, None, None, PauseSnapshot("p"), ResumeSnapshot("r")]
    insert_delete = [signal_from_record(r, insert_delete=True) for r in records]
    assert insert_delete[3] == WindowSignal(
        "c0ffee-close", "snapshot-window-close", '{"openWindowTimestamp": "2026-01-01T00:00:00Z"}')
    assert insert_delete[:3] == insert_insert[:3]
    assert insert_delete[4:] == insert_insert[4:]
    assert execute.condition_for("PUBLIC.PRODUCTS") == "color='blue'"  # CASE_INSENSITIVE
    assert execute.condition_for("public.other") is None


# -- SnapshotSignalDataCollectionsTest (main@0ae4be8c4f) ---------------------------------------


def test_execute_snapshot_should_parse_string_data_collections() -> None:
    """debezium/debezium@0ae4be8c4f ``debezium-connector-common/src/test/java/io/debezium/
    pipeline/signal/actions/snapshotting/SnapshotSignalDataCollectionsTest.java``
    ``executeSnapshotShouldParseStringDataCollections``."""
    result = parse_signal("s", "execute-snapshot",
                          '{"data-collections": ["schema.table1", "schema.table2"]}')
    assert isinstance(result, ExecuteSnapshot)
    assert result.data_collections == ("schema.table1", "schema.table2")


def test_execute_snapshot_should_be_invalid_for_nested_array_data_collections() -> None:
    """debezium/debezium@0ae4be8c4f ``.../SnapshotSignalDataCollectionsTest.java``
    ``executeSnapshotShouldBeInvalidForNestedArrayDataCollections``: the warning says it
    "contains a non-string data collection"."""
    result = warning(parse_signal("s", "execute-snapshot",
                                  '{"data-collections": [["schema.table1", "schema.table2"]]}'),
                     "invalid-data-collections")
    assert "contains a non-string data collection" in result.message


def test_execute_snapshot_should_be_invalid_when_any_data_collection_is_not_a_string() -> None:
    """debezium/debezium@0ae4be8c4f ``.../SnapshotSignalDataCollectionsTest.java``
    ``executeSnapshotShouldBeInvalidWhenAnyDataCollectionIsNotAString``."""
    warning(parse_signal("s", "execute-snapshot", '{"data-collections": ["schema.table1", 42]}'),
            "invalid-data-collections")


def test_execute_snapshot_should_be_invalid_when_data_collections_missing_or_empty() -> None:
    """debezium/debezium@0ae4be8c4f ``.../SnapshotSignalDataCollectionsTest.java``
    ``executeSnapshotShouldBeInvalidWhenDataCollectionsMissingOrEmpty`` (3.6's log line:
    "... has arrived but the requested field 'data-collections' is missing from data or
    is empty")."""
    for data in ("{}", '{"data-collections": []}', None):
        result = warning(parse_signal("s", "execute-snapshot", data), "missing-data-collections")
        assert "'data-collections' is missing from data or is empty" in result.message


def test_stop_snapshot_should_parse_string_data_collections() -> None:
    """debezium/debezium@0ae4be8c4f ``.../SnapshotSignalDataCollectionsTest.java``
    ``stopSnapshotShouldParseStringDataCollections``."""
    assert parse_signal("s", "stop-snapshot", '{"data-collections": ["schema.table1"]}') == \
        StopSnapshot("s", ("schema.table1",))


def test_stop_snapshot_should_be_invalid_for_nested_array_data_collections() -> None:
    """debezium/debezium@0ae4be8c4f ``.../SnapshotSignalDataCollectionsTest.java``
    ``stopSnapshotShouldBeInvalidForNestedArrayDataCollections``."""
    result = warning(parse_signal("s", "stop-snapshot", '{"data-collections": [["schema.table1"]]}'),
                     "invalid-data-collections")
    assert "contains a non-string data collection" in result.message


def test_stop_snapshot_should_stop_all_when_data_collections_missing_or_empty() -> None:
    """debezium/debezium@0ae4be8c4f ``.../SnapshotSignalDataCollectionsTest.java``
    ``stopSnapshotShouldStopAllWhenDataCollectionsMissingOrEmpty``: missing and empty are a
    valid request to stop everything (``None``), distinct from a malformed one."""
    assert parse_signal("s", "stop-snapshot", "{}") == StopSnapshot("s", None)
    assert parse_signal("s", "stop-snapshot", '{"data-collections": []}') == StopSnapshot("s", None)


# -- SnapshotSignalArrivedTest (main@0ae4be8c4f) -----------------------------------------------


def test_stop_snapshot_should_not_stop_anything_for_malformed_data_collections() -> None:
    """debezium/debezium@0ae4be8c4f ``debezium-connector-common/src/test/java/io/debezium/
    pipeline/signal/actions/snapshotting/SnapshotSignalArrivedTest.java``
    ``stopSnapshotShouldNotStopAnythingForMalformedDataCollections``: a warning, not a stop."""
    result = parse_signal("signal-id", "stop-snapshot", '{"data-collections": [["schema.table1"]]}')
    assert not isinstance(result, StopSnapshot)
    warning(result, "invalid-data-collections")


def test_stop_snapshot_should_stop_all_for_missing_data_collections() -> None:
    """debezium/debezium@0ae4be8c4f ``.../SnapshotSignalArrivedTest.java``
    ``stopSnapshotShouldStopAllForMissingDataCollections``."""
    assert parse_signal("signal-id", "stop-snapshot", "{}") == StopSnapshot("signal-id", None)


def test_stop_snapshot_should_stop_specific_collections() -> None:
    """debezium/debezium@0ae4be8c4f ``.../SnapshotSignalArrivedTest.java``
    ``stopSnapshotShouldStopSpecificCollections``."""
    assert parse_signal("signal-id", "stop-snapshot",
                        '{"data-collections": ["schema.table1"]}') == \
        StopSnapshot("signal-id", ("schema.table1",))


# -- the rest of ExecuteSnapshot / AbstractSnapshotSignal (3.6) ---------------------------------


def test_execute_snapshot_fields() -> None:
    """``ExecuteSnapshot.arrived`` (3.6): collections are trimmed; ``type`` defaults to
    incremental and is case-insensitive; a blank surrogate key is none; the first
    matching condition wins (``AbstractIncrementalSnapshotContext.buildDataCollection``)."""
    result = parse_signal("x", "execute-snapshot", """{"data-collections": [" s.a ", "s\\\\.b.*"],
        "type": "BLOCKING", "surrogate-key": "  ",
        "additional-conditions": [{"data-collection": "s.a", "filter": "a > 1"},
                                  {"data-collection": ".*", "filter": "b > 2"}]}""")
    assert result == ExecuteSnapshot(
        "x", ("s.a", "s\\.b.*"), "blocking",
        (AdditionalCondition("s.a", "a > 1"), AdditionalCondition(".*", "b > 2")), None)
    assert isinstance(result, ExecuteSnapshot)
    assert result.condition_for("s.a") == "a > 1"
    assert result.condition_for("s.b1") == "b > 2"
    default = parse_signal("x", "execute-snapshot", '{"data-collections": ["s.a"], "type": 3}')
    assert isinstance(default, ExecuteSnapshot) and default.snapshot_type == "incremental"


def test_execute_snapshot_with_an_unknown_type_is_skipped() -> None:
    """``AbstractSnapshotSignal.getSnapshotType`` (3.6): "Detected an unexpected snapshot
    type '...'. Signal will be skipped.\""""
    result = warning(parse_signal("x", "execute-snapshot",
                                  '{"data-collections": ["s.a"], "type": "sideways"}'),
                     "unknown-snapshot-type")
    assert "'sideways'" in result.message
    warning(parse_signal("x", "stop-snapshot", '{"type": "sideways"}'), "unknown-snapshot-type")


def test_malformed_additional_conditions_are_named() -> None:
    for data in ('{"data-collections": ["s.a"], "additional-conditions": {"s.a": "x"}}',
                 '{"data-collections": ["s.a"], "additional-conditions": [{"filter": "x"}]}',
                 '{"data-collections": ["s.a"], "additional-conditions": ["x"]}'):
        warning(parse_signal("x", "execute-snapshot", data), "invalid-additional-conditions")
    warning(parse_signal("x", "execute-snapshot", '{"data-collections": ["s.(a"]}'),
            "invalid-regex")
    warning(parse_signal("x", "execute-snapshot", "[1, 2]"), "unparseable-data")


def test_the_pre_3_0_additional_condition_is_honoured_with_a_warning() -> None:
    """Seed 003 shows ``"additional-condition": "..."``, the form Debezium 2.x read
    (``ExecuteSnapshot.getAdditionalConditions`` at ``refs/heads/2.7``: for an incremental
    snapshot it applies to every collection, ``.*``, and replaces ``additional-conditions``);
    3.x ignores it and snapshots the whole table (the 3.6.3.Final jar's ``ExecuteSnapshot``
    holds no ``additional-condition`` constant). We honour it and say so."""
    result = parse_signal("x", "execute-snapshot", """{"data-collections": ["public.orders"],
        "additional-condition": "status = 'open' OR status = 'held'"}""")
    assert isinstance(result, ExecuteSnapshot)
    assert result.additional_conditions == (
        AdditionalCondition(".*", "status = 'open' OR status = 'held'"),)
    assert result.condition_for("public.orders") == "status = 'open' OR status = 'held'"
    assert len(result.warnings) == 1 and "pre-3.0 spelling" in result.warnings[0]
    blocking = parse_signal("x", "execute-snapshot", """{"data-collections": ["public.orders"],
        "type": "blocking", "additional-condition": "a = 1"}""")
    assert isinstance(blocking, ExecuteSnapshot)
    assert blocking.additional_conditions == ()
    assert "ignored" in blocking.warnings[0]
    plain = parse_signal("x", "execute-snapshot", '{"data-collections": ["a.b"]}')
    assert isinstance(plain, ExecuteSnapshot) and plain.warnings == ()


def test_stop_snapshot_acts_on_incremental_snapshots_only() -> None:
    """``StopSnapshot.arrived`` (3.6) switches on the type and only handles INCREMENTAL."""
    warning(parse_signal("x", "stop-snapshot", '{"type": "blocking"}'), "not-incremental")


def test_pause_and_resume_ignore_their_data() -> None:
    """``PauseIncrementalSnapshot`` / ``ResumeIncrementalSnapshot`` (3.6) read no data."""
    assert parse_signal("p", "pause-snapshot", '{"anything": 1}') == PauseSnapshot("p")
    assert parse_signal("r", "resume-snapshot", None) == ResumeSnapshot("r")


@pytest.mark.parametrize("data", ['{"data-collections": ["a"]}\n', "not json\nat all"])
def test_warnings_are_one_line(data: str) -> None:
    result = parse_signal("id\nwith newline", "execute-snapshot\n", data)
    assert isinstance(result, SignalWarning)
    assert "\n" not in str(result)
