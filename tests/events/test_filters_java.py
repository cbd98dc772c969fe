"""Filters read as Java regular expressions and matched in linear time.

Debezium compiles ``table.include.list``, ``column.exclude.list``,
``message.prefix.include.list``... with ``java.util.regex`` and
``Pattern.CASE_INSENSITIVE`` and matches whole names (``io.debezium.function.Predicates``).
A backtracking engine takes exponential time on a pattern such as
``([a-z]+-?)+\\.audit``, and any role can pick a message's prefix.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from pgcdc_events.errors import ConfigurationError
from pgcdc_events.events import EventConfig
from pgcdc_events.protocol.capture import write_capture
from pgcdc_events.types.config import parse_patterns, split_patterns
from pgcdc_events.types.javaregex import compile_java
from support.capture import Capturer

#: The review's message filter: nested quantifiers that a backtracking engine explores
#: exponentially on a prefix that nearly matches.
AUDIT = r"([a-z]+-?)+\.audit"
#: A table filter of the same family.
WIDE = r"public\.(x+x+)+y"


def config(**props: str) -> EventConfig:
    return EventConfig.from_properties({"topic.prefix": "p", **props})


# -- the two catastrophic patterns, end to end on a real capture -----------------------------
_DECODE = """
import json, sys
from pgcdc_events.events import EventConfig, EventDecoder
from pgcdc_events.protocol.capture import iter_capture
config = EventConfig.from_properties({"topic.prefix": "p",
    "message.prefix.include.list": sys.argv[2], "table.include.list": sys.argv[3],
    "column.exclude.list": sys.argv[4]})
with open(sys.argv[1], "rb") as fh:
    records = EventDecoder(config).feed_rows(iter_capture(fh))
for record in records:
    if record.topic.endswith(".message"):
        print(json.dumps([record.topic, record.value["message"]["prefix"]]))
    elif record.value is not None:
        print(json.dumps([record.topic, list(record.value["after"])]))
"""


@pytest.mark.postgres
def test_catastrophic_patterns_decode_a_real_capture_at_once(pg_conn, tmp_path: Path) -> None:
    """A prefix of 40 letters and a table named by 60 x's, which Python's re (and Java's
    engine) would explore for hours, are matched at once, and Java's class intersection
    keeps column i: the records are the right ones. The decoder runs in a subprocess
    whose timeout only stops a runaway test."""
    wide = "x" * 60
    pg_conn.run(f'CREATE TABLE public."{wide}" (id int PRIMARY KEY)')
    pg_conn.run("CREATE TABLE public.xxy (i int PRIMARY KEY, j int, k int)")
    cap = Capturer(pg_conn, tables=[f'public."{wide}"', "public.xxy"])
    pg_conn.run(f'INSERT INTO public."{wide}" VALUES (1)')
    pg_conn.run("INSERT INTO public.xxy VALUES (2, 3, 4)")
    hostile = "a" * 40 + "!"
    for prefix in (hostile, "orders-eu.audit", "Orders.AUDIT"):
        pg_conn.run(f"SELECT pg_logical_emit_message(true, '{prefix}', 'x')")
    path = tmp_path / "capture.jsonl"
    with path.open("w") as fh:
        write_capture(cap.changes(messages=True), fh)
    done = subprocess.run(
        [sys.executable, "-c", _DECODE, str(path), AUDIT, WIDE, r"public\.xxy\.[a-z&&[^i]]"],
        capture_output=True, text=True, timeout=20, check=False)
    assert done.returncode == 0, done.stderr
    assert [json.loads(line) for line in done.stdout.splitlines()] == [
        ["p.public.xxy", ["i"]],
        ["p.message", "orders-eu.audit"],
        ["p.message", "Orders.AUDIT"],
    ]


_FILTERS = """
import sys
from pgcdc_events.events import EventConfig
config = EventConfig.from_properties({"topic.prefix": "p",
    "message.prefix.include.list": sys.argv[1], "table.include.list": sys.argv[2]})
