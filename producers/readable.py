"""The twin's outputs as one human line each: what `shadowtwin alerts tail`, `commands tail` and
`dead-letters tail` print.

    2026-11-22T02:03:00.000Z CRITICAL MESSAGE_AT_RISK ex01,ex02 (3 messages) ex01 has been unreachable ...
    2026-11-22T02:03:00.000Z ex02 resubmit <a@contoso.com> [ex01/17] of ex01 via any route (PRIMARY_HEARTBEAT_TIMEOUT)

The `--json` form is the contract's JSON Lines form (`schemas.jsonl.dumps`), the same one the
twin publishes on `<topic>.json` with `twin.json_topics`.
"""

from __future__ import annotations

from typing import Any

from schemas.events import Alert, DeadLetter, RedeliveryCommand
from schemas.jsonl import iso_time


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
        return f"{iso_time(record.at_ms)} dead letter from {where}: {record.reason}"
    raise TypeError(f"no readable line for {type(record).__name__}")
