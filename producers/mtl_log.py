"""Reading Exchange message-tracking log (MTL) files: raw logs and `Get-MessageTrackingLog | Export-Csv` files.

    reader = MtlReader(Path("MSGTRKMD20261122-1.LOG"))
    for number, raw in enumerate(lines, start=1):   # lines as UTF-8 bytes (log_tail transcodes UTF-16)
        item = reader.line(raw)        # a Row, a BadLine (why it cannot be read), or None (header, blank)

Raw logs (MSGTRK*.LOG / *.log): `#Software`, `#Version`, `#Log-type`, `#Date` and `#Fields:` header
lines, then comma-separated values in the order `#Fields:` names them; a value with a comma
or a quote is quoted, a quote inside it doubled; multi-valued fields (recipients, statuses)
separate their values with `;`. A record is one line: a quote left open at the end of the
line is an error, not a continuation. The reader keeps the current `#Fields:` per file, so
a file that is truncated or replaced starts over with its new header (`reset()`).

Export-Csv files: an optional `#TYPE ...` line, then a header of property names
(`"Timestamp","ClientIp",...,"EventId",...`, unquoted with PowerShell 7's `-UseQuotes AsNeeded`,
separated by `;` or a tab with `-UseCulture` or `-Delimiter`), then records. The property names
are mapped to the log's field names (`EXPORT_COLUMNS`), so the mapper sees one kind of row.
`Timestamp` is ISO-8601, or the en-US text PowerShell writes (`11/22/2026 2:00:00 AM`), read as UTC
(EXCHANGE_LOGS.md: export on a UTC machine or as ISO).
A multi-valued property exported without `-join` (`System.String[]`) is a bad line. A quoted value may hold
a line break (`continues`): the file's tail joins the lines of such a record before it is read.

A file that is no message-tracking log at all (`not_a_tracking_log`: its first record comes before any
header, or its header lacks a field every tracking log since Exchange 2007 has: an SMTP protocol log, a CSV
of something else, a binary file) is refused as a whole by the ingester, not read line by line.

Which transport service logged a raw file is in its name (`service_of`): MSGTRK (Transport),
MSGTRKMS (Mailbox Transport Submission), MSGTRKMD (Mailbox Transport Delivery), MSGTRKMA
(moderation approval); an Export-Csv file or another name is "" (unknown). Each Row carries it.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Iterable

BOM = b"\xef\xbb\xbf"
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
# A raw log's name, as Exchange writes it or with a prefix an administrator gave it (EX03_MSGTRKMD...)
_SERVICE = re.compile(r"(?:^|[^a-z])(MSGTRK(?:MS|MD|MA)?)\d", re.IGNORECASE)
# A status starts with an SMTP reply code (`550 5.1.1 ...`, `250 2.0.0`) or an enhanced code alone;
# what follows a `;` and does not start so belongs to the status before it (`...QUEUE.Expired;[{LRT}=...]`).
_STATUS_START = re.compile(r"^\s*(?:[245]\d\d(?:[ -]|$)|[245]\.\d{1,3}\.\d{1,3}\b)")
# A record is one line, whatever its length (a delivery to thousands of recipients lists them all): no field limit
# of the csv module's own (128 KiB by default).
csv.field_size_limit(max(csv.field_size_limit(), 2**31 - 1))
# en-US only, with AM/PM: a day-first culture writes "10/04/2026 15:51:24" for 10 April, which a 24-hour month-first
# layout would read as 4 October.
_US_TIME_FORMATS = ("%m/%d/%Y %I:%M:%S %p", "%m/%d/%Y %I:%M %p")

# Get-MessageTrackingLog's property names -> the raw log's field names.
EXPORT_COLUMNS = {
    "timestamp": "date-time", "clientip": "client-ip", "clienthostname": "client-hostname",
    "serverip": "server-ip", "serverhostname": "server-hostname", "sourcecontext": "source-context",
    "connectorid": "connector-id", "source": "source", "eventid": "event-id",
    "internalmessageid": "internal-message-id", "messageid": "message-id",
    "networkmessageid": "network-message-id", "recipients": "recipient-address",
    "recipientstatus": "recipient-status", "totalbytes": "total-bytes", "recipientcount": "recipient-count",
    "relatedrecipientaddress": "related-recipient-address", "reference": "reference",
    "messagesubject": "message-subject", "sender": "sender-address", "returnpath": "return-path",
    "messageinfo": "message-info", "directionality": "directionality", "tenantid": "tenant-id",
    "originalclientip": "original-client-ip", "originalserverip": "original-server-ip",
    "eventdata": "custom-data",
}
_EXPORT_DELIMITERS = (",", ";", "\t")  # Export-Csv's default, -UseCulture's in most of Europe, a tab
# Fields every message-tracking log has (Exchange 2007 to 2019) and the mapper reads.
REQUIRED_FIELDS = ("date-time", "client-hostname", "server-hostname", "source", "event-id", "internal-message-id",
                   "message-id", "recipient-address")
_MULTI_VALUED = ("recipient-address", "recipient-status", "reference", "related-recipient-address")


def service_of(path: Path | str | None) -> str:
    """`MSGTRKMD20261122-1.LOG` (or `EX03_MSGTRKMD20261122-1.LOG`) -> `MSGTRKMD`; "" for a name that is not a
    raw log's."""
    match = _SERVICE.search(Path(path).name) if path is not None else None
    return match.group(1).upper() if match else ""


