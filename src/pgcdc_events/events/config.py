"""Connector configuration: Debezium property names in, a validated :class:`EventConfig` out.

An existing connector configuration works as it is: every property the
Debezium PostgreSQL connector declares is accepted. Those that shape events
are applied; those about connections, slots, snapshots, queues and the Kafka
Connect runtime are reported as not applicable (:attr:`EventConfig.not_applicable`).
A misspelled or unknown property, an unsupported value, a value for a
property that would change events in a way this library does not implement,
or two exclusive properties together raise :class:`ConfigurationError` naming
the property.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal

import attrs

from pgcdc_events import __version__
from pgcdc_events.errors import ConfigurationError
from pgcdc_events.events.connector_properties import CONNECTOR_PROPERTIES
from pgcdc_events.types.config import TYPE_PROPERTIES, TypeConfig, parse_bool, parse_patterns
from pgcdc_events.types.javaregex import JavaPattern, compile_java

if TYPE_CHECKING:
    from pgcdc_events.types.catalog import CatalogSnapshot

__all__ = [
    "APPLIED_PROPERTIES",
    "CAPTURE_NOTES",
    "DEFAULT_ONLY_PROPERTIES",
    "HASH_ALGORITHMS",
    "PROPERTIES",
    "ColumnHashMask",
    "EventConfig",
    "JsonConverterConfig",
    "Property",
]

AdjustmentMode = Literal["none", "avro", "avro_unicode"]
FailureMode = Literal["fail", "warn", "skip"]

@attrs.frozen
class Property:
    """One connector property the library applies: its name, the :class:`EventConfig` field
    it sets, its default (as written in a ``.properties`` file), the parser of its text and
    the note docs/configuration.md gives it. ``field`` is ``None`` for the type layer's
    properties (read by :meth:`TypeConfig.from_properties`) and for ``xmin.fetch.interval.ms``."""

    name: str
    field: str | None
    default: str
    parse: Callable[[str, str], Any] | None = None  # (name, text) -> value
    doc: str = ""


def _text(name: str, text: str) -> str:
    return text


def _bool(name: str, text: str) -> bool:
    return parse_bool(name, text)


def _non_negative(name: str, text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        number = -1
    if number < 0:
        raise ConfigurationError(f"{name}: expected a non-negative integer, got {text!r}")
    return number


def _choice(*allowed: str) -> Callable[[str, str], str]:
    def parse(name: str, text: str) -> str:
        if text.lower() not in allowed:
            raise ConfigurationError(
                f"{name}: unsupported value {text!r}; allowed: {', '.join(allowed)}")
        return text.lower()
    return parse


def _patterns(name: str, text: str) -> tuple[JavaPattern, ...] | None:
    return parse_patterns(text, name) if text else None


_ADJUSTMENT = _choice("none", "avro", "avro_unicode")
_FAILURE = _choice("fail", "warn", "skip")

#: ``plugin.name`` values: pgoutput, and YugabyteDB's yboutput (the YugabyteDB connector's
#: behaviour, see :mod:`pgcdc_events.events.yugabyte`).
PLUGIN_NAMES: Final = ("pgoutput", "yboutput")
#: Properties only the YugabyteDB connector defines (yugabyte/debezium
#: PostgresConnectorConfig.YB_CONSISTENT_SNAPSHOT); accepted, not applicable, under yboutput.
YUGABYTEDB_PROPERTIES: Final = frozenset({"yb.consistent.snapshot"})

#: Notes for the type layer's properties (their parser is ``TypeConfig.from_properties``).
_TYPE_NOTES: Final[dict[str, str]] = {
    "pgcdc.map.unsupported.types": "**ours**, not Debezium's: map the array columns "
                                   "Debezium drops (`money[]`, `interval[]`...)",
    "decimal.handling.mode": "under `plugin.name=yboutput`: `double` by default, and "
                             "`precise` is refused, as the YugabyteDB connector does (see "
                             "[yugabytedb.md](yugabytedb.md))",
}

#: Connector properties the decoder does not apply but ``pgcdc-events capture`` does
#: (docs/configuration.md prints the note before Debezium's description).
CAPTURE_NOTES: Final[dict[str, str]] = {
    "heartbeat.action.query": "run at each heartbeat (`heartbeat.interval.ms`, which it "
                              "needs), on a connection of its own; a failing statement stops "
                              "the capture",
    "snapshot.max.threads": "the initial snapshot reads that many tables at once",
}

#: What ``table.ignore.builtin`` leaves out (Debezium's PostgresConnectorConfig,
#: ``SystemTablesPredicate``): system schemas, and tables that extensions put in the
#: user's schemas (PostGIS).
_BUILTIN_SCHEMAS: Final = frozenset({"pg_catalog", "information_schema"})
_BUILTIN_TABLES: Final = frozenset({"spatial_ref_sys"})

#: Every property this library applies, in one table: the parser, the documentation
#: (tools/gen_docs.py) and the "did you mean" hints all read it.
PROPERTIES: Final[tuple[Property, ...]] = (
    Property("topic.prefix", "topic_prefix", "", _text,
             "required by the connector; `pgcdc-events decode` defaults it to `pgcdc`"),
    Property("database.dbname", "database", "", _text,
             "becomes `source.db`; when unset, the catalog snapshot's database"),
    Property("tombstones.on.delete", "tombstones_on_delete", "true", _bool),
    Property("skipped.operations", "skipped_operations", "t", lambda _, v: _operations(v)),
    Property("provide.transaction.metadata", "provide_transaction_metadata", "false", _bool),
    Property("topic.delimiter", "topic_delimiter", ".", _text),
    Property("topic.transaction", "topic_transaction", "transaction", _text),
    Property("topic.heartbeat.prefix", "topic_heartbeat_prefix", "__debezium-heartbeat", _text),
    Property("topic.heartbeat.name", "topic_heartbeat_name", "", _text),
    Property("heartbeat.interval.ms", "heartbeat_interval_ms", "0", _non_negative,
             "`EventDecoder.keepalive(lsn)` returns a heartbeat record once the interval "
             "has passed; `pgcdc-events capture` confirms the server's idle position at this "
             "interval (every 2 s when 0) and, with `--decode`, writes the heartbeat records "
             "(docs/operations.md, \"Running for weeks\")"),
    Property("schema.include.list", "schema_include", "", _patterns),
    Property("schema.exclude.list", "schema_exclude", "", _patterns),
    Property("table.include.list", "table_include", "", _patterns),
    Property("table.exclude.list", "table_exclude", "", _patterns),
    Property("table.ignore.builtin", "table_ignore_builtin", "true", _bool,
             "leaves out the tables the connector calls built-in: schemas `pg_catalog`, "
             "`information_schema` and `pg_temp*`, and PostGIS's `spatial_ref_sys` in any "
             "schema"),
    Property("column.include.list", "column_include", "", _patterns),
    Property("column.exclude.list", "column_exclude", "", _patterns),
    Property("message.prefix.include.list", "message_prefix_include", "", _patterns),
    Property("message.prefix.exclude.list", "message_prefix_exclude", "", _patterns),
    Property("message.key.columns", "message_key_columns", "",
             lambda _, v: _message_key_columns(v)),
    Property("schema.name.adjustment.mode", "schema_name_adjustment_mode", "none", _ADJUSTMENT),
    Property("field.name.adjustment.mode", "field_name_adjustment_mode", "none", _ADJUSTMENT),
    Property("event.processing.failure.handling.mode", "event_processing_failure_handling_mode",
             "fail", _FAILURE,
             "a change whose value fails to convert (converting mode `fail`): `fail` raises "
             "`ConversionError` with its `lsn`; `warn` (logged) and `skip` drop the change, "
             "counted in `metrics.failed_events`"),
    Property("event.converting.failure.handling.mode", "event_converting_failure_handling_mode",
             "fail", _FAILURE,
             "**default differs**: `fail` here, `warn` in Debezium (which nulls the value)"),
    Property("skip.messages.without.change", "skip_messages_without_change", "false", _bool,
             "drops updates whose included columns did not change (needs the old row: "
             "REPLICA IDENTITY FULL)"),
    Property("extended.headers.enabled", "extended_headers_enabled", "true", _bool,
             "`false` leaves out the `__debezium.context.*` headers, as the connector's event "
             "dispatcher does"),
    Property("plugin.name", "plugin_name", "pgoutput", _choice(*PLUGIN_NAMES),
             "`pgoutput` or `yboutput` (the YugabyteDB connector's records, see "
             "[yugabytedb.md](yugabytedb.md))"),
    Property("xmin.fetch.interval.ms", None, "0", _non_negative,
             "needs a database connection: values other than 0 are reported as not "
             "applicable and `source.xmin` stays null"),
    *(Property(name, None, default, None, _TYPE_NOTES.get(name, ""))
      for name, default in TYPE_PROPERTIES.items()),
)

#: Properties this library applies, with the default it uses (from :data:`PROPERTIES`).
APPLIED_PROPERTIES: Final[dict[str, str]] = {p.name: p.default for p in PROPERTIES}

#: Mutually exclusive pairs.
_EXCLUSIVE: Final = (("schema.include.list", "schema.exclude.list"),
                     ("table.include.list", "table.exclude.list"),
                     ("column.include.list", "column.exclude.list"),
                     ("message.prefix.include.list", "message.prefix.exclude.list"))

#: Properties that would change events in ways not implemented: only their default is accepted.
DEFAULT_ONLY_PROPERTIES: Final[dict[str, str]] = {
    "transforms": "", "predicates": "", "converters": "", "post.processors": "",
    "include.schema.comments": "false", "publish.via.partition.root": "false",
    "topic.naming.strategy": "io.debezium.schema.SchemaTopicNamingStrategy",
    "sourceinfo.struct.maker": "io.debezium.connector.postgresql.PostgresSourceInfoStructMaker",
    "transaction.metadata.factory":
        "io.debezium.pipeline.txmetadata.DefaultTransactionMetadataFactory",
}

#: Kafka Connect / embedded-engine properties that are not connector fields.
_RUNTIME: Final = frozenset({
    "name", "connector.class", "tasks.max", "key.converter", "value.converter",
    "header.converter", "offset.storage", "offset.flush.interval.ms",
    "offset.flush.timeout.ms", "offset.commit.policy", "config.action.reload",
    "database.history", "record.processing.threads", "record.processing.order",
    "record.processing.shutdown.timeout.ms", "record.processing.with.serial.consumer",
    "errors.retry.delay.initial.ms", "errors.retry.delay.max.ms", "errors.tolerance",
    "errors.log.enable", "errors.log.include.messages", "topic.creation.enable",
})
_RUNTIME_PREFIXES: Final = (
    "offset.storage.", "transforms.", "predicates.", "errors.", "topic.creation.",
    "database.", "driver.", "signal.", "notification.", "snapshot.", "incremental.snapshot.",
    "internal.", "openlineage.", "guardrail.", "producer.", "consumer.", "schema.history.",
    "kafka.",
)


def _signal_tables(value: str) -> tuple[tuple[str, str], ...]:
    """``signal.data.collection``: comma-separated ``schema.table`` (or
    ``database.schema.table``) names; another form is refused by name."""
    out: list[tuple[str, str]] = []
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        parts = item.split(".")
        if len(parts) not in (2, 3) or not all(parts):
            raise ConfigurationError(f"signal.data.collection {item!r} is not schema.table "
                                     "(or database.schema.table)")
        out.append((parts[-2], parts[-1]))
    return tuple(out)


def _unknown(name: str, close: list[str]) -> ConfigurationError:
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    return ConfigurationError(f"unknown connector property {name!r}{hint}")


def _near_misses(name: str, cutoff: float) -> list[str]:
    """Known property names close to ``name``."""
    known = list(dict.fromkeys([*APPLIED_PROPERTIES, *CONNECTOR_PROPERTIES, *_RUNTIME]))
    import difflib  # noqa: PLC0415 - only for a misspelt name (decode's start-up)

    return difflib.get_close_matches(name, known, n=3, cutoff=cutoff)


def _refuse_near_miss(name: str) -> None:
    """Refuse a pass-through name (``database.*``, ``snapshot.*``...) that misspells a known
    property; names that extend one (``snapshot.select.statement.overrides.<table>``) pass."""
    if any(name.startswith(k + ".")
           for k in (*APPLIED_PROPERTIES, *CONNECTOR_PROPERTIES, *_RUNTIME)):
        return
    close = _near_misses(name, 0.85)
    if close:
        raise _unknown(name, close)


_OPERATIONS: Final = {"c", "u", "d", "t"}
_MASK_CHARS: Final = re.compile(r"column\.mask\.with\.(\d+)\.chars")
_MASK_HASH: Final = re.compile(r"column\.mask\.hash\.(v2\.)?([^.]+)\.with\.salt\.(.+)")
_TRUNCATE: Final = re.compile(r"column\.truncate\.to\.(\d+)\.chars")
HASH_ALGORITHMS: Final = {"MD2": "md2", "MD5": "md5", "SHA-1": "sha1", "SHA-224": "sha224",
                           "SHA-256": "sha256", "SHA-384": "sha384", "SHA-512": "sha512",
                           "SHA-512/224": "sha512_224", "SHA-512/256": "sha512_256",
                           "SHA3-224": "sha3_224", "SHA3-256": "sha3_256",
                           "SHA3-384": "sha3_384", "SHA3-512": "sha3_512"}


@attrs.frozen
class ColumnHashMask:
    """``column.mask.hash[.v2].<algorithm>.with.salt.<salt>``: hash matching columns' values."""

    algorithm: str  # Java name, e.g. "SHA-256"
    salt: str
    v2: bool
    columns: tuple[JavaPattern, ...]


