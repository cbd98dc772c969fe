"""Generate docs/types.md and docs/configuration.md from the code, so they cannot drift.

Run: ``.venv/bin/python tools/gen_docs.py`` (``--check`` exits non-zero when the
committed pages differ; the test suite runs that check). The type tables are the
type mapper's own output for each handling mode; the configuration reference lists
every property the Debezium PostgreSQL connector declares (read off its jars by
tools/debezium_properties) and what this library does with it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pgcdc_events.events.config import (
    APPLIED_PROPERTIES,
    CAPTURE_NOTES,
    DEFAULT_ONLY_PROPERTIES,
    PROPERTIES,
)
from pgcdc_events.events.connector_properties import CONNECTOR_PROPERTIES, DEBEZIUM_VERSION
from pgcdc_events.types.config import TypeConfig
from pgcdc_events.types.mapper import TypeMapper
from pgcdc_events.types.oids import OID_BY_NAME
from pgcdc_events.types.registry import PgType
from pgcdc_events.types.schema import Schema

ROOT = Path(__file__).resolve().parent.parent
TYPES_MD = ROOT / "docs" / "types.md"
CONFIG_MD = ROOT / "docs" / "configuration.md"


def _builtin(name: str) -> PgType:
    return TypeMapper().registry.resolve(OID_BY_NAME[name])


def _extension(name: str) -> PgType:
    return PgType(90000, "public", name, "base")


ENUM = PgType(90001, "public", "mood", "enum", enum_labels=("sad", "ok", "happy"))
DOMAIN = PgType(90002, "public", "price", "domain", base=_builtin("numeric"),
                base_type_modifier=(12 << 16 | 2) + 4)
COMPOSITE = PgType(90003, "public", "complex", "composite")


def _array(element: PgType) -> PgType:
    return PgType(90004, element.namespace, "_" + element.name, "array", element=element)


def _numeric(precision: int, scale: int) -> int:
    return ((precision << 16) | (scale & 0x7FF)) + 4


#: (label, type, type modifier) rows of the tables.
TYPES: list[tuple[str, PgType, int]] = [
    ("boolean", _builtin("bool"), -1),
    ("bit(1)", _builtin("bit"), 1),
    ("bit(8)", _builtin("bit"), 8),
    ("bit varying", _builtin("varbit"), -1),
    ("smallint", _builtin("int2"), -1),
    ("integer", _builtin("int4"), -1),
    ("bigint", _builtin("int8"), -1),
    ("oid", _builtin("oid"), -1),
    ("real", _builtin("float4"), -1),
    ("double precision", _builtin("float8"), -1),
    ("numeric(10,2)", _builtin("numeric"), _numeric(10, 2)),
    ("numeric", _builtin("numeric"), -1),
    ("money", _builtin("money"), -1),
    ("char(5)", _builtin("bpchar"), 9),
    ("varchar(10)", _builtin("varchar"), 14),
    ("text", _builtin("text"), -1),
    ("name", _builtin("name"), -1),
    ("citext", _extension("citext"), -1),
    ("bytea", _builtin("bytea"), -1),
    ("json", _builtin("json"), -1),
    ("jsonb", _builtin("jsonb"), -1),
    ("xml", _builtin("xml"), -1),
    ("uuid", _builtin("uuid"), -1),
    ("ltree", _extension("ltree"), -1),
    ("tsvector", _builtin("tsvector"), -1),
    ("date", _builtin("date"), -1),
    ("time(3)", _builtin("time"), 3),
    ("time", _builtin("time"), -1),
    ("timetz", _builtin("timetz"), -1),
    ("timestamp(3)", _builtin("timestamp"), 3),
    ("timestamp", _builtin("timestamp"), -1),
    ("timestamptz", _builtin("timestamptz"), -1),
    ("interval", _builtin("interval"), -1),
    ("inet", _builtin("inet"), -1),
    ("cidr", _builtin("cidr"), -1),
    ("macaddr", _builtin("macaddr"), -1),
    ("macaddr8", _builtin("macaddr8"), -1),
    ("int4range", _builtin("int4range"), -1),
    ("tstzrange", _builtin("tstzrange"), -1),
    ("point", _builtin("point"), -1),
    ("geometry (PostGIS)", _extension("geometry"), -1),
    ("geography (PostGIS)", _extension("geography"), -1),
    ("hstore", _extension("hstore"), -1),
    ("enum mood", ENUM, -1),
    ("domain price over numeric(12,2)", DOMAIN, -1),
    ("integer[]", _array(_builtin("int4")), -1),
    ("text[]", _array(_builtin("text")), -1),
    ("numeric(10,2)[]", _array(_builtin("numeric")), _numeric(10, 2)),
    ("timestamptz[]", _array(_builtin("timestamptz")), -1),
    ("mood[] (enum array)", _array(ENUM), -1),
    ("money[]", _array(_builtin("money")), -1),
    ("interval[]", _array(_builtin("interval")), -1),
    ("box", _builtin("box"), -1),
    ("composite type", COMPOSITE, -1),
]

#: Handling-mode dimensions: property, values, and the rows it affects.
DIMENSIONS: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [
    ("time.precision.mode", ("adaptive", "adaptive_time_microseconds", "connect", "isostring",
                             "microseconds", "nanoseconds"),
     ("date", "time(3)", "time", "timetz", "timestamp(3)", "timestamp", "timestamptz",
      "timestamptz[]")),
    ("decimal.handling.mode", ("precise", "double", "string"),
     ("numeric(10,2)", "numeric", "money", "domain price over numeric(12,2)", "numeric(10,2)[]")),
    ("interval.handling.mode", ("numeric", "string"), ("interval",)),
    ("hstore.handling.mode", ("json", "map"), ("hstore",)),
    ("binary.handling.mode", ("bytes", "base64", "base64-url-safe", "hex"), ("bytea",)),
]


def describe(schema: Schema | None) -> str:
    """A schema in one table cell: type, semantic name, parameters, children."""
    if schema is None:
        return "*dropped*"
    text = schema.type
    if schema.name:
        text += f" `{schema.name}`"
    params = {k: v for k, v in (schema.parameters or ()) if not k.startswith("__debezium")}
    if params:
        text += " (" + ", ".join(f"{k}={v}" for k, v in params.items()) + ")"
    if schema.type == "array" and schema.items is not None:
        text = f"array of {describe(schema.items)}"
        if not schema.items.optional:
            text += " (required items)"
    elif schema.type == "map" and schema.keys is not None and schema.values is not None:
        text = f"map {describe(schema.keys)} → {describe(schema.values)}"
    elif schema.type == "struct" and schema.fields:
        text += " {" + ", ".join(f"{f.name}: {f.schema.type}" for f in schema.fields) + "}"
    return text


def _schema(config: TypeConfig, pg_type: PgType, typmod: int) -> Schema | None:
    mapping = TypeMapper(config).value_mapping(pg_type, typmod)
    return None if mapping is None else mapping.schema


def types_page() -> str:
    """docs/types.md."""
    rows = {label: (t, m) for label, t, m in TYPES}
    lines = [
        "# Type mapping",
        "",
        "<!-- Generated by tools/gen_docs.py from the type mapper; do not edit by hand. -->",
        "",
        "How each PostgreSQL type becomes a Kafka Connect schema, as the Debezium PostgreSQL",
        "connector maps it (checked value by value against Debezium 3.6.3 in",
        "`tests/types/test_golden.py`; the exceptions are listed in",
        "[differences-from-debezium.md](differences-from-debezium.md)). Cells give the",
        "Connect type, the semantic schema name and its parameters. *dropped* means the",
        "column is left out of events, as Debezium leaves it out; set",
        "`include.unknown.datatypes=true` to get types Debezium does not know as bytes of",
        "their text, or `pgcdc.map.unsupported.types=true` to map the arrays Debezium",
        "drops with their element's mapping.",
        "",
        "## With the default configuration",
        "",
        "| PostgreSQL | Connect schema |",
        "|---|---|",
    ]
    config = TypeConfig()
    for label, t, m in TYPES:
        lines.append(f"| {label} | {describe(_schema(config, t, m))} |")
    for prop, values, affected in DIMENSIONS:
        lines += ["", f"## `{prop}`", "", "| PostgreSQL | " + " | ".join(f"`{v}`" for v in values)
                  + " |", "|---" * (len(values) + 1) + "|"]
        for label in affected:
            t, m = rows[label]
            cells = [describe(_schema(TypeConfig.from_properties({prop: v}), t, m))
                     for v in values]
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", ASSUMPTIONS]
    return "\n".join(lines) + "\n"


ASSUMPTIONS = """## Column defaults

