"""What the tests of captures driven by signals share: the signalling table, the
connector properties naming it, and ``capture``/``decode`` run as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pgcdc_events.cli import main
from pgcdc_events.testing.cluster import TempCluster

SIGNAL_DDL = ("CREATE TABLE debezium_signal (id varchar(64) PRIMARY KEY, type varchar(32) "
              "NOT NULL, data varchar(2048) NULL)")
PROPS = ["-c", "signal.data.collection=public.debezium_signal"]


def signal_url(pg_cluster: TempCluster, pg_conn: Any) -> str:
    """The test database's URL, with its signalling table created."""
    database = pg_conn.run("SELECT current_database()")[0][0]
    pg_conn.run(SIGNAL_DDL)
    return f"postgresql://{pg_cluster.user}@{pg_cluster.host}:{pg_cluster.port}/{database}"


def capture(url: str, out: Path, *extra: str, slot: str = "s") -> int:
    """``pgcdc-events capture`` of slot ``slot`` and publication ``p`` into ``out``."""
    return main(["capture", "--dsn", url, "--slot", slot, "--publication", "p",
                 "--output", str(out), "--snapshot-mode", "no_data", "-q", *PROPS, *extra])


def decode(capture_file: Path, tmp_path: Path, *extra: str, workers: int = 1
           ) -> list[dict[str, Any]]:
    """``pgcdc-events decode`` of ``capture_file``: its records."""
    out = tmp_path / f"records-{len(list(tmp_path.iterdir()))}.jsonl"
    assert main(["decode", "--capture", str(capture_file), "--output", str(out), "-q",
                 "--workers", str(workers), *PROPS, *extra]) == 0
    return [json.loads(line) for line in out.read_text().splitlines()]