@attrs.frozen
class JsonConverterConfig:
    """Kafka JsonConverter options (``converter.*``, ``key.converter.*``, ``value.converter.*``)."""

    schemas_enable: bool = True
    replace_null_with_default: bool = True
    decimal_format: Literal["BASE64", "NUMERIC"] = "BASE64"

    @classmethod
    def from_properties(cls, props: Mapping[str, str], role: str = "value"
                        ) -> JsonConverterConfig:
        """Read the options of the ``key``, ``value`` or ``header`` converter;
        ``<role>.converter.*`` wins over ``converter.*``."""
        _check_converter_options(props)
        return _json_config(props, role)


def _yboutput_decimal_mode(props: Mapping[str, str]) -> Mapping[str, str]:
    """``decimal.handling.mode`` under ``plugin.name=yboutput``: the YugabyteDB connector's
    default is ``double`` and it refuses ``precise`` (yugabyte/debezium ybdb-debezium-2.5.2
    at 52515b4ac, ``PostgresConnectorConfig.DECIMAL_HANDLING_MODE`` and ``getDecimalMode()``,
    commit e4746baa2). Other plug-ins keep the PostgreSQL connector's rules."""
    if str(props.get("plugin.name", "")).strip() != "yboutput":
        return props
    mode = props.get("decimal.handling.mode")
    if mode is None:
        return {**props, "decimal.handling.mode": "double"}
    if str(mode).strip().lower() == "precise":
        raise ConfigurationError(
            "decimal.handling.mode=precise is unsupported with plugin.name=yboutput (the "
            "YugabyteDB connector: \"Decimal handling mode PRECISE is unsupported, please use "
            "DOUBLE or STRING\"); use double (the default) or string")
    return props


