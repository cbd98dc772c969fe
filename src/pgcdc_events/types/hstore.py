"""The hstore extension type, as JSON text or a Connect map (``hstore.handling.mode``).

Debezium parses hstore text with pgjdbc's ``HStoreConverter.fromString`` into a
``java.util.HashMap`` and then iterates that map: the JSON string (json mode)
and the Connect map (map mode, serialized by JsonConverter in the map's
iteration order) list the pairs in Java HashMap order, not in PostgreSQL's.
The golden recordings show it (``{"a":"1","new":"val","b":null}`` for
``"a"=>"1", "b"=>NULL, "new"=>"val"``), so :func:`java_hashmap_order`
reproduces that order exactly, tree bins included.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable, Sequence
from typing import Any, Final

from pgcdc_events.errors import ConversionError
from pgcdc_events.types.config import TypeConfig
from pgcdc_events.types.mapping import Builder, ValueMapping
from pgcdc_events.types.registry import PgType
from pgcdc_events.types.schema import Schema, map_schema

__all__ = [
    "BUILDERS",
    "hstore_from_binary",
    "hstore_from_text",
    "java_hashmap_order",
    "java_json_object",
    "java_string_hash",
]

# ---------------------------------------------------------------- parsing

_WS: Final = " \t\n\r\v\f"
# The "unrolled loop": its two parts never match the same text, so no backtracking blow-up.
_QUOTED: Final = re.compile(r'"([^"\\]*(?:\\.[^"\\]*)*)"', re.DOTALL)
_ARROW: Final = re.compile(r"[ \t\n\r\v\f]*=>[ \t\n\r\v\f]*")
_NULL: Final = re.compile(r"NULL(?![^,\s])", re.IGNORECASE)
_SEPARATOR: Final = re.compile(r"[ \t\n\r\v\f]*(,)?[ \t\n\r\v\f]*")
_ESCAPE: Final = re.compile(r"\\(.)", re.DOTALL)


def _unescape(text: str) -> str:
    return _ESCAPE.sub(r"\1", text) if "\\" in text else text


def _quoted(text: str, pos: int, what: str) -> tuple[str, int]:
    match = _QUOTED.match(text, pos)
    if match is None:
        raise ConversionError(f"hstore: expected a double-quoted {what} at character {pos}")
    return _unescape(match.group(1)), match.end()


def hstore_from_text(raw: bytes) -> dict[str, str | None]:
    """Parse hstore's text output (``"k"=>"v", "k2"=>NULL``) in linear time, in text order.

    A repeated key keeps its first position and its last value, as a Java
    ``HashMap`` fed the pairs in order would.
    """
    text = raw.decode("utf-8")
    out: dict[str, str | None] = {}
    pos, end = 0, len(text)
    while pos < end and text[pos] in _WS:
        pos += 1
    while pos < end:
        key, pos = _quoted(text, pos, "key")
        arrow = _ARROW.match(text, pos)
        if arrow is None:
            raise ConversionError(f"hstore: expected '=>' at character {pos}")
        pos = arrow.end()
        null = _NULL.match(text, pos)
        if null is not None:
            value: str | None = None
            pos = null.end()
        else:
            value, pos = _quoted(text, pos, "value")
        out[key] = value
        sep = _SEPARATOR.match(text, pos)
        assert sep is not None  # the pattern matches the empty string
        pos = sep.end()
        if sep.group(1) is None and pos < end:
            raise ConversionError(f"hstore: expected ',' at character {pos}")
    return out


def _chunk(raw: bytes, pos: int, length: int, what: str) -> str:
    if length < 0 or pos + length > len(raw):
        raise ConversionError(f"hstore binary: {what} length {length} exceeds the value")
    try:
        return raw[pos:pos + length].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConversionError(f"hstore binary: {what} is not UTF-8: {exc}") from None


def hstore_from_binary(raw: bytes) -> dict[str, str | None]:
    """Decode hstore's send format: int32 count, then (int32 len, key, int32 len or -1, value)."""
    if len(raw) < 4:
        raise ConversionError("hstore binary: missing pair count")
    (count,) = struct.unpack_from(">i", raw, 0)
    if count < 0 or count * 8 > len(raw) - 4:  # each pair needs at least two lengths
        raise ConversionError(f"hstore binary: pair count {count} exceeds the value")
    out: dict[str, str | None] = {}
    pos = 4
    for _ in range(count):
        if pos + 4 > len(raw):
            raise ConversionError("hstore binary: truncated key length")
        (klen,) = struct.unpack_from(">i", raw, pos)
        key = _chunk(raw, pos + 4, klen, "key")
        pos += 4 + klen
        if pos + 4 > len(raw):
            raise ConversionError("hstore binary: truncated value length")
        (vlen,) = struct.unpack_from(">i", raw, pos)
        pos += 4
        if vlen == -1:
            out[key] = None
        else:
            out[key] = _chunk(raw, pos, vlen, "value")
            pos += vlen
    if pos != len(raw):
        raise ConversionError(f"hstore binary: {len(raw) - pos} trailing bytes")
    return out


