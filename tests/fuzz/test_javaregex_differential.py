"""The filter translation against java.util.regex itself: generated Java expressions, and
names, matched by our RE2 translation and by ``Pattern.compile(p, CASE_INSENSITIVE)
.matcher(s).matches()`` on the Java that runs the referee. Needs ``javac``."""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from pgcdc_events.errors import ConfigurationError
from pgcdc_events.types.javaregex import compile_java

pytestmark = pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK (javac)")

_CHECKER = """
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.util.regex.*;

public class JavaMatches {
    static String unhex(String h) {
        byte[] b = new byte[h.length() / 2];
        for (int i = 0; i < b.length; i++) b[i] = (byte) Integer.parseInt(h.substring(2 * i, 2 * i + 2), 16);
        return new String(b, StandardCharsets.UTF_8);
    }
    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        StringBuilder out = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.split(" ", -1);
            StringBuilder row = new StringBuilder();
            try {
                Pattern p = Pattern.compile(unhex(f[0]), Pattern.CASE_INSENSITIVE);
                for (int i = 1; i < f.length; i++) row.append(p.matcher(unhex(f[i])).matches() ? '1' : '0');
            } catch (RuntimeException e) {  // PatternSyntaxException; JDK 17 also throws a
                row.setLength(0);              // NullPointerException matching some classes
                row.append('E');
            }
            out.append(row).append('\\n');
        }
        System.out.print(out);
    }
}
"""

_LITERALS = ["a", "b", "i", "z", "A", "I", "0", "_", "-", "é", "\\.", "\\-", "\\x{41}", "\\t",
             "\\Q.a\\E", "\\0101", "\\u0069", "\\x{212A}", "\\cA", " ", "#", "k", "K", "s", "ſ",
             "\\n", "$"]
_ESCAPES = ["\\d", "\\w", "\\s", "\\D", "\\W", "\\S", "\\h", "\\p{Alpha}", "\\p{Lower}",
            "\\p{Upper}", "\\P{Digit}", "\\P{Lower}", ".", "\\v", "\\H", "\\V", "\\p{Punct}",
            "\\p{Space}", "\\p{XDigit}", "\\P{Upper}", "\\p{ASCII}", "\\p{Graph}"]
_CLASS_ITEMS = ["a-z", "a", "i", "I", "0-9", "\\d", "\\w", "_", "-", "é", "A-F", "\\s",
                "\\p{Upper}", "\\P{Lower}", "k", "K-Z", "\\x{100}-\\x{10FFFF}", "^", "\\Q-]\\E", "&",
                "\\h"]
_NAMES = "aAbBiIzZ0_-. \n\t\x0bé\u212a\u017fkKsS#\u00a0\x01$^&]"


def _class(rng: random.Random, depth: int) -> str:
    def operand() -> str:
        items = []
        for _ in range(rng.randint(1, 3)):
            if depth < 2 and rng.random() < 0.2:
                items.append(_class(rng, depth + 1))
            else:
                items.append(rng.choice(_CLASS_ITEMS))
        return "".join(items)

    body = operand()
    if rng.random() < 0.4:
        body += "&&" + operand()
    return "[" + ("^" if rng.random() < 0.3 else "") + body + "]"


def _expr(rng: random.Random, depth: int) -> str:
    branches = []
    for _ in range(rng.randint(1, 2) if depth < 3 else 1):
        atoms = []
        for _ in range(rng.randint(1, 3)):
            roll = rng.random()
            if roll < 0.3:
                atom = rng.choice(_LITERALS)
            elif roll < 0.45:
                atom = rng.choice(_ESCAPES)
            elif roll < 0.7:
                atom = _class(rng, 0)
            elif depth < 3:
                opener = rng.choice(["(", "(?:", "(?i:", "(?-i:", "(?s:", "(?<g>"])
                atom = opener + _expr(rng, depth + 1) + ")"
            else:
                atom = rng.choice(_LITERALS)
            atom += rng.choice(["", "", "", "*", "+", "?", "{1,2}", "{2}", "*?", "{0,}"])
            atoms.append(atom)
        branches.append("".join(atoms))
    return "|".join(branches)


def _pattern(rng: random.Random) -> str:
    text = _expr(rng, 0)
    if rng.random() < 0.2:
        text = "^" + text
    if rng.random() < 0.2:
        text += "$"
    if rng.random() < 0.1:
        text = "(?-i)" + text
    roll = rng.random()
    if roll < 0.1:
        text = "(?x)" + text
    elif roll < 0.15:
        text = "(?s)" + text
    elif roll < 0.2:
        text = "(?d)" + text
    return text


def test_translation_matches_what_java_matches(tmp_path: Path) -> None:
    rng = random.Random(20261127)
    cases = []
    for _ in range(800):
        pattern = _pattern(rng)
        names = ["".join(rng.choice(_NAMES) for _ in range(rng.randint(0, 5)))
                 for _ in range(14)]
        cases.append((pattern, names))
    (tmp_path / "JavaMatches.java").write_text(_CHECKER)
    subprocess.run(["javac", "JavaMatches.java"], cwd=tmp_path, check=True, timeout=120)
    feed = "".join(" ".join(x.encode().hex() for x in (pattern, *names)) + "\n"
                   for pattern, names in cases)
    done = subprocess.run(["java", "-cp", str(tmp_path), "JavaMatches"], input=feed,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    answers = done.stdout.split("\n")
    compared = 0
    differences = []
    for (pattern, names), java in zip(cases, answers, strict=False):
        try:
            ours = compile_java(pattern)
        except ConfigurationError as exc:
            # Java refusing too, or a construct we refuse by name: never a silent difference
            # (under (?x), Java accepts a quantifier after white space that starts an
            # alternative, "(?x) {2}a"; we call it invalid)
            assert java == "E" or "does not support" in str(exc) or (
                pattern.startswith("(?x)") and "dangling meta character '{'" in str(exc)), (
                pattern, str(exc))
            continue
        if java == "E":
            continue  # Java's own syntax errors we read leniently (e.g. "[a-&&b]")
        got = "".join("1" if ours.fullmatch(name) else "0" for name in names)
        compared += 1
        if got != java:
            differences.append((pattern, ours.translated, names, java, got))
    assert compared > 500
    assert differences == [], differences[:5]
