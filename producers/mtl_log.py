"""Reading Exchange message-tracking log (MTL) files: header lines, then one CSV record per line.

    reader = MtlReader()
    for number, raw in enumerate(lines, start=1):
        item = reader.line(raw)        # a Row, a BadLine (why it cannot be read), or None (header, blank)

The format (MSGTRK*.LOG): `#Software`, `#Version`, `#Log-type`, `#Date` and `#Fields:` header
lines, then comma-separated values in the order `#Fields:` names them; a value with a comma
or a quote is quoted, a quote inside it doubled; multi-valued fields (recipients, statuses)
separate their values with `;`. A record is one line: a quote left open at the end of the
line is an error, not a continuation. The reader keeps the current `#Fields:` per file, so
a file that is truncated or replaced starts over with its new header (`reset()`).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

BOM = b"\xef\xbb\xbf"
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class Row:
    """One readable record: its fields by header name, and its time in milliseconds UTC."""

    fields: dict[str, str]
    time_ms: int

    def get(self, name: str) -> str:
        return self.fields.get(name, "").strip()

    def values(self, name: str) -> tuple[str, ...]:
        """A multi-valued field's values (`a@x;b@y`), empty ones left out."""
        return tuple(v.strip() for v in self.get(name).split(";") if v.strip())


@dataclass(frozen=True)
class BadLine:
    reason: str


class MtlReader:
    """Turns the lines of one file, in order, into rows; remembers the file's `#Fields:` header."""

    def __init__(self) -> None:
        self.fields: tuple[str, ...] | None = None

    def reset(self) -> None:
        """The file starts over (truncated or replaced): its header comes again."""
        self.fields = None

    def line(self, raw: bytes) -> Row | BadLine | None:
        raw = raw.removeprefix(BOM).rstrip(b"\r\n")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return BadLine(f"not UTF-8 text ({exc.reason} at byte {exc.start})")
        if not text.strip():
            return None
        if text.startswith("#"):
            if text.startswith("#Fields:"):
                self.fields = tuple(name.strip() for name in text[len("#Fields:"):].split(","))
            return None
        if self.fields is None:
            return BadLine("no #Fields: header line before this record")
        try:
            values = next(csv.reader([text], strict=True))
        except csv.Error as exc:
            return BadLine(f"not a CSV record ({exc}; an unterminated quote?)")
        if len(values) != len(self.fields):
            return BadLine(f"{len(values)} fields where the #Fields: header names {len(self.fields)}")
        fields = dict(zip(self.fields, values))
        stamp = fields.get("date-time", "").strip()
        time_ms = parse_time(stamp)
        if time_ms is None:
            return BadLine(f"date-time {stamp!r} is not a valid ISO-8601 time")
        return Row(fields, time_ms)


def parse_time(text: str) -> int | None:
    """Milliseconds since the epoch of an ISO-8601 time (`2026-11-22T02:00:00.750Z`); UTC when it names no zone."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return (moment - _EPOCH) // timedelta(milliseconds=1)
