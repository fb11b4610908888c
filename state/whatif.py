"""What-if summaries: what the model decided over a recording, in figures an operator reads at a glance."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from schemas.events import AlertType
from state.replay import ReplayResult


@dataclass(frozen=True)
class Summary:
    label: str
    servers: int
    events: int
    start_ms: int | None
    end_ms: int | None
    messages: int
    promotions: int
    promoted_messages: int
    commands: int
    at_risk: int
    lost: int
    expired: int
    not_redundant: int
    rejected: int
    duplicates: int
    duplicates_seen: int  # of those, the ones people see (the alerts name recipients)
    delay_per_hop_ms: dict[str, int] | None  # `percentiles` of received -> left this hop, in milliseconds

    @classmethod
    def of(cls, label: str, result: ReplayResult) -> "Summary":
        def messages_in(*types: AlertType) -> set[tuple[tuple[str, ...], str]]:
            # by primary (the alert's first server) too: each server numbers its messages (Exchange's logs: 1, 2, ...)
            return {(a.servers[:1], m.message.internal_id) for a in result.alerts if a.type in types for m in a.messages}

        promotion_types = (AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, AlertType.QUEUE_DATABASE_CHANGED_SHADOWS_PROMOTED)
        duplicate_alerts = [a for a in result.alerts if a.type is AlertType.DUPLICATE_DELIVERY_EXPECTED]
        delays = sorted(o.processed_ms - o.received_ms for o in result.outcomes
                        if o.result in ("delivered", "promoted"))
        return cls(
            label=label,
            servers=len(result.states),
            events=result.events,
            start_ms=result.start_ms,
            end_ms=result.end_ms,
            messages=result.messages,
            promotions=sum(1 for a in result.alerts if a.type in promotion_types),
            promoted_messages=len(messages_in(*promotion_types)),
            commands=len(result.commands),
            at_risk=len(messages_in(AlertType.MESSAGE_AT_RISK)),
            lost=len(messages_in(AlertType.MESSAGE_LOST)),
            expired=len(messages_in(AlertType.MESSAGE_EXPIRED)),
            not_redundant=len(messages_in(AlertType.NOT_REDUNDANT)),
            rejected=len(messages_in(AlertType.REJECTED_NO_SHADOW)),
            duplicates=sum(len(a.messages) for a in duplicate_alerts),
            duplicates_seen=sum(1 for a in duplicate_alerts for m in a.messages if m.recipients),
            delay_per_hop_ms=percentiles(delays),
        )


def render(summaries: list[Summary]) -> str:
    """A side-by-side table, one column per parameter set."""
    first = summaries[0]
    span = ""
    if first.start_ms is not None and first.end_ms is not None:
        span = f", {_time(first.start_ms)} to {_time(first.end_ms)} ({duration(first.end_ms - first.start_ms)})"
    rows = [
        ("messages tracked", lambda s: f"{s.messages:,}"),
        ("promotions (shadow takes over)", lambda s: f"{s.promotions:,} ({s.promoted_messages:,} messages)"),
        ("redelivery commands", lambda s: f"{s.commands:,}"),
        ("messages at risk", lambda s: f"{s.at_risk:,}"),
        ("messages lost", lambda s: f"{s.lost:,}"),
        ("expired in a queue (MessageExpirationTimeout)", lambda s: f"{s.expired:,}"),
        ("not redundantly persisted", lambda s: f"{s.not_redundant:,}"),
        ("rejected 451 4.4.0", lambda s: f"{s.rejected:,}"),
        ("expected duplicate deliveries", lambda s: f"{s.duplicates:,} ({s.duplicates_seen:,} seen by people)"),
        ("delay per hop p50 / p90 / p99 / max", lambda s: " / ".join(duration(s.delay_per_hop_ms[k]) for k in
                                                                      ("p50", "p90", "p99", "max"))
         if s.delay_per_hop_ms else "-"),
    ]
    label_width = max(len(r[0]) for r in rows)
    cells = [[s.label for s in summaries]] + [[fmt(s) for s in summaries] for _, fmt in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(summaries))]
    lines = [f"what-if over {first.events:,} events from {first.servers} servers{span}", ""]
    lines.append(" " * label_width + "  " + "  ".join(c.rjust(w) for c, w in zip(cells[0], widths)))
    for (label, _), row in zip(rows, cells[1:]):
        lines.append(label.ljust(label_width) + "  " + "  ".join(c.rjust(w) for c, w in zip(row, widths)))
    return "\n".join(lines)


def percentiles(sorted_values: list[int]) -> dict[str, int] | None:
    """{"count", "p50", "p90", "p99", "max"} of sorted values (nearest rank); None when there are none."""
    if not sorted_values:
        return None
    n = len(sorted_values)
    at = lambda p: sorted_values[min(n - 1, max(0, round(p / 100 * n) - 1))]  # noqa: E731
    return {"count": n, "p50": at(50), "p90": at(90), "p99": at(99), "max": sorted_values[-1]}


def _time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M")


def duration(ms: int) -> str:
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{seconds / 60:.1f}m"
    if seconds < 86400:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"