def split_statuses(text: str) -> tuple[str, ...]:
    """`recipient-status` values: split on `;`, but a piece that does not start a status is part of the previous one."""
    statuses: list[str] = []
    for piece in text.split(";"):
        if statuses and not _STATUS_START.match(piece):
            statuses[-1] += ";" + piece
        elif piece.strip():
            statuses.append(piece)
    return tuple(s.strip() for s in statuses if s.strip())


@dataclass(frozen=True)
class Row:
    """One readable record: its fields by log field name, its time in milliseconds UTC, and the
    service whose log it came from (`service_of`, "" when unknown)."""

    fields: dict[str, str]
    time_ms: int
    service: str = ""

    def get(self, name: str) -> str:
        return self.fields.get(name, "").strip()

    def values(self, name: str) -> tuple[str, ...]:
        """A multi-valued field's values (`a@x;b@y`), empty ones left out."""
        return tuple(v.strip() for v in self.get(name).split(";") if v.strip())

    def statuses(self) -> tuple[str, ...]:
        return split_statuses(self.get("recipient-status"))


@dataclass(frozen=True)
class BadLine:
    reason: str


_NO_HEADER = BadLine("no #Fields: header line (or Export-Csv header) before this record")


class MtlReader:
    """Turns the lines of one file, in order, into rows; remembers the file's header."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.service = service_of(path)
        self.fields: tuple[str, ...] | None = None
        self.exported = False  # an Export-Csv file (a header of property names)
        self.delimiter = ","  # an export's may be another (-UseCulture, -Delimiter)

    def continues(self, raw: bytes) -> bool:
        """Whether a record goes on on the next line: an Export-Csv record with a quoted field open at its end
        (a subject or a status with a line break: the export quotes every field that holds a quote, so an odd
        count of them leaves one open). A raw log's record is one line."""
        return self.exported and raw.count(b'"') % 2 == 1

    @staticmethod
    def whole(item: Row | BadLine | None) -> bool:
        """Whether a last line with no line end after it reads whole: a record of as many fields as the header
        names, closed quotes and a time (a file written without a line end at its end), or a header. A line
        the server is still writing reads as a bad line (too few fields, an open quote)."""
        return not isinstance(item, BadLine)

    def reset(self) -> None:
        """The file starts over (truncated or replaced): its header comes again."""
        self.fields, self.exported, self.delimiter = None, False, ","

    def line(self, raw: bytes) -> Row | BadLine | None:
        raw = raw.removeprefix(BOM).rstrip(b"\r\n")
        if raw.startswith(b"#") and not raw.startswith(b"#Fields:"):
            return None  # #Software, #Version, #Date...: read by no one, whatever their bytes
        if b"\0" in raw:
            return BadLine(f"a NUL byte in the line (at byte {raw.index(0)}): no log writes one")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return BadLine(f"not UTF-8 text ({exc.reason} at byte {exc.start})")
        if not text.strip():
            return None
        if text.startswith("#Fields:"):
            self.fields = tuple(name.strip() for name in text[len("#Fields:"):].split(","))
            self.exported, self.delimiter = False, ","
            return None
        if self.fields is None:
            header = self._export_header(text)
            if header is not None:
                (self.fields, self.delimiter), self.exported = header, True
                return None
        if self.fields is None:
            return _NO_HEADER
        try:
            values = next(csv.reader([text], strict=True, delimiter=self.delimiter))
        except csv.Error as exc:
            return BadLine(f"not a CSV record ({exc}; an unterminated quote?)")
        if len(values) != len(self.fields):
            return BadLine(f"{len(values)} fields where the header names {len(self.fields)}")
        fields = dict(zip(self.fields, values))
        if self.exported:
            arrays = [name for name in _MULTI_VALUED if fields.get(name, "").startswith("System.")]
            if arrays:
                return BadLine(f"{', '.join(arrays)} exported as {fields[arrays[0]]!r}: export multi-valued"
                               " properties joined with ';' (see producers/EXCHANGE_LOGS.md)")
        stamp = fields.get("date-time", "").strip()
        time_ms = parse_time(stamp)
        if time_ms is None:
            hint = (" (nor en-US with AM/PM: export Timestamp as ISO-8601, see producers/EXCHANGE_LOGS.md)"
                    if self.exported else "")
            return BadLine(f"date-time {stamp!r} is not a valid ISO-8601 time{hint}")
        return Row(fields, time_ms, "" if self.exported else self.service)

    @staticmethod
    def not_text(text: str, reason: str) -> BadLine | None:
        """A line of a UTF-16 file that does not decode (`text`: as far as it does), set aside as a line that
        is not UTF-8 is; a header line no one reads (#Software, #Date...) is passed over as it would be."""
        if text.startswith("#") and not text.startswith("#Fields:") or not text.strip():
            return None
        return BadLine(reason)

    @staticmethod
    def _export_header(text: str) -> tuple[tuple[str, ...], str] | None:
        """The log's field names of an export's header, and its delimiter (`,`, or `;` or tab)."""
        for delimiter in _EXPORT_DELIMITERS:
            try:
                keys = [name.strip().lower() for name in next(csv.reader([text], strict=True, delimiter=delimiter))]
            except csv.Error:
                continue
            if "timestamp" in keys and "eventid" in keys:
                return tuple(EXPORT_COLUMNS.get(key, key) for key in keys), delimiter
        return None


