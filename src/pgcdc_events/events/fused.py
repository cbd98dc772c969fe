"""The fused path of ``decode``: a change's JSON line written straight from its converted
values, with no source, envelope or record object in between.

For the default output (JsonConverter, as :class:`~pgcdc_events.events.JsonRecordWriter`
writes it), most of a line is the same from record to record: the topic, the schemas'
JSON, the headers, the source fields a transaction's changes to one table share. Per
table version, :class:`FusedLines` has the writer generate one function
(:meth:`JsonRecordWriter.line_writer <pgcdc_events.events.JsonRecordWriter.line_writer>`)
that takes the key and row structs the table's generated conversion made, the shared
source fields, the ``sequence``, LSN, transaction block and processing time, and returns
the line. Nothing is written by a rule of its own: the envelope's, the source block's and
the transaction block's layouts are read from the functions that build those structs
(:func:`~pgcdc_events.events.envelope.envelope_value`,
:func:`~pgcdc_events.events.source.from_shared`,
:func:`~pgcdc_events.events.envelope.transaction_block`), called once with placeholders,
and each field is written by its schema's rule in :mod:`.jsonconv`, the same code as
every other record's.

:meth:`EventDecoder.fused_row <pgcdc_events.events.EventDecoder.fused_row>` decides, per
message, whether the fused path applies: an Insert in an ordinary transaction, to a table
with a key, decoded by :class:`~pgcdc_events.events.EventDecoder` itself. Everything else
(other messages, updates, deletes, truncates, logical messages, streamed and prepared
transactions, snapshots, a subclass's decoder such as YugabyteDB's, a skipped operation,
a change that fails to convert) takes the record path, and is counted by reason in
:attr:`FusedLines.fallbacks`; :attr:`FusedLines.written` counts the lines the fused path
wrote.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from pgcdc_events.events.envelope import envelope_value, transaction_block
from pgcdc_events.events.jsonconv import Fixed, Input, JsonRecordWriter
from pgcdc_events.events.source import from_shared, shared_fields
from pgcdc_events.types.schema import Struct

if TYPE_CHECKING:
    from pgcdc_events.events.config import EventConfig
    from pgcdc_events.events.records import Header
    from pgcdc_events.events.tables import TableSchema

__all__ = ["FusedLines", "LineWriter"]

#: ``line(parts, key, after, shared, sequence, lsn, block_id, total_order,
#: collection_order, now_ns)`` appends an Insert's line to ``parts`` (the block's values
#: are ``None`` without transaction metadata).
LineWriter = Callable[[list[bytes], "Struct | None", Struct, tuple[Any, ...], str, int,
                       "str | None", "int | None", "int | None", int], None]
_PARAMS: Final = ("k", "a", "s", "seq", "lsn", "bid", "total", "per", "now")
#: Kept per run: the line writers of this many table versions at most.
_MAX_TABLES: Final = 4096


class _Var:
    """A placeholder for a value only known per record: the name of the generated
    function's local (or an expression of it) that will hold it."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __floordiv__(self, other: int) -> _Var:
        return _Var(f"({self.name} // {other!r})")

    def __mul__(self, other: int) -> _Var:
        return _Var(f"({self.name} * {other!r})")


def _var(name: str) -> Any:
    """A :class:`_Var`, typed as any value (it stands for one)."""
    return _Var(name)


class FusedLines:
    """The fused line writers of one decoder's tables, for one :class:`JsonRecordWriter`
    (its key, value and header options), and the counts that prove the path ran."""

    def __init__(self, writer: JsonRecordWriter, headers: tuple[Header, ...]) -> None:
        self.writer = writer
        self.headers = headers
        #: Lines written by the fused path.
        self.written = 0
        #: Messages the fused path handed to the record path, by reason.
        self.fallbacks: Counter[str] = Counter()
        #: Counts the lines written by topic and op (``decode --summary``), when set.
        self.tally: Counter[tuple[str, str]] | None = None
        self.config: EventConfig | None = None
        #: The Insert line writer of each table version made so far (:meth:`line`).
        self.lines: dict[TableSchema, LineWriter | None] = {}

    def use(self, config: EventConfig) -> None:
        """Write the lines of the records of ``config`` from now on (the decoder's)."""
        self.config = config
        self.lines.clear()

    def line(self, table: TableSchema) -> LineWriter | None:
        """The Insert line writer of ``table`` (``None``: the record path writes them)."""
        try:
            return self.lines[table]
        except KeyError:
            pass
        if len(self.lines) >= _MAX_TABLES:
            self.lines.clear()
        config = self.config
        assert config is not None
        made = self.lines[table] = _insert_line(self.writer, table, self.headers,
                                                config.provide_transaction_metadata)
        return made


def _insert_line(writer: JsonRecordWriter, table: TableSchema, headers: tuple[Header, ...],
                 block: bool) -> LineWriter | None:
    """The generated line writer of an Insert into ``table`` (``None`` for a table without
    a key, whose line has a null key)."""
    if table.key_schema is None:
        return None
    # the layouts, from the functions that build the structs (placeholders in, placeholders
    # and constants out)
    width = len(shared_fields(version="", name="", ts_us=_var("ts_us"), db="", schema="",
                              table="", tx_id=None))
    shared = tuple(f"s{i}" for i in range(width))
    source = from_shared(tuple(map(_var, shared)), None, _var("seq"), _var("lsn"))
    txn = transaction_block(_var("bid"), _var("total"), _var("per")) if block else None
    value = envelope_value(table.envelope_schema, None, _var("a"), source, txn, "c",
                           _var("now"))
    preamble = [f"{', '.join(shared)}, = s"]
    inputs = tuple(_input(v, preamble) for v in value.values)
    line: LineWriter = writer.line_writer(table.topic, table.key_schema, table.envelope_schema,
                                          headers, _PARAMS, tuple(preamble), inputs)
    return line


def _input(value: Any, preamble: list[str]) -> Input:
    """A field's input to the line writer: a local's name (an expression is computed once,
    into a local of the ``preamble``), a nested struct's inputs, or a fixed value."""
    if isinstance(value, Struct):
        return tuple(_input(v, preamble) for v in value.values)
    if isinstance(value, _Var):
        if value.name.isidentifier():
            return value.name
        local = f"t{len(preamble)}"
        preamble.append(f"{local} = {value.name}")
        return local
    return Fixed(value)
