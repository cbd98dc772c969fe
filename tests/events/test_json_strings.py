"""Every string a record carries survives the JSON writer byte for byte.

The writer inlines Jackson's escaping (upper-case ``\\uXXXX`` hex). A pass that
upper-cased "escapes" once treated the second half of an escaped backslash as the
start of one, so ``C:\\users`` was written as ``C:\\uSERS``. The properties here feed
arbitrary text through every string-carrying schema (text, varchar, char(n), citext,
json, jsonb, xml, text[], hstore in JSON and map modes, a text key, key-change
headers and a message prefix) and read the written line back with the standard
library's ``json.loads``, an independent parser: the value must come back unchanged.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from pgcdc_events.events.jsonconv import jackson_string
from pgcdc_events.testing import factories, table

# PostgreSQL text holds any character but NUL; surrogates cannot be encoded as UTF-8.
TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"))
# Text rich in the characters that escaping handles: backslashes, "u", hex digits, quotes.
ESCAPY = st.text(st.sampled_from(["\\", "u", "U", "0", "0", "e", "9", "F", '"', "\n", "\x01",
                                  "\x1f", "é", " ", "x"]), max_size=24)
ANY_TEXT = st.one_of(ESCAPY, TEXT)

STRINGS = table("public.strings", {
    "k": "text", "t": "text", "v": "varchar(1000)", "c": "char(40)", "ci": "citext",
    "j": "json", "jb": "jsonb", "x": "xml", "arr": "text[]", "h": "hstore",
}, primary_key="k")

CASES = ["C:\\users\\bob", "\\usepackage{x}", "\\u00e9", "\\\\u0041", "a\\", "\\", "\\U0001",
         "\x01\\u", '"\\"', "tab\there"]


def _after(record: dict[str, Any]) -> dict[str, Any]:
    payload: dict[str, Any] = record["value"]["payload"]
    after: dict[str, Any] = payload["after"]
    return after


@settings(max_examples=300, deadline=None)
@given(ANY_TEXT)
@example("C:\\users\\bob")
@example("\\usepackage{x}")
@example("\\u00e9")
def test_jackson_string_reads_back(text: str) -> None:
    assert json.loads(jackson_string(text)) == text


def test_jackson_string_upper_cases_only_real_escapes() -> None:
    # Jackson writes control characters as \u00XX with upper-case hex; a backslash followed by
    # "u" in the text is an escaped backslash and a literal "u".
    assert jackson_string("\x1f") == '"\\u001F"'
    assert jackson_string("C:\\users") == '"C:\\\\users"'
    assert jackson_string("\\\x1f") == '"\\\\\\u001F"'


@settings(max_examples=150, deadline=None)
@given(ANY_TEXT, ANY_TEXT)
@example("C:\\users\\bob", "\\u00e9")
def test_every_string_schema_reads_back(key: str, text: str) -> None:
    values = {
        "k": key, "t": text, "v": text[:1000], "c": text, "ci": text,
        "j": {"s": text}, "jb": {"s": text}, "x": text, "arr": [text, key], "h": {text: key},
    }
    for mode in ("json", "map"):
        record = factories.insert(STRINGS, values, json=True,
                                  config={"hstore.handling.mode": mode})
        assert record["key"]["payload"] == {"k": key}
        after = _after(record)
        assert after["k"] == key
        assert after["t"] == text
        assert after["v"] == text[:1000]
        # char(n) pads to n characters with spaces; longer text is kept whole by PostgreSQL's
        # text input only after truncating trailing spaces, so compare the stripped forms.
        assert after["c"].rstrip(" ") == text.rstrip(" ")
        assert after["ci"] == text
        assert json.loads(after["j"]) == {"s": text}
        assert json.loads(after["jb"]) == {"s": text}
        assert after["x"] == text
        assert after["arr"] == [text, key]
        hstore = json.loads(after["h"]) if mode == "json" else after["h"]
        assert hstore == {text: key}


@settings(max_examples=100, deadline=None)
@given(ANY_TEXT, ANY_TEXT)
@example("C:\\users", "\\usepackage")
def test_key_change_headers_and_message_prefix_read_back(old: str, new: str) -> None:
    if old == new:
        new = old + "\\u"
    records = factories.transaction(
        factories.op_update(STRINGS, {"k": old, "t": "x"}, {"k": new, "t": "y"}), json=True)
    delete, create = records[0], records[-1]
    assert delete["headers"]["__debezium.newkey"]["payload"] == {"k": new}
    assert create["headers"]["__debezium.oldkey"]["payload"] == {"k": old}
    assert delete["value"]["payload"]["before"]["k"] == old
    assert create["value"]["payload"]["after"]["k"] == new
    message = factories.message(old, new.encode("utf-8"), json=True)
    assert message["value"]["payload"]["message"]["prefix"] == old


def test_known_corruptions() -> None:
    """The cases reported: each written value reads back as the text that went in."""
    for text in CASES:
        after = _after(factories.insert(STRINGS, {"k": text, "t": text, "jb": {"s": text},
                                                  "arr": [text]}, json=True))
        assert (after["k"], after["t"], after["arr"]) == (text, text, [text])
        assert json.loads(after["jb"]) == {"s": text}
