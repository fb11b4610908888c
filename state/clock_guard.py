"""The clock-skew guard: an event stamped too far ahead of when it can have happened is not believed.

    verdict = guard(recorded, max_skew_ms=300_000)   # recorded: (event, Kafka timestamp ms or None), in order
    verdict.accepted                                 # the events the model may see, in the same order
    verdict.skewed                                   # (position, event, reference ms, reason) of the others

The rule, the same as the streaming twin's (`twin.max_clock_skew_seconds`):

    An event is skewed when its event time is more than `max_skew_ms` ahead of its reference
    time: event_time_ms - reference_ms > max_skew_ms. The reference is the event's Kafka
    timestamp when it has one; otherwise the later of the latest event time among the events
    accepted before it in the stream's order and the event time of the next event in that order
    from another node (the first event of a stream without Kafka timestamps has no reference and
    is accepted). A skewed event never becomes a reference.

Without Kafka timestamps, the next event of another node tells a quiet spell from a clock ahead:
after five quiet minutes every server's events are five minutes on, where a server whose clock
runs ahead is alone ahead of the others. (The latest event time alone took every event after a
quiet spell longer than the limit, a small organisation's night, for a clock ahead, and left the
rest of the recording out.) An event whose time is out of range is no one's witness.

So a skewed event is left out whole: it moves no clock and never stretches the end of a replay.

An event time before 1970 or after 2262-04-11 (`EARLIEST_MS`, `LATEST_MS`) is no moment a
server can have meant (a garbled or forged stamp), and beyond what the engines can hold: Spark's
Python workers hold times as nanoseconds (to 2262), datetimes and ISO text end with year 9999. Such
an event is left out the same way, in both engines, with the reason `out_of_range` gives.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from schemas.events import Event
from schemas.jsonl import iso_time


EARLIEST_MS = 0  # 1970-01-01T00:00:00Z
LATEST_MS = (2**63 - 1) // 1_000_000  # 2262-04-11T23:47:16.854Z, the last millisecond of int64 nanoseconds
OUT_OF_RANGE = "event time out of range"


def out_of_range(event_time_ms: int) -> str | None:
    """Why an event time is no usable moment, or None when it is one."""
    if EARLIEST_MS <= event_time_ms <= LATEST_MS:
        return None
    return (f"{OUT_OF_RANGE}: {event_time_ms} ms ({iso_time(event_time_ms)}) is not between"
            f" {iso_time(EARLIEST_MS)} and {iso_time(LATEST_MS)}")


def is_skewed(event_time_ms: int, reference_ms: int | None, max_skew_ms: int) -> bool:
    return reference_ms is not None and event_time_ms - reference_ms > max_skew_ms


def reason(event_time_ms: int, reference_ms: int, max_skew_ms: int, kafka: bool, witness: bool = False) -> str:
    """Why an event is skewed, in the words the twin's dead letters use."""
    against = ("its Kafka ingestion time" if kafka else "the next event time of another node" if witness
               else "the latest event time before it")
    return (f"clock skew: event time {iso_time(event_time_ms)} is {(event_time_ms - reference_ms) / 1000:.0f} s ahead"
            f" of {against} {iso_time(reference_ms)} (limit {max_skew_ms // 1000} s)")


@dataclass
class Verdict:
    accepted: list[Event] = field(default_factory=list)
    skewed: list[tuple[int, Event, int, str]] = field(default_factory=list)  # (position, event, reference, reason)


def guard(recorded: Iterable[tuple[Event, int | None]], max_skew_ms: int) -> Verdict:
    recorded = list(recorded)
    witnesses = _next_of_another_node([event for event, _ in recorded])
    verdict, latest = Verdict(), None
    for position, (event, kafka_ms) in enumerate(recorded):
        reference = kafka_ms if kafka_ms is not None else _later(latest, witnesses[position])
        if why := out_of_range(event.event_time_ms):
            verdict.skewed.append((position, event, kafka_ms if kafka_ms is not None else latest or 0, why))
            continue
        if is_skewed(event.event_time_ms, reference, max_skew_ms):
            verdict.skewed.append((position, event, reference, reason(
                event.event_time_ms, reference, max_skew_ms, kafka_ms is not None, reference != latest)))
            continue
        verdict.accepted.append(event)
        latest = event.event_time_ms if latest is None else max(latest, event.event_time_ms)
    return verdict


def _later(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def _next_of_another_node(events: list[Event]) -> list[int | None]:
    """For each event, the event time of the next event in the stream from another node (None: none follows)."""
    witnesses: list[int | None] = [None] * len(events)
    nearest: tuple[str, int] | None = None  # the nearest event after, and the nearest after of a node other than its
    other: tuple[str, int] | None = None
    for position in range(len(events) - 1, -1, -1):
        event = events[position]
        witness = other if nearest is not None and nearest[0] == event.node.casefold() else nearest
        witnesses[position] = witness[1] if witness is not None else None
        if out_of_range(event.event_time_ms):
            continue
        if nearest is not None and nearest[0] != event.node.casefold():
            other = nearest
        nearest = (event.node.casefold(), event.event_time_ms)
    return witnesses
