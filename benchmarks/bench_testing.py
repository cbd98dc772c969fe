"""How long a property test over generated multi-table workloads takes, and where it goes.

Run: ``.venv/bin/python benchmarks/bench_testing.py [--examples 200]``. One process,
one core, three runs of each over the same hypothesis seed:

- *generate*: drawing ``--examples`` workloads of two or three generated tables
  (streamed transactions included), nothing else: the strategies' own cost;
- *property test*: the same examples, each decoded into Debezium records and
  checked against the generated final state (what ``docs/testing.md`` promises);
- the peer, *decode only*: the event decoder alone over the byte streams of those
  examples (captured first, untimed), to show what generation adds to the decoding
  a test of real captures would do anyway.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

from hypothesis import Phase, given, seed, settings

from pgcdc_events.testing import Workload, connect_rows
from pgcdc_events.testing.strategies import table_sets, workloads

PROPS = {"topic.prefix": "t", "skipped.operations": "none"}
PLACEHOLDER = "__debezium_unavailable_value"


def _text(obj: object) -> str:
    return json.dumps(obj, sort_keys=True, default=repr)


def _property(examples: int, body: Callable[[Workload], None]) -> Callable[[], None]:
    @seed(20261122)
    @settings(max_examples=examples, deadline=None, database=None, phases=[Phase.generate])
    @given(workloads(table_sets(min_tables=2, max_tables=3), streaming=True))
    def run(w: Workload) -> None:
        body(w)

    return run


def _best(label: str, fn: Callable[[], None], runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    best = min(times)
    print(f"  {label:<15} best of {runs}: {best:6.2f}s  (runs: "
          + ", ".join(f"{t:.2f}" for t in times) + ")")
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=200)
    args = parser.parse_args()

    kept: list[Workload] = []

    def check(w: Workload) -> None:
        state = connect_rows(w.records(PROPS), placeholder=lambda v: v == PLACEHOLDER)
        if _text(state) != _text(w.connect_state(PROPS)):
            raise SystemExit(f"decoded state differs from the generated state:\n{w.script()}")

    _property(args.examples, kept.append)()
    streams = [(w, w.capture()) for w in kept]
    count = len(kept)

    def decode_only() -> None:
        for w, rows in streams:
            w.decoder(PROPS).feed_rows(rows)

    print(f"{count} workloads of 2-3 tables, streaming on, "
          f"{sum(len(r) for _, r in streams)} messages in all")
    generate = _best("generate", _property(args.examples, lambda w: None))
    prop = _best("property test", _property(args.examples, check))
    decode = _best("decode only", decode_only)
    print(f"property test / decode only: {prop / decode:.1f}x; "
          f"generation is {generate / prop:.0%} of the property test")


if __name__ == "__main__":
    main()