print(config.includes_message_prefix("a" * 5000 + "!"),
      config.includes_message_prefix("ab-cd-ef.audit"),
      config.includes_table("public", "x" * 5000),
      config.includes_table("public", "x" * 5000 + "y"))
"""


def test_catastrophic_patterns_as_filters() -> None:
    """The same patterns on names of 5000 characters (no database needed)."""
    done = subprocess.run([sys.executable, "-c", _FILTERS, AUDIT, WIDE],
                          capture_output=True, text=True, timeout=20, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True", "False", "True"]


# -- Java's syntax -------------------------------------------------------------------------
def test_java_class_intersection_excludes_the_column() -> None:
    """``[a-z&&[^i]]`` is Java's intersection; Python's re read it as a union (with a
    warning), so column ``i`` was kept."""
    cfg = config(**{"column.exclude.list": r"public\.t\.[a-z&&[^i]]"})
    assert cfg.includes_column("public", "t", "i")
    assert cfg.includes_column("public", "t", "I")
    assert not cfg.includes_column("public", "t", "j")
    assert not cfg.includes_column("public", "t", "J")


@pytest.mark.parametrize(("pattern", "yes", "no"), [
    # intersection and subtraction forms, negation of the whole class (Java 9+)
    ("[a-z&&[^aeiou]]", ["b", "Z"], ["a", "E", "1"]),
    ("[^a-z&&[aeiou]]", ["b", "1"], ["a", "U"]),
    ("[a-c[x-z]&&[b-y]]", ["b", "x"], ["a", "z"]),
    ("[\\w&&[^\\d]]+", ["abc_"], ["a1"]),
    ("[a-z&&def]", ["e"], ["a"]),
    ("[^[a]]", ["b"], ["a", "A"]),
    ("[]a]+", ["]a"], ["b"]),
    # case folds in ASCII only, as CASE_INSENSITIVE without UNICODE_CASE
    ("k", ["K"], ["\u212a"]),
    ("é", ["é"], ["É"]),
    ("[^a]", ["b"], ["A"]),
    ("(?-i)a", ["a"], ["A"]),
    ("(?-i:a)b", ["aB"], ["Ab"]),
    # Java's '.', \s, \h, POSIX classes, escapes, quoting, comments
    (".", ["x", "😀"], ["\n", "\r", "\x85", "\u2028"]),
    ("(?s).", ["\n"], []),
    ("(?d).", ["\r"], ["\n"]),
    ("\\s", ["\x0b", " "], ["x"]),
    ("\\h", ["\xa0"], ["\n"]),
    ("\\p{Lower}", ["a", "A"], ["1"]),
    ("\\P{Lower}", ["1"], ["a", "A"]),
    ("\\p{Alpha}", ["a"], ["é"]),
    ("\\Qa.b\\E", ["a.b"], ["axb"]),
    ("\\x{1F600}\\u00e9\\0101\\cA", ["😀éA\x01"], []),
    ("(?x) a b # comment", ["ab"], ["a b"]),
    ("\\N{LATIN SMALL LETTER A}", ["a"], ["b"]),
    # anchors: the whole name must match; $ at the end is the end
    ("^public\\.users$", ["public.users"], ["public.users\n", "xpublic.users"]),
    ("public\\.user", ["PUBLIC.USER"], ["public.users"]),
    ("a|", ["a", ""], ["b"]),
    ("(?<name>a)b{2,3}", ["abb", "abbb"], ["ab", "abbbb"]),
    ("a*?b", ["aab"], ["aa"]),
])
def test_java_syntax(pattern: str, yes: list[str], no: list[str]) -> None:
    """Each row's outcomes were checked against java.util.regex on Java 17
    (``Pattern.compile(p, CASE_INSENSITIVE).matcher(s).matches()``)."""
    compiled = compile_java(pattern, "table.include.list")
    assert [compiled.fullmatch(s) for s in yes] == [True] * len(yes)
    assert [compiled.fullmatch(s) for s in no] == [False] * len(no)


@pytest.mark.parametrize(("pattern", "construct"), [
    ("(a)\\1", "a backreference \\1"),
    ("(?<n>a)\\k<n>", "a backreference \\k<name>"),
    ("a(?=b)b", "a lookahead (?="),
    ("a(?!b).", "a lookahead (?!"),
    ("(?<=a)b", "a lookbehind (?<="),
    ("(?<!a)b", "a lookbehind (?<!"),
    ("a++", "a possessive quantifier ++"),
    ("a{2}+", "a possessive quantifier {2}+"),
    ("(?>a|ab)c", "an atomic group (?>"),
    ("a\\b", "a word boundary \\b"),
    ("\\R", "a line break \\R"),
    ("a$\\s*", "$ or \\Z followed by more of the pattern"),
    ("(?m)^a$", "^ under the MULTILINE flag (?m)"),
    ("(?iu)é", "the UNICODE_CASE flag (?u)"),
    ("(?U)\\w", "the UNICODE_CHARACTER_CLASS flag (?U)"),
    ("\\p{L}", "the Unicode property \\p{L}"),
    ("[a&&&b]", "'&&&' in a character class"),
    ("[a-&&b]", "'-&&' in a character class"),
    ("[a&&[^b]&]", "a single '&' after a nested class in an intersection"),
    ("[\\Q-]\\E-a]", "a range next to \\Q...\\E in a character class"),
    ("a{1}{2}", "a repetition after a quantifier"),
])
def test_what_cannot_be_honoured_is_refused_by_name(pattern: str, construct: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        config(**{"table.include.list": f"public\\.ok,{pattern}"})
    message = str(info.value)
    assert message.startswith(f"table.include.list: regular expression {pattern!r} uses "
                              f"{construct}")
    assert "\n" not in message


@pytest.mark.parametrize("pattern", ["a{", "(a", "a)", "[a", "*a", "a**", "\\y", "[b-a]",
                                     "a{2000}", "\\x{110000}", "(?q)a"])
def test_invalid_patterns_name_the_property(pattern: str) -> None:
    with pytest.raises(ConfigurationError, match=r"^column\.include\.list: invalid regular "
                                                 r"expression "):
        config(**{"column.include.list": pattern})


@pytest.mark.parametrize("prop", [
    "schema.include.list", "table.exclude.list", "column.exclude.list",
    "message.prefix.exclude.list", "column.mask.with.3.chars", "column.truncate.to.4.chars",
    "column.mask.hash.SHA-256.with.salt.x", "column.propagate.source.type",
    "datatype.propagate.source.type",
])
def test_every_filter_property_reads_java(prop: str) -> None:
    with pytest.raises(ConfigurationError, match=rf"^{prop.replace('.', '[.]')}: regular "
                                                 r"expression 'a\+\+' uses a possessive"):
        config(**{prop: "a++"})


def test_message_key_columns_read_java() -> None:
    cfg = config(**{"message.key.columns": "public.[a-z&&[^b]]:c"})
    assert cfg.key_columns_for("public", "a") == ("c",)
    assert cfg.key_columns_for("PUBLIC", "B") is None
    with pytest.raises(ConfigurationError, match=r"^message\.key\.columns: regular "
                                                 r"expression '\(\?>a\)' uses an atomic"):
        config(**{"message.key.columns": "(?>a):c"})


def test_patterns_pickle_as_their_java_text() -> None:
    """A configuration travels to Spark workers by pickle; the patterns compile again."""
    cfg = config(**{"table.include.list": r"public\.[a-z&&[^i]]"})
    again = pickle.loads(pickle.dumps(cfg))
    assert again == cfg
    assert again.includes_table("public", "j") and not again.includes_table("public", "i")


# -- Debezium's own tests of its filter predicates -----------------------------------------
def _includes(patterns: str, value: str) -> bool:
    return any(p.fullmatch(value) for p in parse_patterns(patterns))


def test_debezium_should_match_comma_separated_regex_includes() -> None:
    """debezium/debezium, debezium-core/src/test/java/io/debezium/function/PredicatesTest.java,
    shouldMatchCommaSeparatedRegexIncludes."""
    for value in ("30", "1005", "105", "15"):
        assert _includes("1.*5,30", value)
    for value in ("215", "150", "015", "5"):
        assert not _includes("1.*5,30", value)


def test_debezium_should_match_comma_separated_literal_includes_and_excludes() -> None:
    """PredicatesTest.java, shouldMatchCommaSeparatedLiteralIncludes and
    shouldMatchCommaSeparatedLiteralExcludes (an exclude list is the negation)."""
    for number in (1, 2, 3, 4, 5):
        assert _includes("1,2,3,4,5", str(number))
    for number in (0, 6, -1):
        assert not _includes("1,2,3,4,5", str(number))


def test_debezium_regex_split() -> None:
    """debezium/debezium, debezium-core/src/test/java/io/debezium/util/StringsTest.java,
    regexSplit and regexSplitWrongEscape (the Java literals unescaped once)."""
    assert split_patterns("a,b") == ["a", "b"]
    assert split_patterns("a\\,b") == ["a,b"]
    assert split_patterns("a,b,") == ["a", "b"]
    assert split_patterns("a,b\\,") == ["a", "b,"]
    assert split_patterns("a\\\\\\,b") == ["a\\\\,b"]
    assert split_patterns(
        "DROP TEMPORARY TABLE IF EXISTS .+ /\\\\* generated by server \\\\*/,"
        "INSERT INTO mysql.rds_heartbeat2\\(.*\\,.*\\) values \\(.*\\,.*\\) ON DUPLICATE KEY "
        "UPDATE value = .*") == [
        "DROP TEMPORARY TABLE IF EXISTS .+ /\\\\* generated by server \\\\*/",
        "INSERT INTO mysql.rds_heartbeat2\\(.*,.*\\) values \\(.*,.*\\) ON DUPLICATE KEY "
        "UPDATE value = .*"]
    with pytest.raises(ConfigurationError, match="unterminated escape sequence"):
        split_patterns("a,b\\,c\\")


def test_an_escaped_backslash_before_a_comma_still_splits() -> None:
    """RegExSplitter: a backslash escapes the next character, so ``\\\\,`` splits."""
    assert split_patterns("a\\\\,b") == ["a\\\\", "b"]
    assert _includes("a\\\\,b", "a\\") and _includes("a\\\\,b", "B")


def test_debezium_selectors_schema_lists() -> None:
    """debezium/debezium, debezium-core/src/test/java/io/debezium/relational/SelectorsTest.java,
    shouldCreateFilterWithSchemaBlacklistAndNoTableFilter,
    shouldCreateFilterWithSchemaWhitelistAndNoTableFilter and
    shouldCreateFilterWithSchemaWhitelistAndTableWhitelist (the table list written as the
    PostgreSQL connector matches it, ``schema.table``, where the test's ids carry a
    database: ``db\\.sc1\\.A`` becomes ``sc1\\.A``)."""
    excluded = config(**{"schema.exclude.list": "sc1,sc2"})
    assert not excluded.includes_table("sc1", "A") and not excluded.includes_table("sc2", "A")
    assert excluded.includes_table("sc3", "A") and excluded.includes_table("sc4", "A")
    included = config(**{"schema.include.list": "sc1,sc2"})
    assert included.includes_table("sc1", "A") and included.includes_table("sc2", "A")
    assert not included.includes_table("sc3", "A") and not included.includes_table("sc4", "A")
    both = config(**{"schema.include.list": "sc1,sc2", "table.include.list": "sc1\\.A,sc2\\.B"})
    assert both.includes_table("sc1", "A") and both.includes_table("sc2", "B")
    for schema, table in (("sc1", "B"), ("sc2", "A"), ("sc1", "C"), ("sc2", "D"),
                          ("sc3", "A"), ("sc4", "B")):
        assert not both.includes_table(schema, table)