_GZIP_MAGIC = b"\x1f\x8b"  # RFC 1952's ID1 ID2: an archived log, copied as it was kept


def not_a_tracking_log(lines: Iterable[bytes]) -> str | None:
    """Why a file whose first lines these are is no message-tracking log, or None: it is one, or it has no
    header or record yet to tell."""
    reader, log_type = MtlReader(), ""
    for raw in lines:
        if not log_type and reader.fields is None and raw.startswith(_GZIP_MAGIC):
            return "it is gzip-compressed (gunzip it first: the logs are read as Exchange writes them)"
        if raw.removeprefix(BOM).startswith(b"#Log-type:"):
            log_type = raw.removeprefix(BOM)[len(b"#Log-type:"):].decode("utf-8", "replace").strip()
        item = reader.line(raw)
        if reader.fields is not None:
            missing = [name for name in REQUIRED_FIELDS if name not in reader.fields]
            if not missing:
                return None
            if reader.exported:
                export_names = {field: prop for prop, field in EXPORT_COLUMNS.items()}
                return f"its Export-Csv header has no {', '.join(export_names[name] for name in missing)} column"
            kind = f" (#Log-type: {log_type})" if log_type else ""
            return f"its #Fields: line{kind} has no {', '.join(missing)}"
        if item is not None:
            return ("no #Fields: line or Export-Csv header comes before its first record" if item == _NO_HEADER
                    else f"before any #Fields: line, a line is {item.reason}")
    return None


def parse_time(text: str) -> int | None:
    """Milliseconds since the epoch of an ISO-8601 time (`2026-11-22T02:00:00.750Z`), or of the en-US
    text Export-Csv writes (`11/22/2026 2:00:00 AM`, with AM/PM); UTC when it names no zone."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        moment = None
        for layout in _US_TIME_FORMATS:
            try:
                moment = datetime.strptime(text, layout)
                break
            except ValueError:
                continue
        if moment is None:
            return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return (moment - _EPOCH) // timedelta(milliseconds=1)
