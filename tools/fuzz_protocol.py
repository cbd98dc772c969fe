"""Fuzz the protocol layer: random, truncated, bit-flipped and spliced real messages.

Run: ``.venv/bin/python tools/fuzz_protocol.py [--cases 300000] [--seed N]``.
Seeds are every message of the committed real captures (tests/protocol/captures)
plus generated messages of every type. Each case is parsed with and without the
in-stream flag and fed to a reader; anything other than ProtocolError escaping,
or a case taking over a second, is a failure and is printed with its bytes.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings

from pgcdc_events.errors import ProtocolError
from pgcdc_events.protocol import PgOutputReader, encode_message, iter_capture, parse_message
from pgcdc_events.testing.protocol import messages

ROOT = Path(__file__).resolve().parent.parent


def seed_messages(generated: int = 2000) -> list[bytes]:
    """Real captured messages plus ``generated`` encoded hypothesis messages."""
    seeds: list[bytes] = []
    for path in sorted((ROOT / "tests" / "protocol" / "captures").glob("*.jsonl")):
        with open(path, encoding="utf-8") as fh:
            seeds.extend(row.data for row in iter_capture(fh))
    collected: list[bytes] = []

    @settings(max_examples=generated, database=None, suppress_health_check=list(HealthCheck))
    @given(messages())
    def collect(message: object) -> None:
        collected.append(encode_message(message))  # type: ignore[arg-type]

    collect()
    return seeds + collected


def mutate(rng: random.Random, seeds: list[bytes]) -> bytes:
    """One fuzz case derived from the seeds."""
    raw = bytearray(rng.choice(seeds))
    action = rng.randrange(5)
    if action == 0:  # truncate
        del raw[rng.randrange(len(raw) + 1):]
    elif action == 1:  # flip bits
        for _ in range(rng.randint(1, 4)):
            if raw:
                raw[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
    elif action == 2:  # overwrite with interesting bytes (lengths, sign bits)
        for _ in range(rng.randint(1, 3)):
            if raw:
                raw[rng.randrange(len(raw))] = rng.choice((0, 0x7F, 0x80, 0xFF, 1))
    elif action == 3:  # splice two messages
        other = rng.choice(seeds)
        raw = raw[: rng.randrange(len(raw) + 1)] + other[rng.randrange(len(other) + 1):]
    else:  # random bytes behind a valid type byte
        raw = raw[:1] + bytearray(rng.randbytes(rng.randrange(64)))
    return bytes(raw)


def run(cases: int, seed: int) -> int:
    rng = random.Random(seed)
    seeds = seed_messages()
    failures = 0
    counts = {"ok": 0, "ProtocolError": 0}
    started = time.perf_counter()
    reader = PgOutputReader()
    for i in range(cases):
        data = mutate(rng, seeds)
        for in_stream in (False, True):
            t0 = time.perf_counter()
            try:
                parse_message(data, in_stream=in_stream)
                counts["ok"] += 1
            except ProtocolError as exc:
                counts["ProtocolError"] += 1
                if exc.offset is None and data:
                    failures += 1
                    print(f"case {i}: ProtocolError without offset: {exc} {data.hex()}")
            except Exception as exc:
                failures += 1
                print(f"case {i}: {type(exc).__name__}: {exc}\n  bytes: {data.hex()}")
            if time.perf_counter() - t0 > 1.0:
                failures += 1
                print(f"case {i}: took over a second: {data.hex()}")
        try:
            reader.read(data)
        except ProtocolError:
            pass
        except Exception as exc:
            failures += 1
            print(f"case {i} (reader): {type(exc).__name__}: {exc}\n  bytes: {data.hex()}")
    elapsed = time.perf_counter() - started
    print(f"{cases} cases x 2 parses + reader, seeds {len(seeds)}, seed {seed}: "
          f"{counts['ok']} parsed, {counts['ProtocolError']} ProtocolError, "
          f"{failures} failures, {elapsed:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", type=int, default=300_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    sys.exit(run(args.cases, args.seed))
