"""Regenerate examples/demo-capture.jsonl from examples/demo.sql on a throwaway server."""

from __future__ import annotations

from pathlib import Path

import pg8000.native

from pgcdc_events.protocol import CaptureRow, Lsn, write_capture
from pgcdc_events.testing.cluster import TempCluster
from pgcdc_events.types.catalog import fetch_catalog

ROOT = Path(__file__).resolve().parent.parent


def statements(sql: str) -> tuple[list[str], list[str]]:
    """Split the demo SQL into its setup and change statements (one per ';' line end)."""
    setup, _, changes = sql.partition("-- @changes")

    def split(part: str) -> list[str]:
        lines = [line for line in part.splitlines() if not line.startswith("--")]
        return [s.strip() for s in "\n".join(lines).split(";\n") if s.strip().rstrip(";")]

    return split(setup), split(changes)


def main() -> None:
    setup, changes = statements((ROOT / "examples" / "demo.sql").read_text())
    with TempCluster() as cluster:
        con = pg8000.native.Connection(**cluster.dsn())
        for stmt in setup:
            con.run(stmt)
        con.run("CREATE PUBLICATION demo_pub FOR ALL TABLES")
        con.run("SELECT pg_create_logical_replication_slot('demo', 'pgoutput')")
        for stmt in changes:
            con.run(stmt.rstrip(";"))
        rows = con.run(
            "SELECT lsn::text, xid::text, data FROM pg_logical_slot_peek_binary_changes('demo',"
            " NULL, NULL, 'proto_version', '1', 'publication_names', 'demo_pub',"
            " 'messages', 'true')"
        )
        fetch_catalog(con).filtered(["public"]).save(str(ROOT / "examples" / "demo-catalog.json"))
        out = ROOT / "examples" / "demo-capture.jsonl"
        with open(out, "w", encoding="utf-8") as fh:
            count = write_capture(
                (CaptureRow(Lsn.parse(lsn), int(xid), bytes(data)) for lsn, xid, data in rows), fh
            )
        print(f"wrote {count} messages to {out}")


if __name__ == "__main__":
    main()
