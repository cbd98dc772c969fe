#!/usr/bin/env bash
# The released artefacts, as a user gets them: build the sdist and the wheel, install the
# wheel (not the source tree) into a fresh venv with no extras, and run a smoke test there
# from a directory outside the checkout. Run by `bash tools/bootstrap.sh test` (CI).
#   bash tools/smoke_wheel.sh [PYTHON]   PYTHON has `build` installed (default .venv/bin/python)
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
python="${1:-.venv/bin/python}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

"$python" -m build --outdir "$work/dist" . >"$work/build.log" 2>&1 || { cat "$work/build.log" >&2; exit 1; }
sdist=("$work"/dist/pgcdc_events-*.tar.gz)
wheel=("$work"/dist/pgcdc_events-*.whl)
# the sdist carries the sources, the licence and the README; the wheel the typed package
tar -tzf "${sdist[0]}" >"$work/sdist.txt"
"$python" -m zipfile -l "${wheel[0]}" >"$work/wheel.txt"
for want in '/src/pgcdc_events/events/decoder.py$' '/LICENSE$' '/README.md$'; do
    grep -q "$want" "$work/sdist.txt" || { echo "the sdist lacks $want" >&2; exit 1; }
done
grep -q 'pgcdc_events/py.typed' "$work/wheel.txt" || { echo "the wheel lacks py.typed" >&2; exit 1; }

"$python" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q "${wheel[0]}"
cd "$work"   # nothing of the checkout on the path
"$work/venv/bin/python" - "$root" <<'PY'
import json, subprocess, sys
from pathlib import Path

import pgcdc_events
import pgcdc_events.testing  # works without hypothesis (the `testing` extra)

root = Path(sys.argv[1])
assert "site-packages" in pgcdc_events.__file__, pgcdc_events.__file__
cli = str(Path(sys.executable).parent / "pgcdc-events")
version = subprocess.run([cli, "--version"], capture_output=True, text=True, check=True)
assert pgcdc_events.__version__ in version.stdout, version.stdout
decoded = subprocess.run(
    [cli, "decode", "--capture", str(root / "examples/demo-capture.jsonl"),
     "--catalog", str(root / "examples/demo-catalog.json"),
     "--config", str(root / "examples/connector.properties")],
    capture_output=True, text=True, check=True)
records = [json.loads(line) for line in decoded.stdout.splitlines()]
ops = sorted(r["value"]["payload"]["op"] for r in records if r["value"] is not None)
assert ops == ["c", "c", "c", "c", "d", "m", "u", "u"], ops
assert {r["value"]["payload"]["source"]["db"] for r in records if r["value"]} == {"postgres"}
checked = subprocess.run([cli, "validate", "-"], input=decoded.stdout, capture_output=True,
                         text=True, check=False)
assert checked.returncode == 0, checked.stdout + checked.stderr
print(f"smoke test of the installed wheel: {len(records)} records decoded and valid "
      f"({pgcdc_events.__file__})")
PY