# ---------------------------------------------------------------- java.util.HashMap order


def java_string_hash(key: str) -> int:
    """Java's ``String.hashCode()`` (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    units = key.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def _spread(h: int) -> int:
    """``HashMap.hash()``: ``h ^ (h >>> 16)``, signed."""
    u = h & 0xFFFFFFFF
    u ^= u >> 16
    return u - (1 << 32) if u & 0x80000000 else u


class _Node:
    """A HashMap entry; the tree fields are used only while its bin is a red-black tree."""

    __slots__ = ("hash", "index", "left", "parent", "red", "right", "units")

    def __init__(self, index: int, key: str) -> None:
        self.index = index
        self.hash = _spread(java_string_hash(key))
        self.units = key.encode("utf-16-be")  # String.compareTo order
        self.left: _Node | None = None
        self.right: _Node | None = None
        self.parent: _Node | None = None
        self.red = False

    def goes_left_of(self, other: _Node) -> bool:
        """The tree direction: hash first, then ``compareTo`` (keys are distinct)."""
        if other.hash != self.hash:
            return other.hash > self.hash
        return self.units < other.units


def _rotate_left(root: _Node, p: _Node) -> _Node:
    r = p.right
    if r is not None:
        p.right = rl = r.left
        if rl is not None:
            rl.parent = p
        r.parent = pp = p.parent
        if pp is None:
            root = r
            r.red = False
        elif pp.left is p:
            pp.left = r
        else:
            pp.right = r
        r.left = p
        p.parent = r
    return root


def _rotate_right(root: _Node, p: _Node) -> _Node:
    left = p.left
    if left is not None:
        p.left = lr = left.right
        if lr is not None:
            lr.parent = p
        left.parent = pp = p.parent
        if pp is None:
            root = left
            left.red = False
        elif pp.right is p:
            pp.right = left
        else:
            pp.left = left
        left.right = p
        p.parent = left
    return root


def _balance_insertion(root: _Node, x: _Node) -> _Node:
    """``HashMap.TreeNode.balanceInsertion``, step for step (the root decides bin order)."""
    x.red = True
    while True:
        xp = x.parent
        if xp is None:
            x.red = False
            return x
        xpp = xp.parent
        if not xp.red or xpp is None:
            return root
        xppl = xpp.left
        if xp is xppl:
            xppr = xpp.right
            if xppr is not None and xppr.red:
                xppr.red = xp.red = False
                xpp.red = True
                x = xpp
                continue
            if x is xp.right:
                x = xp
                root = _rotate_left(root, x)
                xp = x.parent
                xpp = None if xp is None else xp.parent
            if xp is not None:
                xp.red = False
                if xpp is not None:
                    xpp.red = True
                    root = _rotate_right(root, xpp)
        else:
            if xppl is not None and xppl.red:
                xppl.red = xp.red = False
                xpp.red = True
                x = xpp
                continue
            if x is xp.left:
                x = xp
                root = _rotate_right(root, x)
                xp = x.parent
                xpp = None if xp is None else xp.parent
            if xp is not None:
                xp.red = False
                if xpp is not None:
                    xpp.red = True
                    root = _rotate_left(root, xpp)


def _tree_insert(root: _Node, x: _Node) -> _Node:
    """Hang ``x`` under its tree parent (returned); the caller rebalances."""
    p = root
    while True:
        left = x.goes_left_of(p)
        child = p.left if left else p.right
        if child is None:
            x.parent = p
            x.left = x.right = None
            if left:
                p.left = x
            else:
                p.right = x
            return p
        p = child


def _move_to_front(order: list[_Node], root: _Node) -> None:
    if order[0] is not root:
        order.remove(root)
        order.insert(0, root)


def _treeify(order: list[_Node]) -> _Node:
    """``TreeNode.treeify``: insert the bin's nodes in list order, move the root to the front."""
    root = order[0]
    root.parent = root.left = root.right = None
    root.red = False
    for x in order[1:]:
        _tree_insert(root, x)
        root = _balance_insertion(root, x)
    _move_to_front(order, root)
    return root


