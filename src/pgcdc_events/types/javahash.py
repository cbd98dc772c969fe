"""Java's ``HashMap`` iteration order, where Debezium's output follows it.

Debezium builds some values from a ``java.util.HashMap`` and emits them in its
iteration order: hstore pairs, and the ``data_collections`` of transaction END
records. :func:`java_hashmap_order` reproduces that order exactly (String hash
codes over UTF-16, table resizes and the red-black tree bins of colliding keys),
checked against OpenJDK 17's HashMap.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["java_hashmap_order", "java_string_hash"]


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