@attrs.frozen
class EventConfig:
    """Everything that shapes the events, with Debezium's defaults.

    ``event_converting_failure_handling_mode`` defaults to ``fail`` where Debezium
    defaults to ``warn`` (which replaces a value that does not convert by null):
    this library never drops a value unless asked to.
    """

    topic_prefix: str
    database: str = ""
    types: TypeConfig = attrs.field(factory=TypeConfig)
    json: JsonConverterConfig = attrs.field(factory=JsonConverterConfig)
    json_key: JsonConverterConfig = attrs.field(factory=JsonConverterConfig)
    json_headers: JsonConverterConfig = attrs.field(factory=JsonConverterConfig)
    tombstones_on_delete: bool = True
    skipped_operations: frozenset[str] = frozenset({"t"})
    provide_transaction_metadata: bool = False
    topic_delimiter: str = "."
    topic_transaction: str = "transaction"
    topic_heartbeat_prefix: str = "__debezium-heartbeat"
    topic_heartbeat_name: str = ""
    heartbeat_interval_ms: int = 0
    schema_include: tuple[JavaPattern, ...] | None = None
    schema_exclude: tuple[JavaPattern, ...] | None = None
    table_include: tuple[JavaPattern, ...] | None = None
    table_exclude: tuple[JavaPattern, ...] | None = None
    table_ignore_builtin: bool = True
    column_include: tuple[JavaPattern, ...] | None = None
    column_exclude: tuple[JavaPattern, ...] | None = None
    message_prefix_include: tuple[JavaPattern, ...] | None = None
    message_prefix_exclude: tuple[JavaPattern, ...] | None = None
    message_key_columns: tuple[tuple[JavaPattern, tuple[str, ...]], ...] = ()
    mask_with_chars: tuple[tuple[int, tuple[JavaPattern, ...]], ...] = ()
    mask_with_hash: tuple[ColumnHashMask, ...] = ()
    truncate_to_chars: tuple[tuple[int, tuple[JavaPattern, ...]], ...] = ()
    schema_name_adjustment_mode: AdjustmentMode = "none"
    field_name_adjustment_mode: AdjustmentMode = "none"
    event_processing_failure_handling_mode: FailureMode = "fail"
    event_converting_failure_handling_mode: FailureMode = "fail"
    skip_messages_without_change: bool = False
    extended_headers_enabled: bool = True
    #: ``plugin.name``: ``yboutput`` selects the YugabyteDB connector's records
    #: (:class:`~pgcdc_events.events.yugabyte.YugabyteEventDecoder`).
    plugin_name: Literal["pgoutput", "yboutput"] = "pgoutput"
    version: str = __version__
    not_applicable: tuple[str, ...] = ()
    #: ``signal.data.collection`` as ``(schema, table)`` pairs: captured whatever the table
    #: filters say, as the connector ORs them into its table filter
    #: (``RelationalTableFilters``), so that their rows (signals, watermarks) are events.
    signal_tables: tuple[tuple[str, str], ...] = ()

    def __attrs_post_init__(self) -> None:
        if not self.topic_prefix:
            raise ConfigurationError("topic.prefix is required (the prefix of every topic name)")

    # -- construction from properties ------------------------------------------------
    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> EventConfig:  # noqa: C901, PLR0915
        """Validate Debezium connector properties and build the configuration."""
        values: dict[str, Any] = {}
        not_applicable: list[str] = []
        masks_chars: list[tuple[int, tuple[JavaPattern, ...]]] = []
        masks_hash: list[ColumnHashMask] = []
        truncates: list[tuple[int, tuple[JavaPattern, ...]]] = []
        for name, raw in props.items():
            value = str(raw).strip()
            if name in APPLIED_PROPERTIES:
                continue
            if m := _MASK_CHARS.fullmatch(name):
                masks_chars.append((int(m.group(1)), parse_patterns(value, name)))
            elif m := _MASK_HASH.fullmatch(name):
                algorithm = m.group(2)
                if algorithm.upper() not in HASH_ALGORITHMS:
                    raise ConfigurationError(
                        f"{name}: unsupported hash algorithm {algorithm!r}; allowed: "
                        f"{', '.join(HASH_ALGORITHMS)}")
                masks_hash.append(ColumnHashMask(algorithm.upper(), m.group(3), bool(m.group(1)),
                                                 parse_patterns(value, name)))
            elif m := _TRUNCATE.fullmatch(name):
                length = int(m.group(1))
                if length <= 0:
                    raise ConfigurationError(f"{name}: the length must be a positive integer")
                truncates.append((length, parse_patterns(value, name)))
            elif name.startswith(_CONVERTER_PREFIXES):
                continue  # JsonConverter options, validated and applied below
            elif name == "signal.data.collection":
                values["signal_tables"] = _signal_tables(value)
            elif name in DEFAULT_ONLY_PROPERTIES:
                if value != DEFAULT_ONLY_PROPERTIES[name]:
                    raise ConfigurationError(
                        f"{name}={value!r} changes events in a way pgcdc-events does not implement;"
                        f" only {DEFAULT_ONLY_PROPERTIES[name]!r} is supported")
                not_applicable.append(name)
            elif (name in CONNECTOR_PROPERTIES or name in _RUNTIME
                  or (name in YUGABYTEDB_PROPERTIES
                      and str(props.get("plugin.name")).strip() == "yboutput")):
                not_applicable.append(name)
            elif name.startswith(_RUNTIME_PREFIXES):
                _refuse_near_miss(name)  # database.dbnmae is a typo, not a driver option
                not_applicable.append(name)
            else:
                raise _unknown(name, _near_misses(name, 0.75))

        def get(name: str) -> str:
            return str(props.get(name, APPLIED_PROPERTIES[name])).strip()

        for include, exclude in _EXCLUSIVE:
            if get(include) and get(exclude):
                raise ConfigurationError(f"{include} and {exclude} cannot be used together")
        for prop in PROPERTIES:
            if prop.parse is None:
                continue  # the type layer's: TypeConfig.from_properties below
            value = prop.parse(prop.name, get(prop.name))
            if prop.field is not None:
                values[prop.field] = value
            elif value:  # xmin.fetch.interval.ms: fetching xmin needs a database connection
                not_applicable.append(prop.name)
        values["types"] = TypeConfig.from_properties(_yboutput_decimal_mode(props))
        values["json"] = JsonConverterConfig.from_properties(props)
        values["json_key"] = JsonConverterConfig.from_properties(props, "key")
        values["json_headers"] = JsonConverterConfig.from_properties(props, "header")
        values["mask_with_chars"] = tuple(masks_chars)
        values["mask_with_hash"] = tuple(masks_hash)
        values["truncate_to_chars"] = tuple(truncates)
        values["not_applicable"] = tuple(sorted(set(not_applicable)))
        return cls(**values)

    def with_catalog(self, catalog: CatalogSnapshot | None) -> EventConfig:
        """This configuration with ``database`` (``source.db``) taken from the catalog
        snapshot when ``database.dbname`` is unset (as the catalog records the database)."""
        if catalog is None or self.database:
            return self
        return attrs.evolve(self, database=catalog.database)

    # -- selection -----------------------------------------------------------------------
    def includes_table(self, schema: str, table: str) -> bool:
        """Whether changes to ``schema.table`` are captured (schema and table filters, and
        ``table.ignore.builtin`` as the connector's ``SystemTablesPredicate`` reads it;
        the signalling tables always are)."""
        if (schema, table) in self.signal_tables:
            return True
        if self.table_ignore_builtin and (
                schema.lower() in _BUILTIN_SCHEMAS or schema.startswith("pg_temp")
                or table.lower() in _BUILTIN_TABLES):
            return False
        if self.schema_include is not None and not _any(self.schema_include, schema):
            return False
        if self.schema_exclude is not None and _any(self.schema_exclude, schema):
            return False
        full = f"{schema}.{table}"
        if self.table_include is not None and not _any(self.table_include, full):
            return False
        return not (self.table_exclude is not None and _any(self.table_exclude, full))

    def includes_column(self, schema: str, table: str, column: str) -> bool:
        """Whether ``column`` appears in events (``column.include.list``/``exclude.list``)."""
        full = f"{schema}.{table}.{column}"
        if self.column_include is not None and not _any(self.column_include, full):
            return False
        return not (self.column_exclude is not None and _any(self.column_exclude, full))

    def includes_message_prefix(self, prefix: str) -> bool:
        """Whether logical decoding messages with ``prefix`` become events."""
        if self.message_prefix_include is not None:
            return _any(self.message_prefix_include, prefix)
        return not (self.message_prefix_exclude is not None
                    and _any(self.message_prefix_exclude, prefix))

    def key_columns_for(self, schema: str, table: str) -> tuple[str, ...] | None:
        """The ``message.key.columns`` override for ``schema.table``, if any."""
        full = f"{schema}.{table}"
        for pattern, columns in self.message_key_columns:
            if pattern.fullmatch(full):
                return columns
        return None