class _JavaHashMap:
    """Enough of ``java.util.HashMap`` (JDK 8+) to know its iteration order.

    Bins are lists in ``next`` order; a bin holding more than 8 nodes in a
    table of at least 64 becomes a red-black tree whose root is moved to the
    front of the bin (``moveRootToFront``), which is what reorders tree bins.
    """

    def __init__(self) -> None:
        self.bins: list[list[_Node] | None] = [None] * 16
        self.roots: dict[int, _Node] = {}  # bin index -> tree root, for tree bins
        self.size = 0

    def put(self, node: _Node) -> None:
        """Insert a key that is not in the map yet."""
        n = len(self.bins)
        i = node.hash & (n - 1)
        order = self.bins[i]
        if order is None:
            self.bins[i] = [node]
        elif i in self.roots:
            root = self.roots[i]
            parent = _tree_insert(root, node)
            order.insert(order.index(parent) + 1, node)
            root = _balance_insertion(root, node)
            _move_to_front(order, root)
            self.roots[i] = root
        else:
            order.append(node)
            if len(order) > 8:  # TREEIFY_THRESHOLD: the bin had 8 nodes before this one
                if n < 64:  # MIN_TREEIFY_CAPACITY
                    self._resize()
                else:
                    self.roots[i] = _treeify(order)
        self.size += 1
        if self.size > len(self.bins) * 3 // 4:
            self._resize()

    def _resize(self) -> None:
        old, bit = self.bins, len(self.bins)
        self.bins = [None] * (2 * bit)
        roots, self.roots = self.roots, {}
        for j, order in enumerate(old):
            if order is None:
                continue
            lo = [e for e in order if not e.hash & bit]
            hi = [e for e in order if e.hash & bit]
            for index, part, other in ((j, lo, hi), (j + bit, hi, lo)):
                if not part:
                    continue
                self.bins[index] = part
                if j in roots and len(part) > 6:  # UNTREEIFY_THRESHOLD
                    self.roots[index] = _treeify(part) if other else roots[j]

    def order(self) -> list[int]:
        """Insertion indices in iteration order."""
        return [e.index for order in self.bins if order for e in order]


def java_hashmap_order(keys: Sequence[str]) -> list[int]:
    """Positions of distinct ``keys`` in the order a ``HashMap`` filled in key order iterates."""
    table = _JavaHashMap()
    for i, key in enumerate(keys):
        table.put(_Node(i, key))
    return table.order()


# ---------------------------------------------------------------- Jackson JSON

_JSON_ESCAPES: Final = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n",
                        "\f": "\\f", "\r": "\\r"}
_JSON_SPECIAL: Final = re.compile(r'["\\\x00-\x1f]')


def _json_char(match: re.Match[str]) -> str:
    ch = match.group()
    return _JSON_ESCAPES.get(ch) or f"\\u{ord(ch):04X}"


def _json_string(text: str) -> str:
    """A JSON string as Jackson writes it: ``"``, ``\\`` and controls escaped, upper-case hex."""
    return '"' + _JSON_SPECIAL.sub(_json_char, text) + '"'


def java_json_object(pairs: Iterable[tuple[str, str | None]]) -> str:
    """``{"k":"v","k2":null}``, as Jackson's ``JsonGenerator`` writes string fields."""
    body = ",".join(
        f"{_json_string(k)}:{'null' if v is None else _json_string(v)}" for k, v in pairs
    )
    return "{" + body + "}"


# ---------------------------------------------------------------- mapping


def _java_ordered(pairs: dict[str, str | None]) -> dict[str, str | None]:
    items = list(pairs.items())
    if len(items) < 2:
        return pairs
    return dict(items[i] for i in java_hashmap_order([k for k, _ in items]))


def _as_json(parse: Any) -> Any:
    return lambda raw: java_json_object(_java_ordered(parse(raw)).items())


def _as_map(parse: Any) -> Any:
    return lambda raw: _java_ordered(parse(raw))


def _hstore(t: PgType, typmod: int, config: TypeConfig) -> ValueMapping:
    """json mode: an ``io.debezium.data.Json`` string; map mode: map<string, optional string>."""
    placeholder = config.unavailable_value_placeholder.decode("utf-8", "replace")
    if config.hstore_handling_mode == "map":
        schema = map_schema(Schema("string"), Schema("string", optional=True))
        return ValueMapping(schema, _as_map(hstore_from_text), _as_map(hstore_from_binary),
                            {placeholder: placeholder})
    schema = Schema("string", name="io.debezium.data.Json", version=1)
    return ValueMapping(schema, _as_json(hstore_from_text), _as_json(hstore_from_binary),
                        java_json_object([(placeholder, placeholder)]))


BUILDERS: Final[dict[str, Builder]] = {"hstore": _hstore}
