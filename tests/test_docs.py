"""The documentation is true: generated pages are current, and every fenced Python and
shell block of README.md and docs/*.md runs as a user would run it.

A user reads a page top to bottom and runs its blocks in order, from a clean working
directory holding the shipped example files (``examples/``), without editing them. So
for each page this test makes an empty temporary directory, copies ``examples/`` into
it, and runs the page's ``python`` and ``sh`` blocks there, in document order: the
Python blocks of a page share one interpreter (a later block uses what an earlier one
defined, as in a REPL session), every ``test_*`` function a block defines is then
called (as pytest would), and each shell block runs under ``bash -e -o pipefail`` with
the ``pgcdc-events`` script on the PATH. Blocks in other languages (``json``, ``sql``,
untagged output) are not run.

A block is only left out when an HTML comment on the line before its fence says why:

* ``<!-- docs-test: needs kafka -->``: it needs a service the suite does not run
  (skipped, and reported as skipped);
* ``<!-- docs-test: installs: REASON -->``: a shell block that installs or bootstraps
  (skipped, with the reason);
* ``<!-- docs-test: needs postgres -->``: not skipped: it runs with ``PGCDC_DSN`` set to a
  fresh database on the suite's throwaway server.

Any other ``docs-test`` comment is an error, so a typo cannot skip a block silently.
New pages under docs/ are picked up without touching this file.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
LANGUAGES = {"python": "python", "py": "python", "sh": "sh", "bash": "sh", "shell": "sh"}
SERVICES_NOT_RUN = {
    "kafka": "needs Kafka, which the test suite does not run",
    "jdbc": "needs a PostgreSQL JDBC driver jar on Spark's classpath (a Maven download)",
    "duckdb": ("needs DuckDB and its delta extension (duckdb-ext-delta from PyPI), not "
               "dependencies of the project; tests/spark reads the Delta tables with them "
               "when they are installed"),
}
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*([\w+-]*)")
_MARKER = re.compile(r"^<!--\s*docs-test:\s*(.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    page: str          # "README.md", "docs/events.md"
    line: int          # line of the opening fence, 1-based
    language: str      # "python" or "sh"
    code: str
    marker: str | None  # the docs-test comment above the fence, if any

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def skip_reason(self) -> str | None:
        """Why the block is not run, or None (it runs)."""
        if self.marker is None or self.marker == "needs postgres":
            return None
        if self.marker.startswith("needs "):
            service = self.marker.removeprefix("needs ").strip()
            if service in SERVICES_NOT_RUN:
                return SERVICES_NOT_RUN[service]
        if self.marker.startswith("installs:") and self.language == "sh":
            reason = self.marker.removeprefix("installs:").strip()
            if reason:
                return f"installs or bootstraps: {reason}"
        raise ValueError(f"{self.where}: unknown or incomplete docs-test marker {self.marker!r}"
                         " (expected 'needs kafka', 'needs postgres' or 'installs: REASON')")


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks_of(path: Path) -> list[Block]:
    """The runnable-language fenced blocks of one Markdown page."""
    page = path.relative_to(ROOT).as_posix()
    lines = path.read_text().splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, language = m.group(1), m.group(2).lower()
        start = i
        i += 1
        body: list[str] = []
        indent = len(lines[start]) - len(lines[start].lstrip())
        while i < len(lines) and not lines[i].strip().startswith(fence):
            line = lines[i]
            body.append(line[indent:] if line[:indent].strip() == "" else line.lstrip())
            i += 1
        i += 1  # the closing fence
        if language not in LANGUAGES:
            continue
        j = start - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        marker = _MARKER.match(lines[j].strip()) if j >= 0 else None
        out.append(Block(page, start + 1, LANGUAGES[language], "\n".join(body) + "\n",
                         marker.group(1) if marker else None))
    return out


ALL_BLOCKS = [b for p in pages() for b in blocks_of(p)]
PAGES_TO_RUN = sorted({b.page for b in ALL_BLOCKS if b.skip_reason is None})


def test_generated_pages_are_current() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_docs.py"), "--check"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def test_every_docs_page_is_linked_from_the_readme() -> None:
    readme = (ROOT / "README.md").read_text()
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f"docs/{page.name}" in readme, f"README does not link docs/{page.name}"


def test_the_blocks_are_found_and_every_skip_is_marked() -> None:
    """The inventory: how many blocks run and how many are skipped, and why."""
    skipped = Counter(b.skip_reason for b in ALL_BLOCKS if b.skip_reason is not None)
    run = [b for b in ALL_BLOCKS if b.skip_reason is None]
    print(f"\ndocs blocks: {len(run)} run ({sum(b.language == 'python' for b in run)} Python,"
          f" {sum(b.language == 'sh' for b in run)} shell) on {len(PAGES_TO_RUN)} pages,"
          f" {sum(skipped.values())} skipped")
    for reason, n in sorted(skipped.items(), key=lambda kv: str(kv[0])):
        print(f"  skipped {n}: {reason}")
    assert {"README.md", "docs/events.md", "docs/testing.md"} <= set(PAGES_TO_RUN)
    # Only the README's two set-up commands install; only Kafka is a service not run.
    assert sum(1 for b in ALL_BLOCKS if b.marker and b.marker.startswith("installs:")) <= 1


@pytest.mark.parametrize("where", [b.where for b in ALL_BLOCKS if b.skip_reason is not None])
def test_marked_block_is_skipped(where: str) -> None:
    block = next(b for b in ALL_BLOCKS if b.where == where)
    pytest.skip(f"{block.where} ({block.language}): {block.skip_reason}")


def _workdir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    shutil.copytree(ROOT / "examples", work / "examples",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return work


def _env(extra: dict[str, str] | None = None, *, pythonpath: tuple[str, ...] = ()) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PGCDC_", "PYTEST_"))}
    env["PYTHONPATH"] = os.pathsep.join([*pythonpath, str(ROOT / "src")])
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.pop("PYSPARK_PYTHON", None)  # a page that needs it says so
    env.update(extra or {})
    return env


def run_page(page: str, work: Path, env: dict[str, str], *,
             timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run the page's blocks in ``work`` (the runner below, in a fresh interpreter)."""
    blocks = [b for b in ALL_BLOCKS if b.page == page and b.skip_reason is None]
    spec = work.parent / "blocks.json"
    spec.write_text(json.dumps([{"where": b.where, "language": b.language, "code": b.code}
                                for b in blocks]))
    return subprocess.run([sys.executable, str(Path(__file__).resolve()), str(spec)],
                          cwd=work, env=env, capture_output=True, text=True, timeout=timeout,
                          check=False)


