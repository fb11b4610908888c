"""The clock-skew guard: an event stamped too far ahead of when it can have happened is not believed.

    verdict = guard(recorded, max_skew_ms=300_000)   # recorded: (event, Kafka timestamp ms or None), in order
    verdict.accepted                                 # the events the model may see, in the same order
    verdict.skewed                                   # (position, event, reference ms, reason) of the others

The rule, the same as the streaming twin's (`twin.max_clock_skew_seconds`):

    An event is skewed when its event time is more than `max_skew_ms` ahead of its reference
    time: event_time_ms - reference_ms > max_skew_ms. The reference is the event's Kafka
    timestamp when it has one; otherwise the latest event time among the events accepted
    before it in the stream's order (the first event of a stream without Kafka timestamps has
    no reference and is accepted). A skewed event never becomes a reference.

So a skewed event is left out whole: it moves no clock and never stretches the end of a replay.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from schemas.events import Event
from schemas.jsonl import iso_time


def is_skewed(event_time_ms: int, reference_ms: int | None, max_skew_ms: int) -> bool:
    return reference_ms is not None and event_time_ms - reference_ms > max_skew_ms


def reason(event_time_ms: int, reference_ms: int, max_skew_ms: int, kafka: bool) -> str:
    """Why an event is skewed, in the words the twin's dead letters use."""
    against = "its Kafka ingestion time" if kafka else "the latest event time before it"
    return (f"clock skew: event time {iso_time(event_time_ms)} is {(event_time_ms - reference_ms) / 1000:.0f} s ahead"
            f" of {against} {iso_time(reference_ms)} (limit {max_skew_ms // 1000} s)")


@dataclass
class Verdict:
    accepted: list[Event] = field(default_factory=list)
    skewed: list[tuple[int, Event, int, str]] = field(default_factory=list)  # (position, event, reference, reason)


def guard(recorded: Iterable[tuple[Event, int | None]], max_skew_ms: int) -> Verdict:
    verdict, latest = Verdict(), None
    for position, (event, kafka_ms) in enumerate(recorded):
        reference = kafka_ms if kafka_ms is not None else latest
        if is_skewed(event.event_time_ms, reference, max_skew_ms):
            verdict.skewed.append((position, event, reference, reason(event.event_time_ms, reference, max_skew_ms,
                                                                      kafka_ms is not None)))
            continue
        verdict.accepted.append(event)
        latest = event.event_time_ms if latest is None else max(latest, event.event_time_ms)
    return verdict

