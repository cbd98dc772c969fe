"""Generated schemas and workloads for the differential referee (deterministic by seed).

``generate_case(seed, tables=50)`` draws a :class:`Case`: the SQL that creates a
schema (``setup``) and the SQL of a workload over it (``changes``), to be run on a
server that has a raw slot and a Debezium slot created between the two.

What is drawn (``random.Random(seed)``, nothing else): tables in several schemas
(quoted, mixed-case and non-ASCII names included) whose columns come from every
type family (:data:`FAMILIES`: numbers, text, binary, bit strings, network,
temporal with precisions, json/xml, ranges, geometric and PostGIS, hstore, ltree,
citext, tsvector, enums with quoted and colliding names, domains in several
schemas with and without defaults), arrays of each family the connector maps and
arrays of domains; every kind of default (:data:`DEFAULT_KINDS`); NOT NULL and
nullable columns; every replica identity with and without a primary key
(``DEFAULT``, ``FULL``, ``NOTHING``, ``USING INDEX``); partitioned tables; and a
workload of inserts (some leaving columns to their defaults, NULLs), updates
(key changes, partition moves, updates that leave TOASTed values unchanged),
deletes, truncates, transactional and non-transactional logical messages,
mid-stream ``ALTER TABLE ... ADD COLUMN``, and one large transaction.

Values come from per-family pools of SQL literals (edge values included: text
with ``\\u``, quotes and non-ASCII characters, extreme numbers, empty arrays).
They leave out the inputs that stop the connector itself (:data:`CONNECTOR_FAILURES`).
Column names are ``c<n>_<family>`` so a difference names its family.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

#: Inputs the generator never draws because the connector itself fails on them (the
#: golden corpora types_crash_* record each failure): numeric NaN and ±Infinity (with
#: and without a typmod) and a timetz whose UTC offset has seconds.
CONNECTOR_FAILURES = (
    "numeric 'NaN', 'Infinity', '-Infinity' (types_crash_numeric_*)",
    "timetz with an offset that has seconds, e.g. '12:00:00+05:30:15' (types_crash_timetz_seconds*)",
    "time.precision.mode=nanoseconds: a NOT NULL timestamp column missing from an old key (a "
    "delete or key change; DataException: null used for required field; events_crash_nanos_*)",
    "a NOT NULL bit(n)[] column (declared as one bit string, every value null; "
    "events_crash_bitarray_notnull)",
)

DEFAULT_KINDS = ("literal", "cast", "function", "current_date", "now", "current_timestamp",
                 "localtimestamp", "nextval", "arithmetic", "concat", "empty_array", "domain",
                 "enum")

Q = "'{}'".format


def _q(text: str) -> str:
    """An SQL string literal (E'' when it holds a backslash or control character)."""
    body = text.replace("'", "''")
    if "\\" in text or any(ord(c) < 0x20 for c in text):
        body = body.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t")
        return f"E'{body}'"
    return f"'{body}'"


TEXTS = ("", " ", "plain", "C:\\users\\bob", "\\usepackage{x}", "\\u00e9 literal", "it's",
         'say "hi"', "ünïcødé", "日本語", "emoji 🙂", "tab\there", "new\nline", "NULL", "null",
         "{brace}", "back\\slash", "trailing  ")


@dataclass(frozen=True)
class Family:
    """A type family: DDL of the column type, literal pool, default expressions."""

    name: str
    sql: str
    values: tuple[str, ...]
    #: default expressions of this family by kind (literal and cast are derived)
    defaults: dict[str, str] = field(default_factory=dict)
    array: bool = True
    key: bool = False
    toast: bool = False
    #: a literal can be written bare (numbers, booleans)
    bare: bool = False
    #: whether array literals of the pool's values are valid and not documented-divergent
    array_values: tuple[str, ...] | None = None


def _f(name: str, sql: str, values: tuple[str, ...], **kw: object) -> Family:
    return Family(name, sql, values, **kw)  # type: ignore[arg-type]


FAMILIES: tuple[Family, ...] = (
    _f("bool", "boolean", ("true", "false"), bare=True,
       defaults={"function": "(1 = 1)"}),
    _f("int2", "smallint", ("0", "-32768", "32767", "7"), bare=True, key=True,
       defaults={"arithmetic": "(2 * 3)"}),
    _f("int4", "integer", ("0", "-2147483648", "2147483647", "42"), bare=True, key=True,
       defaults={"function": "abs(-3)", "arithmetic": "(1 + 2)", "nextval": "nextval('ref_seq')"}),
    _f("int8", "bigint", ("0", "-9223372036854775808", "9223372036854775807", "123456789012"),
       bare=True, key=True, defaults={"nextval": "nextval('ref_seq')", "arithmetic": "(10 - 11)"}),
    _f("numeric", "numeric", ("0", "-1.5", "123456789.123456789", "0.000001",
                               "99999999999999999999.5", "1e-20"),
       bare=True, defaults={"arithmetic": "(1.5 * 2)"}),
    _f("numeric_p", "numeric(12,3)", ("0.000", "-1.5", "123456789.123", "0.001"), bare=True,
       key=True),
    _f("numeric_p0", "numeric(5,0)", ("0", "-99999", "12345"), bare=True),
    # (no 1.17549435e-38 nor subnormals: Java 17's Float.toString prints them with more
    # digits than the shortest, a documented difference the keys cannot tell apart;
    # recorded in events_referee and types)
    _f("float4", "real", ("0", "-1.5", "3.4e38", "0.1", "'NaN'", "'Infinity'", "'-Infinity'"),
       bare=True, defaults={"function": "pi()::real"}),
    _f("float8", "double precision", ("0", "-1.5", "1e308", "2.2250738585072014e-308", "0.1",
                                      "'NaN'", "'-Infinity'"), bare=True,
       defaults={"function": "random()"}),
    _f("money", "money", ("0", "-12.34", "1234567.89"), defaults={}, array=False),
    _f("oid", "oid", ("0", "4294967295", "42"), bare=True),
    _f("char1", '"char"', ("'a'", "'Z'", "'7'")),
    _f("name", "name", ("'a_name'", "'Ünï'"), array=False),
    _f("text", "text", tuple(_q(t) for t in TEXTS), key=True, toast=True,
       defaults={"function": "lower('ABC')", "concat": "'a' || 'b'"}),
    _f("varchar", "varchar(20)", tuple(_q(t) for t in TEXTS if len(t) <= 20), key=True,
       toast=False, defaults={"concat": "'x' || 'y'"}),
    _f("bpchar", "char(4)", ("'ab'", "'abcd'", "''", "'ü'"),
       defaults={"function": "upper('q')"}),
    _f("citext", "citext", tuple(_q(t) for t in TEXTS[:10]), array=False, toast=True),
    _f("json", "json", ("'{\"a\": 1, \"b\": [1, 2.5, \"x\"]}'", "'[]'", "'null'",
                        "E'\"\\\\u00e9\"'", "'{\"k\": \"C:\\\\\\\\users\"}'", "'3.25'"),
       toast=True),
    _f("jsonb", "jsonb", ("'{\"a\": 1, \"b\": [1, 2.5, \"x\"]}'", "'{}'", "'\"s\"'",
                          "E'\"\\\\u00e9\"'", "'{\"n\": null, \"t\": true}'"), toast=True),
    _f("xml", "xml", ("'<a>x</a>'", "'<b attr=\"1\"/>'"), array=False),
    _f("uuid", "uuid", ("'76019d1a-ad2e-4b22-96e9-1a6d6543c818'",
                        "'00000000-0000-0000-0000-000000000000'"), key=True,
       defaults={"function": "gen_random_uuid()"}),
    _f("bytea", "bytea", ("'\\x'", "'\\x00ff10'", "'\\x5c75'", "decode('68656c6c6f', 'hex')"),
       key=True, toast=True),
    _f("bit1", "bit(1)", ("B'0'", "B'1'"), array=False),
    _f("bit8", "bit(8)", ("B'10100101'", "B'00000000'"), array=False),
    _f("varbit", "varbit", ("B'101'", "B''", "B'1111000011110000111'"), array=False),
    _f("inet", "inet", ("'10.0.0.1'", "'::1'", "'192.168.1.0/24'")),
    _f("cidr", "cidr", ("'10.0.0.0/8'", "'2001:db8::/32'")),
    _f("macaddr", "macaddr", ("'08:00:2b:01:02:03'", "'ff:ff:ff:ff:ff:ff'")),
    _f("macaddr8", "macaddr8", ("'08:00:2b:01:02:03:04:05'",)),
    _f("tsvector", "tsvector", ("'a fat cat'", "'x:1A y:2B'", "''"), array=False),
    _f("ltree", "ltree", ("'a.b.c'", "'top'", "''"), array=False),
    _f("hstore", "hstore", ("'a=>1, b=>NULL'", "'\"k k\"=>\"v\"'", "''", "'x=>\"C:\\\\\\\\u\"'"),
       array=False),
    _f("date", "date", ("'2000-01-01'", "'1970-01-01'", "'2262-04-11'", "'0001-01-01'",
                        "'1582-10-15'", "'0044-03-15 BC'", "'9999-12-31'"), key=True,
       defaults={"current_date": "CURRENT_DATE", "function": "now()::date"},
       array_values=("'2000-01-01'", "'1970-01-01'", "'2262-04-11'")),
    _f("time", "time", ("'00:00:00'", "'12:34:56.789'", "'23:59:59.999999'"),
       defaults={"function": "LOCALTIME"}, array_values=("'00:00:00'", "'12:34:56.789'")),
    _f("time3", "time(3)", ("'00:00:00'", "'12:34:56.789'", "'23:59:59.5'"),
       defaults={"function": "CURRENT_TIME"}),
    # arrays without fractions: the connector drops them in timetz arrays (documented,
    # recorded in events_referee)
    _f("timetz", "timetz", ("'12:00:00+02'", "'23:59:59.5-05:30'", "'00:00:00+00'"),
       array_values=("'12:00:00+02'", "'23:59:59-05:30'", "'00:00:00+00'")),
    _f("timestamp", "timestamp", ("'2000-01-01 00:00:00'", "'1970-01-01 00:00:00.123456'",
                                  "'1900-01-01 12:00:00'", "'2100-12-31 23:59:59.999'"),
       defaults={"now": "now()", "localtimestamp": "LOCALTIMESTAMP",
                 "current_timestamp": "CURRENT_TIMESTAMP"}),
    _f("timestamp0", "timestamp(0)", ("'2000-01-01 00:00:00'", "'1999-12-31 23:59:59'"),
       defaults={"localtimestamp": "LOCALTIMESTAMP(0)"}),
    _f("timestamptz", "timestamptz", ("'2000-01-01 00:00:00+00'", "'1999-12-31 23:59:59.5-08'",
                                      "'2038-01-19 03:14:07.123456+00'"),
       defaults={"now": "now()", "current_timestamp": "CURRENT_TIMESTAMP"}),
    _f("timestamptz3", "timestamptz(3)", ("'2000-01-01 00:00:00.25+00'",
                                          "'2020-02-29 12:00:00+05:30'"),
       defaults={"now": "now()"}),
    _f("interval", "interval", ("'1 day'", "'1 year 2 mons 3 days 04:05:06'", "'-1 mons'",
                                "'00:00:00'"), defaults={"function": "make_interval(days => 1)"},
       array=False),
    _f("int4range", "int4range", ("'[1,10)'", "'empty'", "'(,5]'"), array=False),
    _f("int8range", "int8range", ("'[1,10000000000)'",), array=False),
    _f("numrange", "numrange", ("'[1.5,2.5]'", "'(,)'"), array=False),
    _f("daterange", "daterange", ("'[2000-01-01,2000-02-01)'",), array=False),
    _f("tsrange", "tsrange", ("'[2000-01-01 00:00,2000-01-02 00:00)'",), array=False),
    _f("tstzrange", "tstzrange", ("'[2000-01-01 00:00+00,2000-01-02 00:00+00)'",), array=False),
    _f("point", "point", ("'(1,2)'", "'(-1.5,0)'"), array=False),
    _f("geometry", "geometry", ("'SRID=4326;POINT(1 2)'", "'LINESTRING(0 0,1 1)'"), array=False),
    _f("geompt", "geometry(Point,4326)", ("'SRID=4326;POINT(1 2)'", "'SRID=4326;POINT(-3 4.5)'"),
       array=False),
    _f("geography", "geography", ("'SRID=4326;POINT(1 2)'",), array=False),
)
BY_NAME = {f.name: f for f in FAMILIES}

#: enums: (SQL type name, labels); quoted and colliding names
ENUMS = (
    ("ref_mood", ("sad", "ok", "it''s")),
    ('"bug.status"', ("open", "closed")),
    ("ref_s1.color", ("red", "blue")),
    ("ref_s2.color", ("green", "red")),
    ('"Mixed Enum"', ("A", "b c")),
)
#: domains: (SQL name, base family, domain default or None)
DOMAINS = (
    ("ref_dint", "int4", None),
    ("ref_dint_def", "int4", "5"),
    ("ref_s1.ref_dint", "int4", None),
    ("ref_s2.ref_dint", "int4", "7"),
    ("ref_dtext", "text", None),
    ("ref_dnum", "numeric_p", None),
    ("ref_s1.dvc", "varchar", "'dv'"),
)

PRELUDE = """SET client_min_messages = warning;
CREATE SCHEMA IF NOT EXISTS ref_s1;
CREATE SCHEMA IF NOT EXISTS ref_s2;
CREATE SCHEMA IF NOT EXISTS "Sales Ö";
CREATE SCHEMA IF NOT EXISTS ref_excluded;
CREATE SEQUENCE ref_seq;
"""
SCHEMAS = ("public", "public", "public", "ref_s1", "ref_s2", '"Sales Ö"', "ref_excluded")


@dataclass
class Column:
    name: str
    sql: str
    family: str
    #: value pool (SQL literals)
    pool: tuple[str, ...]
    not_null: bool = False
    default: str | None = None
    default_kind: str | None = None


@dataclass
class Table:
    schema: str
    name: str
    columns: list[Column]
    pk: list[str]
    identity: str  # default, full, nothing, index
    index_cols: list[str] = field(default_factory=list)
    partitioned: bool = False
    toast: str | None = None
    rid: str | None = None
    dropped: bool = False

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"

    @property
    def can_change(self) -> bool:
        """Whether UPDATE/DELETE are allowed (the table has a replica identity)."""
        return self.identity == "full" or (self.identity == "default" and bool(self.pk)) or (
            self.identity == "index")


@dataclass
class Case:
    seed: int
    tables: list[Table]
    setup: str
    changes: str
    #: statistics of what was drawn (families, default kinds, identities, features)
    stats: dict[str, dict[str, int]]


def _ident(schema: str, name: str) -> str:
    return f'{schema}."{name}"'


class _Gen:
    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.stats: dict[str, dict[str, int]] = {"family": {}, "default": {}, "identity": {},
                                                   "feature": {}}

    def count(self, kind: str, name: str) -> None:
        self.stats[kind][name] = self.stats[kind].get(name, 0) + 1

    # ------------------------------------------------------------------ columns
    def column(self, index: int, key: bool = False) -> Column:
        rng = self.rng
        roll = rng.random()
        if key:
            fam = rng.choice([f for f in FAMILIES if f.key])
            self.count("family", fam.name)
            return Column(f"c{index}_{fam.name}", fam.sql, fam.name, fam.values, not_null=True)
        if roll < 0.08:
            sql, labels = rng.choice(ENUMS)
            pool = tuple(_q(label.replace("''", "'")) for label in labels)
            col = Column(f"c{index}_enum", sql, "enum", pool)
            if rng.random() < 0.4:
                col.default, col.default_kind = rng.choice(pool), "enum"
                if "''" in col.default:
                    # the connector keeps the doubled quote of this default (documented):
                    # the name says so, so that the documented rows can name the column
                    col.name += "_dq"
            if rng.random() < 0.2:
                col = Column(f"c{index}_enum_arr", sql + "[]", "enum[]",
                             (*(f"ARRAY[{v}]::{sql}[]" for v in pool), f"'{{}}'::{sql}[]"))
        elif roll < 0.16:
            sql, base, dom_default = rng.choice(DOMAINS)
            fam = BY_NAME[base]
            if rng.random() < 0.25:
                col = Column(f"c{index}_domain_arr", sql + "[]", "domain[]",
                             tuple(f"ARRAY[{v}]::{sql}[]" for v in fam.values[:3]))
            else:
                col = Column(f"c{index}_domain", sql, "domain", fam.values)
                if dom_default is not None:
                    col.default_kind = "domain"  # the domain's own default applies
                elif rng.random() < 0.5:
                    value = rng.choice(fam.values)
                    col.default = f"({value})::{sql}" if rng.random() < 0.5 else value
                    col.default_kind = "domain"
        else:
            fam = rng.choice(FAMILIES)
            # arrays of every family: those the connector has no converter for are left
            # out by both sides (``Family.array`` only says whether it maps them)
            is_array = rng.random() < 0.2
            if is_array:
                elements = fam.array_values or fam.values
                pool = (*(f"ARRAY[{v}]::{fam.sql}[]" for v in elements),
                        f"ARRAY[{elements[0]}, {elements[-1]}]::{fam.sql}[]",
                        f"'{{}}'::{fam.sql}[]")
                if fam.name not in ("ltree", "tsvector"):
                    # (an ltree[] or tsvector[] with a NULL element is null to the
                    # connector, documented in types and events_referee; in a NOT NULL
                    # column it stops the connector)
                    pool = (*pool, f"ARRAY[{elements[0]}, NULL, {elements[-1]}]::{fam.sql}[]")
                col = Column(f"c{index}_{fam.name}_arr", fam.sql + "[]", fam.name + "[]", pool)
                if rng.random() < 0.3:
                    col.default, col.default_kind = (("'{}'", "empty_array") if rng.random() < 0.6
                                                     else (pool[0], "literal"))
            else:
                col = Column(f"c{index}_{fam.name}", fam.sql, fam.name, fam.values)
                if rng.random() < 0.45:
                    kinds = ["literal", "cast", *fam.defaults]
                    kind = rng.choice(kinds)
                    value = rng.choice(fam.values)
                    if kind == "literal":
                        col.default = value
                    elif kind == "cast":
                        if value.startswith(("'", "E'")):
                            col.default = f"{value}::{fam.sql}"
                        elif fam.bare:
                            col.default = f"'{value}'::{fam.sql}"
                        else:
                            col.default = f"({value})::{fam.sql}"
                    else:
                        col.default = fam.defaults[kind]
                    col.default_kind = kind
        if col.default_kind:
            self.count("default", col.default_kind)
        self.count("family", col.family)
        # (a NOT NULL bit(n)[] stops the connector: CONNECTOR_FAILURES)
        col.not_null = rng.random() < 0.25 and col.family not in ("bit1[]", "bit8[]")
        return col

    # ------------------------------------------------------------------ tables
    def table(self, index: int) -> Table:
        rng = self.rng
        schema = rng.choice(SCHEMAS)
        name = rng.choice([f"t{self.seed}_{index}", f"T{self.seed} Mixed_{index}",
                           f"tab_{self.seed}_{index}_ü"]) if rng.random() < 0.2 else (
            f"t{self.seed}_{index}")
        n_keys = rng.choice([0, 1, 1, 1, 2])
        columns = [self.column(i, key=True) for i in range(n_keys)]
        columns += [self.column(i) for i in range(n_keys, n_keys + rng.randint(2, 9))]
        pk = [c.name for c in columns[:n_keys]]
        identity = rng.choice(["default", "default", "full", "nothing", "index"])
        ddl = rng.random()
        if pk and ddl < 0.04:
            name += "_rn"  # renamed mid-stream (documented rows name it by this suffix)
        elif ddl > 0.97:
            name += "_dc"  # dropped and recreated mid-stream
        table = Table(schema, name, columns, pk, identity)
        if not pk:
            # a row id (not a key) for the WHERE clauses of updates and deletes
            columns.append(Column(f"c{len(columns)}_rid", "integer", "int4", ()))
            table.index_cols = []
            table.rid = columns[-1].name
        # The connector fails (DataException: null used for required field) when a NOT
        # NULL timestamp is missing from an old key (a delete, the delete half of a key
        # change) under time.precision.mode=nanoseconds (events_crash_nanos_*): never draw
        # a NOT NULL timestamp outside the key.
        for c in columns[n_keys:]:
            if c.family in ("timestamp", "timestamp0") and c.not_null:
                c.not_null = False
        if identity == "index":
            # a unique index on NOT NULL columns: a key column or a fresh one
            idx = Column(f"c{len(columns)}_ukey", "integer", "int4", BY_NAME["int4"].values,
                         not_null=True)
            columns.append(idx)
            table.index_cols = [idx.name]
        if rng.random() < 0.25:
            toast = Column(f"c{len(columns)}_toast", "text", "text", ())
            columns.append(toast)
            table.toast = toast.name
            self.count("feature", "toast")
        self.count("identity", f"{identity}{'' if pk else '-nopk'}")
        return table

    def create_sql(self, t: Table) -> str:
        parts = []
        for c in t.columns:
            col = f'"{c.name}" {c.sql}'
            if c.not_null:
                col += " NOT NULL"
            if c.default is not None:
                col += f" DEFAULT {c.default}"
            parts.append(col)
        if t.pk:
            parts.append("PRIMARY KEY (" + ", ".join(f'"{k}"' for k in t.pk) + ")")
        q = _ident(t.schema, t.name)
        sql = [f"CREATE TABLE {q} ({', '.join(parts)});"]
        if t.toast:
            sql.append(f'ALTER TABLE {q} ALTER COLUMN "{t.toast}" SET STORAGE EXTERNAL;')
        if t.identity == "index":
            index = f"{t.name[:40]}_uidx"
            sql.append(f'CREATE UNIQUE INDEX "{index}" ON {q} ('
                       + ", ".join(f'"{c}"' for c in t.index_cols) + ");")
            sql.append(f'ALTER TABLE {q} REPLICA IDENTITY USING INDEX "{index}";')
        elif t.identity != "default":
            sql.append(f"ALTER TABLE {q} REPLICA IDENTITY {t.identity.upper()};")
        return "\n".join(sql)

    # ------------------------------------------------------------------ rows
    def row(self, t: Table, n: int, *, all_columns: bool = False) -> dict[str, str]:
        """Values for an INSERT: key columns from ``n``; some columns left to defaults."""
        rng = self.rng
        row: dict[str, str] = {}
        for c in t.columns:
            if c.name in t.pk or c.name in t.index_cols or c.name == t.rid:
                row[c.name] = self.key_value(c, n)
            elif c.name == t.toast:
                row[c.name] = f"repeat({_q(f'toast{n} ')}, {rng.randint(400, 1500)})"
            elif not all_columns and (c.default is not None or c.default_kind == "domain") and (
                    rng.random() < 0.4):
                continue
            elif not c.not_null and rng.random() < 0.15:
                row[c.name] = "NULL"
            else:
                row[c.name] = rng.choice(c.pool)
        return row

    @staticmethod
    def key_value(c: Column, n: int) -> str:
        fam = c.family
        if fam in ("int2", "int4", "int8", "numeric_p"):
            return str(n)
        if fam in ("text", "varchar"):
            return _q(f"k{n}")
        if fam == "uuid":
            return f"'00000000-0000-0000-0000-{n:012d}'"
        if fam == "date":
            return f"DATE '2000-01-01' + {n}"
        if fam == "bytea":
            return f"'\\x{n:08x}'"
        raise ValueError(fam)

    def insert(self, t: Table, row: dict[str, str]) -> str:
        q = _ident(t.schema, t.name)
        if not row:
            return f"INSERT INTO {q} DEFAULT VALUES;"
        cols = ", ".join(f'"{k}"' for k in row)
        return f"INSERT INTO {q} ({cols}) VALUES ({', '.join(row.values())});"

    def where(self, t: Table, row: dict[str, str]) -> str:
        keys = t.pk or t.index_cols or [t.rid or ""]
        return " AND ".join(f'"{k}" = {row[k]}' for k in keys)

    # ------------------------------------------------------------------ workload
    def workload(self, tables: list[Table]) -> list[str]:
        rng = self.rng
        stmts: list[str] = []
        live: dict[int, list[dict[str, str]]] = {id(t): [] for t in tables}
        counter = {id(t): 0 for t in tables}
        ops: list[tuple[str, Table]] = []
        for t in tables:
            ops += [("insert", t)] * rng.randint(2, 4)
            if t.can_change:
                ops += [("update", t)] * rng.randint(1, 3) + [("delete", t)] * rng.randint(0, 1)
                if (t.pk or t.index_cols) and not t.name.endswith(("_rn", "_dc")):
                    # (a key change of a table the connector cannot find by name is one
                    # update to it, two events to us: every later total_order of its
                    # transaction would differ; the class is documented by its key)
                    ops.append(("rekey", t))
                if t.toast:
                    ops.append(("toast_update", t))
            if rng.random() < 0.1:
                ops.append(("truncate", t))
            if rng.random() < 0.08:
                ops.append(("add_column", t))
            if t.name.endswith("_rn"):
                ops.append(("rename", t))
            if t.name.endswith("_dc"):
                ops.append(("recreate", t))
        for _ in range(max(2, len(tables) // 8)):
            ops.append(("message", tables[0]))
        # inserts first per table keeps updates meaningful; the rest shuffled
        first = [op for op in ops if op[0] == "insert"]
        rest = [op for op in ops if op[0] != "insert"]
        rng.shuffle(first)
        rng.shuffle(rest)
        pending: list[str] = []

        def flush() -> None:
            if not pending:
                return
            if len(pending) > 1 or rng.random() < 0.3:
                stmts.append("BEGIN;\n" + "\n".join(pending) + "\nCOMMIT;")
            else:
                stmts.append(pending[0])
            pending.clear()

        for op, t in first + rest:
            q = _ident(t.schema, t.name)
            rows = live[id(t)]
            if t.dropped:
                continue
            if op == "insert":
                counter[id(t)] += 1
                row = self.row(t, counter[id(t)])
                rows.append(row)
                pending.append(self.insert(t, row))
                self.count("feature", "insert")
            elif op in ("update", "toast_update") and rows:
                row = rng.choice(rows)
                choices = [c for c in t.columns if c.name not in t.pk and c.name not in
                           t.index_cols and c.name not in (t.toast, t.rid) and c.pool]
                if not choices:
                    continue
                c = rng.choice(choices)
                value = rng.choice(c.pool) if c.not_null or rng.random() < 0.85 else "NULL"
                pending.append(f'UPDATE {q} SET "{c.name}" = {value} WHERE {self.where(t, row)};')
                row[c.name] = value
                self.count("feature", op)
            elif op == "rekey" and rows:
                row = rng.choice(rows)
                keys = t.pk or t.index_cols
                counter[id(t)] += 1
                kcol = next(c for c in t.columns if c.name == keys[0])
                new = self.key_value(kcol, counter[id(t)] + 1000)
                pending.append(f'UPDATE {q} SET "{keys[0]}" = {new} WHERE {self.where(t, row)};')
                row[keys[0]] = new
                self.count("feature", "key_change")
            elif op == "delete" and rows:
                row = rows.pop(rng.randrange(len(rows)))
                pending.append(f"DELETE FROM {q} WHERE {self.where(t, row)};")
                self.count("feature", "delete")
            elif op == "truncate":
                pending.append(f"TRUNCATE {q};")
                rows.clear()
                self.count("feature", "truncate")
            elif op == "rename":
                flush()
                stmts.append(f'ALTER TABLE {q} RENAME TO "{t.name}2";')
                t.name += "2"
                self.count("feature", "rename_table")
            elif op == "recreate":
                flush()
                stmts.append(f"DROP TABLE {q};\nCREATE TABLE {q} (id integer PRIMARY KEY, v text);"
                             f"\nINSERT INTO {q} VALUES (1, 'recreated');")
                t.dropped = True
                self.count("feature", "drop_create")
            elif op == "add_column":
                flush()
                name = f"c{len(t.columns)}_added"
                stmts.append(f'ALTER TABLE {q} ADD COLUMN "{name}" integer DEFAULT 11;')
                t.columns.append(Column(name, "integer", "int4", ("1", "2")))
                self.count("feature", "alter_add_column")
            elif op == "message":
                transactional = rng.random() < 0.5
                content = rng.choice(["hello", "C:\\users\\x", "ünï", ""])
                sql = (f"SELECT pg_logical_emit_message({str(transactional).lower()}, "
                       f"'ref.{self.seed}', {_q(content)});")
                if transactional:
                    pending.append(sql)
                else:
                    flush()
                    stmts.append(sql)
                self.count("feature", "message_tx" if transactional else "message_nontx")
            if len(pending) >= rng.randint(1, 4):
                flush()
        flush()
        return stmts


def _partitioned(gen: _Gen, index: int) -> tuple[Table, str, list[str]]:
    """A table partitioned by range over ``k``, and a workload that moves rows across."""
    seed = gen.seed
    name = f"p{seed}_{index}"
    extra = gen.column(2)
    extra.not_null = False
    t = Table("public", name, [
        Column("c0_int4", "integer", "int4", (), not_null=True),
        Column("c1_k", "integer", "int4", (), not_null=True), extra], ["c0_int4", "c1_k"],
        "default", partitioned=True)
    col = f'"{extra.name}" {extra.sql}' + (f" DEFAULT {extra.default}" if extra.default else "")
    setup = (f"CREATE TABLE {name} (c0_int4 integer NOT NULL, c1_k integer NOT NULL, {col}, "
             f"PRIMARY KEY (c0_int4, c1_k)) PARTITION BY RANGE (c1_k);\n"
             f"CREATE TABLE {name}_a PARTITION OF {name} FOR VALUES FROM (0) TO (100);\n"
             f"CREATE TABLE {name}_b PARTITION OF {name} FOR VALUES FROM (100) TO (200);")
    v = gen.rng.choice(extra.pool)
    changes = [
        f'INSERT INTO {name} (c0_int4, c1_k, "{extra.name}") VALUES (1, 10, {v}), (2, 150, NULL);',
        f"UPDATE {name} SET c1_k = 120 WHERE c0_int4 = 1;",
        f'UPDATE {name} SET "{extra.name}" = {gen.rng.choice(extra.pool)} WHERE c0_int4 = 2;',
        f"DELETE FROM {name} WHERE c0_int4 = 2;",
    ]
    gen.count("feature", "partitioned")
    return t, setup, changes


def _large(seed: int, rows: int) -> tuple[str, list[str]]:
    name = f"big{seed}"
    setup = f"CREATE TABLE {name} (id integer PRIMARY KEY, v text, n numeric(10,2));"
    changes = [f"BEGIN;\nINSERT INTO {name} SELECT g, 'row ' || g, g / 7.0 "
               f"FROM generate_series(1, {rows}) g;\nUPDATE {name} SET v = v || '!' "
               f"WHERE id % 97 = 0;\nCOMMIT;"]
    return setup, changes


def types_sql() -> str:
    out = []
    for name, labels in ENUMS:
        out.append(f"CREATE TYPE {name} AS ENUM (" + ", ".join(f"'{lb}'" for lb in labels) + ");")
    for name, base, default in DOMAINS:
        out.append(f"CREATE DOMAIN {name} AS {BY_NAME[base].sql}"
                   + (f" DEFAULT {default}" if default else "") + ";")
    return "\n".join(out)


def generate_case(seed: int, tables: int = 50, *, large_rows: int = 1500,
                  partitioned: int = 2) -> Case:
    """A schema of ``tables`` generated tables (plus ``partitioned`` partitioned ones and
    a table for one large transaction) and a workload over it; same seed, same case."""
    gen = _Gen(seed)
    made = [gen.table(i) for i in range(tables)]
    setup = [PRELUDE, types_sql(), *(gen.create_sql(t) for t in made)]
    changes = gen.workload(made)
    for i in range(partitioned):
        t, sql, work = _partitioned(gen, i)
        made.append(t)
        setup.append(sql)
        at = gen.rng.randrange(len(changes) + 1)
        changes[at:at] = work
    if large_rows:
        sql, work = _large(seed, large_rows)
        setup.append(sql)
        changes[len(changes) // 2:len(changes) // 2] = work
        gen.count("feature", "large_transaction")
    return Case(seed, made, "\n".join(setup) + "\n", "\n".join(changes) + "\n", gen.stats)


FilterFn = Callable[[Case], bool]

if __name__ == "__main__":  # pragma: no cover - print one case
    import sys

    case = generate_case(int(sys.argv[1]) if len(sys.argv) > 1 else 1,
                         int(sys.argv[2]) if len(sys.argv) > 2 else 5)
    print(case.setup)
    print("-- @changes")
    print(case.changes)