@pytest.fixture
def page_database(request: pytest.FixtureRequest) -> dict[str, str]:
    """``PGCDC_DSN`` for a page with a ``needs postgres`` block (a fresh database)."""
    page = request.node.callspec.params["page"]
    if not any(b.marker == "needs postgres" for b in ALL_BLOCKS if b.page == page):
        return {}
    conn = request.getfixturevalue("pg_conn")
    cluster = request.getfixturevalue("pg_cluster")
    database = conn.run("SELECT current_database()")[0][0]
    return {"PGCDC_DSN": f"postgresql://{cluster.user}@{cluster.host}:{cluster.port}/{database}"}


@pytest.mark.parametrize("page", PAGES_TO_RUN)
def test_page_blocks_run_as_written(page: str, tmp_path: Path,
                                    page_database: dict[str, str]) -> None:
    work = _workdir(tmp_path)
    proc = run_page(page, work, _env(page_database))
    assert proc.returncode == 0, (
        f"{page}: a block failed\n--- stdout\n{proc.stdout[-6000:]}\n--- stderr\n"
        f"{proc.stderr[-6000:]}")
    ran = [b.where for b in ALL_BLOCKS if b.page == page and b.skip_reason is None]
    assert proc.stdout.count("docs-test: ran ") == len(ran), proc.stdout


def test_operations_python_block_fails_cleanly_without_the_pg_extra(tmp_path: Path) -> None:
    """Without pg8000 the capture example stops at once, naming the extra, and leaves the
    user's working directory as it was (no ./capture/ created)."""
    block = next(b for b in ALL_BLOCKS
                 if b.page == "docs/operations.md" and b.language == "python"
                 and "DurableOutput" in b.code)
    work = _workdir(tmp_path)
    shadow = tmp_path / "no-pg8000"
    (shadow / "pg8000").mkdir(parents=True)
    (shadow / "pg8000" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'pg8000'\", name='pg8000')\n")
    spec = tmp_path / "blocks.json"
    spec.write_text(json.dumps([{"where": block.where, "language": "python",
                                 "code": block.code}]))
    env = _env({"PGCDC_DSN": "postgresql://cdc@127.0.0.1:1/app"}, pythonpath=(str(shadow),))
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), str(spec)],
                          cwd=work, env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode != 0
    assert "pip install 'pgcdc-events[pg]'" in proc.stdout + proc.stderr
    assert sorted(p.name for p in work.iterdir()) == ["examples"]


def test_the_readmes_demo_summary_is_what_decode_prints(tmp_path: Path) -> None:
    """The summary the README shows is the command's output, not a hand-written table."""
    readme = (ROOT / "README.md").read_text()
    shown = readme.split("`--summary` prints what was produced")[1].split("```")[1].strip("\n")
    work = _workdir(tmp_path)
    proc = subprocess.run(
        ["pgcdc-events", "decode", "--capture", "examples/demo-capture.jsonl",
         "--catalog", "examples/demo-catalog.json", "--output", "records.jsonl", "--summary"],
        cwd=work, env=_env(), capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip("\n") == shown


def test_the_validator_example_prints_what_testing_md_shows(tmp_path: Path) -> None:
    """docs/testing.md's validator example, run as written, prints the block shown after it."""
    section = (ROOT / "docs" / "testing.md").read_text().split("## Validating records")[1]
    code, shown = section.split("```python\n")[1].split("```\n")[0], section.split("```\n")[2]
    work = _workdir(tmp_path)
    proc = subprocess.run([sys.executable, "-c", code], cwd=work, env=_env(),
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == shown


# ---------------------------------------------------------------- the runner


def _run_blocks(spec: Path) -> int:
    """Run the blocks listed in ``spec`` in the current directory, in order."""
    import traceback  # noqa: PLC0415

    namespace: dict[str, Any] = {"__name__": "__main__"}
    sys.path.insert(0, os.getcwd())  # as `python` started here: the directory is importable
    for block in json.loads(spec.read_text()):
        where, code = block["where"], block["code"]
        print(f"docs-test: running {where} ({block['language']})", flush=True)
        if block["language"] == "sh":
            proc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", code], check=False)
            if proc.returncode != 0:
                print(f"docs-test: FAILED {where}: exit status {proc.returncode}", flush=True)
                return 1
        else:
            before = set(namespace)
            try:
                exec(compile(code, where, "exec"), namespace)  # the docs' own code
                for name in [n for n in namespace if n not in before]:
                    if name.startswith("test_") and callable(namespace[name]):
                        print(f"docs-test: calling {name}()", flush=True)
                        namespace[name]()
            except BaseException:  # reported with the block's place
                traceback.print_exc()
                print(f"docs-test: FAILED {where}", flush=True)
                return 1
        print(f"docs-test: ran {where}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_run_blocks(Path(sys.argv[1])))