def _any(patterns: tuple[JavaPattern, ...], text: str) -> bool:
    return any(p.fullmatch(text) for p in patterns)


def _operations(value: str) -> frozenset[str]:
    if value.lower() == "none" or not value:
        return frozenset()
    ops = {v.strip().lower() for v in value.split(",") if v.strip()}
    unknown = ops - _OPERATIONS
    if unknown:
        raise ConfigurationError(f"skipped.operations: unsupported operation(s) "
                                 f"{', '.join(sorted(unknown))}; allowed: c, u, d, t or none")
    return frozenset(ops)


def _message_key_columns(value: str) -> tuple[tuple[JavaPattern, tuple[str, ...]], ...]:
    """``schema.table:col1,col2;other\\.table:col`` (table part a regular expression)."""
    out = []
    for item in filter(None, (part.strip() for part in value.split(";"))):
        table, sep, columns = item.rpartition(":")
        names = tuple(c.strip() for c in columns.split(",") if c.strip())
        if not sep or not table or not names:
            raise ConfigurationError(
                f"message.key.columns: {item!r} is not of the form <schema>.<table>:<col>[,<col>]")
        out.append((compile_java(table, "message.key.columns"), names))
    return tuple(out)


#: JsonConverter's options (Kafka 4.x ``JsonConverterConfig``), under every converter prefix.
JSON_CONVERTER_OPTIONS: Final = frozenset({
    "schemas.enable", "schemas.cache.size", "decimal.format", "replace.null.with.default",
    "schema.content", "converter.type",
})
_CONVERTER_PREFIXES: Final = ("key.converter.", "value.converter.", "header.converter.",
                              "converter.")


