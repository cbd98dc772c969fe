"""``pgcdc-events inspect``: print each message of a capture as one JSON object a line."""

from __future__ import annotations

import argparse
import json
from typing import Any

import attrs

from pgcdc_events.cli._io import open_input, open_output
from pgcdc_events.errors import ProtocolError
from pgcdc_events.protocol import (
    KIND_BINARY,
    KIND_NULL,
    KIND_TEXT,
    CaptureError,
    Lsn,
    Message,
    PgOutputReader,
    Relation,
    TupleData,
    pg_timestamp_to_datetime,
    rows_of_line,
)

_LSN_FIELDS = frozenset(
    {"final_lsn", "commit_lsn", "end_lsn", "origin_lsn", "lsn", "abort_lsn", "prepare_lsn",
     "prepare_end_lsn", "rollback_end_lsn"}
)


def register(commands: Any) -> None:
    """Add the subcommand to the CLI's subparsers."""
    parser = commands.add_parser(
        "inspect",
        help="print each pgoutput message of a capture as JSON",
        description="Parse a capture (JSON Lines of {lsn, xid, data}) and print one JSON "
        "object per message: its type, LSN, xid and every field. Tuple values are "
        "text where they are text, {\"binary\": hex} where binary, null for NULL and "
        "{\"unchanged_toast\": true} for unchanged TOASTed values.",
    )
    parser.add_argument("capture", help="capture JSON Lines file ('-' for stdin)")
    parser.add_argument("--output", "-o", help="write here instead of stdout")
    parser.add_argument("--proto-version", type=int, choices=(1, 2, 3, 4),
                        help="the stream's proto_version (enables per-version checks)")
    parser.add_argument("--streaming", choices=("off", "on", "parallel"),
                        help="the stream's streaming option (decides the Stream Abort form)")
    parser.set_defaults(run=run)


def _column(kind: int, value: bytes | None) -> Any:
    if kind == KIND_TEXT:
        assert value is not None
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"text_hex": value.hex()}
    if kind == KIND_BINARY:
        assert value is not None
        return {"binary": value.hex()}
    if kind == KIND_NULL:
        return None
    return {"unchanged_toast": True}


def tuple_to_json(tup: TupleData, relation: Relation | None) -> Any:
    """A tuple as ``{column: value}`` when the relation is known, else a list."""
    values = [_column(k, v) for k, v in zip(tup.kinds, tup.values, strict=True)]
    if relation is not None and len(relation.columns) == len(values):
        return {col.name: value for col, value in zip(relation.columns, values, strict=True)}
    return values


def _iso_time(value: int) -> str | int:
    try:
        return pg_timestamp_to_datetime(value).isoformat()
    except ProtocolError:
        return value


def message_to_json(message: Message, relations: Any) -> dict[str, Any]:
    """Every field of ``message`` as JSON-ready values.

    LSNs are in X/Y form, times in ISO 8601 (UTC), and an absent stream xid is left out.
    """
    out: dict[str, Any] = {"type": type(message).__name__, "byte": message.TYPE.decode()}
    relation = relations.get(getattr(message, "relation_id", None))
    for field in attrs.fields(type(message)):
        value = getattr(message, field.name)
        if isinstance(value, TupleData):
            value = tuple_to_json(value, relation)
        elif isinstance(value, bytes):
            value = value.decode("utf-8", "backslashreplace")
        elif field.name in _LSN_FIELDS and isinstance(value, int):
            value = str(Lsn(value))
        elif field.name.endswith("_time") and isinstance(value, int):
            value = _iso_time(value)
        elif field.name == "xid" and value is None:
            continue
        elif isinstance(value, tuple):
            value = [attrs.asdict(v) if attrs.has(type(v)) else v for v in value]
        out[field.name] = value
    return out


def run(args: argparse.Namespace) -> int:
    """Print the capture's messages; a bad line stops with its line number and offset."""
    reader = PgOutputReader(proto_version=args.proto_version, streaming=args.streaming)
    with open_input(args.capture) as src, open_output(args.output) as out:
        for number, line in enumerate(src, 1):
            if not line.strip():
                continue
            for row in rows_of_line(line, line_number=number):  # a COPY block: its rows
                try:
                    message = reader.read(row.data)
                except ProtocolError as exc:
                    raise CaptureError(str(exc), line=number) from None
                record = {"lsn": str(row.lsn), "xid": row.xid,
                          **message_to_json(message, reader.relations)}
                if row.snapshot:
                    record["snapshot"] = True
                out.write(json.dumps(record, ensure_ascii=False))
                out.write("\n")
    return 0
