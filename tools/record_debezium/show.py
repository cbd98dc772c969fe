#!/usr/bin/env python3
"""Print what Debezium emitted for one column (or table) of a golden recording, compactly.

    python tools/record_debezium/show.py tests/golden/types/default t_time c_date
    python tools/record_debezium/show.py tests/golden/types/default t_time          # every column
    python tools/record_debezium/show.py 'tests/golden/types/*' t_numeric c_money   # across modes

One line per change: op, the key, then before -> after for the column (JSON as
Debezium wrote it, values longer than --width cut), and the column's schema once.
"""

from __future__ import annotations

import argparse
import glob
import json
from pathlib import Path
from typing import Any


def _short(value: Any, width: int) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 3] + "..."


def show(recording: Path, table: str, column: str | None, width: int) -> None:
    print(f"== {recording}")
    schema_shown: set[str] = set()
    for line in (recording / "debezium.jsonl").read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if not rec["topic"].endswith("." + table):
            continue
        value = rec["value"]
        if value is None:
            print("   tombstone", _short(rec["key"]["payload"] if rec["key"] else None, width))
            continue
        payload = value["payload"]
        fields = next(f["fields"] for f in value["schema"]["fields"] if f["field"] == "after")
        columns = [column] if column else [f["field"] for f in fields]
        key = rec["key"]["payload"] if rec["key"] else None
        for col in columns:
            if col not in schema_shown:
                spec = next((f for f in fields if f["field"] == col), None)
                print(f"   schema {col}: {json.dumps(spec)}")
                schema_shown.add(col)
            before = (payload.get("before") or {}).get(col, "-") if payload.get("before") else "-"
            after = (payload.get("after") or {}).get(col, "-") if payload.get("after") else "-"
            print(f"   {payload['op']} {_short(key, 30)} {col}: "
                  f"{_short(before, width) if before != '-' else '-'} -> "
                  f"{_short(after, width) if after != '-' else '-'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recording", help="a tests/golden/<corpus>/<mode> directory (glob allowed)")
    parser.add_argument("table")
    parser.add_argument("column", nargs="?")
    parser.add_argument("--width", type=int, default=120)
    args = parser.parse_args()
    for path in sorted(glob.glob(args.recording)):
        show(Path(path), args.table, args.column, args.width)


if __name__ == "__main__":
    main()