With a catalog snapshot, a column's default expression becomes its schema default
by the connector's rules (`pgcdc_events.types.defaults`; recorded in
`tests/golden/events_defaults`). Only integers, `numeric`, floats, `bool`,
`bit`/`varbit`, `text`/`varchar`/`bpchar`, `json`/`jsonb`/`xml`, `uuid`, `date`,
`time`, `timestamp`, `timestamptz`, `interval` and enums get one; arrays, domains
and every other type get none, whatever the expression. The literal is the first
quoted string of the expression (`'a'::text || 'b'::text` gives `"a"`), or the
whole expression when it has no quote (`42`; `(1 + 2)` gives none); a `numeric`
literal with more fraction digits than the column's scale gives none. A function call
or `CURRENT_DATE`, `CURRENT_TIMESTAMP`, `LOCALTIMESTAMP`... gives the type's
placeholder: `0`, `false`, `""`, `"{}"`, the epoch, the nil UUID. An enum default
needs an unquoted type name (`'open'::"bug.status"` gives none); its doubled quotes
are undone (`'it''s'` gives `"it's"`, where the connector keeps `"it''s"`, a listed
difference).
The defaults matter twice more: JsonConverter's `replace.null.with.default` writes
them for nulls, and a NOT NULL column that PostgreSQL did not send (a delete's
before-image) gets its default, else the type's zero (`""` for a range, `"{}"` for
hstore).

