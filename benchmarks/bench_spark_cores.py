"""Does Spark decoding grow with cores? ``bench_spark_stream.py`` once per master, each in
a process of its own confined to as many CPUs as the master has task slots.

Run: ``.venv/bin/python benchmarks/bench_spark_cores.py [--masters local[1],local[2]]
-- --sustained-changes 500000 --files-per-trigger 16 --skip-throughput --skip-latency``
(what follows ``--`` is given to ``bench_spark_stream.py``).

Why confined: ``local[1]`` is one task slot, not one core. Its JVM runs the task thread,
the garbage collector and the JIT compiler, its Python worker decodes while the JVM feeds
it the next Arrow batch, and the driver's Python and delta-rs run beside them: on a
2-core machine, an unconfined ``local[1]`` run already keeps about 1.5 cores busy
(``bench_spark_stream.py`` prints its CPU seconds), so ``local[2]`` against it measures
half a core, not one. Here each run, the JVM, its Python workers and the driver
included, is started under ``taskset`` (the child processes inherit the CPU set): the
first allowed CPU for ``local[1]``, the first two for ``local[2]``. Each child's own
report is printed as it runs, then the ratios of every figure the children share, each
master against the first.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent / "bench_spark_stream.py"
_SLOTS = re.compile(r"local\[(\d+)\]")


def slots(master: str) -> int:
    """The task slots of a ``local[N]`` master."""
    match = _SLOTS.fullmatch(master)
    if match is None:
        raise SystemExit(f"{master!r}: give local[N] masters (local[*] has no fixed size)")
    return int(match.group(1))


def run_confined(master: str, cpus: list[int], extra: list[str]) -> dict[str, float]:
    """``bench_spark_stream.py --masters master`` under ``taskset -c cpus``: its figures."""
    command = ["taskset", "-c", ",".join(map(str, cpus)), sys.executable, str(BENCH),
               "--masters", master, *extra]
    print(f"== {master} on CPU {','.join(map(str, cpus))}: {' '.join(command[3:])}",
          flush=True)
    figures: dict[str, float] | None = None
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as child:
        assert child.stdout is not None
        for line in child.stdout:
            print(line, end="", flush=True)
            if line.startswith("{"):
                parsed = json.loads(line)
                if master in parsed:
                    figures = parsed[master]
    if child.returncode != 0 or figures is None:
        raise SystemExit(f"{master}: bench_spark_stream.py exited {child.returncode}"
                         + ("" if figures is not None else ", no figures printed"))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--masters", default="local[1],local[2]")
    parser.add_argument("rest", nargs=argparse.REMAINDER,
                        help="after --: the arguments of bench_spark_stream.py")
    args = parser.parse_args()
    if shutil.which("taskset") is None:
        raise SystemExit("taskset (util-linux) is needed to confine each run to its CPUs")
    # no batch decode against the floor in the children (unless asked for): not a
    # measure of cores
    extra = ["--floor-changes", "0", "--child",
             *(args.rest[1:] if args.rest[:1] == ["--"] else args.rest)]
    allowed = sorted(os.sched_getaffinity(0))
    masters = [m.strip() for m in args.masters.split(",") if m.strip()]
    figures: dict[str, dict[str, float]] = {}
    for master in masters:
        n = slots(master)
        if n > len(allowed):
            raise SystemExit(f"{master}: {n} task slots, but this process may use "
                             f"{len(allowed)} CPUs")
        figures[master] = run_confined(master, allowed[:n], extra)
    first, *rest = masters
    for master in rest:
        for key, value in figures[master].items():
            base = figures[first].get(key)
            if key.endswith("_per_s") and base:
                print(f"{key}: {master} on {slots(master)} CPUs / {first} on "
                      f"{slots(first)}: {value / base:.2f}x")
    print(json.dumps({"confined": figures}))


if __name__ == "__main__":
    main()
