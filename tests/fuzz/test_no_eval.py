"""The library never evaluates, unpickles or imports anything that comes from its input.

A token scan of src/ finds every call of eval/exec/compile and every use of pickle,
marshal, shelve, importlib and friends; each one must be in the audited list below,
with the reason it cannot carry input. Then hostile identifiers (quotes, newlines,
Python code) go through the two code generators the library has.
"""

from __future__ import annotations

import builtins
import io
import json
import tokenize
from pathlib import Path

from pgcdc_events.events import EventConfig, EventDecoder, JsonRecordWriter
from pgcdc_events.protocol import (
    Begin,
    Commit,
    Insert,
    Relation,
    RelationColumn,
    TupleData,
    encode_message,
)

SRC = Path(__file__).resolve().parents[2] / "src" / "pgcdc_events"

#: Names whose use could evaluate, deserialize or import data.
DANGEROUS = {"eval", "exec", "compile", "execfile", "__import__", "pickle", "cPickle",
             "dill", "cloudpickle", "marshal", "shelve", "importlib", "import_module", "runpy",
             "yaml", "jsonpickle", "literal_eval"}

#: (file, name): why it is safe. Keep this list short and every entry justified.
AUDITED = {
    ("events/jsonconv.py", "exec"): "JSON writers generated from a schema: field names and "
                                    "defaults enter the source only as repr() literals",
    ("events/jsonconv.py", "compile"): "same generator",
    ("events/jsonconv.py", "eval"): "a fixed field's JSON text (the fused path): the same "
                                    "generator's expression for one value, made of helper "
                                    "names and an integer scale, the value bound as a local",
    ("events/tables.py", "exec"): "row converter generated from column positions (integers)",
    ("events/tables.py", "compile"): "same generator",
    ("protocol/decoder.py", "exec"): "tuple parser generated from a column count (an integer) "
                                     "and the kind bytes of protocol.wire",
    ("protocol/decoder.py", "compile"): "same generator",
    ("_frozen.py", "exec"): "constructor generated from the field count of one of the "
                            "library's own attrs classes (argument numbers only)",
    ("_frozen.py", "compile"): "same generator",
    ("testing/__init__.py", "importlib"): "lazy import of module names from a constant table",
    ("testing/__init__.py", "import_module"): "same",
    ("events/__init__.py", "importlib"): "lazy import of the incremental-snapshot modules named "
                                         "in the constant _LAZY table (an attribute name only "
                                         "selects a row)",
    ("events/__init__.py", "import_module"): "same",
    ("cli/__init__.py", "importlib"): "lazy import of the subcommand modules named in the "
                                      "constant _COMMANDS table (argv only selects a row)",
    ("cli/__init__.py", "import_module"): "same",
    ("spark/_session.py", "importlib"): "find_spec('pandas'): a constant",
    ("cli/_capture_decoder.py", "pickle"): "the back channel of capture --decode: answers and "
                                           "errors of the capture's own forked decoding "
                                           "processes, over an anonymous pipe between them "
                                           "(no file, socket or other user's data)",
    ("spark/layout.py", "pickle"): "record payloads the decode step wrote, read back with an "
                                   "Unpickler that resolves no global but decimal.Decimal",
}


def _uses(path: Path) -> list[tuple[str, int]]:
    """Dangerous names used as code (not in strings or comments, not as attributes)."""
    found = []
    tokens = list(tokenize.generate_tokens(io.StringIO(path.read_text()).readline))
    for i, tok in enumerate(tokens):
        if tok.type != tokenize.NAME or tok.string not in DANGEROUS:
            continue
        previous = tokens[i - 1].string if i else ""
        if previous == "." and tok.string in ("compile", "exec", "eval"):
            continue  # re.compile, a method called exec...: not the builtins
        if previous in ("def", "class"):
            continue
        found.append((tok.string, tok.start[0]))
    return found


def test_only_audited_uses_of_eval_exec_pickle_and_importlib() -> None:
    unexpected = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        for name, line in _uses(path):
            if (rel, name) not in AUDITED:
                unexpected.append(f"src/pgcdc_events/{rel}:{line}: {name}")
    assert unexpected == [], "audit these (and add them to AUDITED with a reason):\n" + \
        "\n".join(unexpected)


HOSTILE = [
    "a'b\"c", "x\ny", "\\", "'''", '"""', "__import__('builtins').setattr("
    "__import__('builtins'), 'PWNED', 1)", "}); raise SystemExit #", "{!r}{0}",
    "é\u2028ü", "tab\there",
]


def test_hostile_identifiers_are_data_never_code() -> None:
    columns = tuple(RelationColumn(1 if i == 0 else 0, name, 25, -1)
                    for i, name in enumerate(HOSTILE))
    relation = Relation(16400, "s'\"; exec('1')", "t\n'''", "d", columns)
    values = tuple(name.encode() for name in HOSTILE)
    for props in ({"topic.prefix": "p"},
                  {"topic.prefix": "p", "converter.schemas.enable": "false"}):
        config = EventConfig.from_properties(props)
        decoder = EventDecoder(config)
        writer = JsonRecordWriter(config.json)
        records = []
        for lsn, message in enumerate((Begin(9, 0, 7), relation,
                                       Insert(16400, TupleData(b"t" * len(values), values)),
                                       Commit(0, 9, 10, 0)), 1):
            records += decoder.feed(encode_message(message), lsn)
        (record,) = records
        line = json.loads(writer.record_line(record))
        value = line["value"]["payload"] if "payload" in line["value"] else line["value"]
        assert list(value["after"]) == HOSTILE
        assert list(value["after"].values()) == HOSTILE
        assert value["source"]["schema"] == relation.namespace
    assert not hasattr(builtins, "PWNED")


def test_spark_record_payloads_load_no_code() -> None:
    """The Spark layer's persisted record payloads are pickles it wrote itself; reading one
    back resolves no global but decimal.Decimal, so a planted payload cannot run code."""
    import pickle  # noqa: PLC0415
    from decimal import Decimal  # noqa: PLC0415

    import pytest  # noqa: PLC0415

    from pgcdc_events.spark.layout import _load_payload  # noqa: PLC0415

    payload = ({"id": 1}, {"after": {"amount": Decimal("12.50"), "b": b"\x00", "l": [1.5]}},
               None)
    assert _load_payload(pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)) == payload

    class Planted:
        def __reduce__(self) -> tuple[object, ...]:
            return (print, ("PWNED",))

    with pytest.raises(pickle.UnpicklingError, match=r"builtins\.print"):
        _load_payload(pickle.dumps(({}, Planted(), None)))