def _check_converter_options(props: Mapping[str, str]) -> None:
    for name in props:
        prefix = next((p for p in _CONVERTER_PREFIXES if name.startswith(p)), None)
        if prefix is None:
            continue
        option = name[len(prefix):]
        if option not in JSON_CONVERTER_OPTIONS:
            import difflib  # noqa: PLC0415 - only for a misspelt option

            close = difflib.get_close_matches(option, sorted(JSON_CONVERTER_OPTIONS), n=1)
            hint = f"; did you mean {prefix}{close[0]}?" if close else ""
            raise ConfigurationError(f"unknown JsonConverter option {name!r}{hint}")


def _json_config(props: Mapping[str, str], role: str = "value") -> JsonConverterConfig:
    def option(name: str) -> str | None:
        for prefix in (f"{role}.converter.", "converter."):
            if prefix + name in props:
                return str(props[prefix + name]).strip()
        return None

    values: dict[str, Any] = {}
    if (v := option("schemas.enable")) is not None:
        values["schemas_enable"] = parse_bool(f"{role}.converter.schemas.enable", v)
    if (v := option("replace.null.with.default")) is not None:
        values["replace_null_with_default"] = parse_bool(
            f"{role}.converter.replace.null.with.default", v)
    if (v := option("decimal.format")) is not None:
        if v.upper() not in ("BASE64", "NUMERIC"):
            raise ConfigurationError(
                f"{role}.converter.decimal.format: unsupported value {v!r}; "
                "allowed: BASE64, NUMERIC")
        values["decimal_format"] = v.upper()
    return JsonConverterConfig(**values)
