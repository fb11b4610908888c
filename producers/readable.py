"""The twin's outputs as one human line each: what `shadowtwin alerts tail`, `commands tail` and
`dead-letters tail` print.

    2026-11-22T02:03:00.000Z CRITICAL MESSAGE_AT_RISK ex01,ex02 (3 messages) ex01 has been unreachable ...
    2026-11-22T02:03:00.000Z ex02 resubmit <a@contoso.com> [ex01/17] of ex01 via any route (PRIMARY_HEARTBEAT_TIMEOUT)
    2026-11-22T02:03:00.000Z dead letter from shadowtwin.events[1]@41 key "ex01" headers source="console": ...

A dead letter's key and header values are bytes, shown as quoted text: what is not printable UTF-8
escaped (`\x80`, `\n`), cut after `SHOWN` characters with its size (`"ex01ex01..." (1200 bytes)`); the
first `HEADERS_SHOWN` headers, with how many more (`--json` has them all, and the bytes).

The `--json` form is the contract's JSON Lines form (`schemas.jsonl.dumps`), the same one the
twin publishes on `<topic>.json` with `twin.json_topics`.
"""

from __future__ import annotations

from typing import Any

from schemas.events import Alert, DeadLetter, KafkaHeader, RedeliveryCommand
from schemas.jsonl import iso_time

SHOWN, HEADERS_SHOWN = 40, 5  # characters of a dead letter's key or header shown; headers shown


def line(record: Any) -> str:
    """One line for an alert, a redelivery command or a dead letter."""
    if isinstance(record, Alert):
        count = len(record.messages)
        messages = f" ({count} message{'s' if count != 1 else ''})" if count else ""
        return (f"{iso_time(record.decided_at_ms)} {record.severity.value} {record.type.value}"
                f" {','.join(record.servers)}{messages} {record.reason}")
    if isinstance(record, RedeliveryCommand):
        fork = f" fork {record.message.fork_id}" if record.message.fork_id else ""
        to = f" to {', '.join(record.recipients)}" if record.recipients else ""
        return (f"{iso_time(record.decided_at_ms)} {record.holder} resubmit {record.message.message_id}"
                f" [{record.message.internal_id}{fork}] of {record.primary_server}{to}"
                f" via {record.next_hop or 'any route'} ({record.reason.value})")
    if isinstance(record, DeadLetter):
        where = (f"{record.topic} line {record.offset}" if record.partition == -1  # a log file's line (ingest)
                 else f"{record.topic}[{record.partition}]@{record.offset}")
        key = "" if record.key is None else f" key {shown(record.key)}"
        more = len(record.headers) - HEADERS_SHOWN
        headers = (f" headers {', '.join(_header(h) for h in record.headers[:HEADERS_SHOWN])}"
                   f"{f' and {more} more' if more > 0 else ''}" if record.headers else "")
        return f"{iso_time(record.at_ms)} dead letter from {where}{key}{headers}: {record.reason}"
    raise TypeError(f"no readable line for {type(record).__name__}")


def shown(data: bytes) -> str:
    """Bytes as quoted printable text, cut at `SHOWN` characters (see the module's docstring)."""
    text = data.decode("utf-8", "surrogateescape")  # a byte that is not UTF-8: a lone surrogate, escaped below
    return f'"{_printable(text)}"' + ("" if len(text) <= SHOWN else f" ({len(data)} bytes)")


def _header(header: KafkaHeader) -> str:
    return f"{_printable(header.key)}={'null' if header.value is None else shown(header.value)}"


def _printable(text: str) -> str:
    cut = "".join(_escaped(c) for c in text[:SHOWN])
    return cut if len(text) <= SHOWN else cut + "..."


def _escaped(c: str) -> str:
    if c.isprintable() and c not in '"\\':
        return c
    if "\udc80" <= c <= "\udcff":
        return f"\\x{ord(c) - 0xDC00:02x}"
    return "\\" + c if c in '"\\' else c.encode("unicode_escape").decode("ascii")
