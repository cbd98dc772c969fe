"""Fuzz the protocol and event layers: single messages, and message sequences.

Run: ``.venv/bin/python tools/fuzz_protocol.py [--cases 1000000] [--family messages|sequences]
[--seed N] [--workers 2]``. ``--cases`` is per family.

``messages``: random, truncated, bit-flipped and spliced real messages (every message
of the committed real captures in tests/protocol/captures, plus generated messages
of every type, pgoutput's and YugabyteDB yboutput's), each parsed with and without the
in-stream flag, in pgoutput and in yboutput mode, and fed to a long-lived reader of
each mode. Only ProtocolError may escape, with the message type and offset. The two
modes must agree: what pgoutput mode parses, yboutput mode parses to the same message,
and what only yboutput mode parses is a Relation with replica identity ``c`` (CHANGE).
Every message that parses must re-encode to exactly its bytes.

``yboutput-sequences``: the same mutations over yboutput streams of generated YugabyteDB
workloads (every replica identity), fed to a yboutput reader and a YugabyteEventDecoder;
ConfigurationError may escape too, when it names the table it refuses (no primary key).

``sequences``: windows of the real capture sessions, reordered, duplicated, cut
(missing Begin/Commit, missing Relation), with a change to an unknown relation,
a message spliced in from another session or a mutated message in the middle,
fed to a PgOutputReader and to an EventDecoder (several connector configurations)
whose records are serialized as JsonConverter JSON. Only ProtocolError (with
message type and offset) and ConversionError (with table and column) may escape;
feeding goes on after each error.

A case taking over a second of CPU is a failure too; failures print with their bytes.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import struct
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pgcdc_events.errors import ConfigurationError, ConversionError, PgCdcError, ProtocolError
from pgcdc_events.events import EventConfig, EventDecoder, JsonRecordWriter
from pgcdc_events.events.yugabyte import YugabyteEventDecoder
from pgcdc_events.protocol import (
    PgOutputReader,
    Relation,
    encode_message,
    iter_capture,
    parse_message,
)

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "tests" / "protocol" / "captures"
SLOW_SECONDS = 1.0


def capture_sessions() -> list[list[bytes]]:
    """The committed real captures, one list of message bytes per capture."""
    sessions = []
    for path in sorted(CAPTURES.glob("*.jsonl")):
        with open(path, encoding="utf-8") as fh:
            sessions.append([row.data for row in iter_capture(fh)])
    return sessions


def seed_messages(generated: int = 2000) -> list[bytes]:
    """Real captured messages plus ``generated`` encoded hypothesis messages."""
    from hypothesis import HealthCheck, given, settings

    from pgcdc_events.testing.protocol import messages

    seeds = [m for session in capture_sessions() for m in session]
    collected: list[bytes] = []

    @settings(max_examples=generated, database=None, suppress_health_check=list(HealthCheck))
    @given(messages())
    def collect(message: object) -> None:
        collected.append(encode_message(message))  # type: ignore[arg-type]

    @settings(max_examples=max(generated // 4, 1), database=None,
              suppress_health_check=list(HealthCheck))
    @given(messages(yboutput=True))
    def collect_yb(message: object) -> None:
        collected.append(encode_message(message, yboutput=True))  # type: ignore[arg-type]

    collect()
    collect_yb()
    return seeds + collected


def mutate(rng: random.Random, seeds: list[bytes]) -> bytes:
    """One fuzz case derived from the seeds."""
    raw = bytearray(rng.choice(seeds))
    action = rng.randrange(6)
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
    elif action == 4 and len(raw) > 5:  # a length or count field set to something huge
        pos = rng.randrange(1, len(raw) - 3)
        raw[pos:pos + 4] = struct.pack(">i", rng.choice((2**31 - 1, -1, 32767, 10**9, 65535)))
    else:  # random bytes behind a valid type byte
        raw = raw[:1] + bytearray(rng.randbytes(rng.randrange(64)))
    return bytes(raw)


def _context_problem(exc: PgCdcError, data: bytes) -> str | None:
    """What context an escaped library error lacks, if anything."""
    if isinstance(exc, ProtocolError):
        if exc.offset is None:
            return "ProtocolError without offset"
        if exc.message_type is None and data:
            return "ProtocolError without message type"
        return None
    if isinstance(exc, ConversionError):
        if not exc.table or not exc.column:
            return "ConversionError without table/column"
        return None
    return f"unexpected {type(exc).__name__}"


# ---------------------------------------------------------------- single messages


def _modes_disagree(parsed: dict[bool, object]) -> str | None:
    """What is wrong between the pgoutput-mode (False) and yboutput-mode (True) results."""
    if False in parsed:
        if parsed.get(True) != parsed[False]:
            return f"yboutput mode gave {parsed.get(True)!r}, pgoutput mode {parsed[False]!r}"
    elif True in parsed:
        message = parsed[True]
        if not (isinstance(message, Relation) and message.replica_identity == "c"):
            return f"only yboutput mode parsed {message!r}"
    return None


def run_messages(cases: int, seed: int) -> tuple[Counter[str], list[str], float]:
    rng = random.Random(seed)
    seeds = seed_messages()
    stats: Counter[str] = Counter()
    failures: list[str] = []
    slowest = 0.0
    readers = {"reader": PgOutputReader(), "yboutput reader": PgOutputReader(yboutput=True)}
    for i in range(cases):
        data = mutate(rng, seeds)
        started = time.process_time()
        for in_stream in (False, True):
            parsed: dict[bool, object] = {}
            for yboutput in (False, True):
                try:
                    parsed[yboutput] = message = parse_message(data, in_stream=in_stream,
                                                               yboutput=yboutput)
                    stats["yboutput parsed" if yboutput else "parsed"] += 1
                    again = encode_message(message, yboutput=yboutput)
                    if again != data:
                        failures.append(f"case {i}: parses but re-encodes as {again.hex()}: "
                                        f"{data.hex()}")
                except ProtocolError as exc:
                    stats["yboutput ProtocolError" if yboutput else "ProtocolError"] += 1
                    problem = _context_problem(exc, data)
                    if problem:
                        failures.append(f"case {i}: {problem}: {exc} {data.hex()}")
                except Exception as exc:
                    failures.append(f"case {i}: {type(exc).__name__}: {exc} {data.hex()}")
            problem = _modes_disagree(parsed)
            if problem:
                failures.append(f"case {i}: {problem} {data.hex()}")
        for name, reader in readers.items():
            try:
                reader.read(data)
            except ProtocolError as exc:
                problem = _context_problem(exc, data)
                if problem:
                    failures.append(f"case {i} ({name}): {problem}: {exc} {data.hex()}")
            except Exception as exc:
                failures.append(f"case {i} ({name}): {type(exc).__name__}: {exc} {data.hex()}")
        elapsed = time.process_time() - started
        slowest = max(slowest, elapsed)
        if elapsed > SLOW_SECONDS:
            failures.append(f"case {i}: took {elapsed:.1f} s: {data.hex()}")
        stats["cases"] += 1
    return stats, failures, slowest


# ---------------------------------------------------------------- sequences

_CONFIGS = [
    {"topic.prefix": "f"},
    {"topic.prefix": "f", "provide.transaction.metadata": "true", "skipped.operations": "none",
     "binary.handling.mode": "base64", "decimal.handling.mode": "string"},
    {"topic.prefix": "f", "time.precision.mode": "connect", "hstore.handling.mode": "map",
     "interval.handling.mode": "string", "tombstones.on.delete": "false",
     "include.unknown.datatypes": "true"},
]


def mutate_sequence(rng: random.Random, sessions: list[list[bytes]], seeds: list[bytes]
                    ) -> list[bytes]:
    """A window of a real session, then 1-3 sequence mutations."""
    session = rng.choice(sessions)
    start = rng.randrange(len(session))
    window = session[start:start + rng.randint(1, 24)]
    if rng.random() < 0.6:  # usually keep the relations announced before the window
        latest: dict[bytes, bytes] = {}  # the last Relation/Type per OID (in or out of stream)
        for m in session[:start]:
            if m[:1] in (b"R", b"Y"):
                latest[m[:9]] = m
        window = list(latest.values()) + window
    seq = list(window)
    for _ in range(rng.randint(1, 3)):
        action = rng.randrange(8)
        n = len(seq)
        if action == 0 and n:  # drop one (a missing Begin, Commit, Stream Stop, Relation...)
            del seq[rng.randrange(n)]
        elif action == 1 and n:  # duplicate one
            i = rng.randrange(n)
            seq.insert(rng.randint(0, n), seq[i])
        elif action == 2 and n > 1:  # swap neighbours (out of order)
            i = rng.randrange(n - 1)
            seq[i], seq[i + 1] = seq[i + 1], seq[i]
        elif action == 3 and n:  # move one anywhere
            item = seq.pop(rng.randrange(n))
            seq.insert(rng.randint(0, len(seq)), item)
        elif action == 4:  # a change to a relation nobody announced
            dml = [i for i, m in enumerate(seq) if m[:1] in (b"I", b"U", b"D") and len(m) > 5]
            if dml:
                i = rng.choice(dml)
                m = bytearray(seq[i])
                m[1:5] = struct.pack(">I", rng.randrange(2**32))
                seq[i] = bytes(m)
        elif action == 5:  # splice in a window of another session
            other = rng.choice(sessions)
            j = rng.randrange(len(other))
            seq[rng.randint(0, n):rng.randint(0, n)] = other[j:j + rng.randint(1, 6)]
        elif action == 6 and n:  # one message mutated (values, lengths, kinds)
            i = rng.randrange(n)
            seq[i] = mutate(rng, [seq[i]])
        elif n:  # a message of any kind dropped in
            seq.insert(rng.randint(0, n), rng.choice(seeds))
    return seq


def run_sequences(cases: int, seed: int) -> tuple[Counter[str], list[str], float]:
    rng = random.Random(seed)
    sessions = capture_sessions()
    seeds = seed_messages(500)
    configs = [EventConfig.from_properties(c) for c in _CONFIGS]
    stats: Counter[str] = Counter()
    failures: list[str] = []
    slowest = 0.0
    for i in range(cases):
        seq = mutate_sequence(rng, sessions, seeds)
        k = rng.randrange(len(configs))
        reader = PgOutputReader()
        decoder = EventDecoder(configs[k], clock=lambda: 1_700_000_000_000_000_000, run_id="r")
        writer = JsonRecordWriter(configs[k].json)  # its writer cache lives as long as the case
        started = time.process_time()
        for lsn, data in enumerate(seq, 1):
            for target in ("reader", "decoder"):
                try:
                    if target == "reader":
                        reader.read(data)
                    else:
                        for record in decoder.feed(data, lsn):
                            writer.record_line(record)
                            stats["records"] += 1
                    stats[f"{target} ok"] += 1
                except (ProtocolError, ConversionError) as exc:
                    stats[f"{target} {type(exc).__name__}"] += 1
                    problem = _context_problem(exc, data)
                    if problem:
                        failures.append(f"case {i} ({target}, message {lsn}): {problem}: {exc}"
                                        f" {[m.hex() for m in seq]}")
                except Exception as exc:
                    failures.append(f"case {i} ({target}, message {lsn}): {type(exc).__name__}:"
                                    f" {exc} {[m.hex() for m in seq]}")
        elapsed = time.process_time() - started
        slowest = max(slowest, elapsed)
        if elapsed > SLOW_SECONDS:
            failures.append(f"case {i}: took {elapsed:.1f} s: {[m.hex() for m in seq]}")
        stats["cases"] += 1
        stats["messages"] += len(seq)
    return stats, failures, slowest


# ---------------------------------------------------------------- yboutput sequences

_YB_CONFIGS = [
    {"topic.prefix": "f", "plugin.name": "yboutput"},
    {"topic.prefix": "f", "plugin.name": "yboutput", "provide.transaction.metadata": "true",
     "tombstones.on.delete": "false", "skip.messages.without.change": "true"},
]


def yboutput_sessions(count: int = 40) -> list[list[bytes]]:
    """yboutput streams of generated YugabyteDB workloads (pgcdc_events.testing.yugabyte),
    every replica identity, one list of message bytes per workload."""
    from hypothesis import HealthCheck, given, settings

    from pgcdc_events.testing.yugabyte import YugabyteWorkload, yugabyte_workloads

    sessions: list[list[bytes]] = []

    @settings(max_examples=count, database=None, suppress_health_check=list(HealthCheck))
    @given(yugabyte_workloads())
    def collect(workload: YugabyteWorkload) -> None:
        sessions.append([encode_message(m, yboutput=True) for m, _ in workload.messages()])

    collect()
    return sessions


def _yb_refusal_problem(exc: ConfigurationError) -> str | None:
    """A refusal under yboutput must name the table it refuses."""
    return None if 'table "' in str(exc) else f"ConfigurationError naming no table: {exc}"


def run_yboutput_sequences(cases: int, seed: int) -> tuple[Counter[str], list[str], float]:
    """Mutated yboutput streams fed to a yboutput reader and a YugabyteEventDecoder."""
    rng = random.Random(seed)
    sessions = yboutput_sessions()
    seeds = [m for session in sessions for m in session]
    configs = [EventConfig.from_properties(c) for c in _YB_CONFIGS]
    stats: Counter[str] = Counter()
    failures: list[str] = []
    slowest = 0.0
    for i in range(cases):
        seq = mutate_sequence(rng, sessions, seeds)
        k = rng.randrange(len(configs))
        reader = PgOutputReader(yboutput=True)
        decoder = YugabyteEventDecoder(configs[k], clock=lambda: 1_700_000_000_000_000_000,
                                       run_id="r")
        writer = JsonRecordWriter(configs[k].json)
        started = time.process_time()
        for lsn, data in enumerate(seq, 1):
            for target in ("reader", "decoder"):
                try:
                    if target == "reader":
                        reader.read(data)
                    else:
                        for record in decoder.feed(data, lsn):
                            writer.record_line(record)
                            stats["records"] += 1
                    stats[f"{target} ok"] += 1
                except (ProtocolError, ConversionError, ConfigurationError) as exc:
                    stats[f"{target} {type(exc).__name__}"] += 1
                    problem = (_yb_refusal_problem(exc) if isinstance(exc, ConfigurationError)
                               else _context_problem(exc, data))
                    if problem:
                        failures.append(f"case {i} ({target}, message {lsn}): {problem}: {exc}"
                                        f" {[m.hex() for m in seq]}")
                except Exception as exc:
                    failures.append(f"case {i} ({target}, message {lsn}): {type(exc).__name__}:"
                                    f" {exc} {[m.hex() for m in seq]}")
        elapsed = time.process_time() - started
        slowest = max(slowest, elapsed)
        if elapsed > SLOW_SECONDS:
            failures.append(f"case {i}: took {elapsed:.1f} s: {[m.hex() for m in seq]}")
        stats["cases"] += 1
        stats["messages"] += len(seq)
    return stats, failures, slowest


FAMILIES: dict[str, Callable[[int, int], tuple[Counter[str], list[str], float]]] = {
    "messages": run_messages,
    "sequences": run_sequences,
    "yboutput-sequences": run_yboutput_sequences,
}


def _work(job: tuple[str, int, int]) -> tuple[str, Counter[str], list[str], float, float]:
    family, cases, seed = job
    started = time.perf_counter()
    stats, failures, slowest = FAMILIES[family](cases, seed)
    return family, stats, failures, slowest, time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=1_000_000, help="cases per family")
    parser.add_argument("--family", action="append", choices=sorted(FAMILIES))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--chunks", type=int, default=1, help="split each family in N seeds")
    args = parser.parse_args(argv)
    families = args.family or list(FAMILIES)
    per = args.cases // args.chunks
    jobs = [(f, per, args.seed * 1000 + c) for f in families for c in range(args.chunks)]
    run: Callable[[Any, Any], Any] = map
    if args.workers > 1:
        run = multiprocessing.Pool(args.workers).imap_unordered
    totals: dict[str, Counter[str]] = {f: Counter() for f in families}
    slow = dict.fromkeys(families, 0.0)
    seconds = dict.fromkeys(families, 0.0)
    failed = 0
    for family, stats, failures, slowest, elapsed in run(_work, jobs):
        totals[family] += stats
        slow[family] = max(slow[family], slowest)
        seconds[family] += elapsed
        for line in failures[:10]:
            print("FAIL", line[:2000], flush=True)
        failed += len(failures)
    for family in families:
        counts = ", ".join(f"{k} {v:,}" for k, v in sorted(totals[family].items()) if k != "cases")
        print(f"{family:>10}: {totals[family]['cases']:,} cases ({counts}); slowest case "
              f"{slow[family] * 1000:.1f} ms; {seconds[family]:.0f} s", flush=True)
    print(json.dumps({"seed": args.seed, "failures": failed}), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
