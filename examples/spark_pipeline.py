"""End to end with Spark: workload on PostgreSQL -> capture -> Spark decode -> latest state.

Run: ``.venv/bin/python examples/spark_pipeline.py`` (needs the PostgreSQL server
binaries, Java 17 and the ``spark`` extra). It starts a throwaway PostgreSQL,
runs a small workload on three tables while a pgoutput slot records it, decodes
the capture with Spark into one DataFrame of Debezium events per table, reduces
each to its latest state per key, and checks that it equals ``SELECT *`` of
the source table. The tests run the same functions (tests/spark/test_pipeline.py).
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pg8000.native

from pgcdc_events.events import EventConfig
from pgcdc_events.protocol import CaptureRow, Lsn
from pgcdc_events.spark import capture_dataframe, decode_capture, session
from pgcdc_events.spark.state import latest_state
from pgcdc_events.testing.cluster import TempCluster
from pgcdc_events.types.catalog import fetch_catalog

WORKLOAD_SETUP = [
    "CREATE TYPE tier AS ENUM ('free', 'pro', 'team')",
    """CREATE TABLE accounts (
        id serial PRIMARY KEY, name text NOT NULL, tier tier NOT NULL DEFAULT 'free',
        balance numeric(12, 2), opened date, tags text[], updated timestamptz)""",
    """CREATE TABLE orders (
        id bigint PRIMARY KEY, account_id int NOT NULL, amount numeric(10, 2) NOT NULL,
        paid boolean, placed timestamp, items jsonb)""",
    """CREATE TABLE ledger (
        account_id int, seq int, delta double precision, memo varchar(40),
        PRIMARY KEY (account_id, seq))""",
]


def workload(conn: Any) -> None:
    """Inserts, updates, deletes, a primary-key change, a truncate; several transactions."""
    for i in range(1, 41):
        conn.run("INSERT INTO accounts (name, tier, balance, opened, tags, updated) VALUES "
                 "(:n, CAST(:t AS tier), CAST(:b AS numeric), "
                 "DATE '2024-01-01' + CAST(:i AS int), CAST(:g AS text[]), "
                 "TIMESTAMPTZ '2024-01-01 00:00:00+00' + CAST(:i AS int) * INTERVAL '1 hour')",
                 n=f"account {i}", t=("free", "pro", "team")[i % 3], b=Decimal(i) * 10,
                 i=i, g=[f"t{i % 4}", "all"])
    conn.run("BEGIN")
    for i in range(1, 121):
        conn.run("INSERT INTO orders VALUES (:id, :a, :m, :p, TIMESTAMP '2024-02-01 08:00' "
                 "+ CAST(:k AS int) * INTERVAL '1 minute', CAST(:j AS jsonb))",
                 id=i, k=i, a=i % 40 + 1, m=Decimal(i) / 4, p=i % 2 == 0,
                 j=json.dumps({"sku": f"S-{i}", "qty": i % 5}))
    conn.run("COMMIT")
    for i in range(1, 61):
        conn.run("INSERT INTO ledger VALUES (:a, :s, :d, :m)", a=i % 10, s=i, d=i * 1.5,
                 m=f"entry {i}")
    conn.run("UPDATE accounts SET balance = balance + 1.25, updated = updated + INTERVAL "
             "'1 day' WHERE id % 3 = 0")
    conn.run("UPDATE orders SET paid = true WHERE id BETWEEN 10 AND 30")
    conn.run("DELETE FROM orders WHERE id % 7 = 0")
    conn.run("UPDATE accounts SET id = 1000 WHERE id = 5")
    conn.run("UPDATE accounts SET tags = NULL, tier = 'team' WHERE id = 7")
    conn.run("DELETE FROM accounts WHERE id IN (8, 9)")
    conn.run("TRUNCATE ledger")
    conn.run("INSERT INTO ledger VALUES (1, 1, -2.5, 'after truncate'), (2, 1, 0.5, NULL)")
    conn.run("UPDATE ledger SET delta = 3.75 WHERE account_id = 2")


CONFIG = {"topic.prefix": "shop", "skipped.operations": "none",
          "provide.transaction.metadata": "true"}


def decode(spark: Any, rows: Any, catalog: Any) -> Any:
    """The capture decoded by Spark (semantic flavour)."""
    config = EventConfig.from_properties(CONFIG)
    return decode_capture(capture_dataframe(spark, rows), config, catalog=catalog,
                          flavour="semantic")


def _plain(value: Any) -> Any:
    if hasattr(value, "tzinfo") and value.tzinfo is not None:
        return value.replace(tzinfo=None)  # Spark hands instants back in its UTC session zone
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return value


def compare(spark: Any, decoded: Any, conn: Any) -> dict[str, int]:
    """Assert that each table's latest state equals ``SELECT *``; rows compared per table."""
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    checked = {}
    for table in decoded.tables:
        name = table.split(".", 1)[1]
        state = latest_state(decoded.table(table)).collect()
        columns = list(state[0].asDict()) if state else []
        ours = sorted((tuple(_json(r[c]) for c in columns) for r in state), key=repr)
        select = ", ".join(f'"{c}"' for c in columns) or "*"
        theirs = sorted((tuple(_plain(v) for v in row)
                         for row in conn.run(f"SELECT {select} FROM {name}")), key=repr)
        assert ours == theirs, f"{table}: latest state differs from SELECT *"
        checked[table] = len(ours)
    return checked


def _json(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return json.dumps(json.loads(value), sort_keys=True)
        except ValueError:
            return value
    return value


def capture(conn: Any, slot: str) -> list[CaptureRow]:
    """Everything the slot decoded, as capture rows (the SQL interface; proto_version 2)."""
    rows = conn.run(
        "SELECT lsn::text, xid::text::bigint, data FROM pg_logical_slot_get_binary_changes("
        f"'{slot}', NULL, NULL, 'proto_version', '2', 'publication_names', 'example_pub')")
    return [CaptureRow(Lsn.parse(lsn), xid, bytes(data)) for lsn, xid, data in rows]


def main() -> int:
    spark = session("local[2]", quiet=True)
    spark.sparkContext.setLogLevel("ERROR")
    with TempCluster() as cluster:
        conn = pg8000.native.Connection(**cluster.dsn())
        for statement in WORKLOAD_SETUP:
            conn.run(statement)
        conn.run("CREATE PUBLICATION example_pub FOR ALL TABLES")
        conn.run("SELECT pg_create_logical_replication_slot('example', 'pgoutput')")
        workload(conn)
        decoded = decode(spark, capture(conn, "example"), fetch_catalog(conn))
        for table, count in compare(spark, decoded, conn).items():
            print(f"{table}: latest state = SELECT * ({count} rows)")
        conn.close()
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