## Without a catalog snapshot

pgoutput's Relation message carries each column's type OID and modifier, nothing
else. The connector reads the rest from the database; this library reads it from a
catalog snapshot (`pgcdc-events catalog`, `CatalogSnapshot`). Without one:

- **Optionality**: every column is optional, except the replica-identity columns of
  a REPLICA IDENTITY DEFAULT or USING INDEX table, which PostgreSQL requires to be
  NOT NULL.
- **Keys**: the key of a REPLICA IDENTITY DEFAULT table is its replica-identity
  columns, which are its primary key; tables with any other identity have no key
  (use `message.key.columns`).
- **Defaults**: no schema has a default.
- **Domains**: pgoutput names a domain by its base type, so a domain column maps as
  its base type without the domain's modifier (a domain over `numeric(12,2)` maps as
  a variable-scale numeric) and `__debezium.source.column.type` names the base type.
- **Enums and other user-defined types**: a Type message gives only a name, so an
  enum cannot be told from a composite type; both are unknown types (dropped, or
  bytes with `include.unknown.datatypes`). Extension types (hstore, ltree, citext,
  PostGIS geometry and geography) are recognised by name, as Debezium recognises them.

## Values that cannot be represented

- `numeric` `NaN`, `Infinity` and `-Infinity` under `decimal.handling.mode=precise`
  become `null`, as in Debezium (a Connect decimal has no such values); use `string`
  (`"NAN"`, `"POSITIVE_INFINITY"`, `"NEGATIVE_INFINITY"`) or `double` to keep them.
- Temporal infinities use Debezium's sentinels (see the type-family notes in
  `src/pgcdc_events/types/temporal.py`); a timestamp whose microseconds since 1970 do
  not fit in 64 bits becomes `null`.
- In a NOT NULL column those values have nowhere to go (`null` would break the
  required field, and Kafka's JsonConverter would refuse the record): they are
  conversion errors, as in Debezium.
- A value that does not parse as its type raises `ConversionError` naming the table,
  column, type and value; `event.converting.failure.handling.mode=warn` or `skip`
  replaces it by null instead, as Debezium does (counted in the metrics, and logged
  for `warn`), or in a NOT NULL column by the column's default or the type's zero,
  Debezium's fallback for a required field.
"""


def configuration_page() -> str:
    """docs/configuration.md."""
    lines = [
        "# Configuration reference",
        "",
        "<!-- Generated by tools/gen_docs.py; do not edit by hand. -->",
        "",
        "The decoder is configured with the Debezium PostgreSQL connector's own property",
        "names (`EventConfig.from_properties`, `pgcdc-events decode --config FILE -c k=v`).",
        "An existing connector configuration works as it is: properties that shape events",
        "are applied, the rest are accepted and reported as not applicable. An unknown or",
        "misspelled property, an unsupported value, or exclusive properties together raise",
        "`ConfigurationError` naming the property.",
        "",
        "## Applied",
        "",
        "| property | default | notes |",
        "|---|---|---|",
    ]
    for prop in sorted(PROPERTIES, key=lambda p: p.name):
        debezium = CONNECTOR_PROPERTIES.get(prop.name)
        note = prop.doc
        if debezium is not None and debezium.default != prop.default and "differs" not in note:
            note = (note + "; " if note else "") + f"Debezium's default: `{debezium.default}`"
        lines.append(f"| `{prop.name}` | `{prop.default}` | {note} |")
    lines += ["", "Patterned properties are applied too: `column.mask.with.N.chars`,",
              "`column.mask.hash.ALGORITHM.with.salt.SALT` (and `.v2.`),",
              "`column.truncate.to.N.chars`; and the JsonConverter options",
              "`schemas.enable`, `replace.null.with.default` and `decimal.format` under",
              "`key.converter.`, `value.converter.`, `header.converter.` or (for all three)",
              "`converter.`; `schemas.cache.size`, `schema.content` and `converter.type` are",
              "accepted (they do not change what is written); other option names are rejected.",
              "", "## Accepted with their default value only", "",
              "These change events in ways this library does not implement; any other value is",
              "rejected.", "", "| property | the only accepted value |", "|---|---|"]
    for name, value in sorted(DEFAULT_ONLY_PROPERTIES.items()):
        lines.append(f"| `{name}` | `{value}` |")
    lines += ["", f"## Not applicable (connector properties of Debezium {DEBEZIUM_VERSION})", "",
              "Accepted and reported in `EventConfig.not_applicable`: they concern",
              "connections, slots, snapshots, queues and the Kafka Connect runtime.", "",
              "| property | Debezium's description |", "|---|---|"]
    for name, prop in sorted(CONNECTOR_PROPERTIES.items()):
        if name in APPLIED_PROPERTIES or name in DEFAULT_ONLY_PROPERTIES or "(" in name:
            continue
        description = prop.description.replace("|", "\\|")
        if len(description) > 160:
            description = description[:157].rstrip() + "..."
        if name in CAPTURE_NOTES:
            description = (f"**applied by `pgcdc-events capture`**: {CAPTURE_NOTES[name]}."
                           f" Debezium: {description}")
        lines.append(f"| `{name}` | {description} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if the pages are stale")
    args = parser.parse_args()
    stale = []
    for path, text in ((TYPES_MD, types_page()), (CONFIG_MD, configuration_page())):
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(path.name)
        else:
            path.write_text(text)
            print(f"wrote {path}")
    if stale:
        print(f"stale: {', '.join(stale)}; run tools/gen_docs.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
