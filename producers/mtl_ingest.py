"""`shadowtwin ingest exchange-mtl`: message-tracking log files -> events and dead letters in Kafka.

    counts = ingest(["MSGTRK20261122-1.LOG"], KafkaSink(bootstrap, events_topic, dead_letters_topic))
    print(counts.describe())

Lines are read with `producers.log_tail` (merged by time across files; `follow=True` keeps
tailing them and follows roll-over), parsed with `producers.mtl_log` and mapped with
`producers.mtl_events`. Every line that cannot be read or mapped becomes a contract
DeadLetter (the line's bytes, topic = the file path, partition -1, offset = the line number,
the reason) and ingestion goes on; lines that are readable but make no event (an event-id
the twin does not use, DEFER, a Safety Net RESUBMIT) are counted by reason and skipped.
Event ids are `mtl-<sha256 of the line, 24 hex>-<n>`: ingesting the same lines again gives
the same ids, whatever the file is called.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Protocol

from producers.log_tail import Line, LogTail
from producers.mtl_events import MtlMapper, Skip, Unmappable
from producers.mtl_log import BadLine, MtlReader
from schemas.events import DeadLetter, Event
from producers.publisher import DEFAULT_DELIVERY_TIMEOUT_S, Deliveries, flush, produce, reporting_producer


class Sink(Protocol):
    def event(self, event: Event) -> None: ...

    def dead(self, letter: DeadLetter) -> None: ...


@dataclass
class IngestCounts:
    lines: int = 0  # record lines read (headers and blank lines not counted)
    events: Counter = field(default_factory=Counter)  # by kind
    dead_letters: int = 0
    skipped: Counter = field(default_factory=Counter)  # by reason
    unjoined: int = 0  # events whose primary internal id could not be learned (see mtl_events)

    def describe(self) -> str:
        parts = [f"{self.lines} lines: {sum(self.events.values())} events, {self.dead_letters} dead letters,"
                 f" {sum(self.skipped.values())} skipped"]
        parts += [f"  {kind}: {n}" for kind, n in sorted(self.events.items())]
        parts += [f"  skipped {n}: {reason}" for reason, n in self.skipped.most_common()]
        if self.unjoined:
            parts.append(f"  {self.unjoined} lines named a message whose primary's internal id was not seen"
                         " (see producers/EXCHANGE_LOGS.md)")
        return "\n".join(parts)


def line_id(raw: bytes) -> str:
    return "mtl-" + hashlib.sha256(raw).hexdigest()[:24]


def ingest(paths: list[str], sink: Sink, *, follow: bool = False, stop: threading.Event | None = None,
           poll_seconds: float = 0.5, internal_domains: frozenset[str] = frozenset(),
           wall_clock: Callable[[], float] = time.time) -> IngestCounts:
    """Read the files (to their end, or with `follow` until `stop` is set) into `sink`."""
    stop = stop or threading.Event()
    tail = LogTail(paths, follow=follow, new_reader=MtlReader)
    mapper, counts = MtlMapper(internal_domains), IngestCounts()
    try:
        while True:
            for line in tail.poll():
                _one(line, mapper, sink, counts, wall_clock)
            if not follow or stop.wait(poll_seconds):
                break
    finally:
        tail.close()
    counts.unjoined = mapper.unjoined
    return counts


def _one(line: Line, mapper: MtlMapper, sink: Sink, counts: IngestCounts, wall_clock: Callable[[], float]) -> None:
    if line.item is None:  # a header or a blank line
        return
    counts.lines += 1
    reason = line.item.reason if isinstance(line.item, BadLine) else None
    if reason is None:
        try:
            result = mapper.map(line.item, line_id(line.raw))
        except Unmappable as exc:
            reason = str(exc)
        else:
            if isinstance(result, Skip):
                counts.skipped[result.reason] += 1
            for event in () if isinstance(result, Skip) else result:
                sink.event(event)
                counts.events[event.kind] += 1
            return
    counts.dead_letters += 1
    sink.dead(DeadLetter(original=line.raw, topic=str(line.path), partition=-1, offset=line.number,
                         reason=reason, at_ms=int(wall_clock() * 1000)))


class KafkaSink:
    """Events to the events topic (keyed by primary server), dead letters to the dead-letter topic;
    `deliveries` counts the broker's acknowledgements of both."""

    def __init__(self, bootstrap: str, events_topic: str, dead_letters_topic: str,
                 delivery_timeout_s: float = DEFAULT_DELIVERY_TIMEOUT_S):
        self.deliveries = Deliveries(bootstrap, delivery_timeout_s)
        self.producer = reporting_producer(bootstrap, self.deliveries)
        self.topics = (events_topic, dead_letters_topic)

    def _send(self, topic: str, record: Event | DeadLetter) -> None:
        produce(self.producer, topic, record, self.deliveries.delivered)
        self.deliveries.produced += 1

    def event(self, event: Event) -> None:
        self._send(self.topics[0], event)

    def dead(self, letter: DeadLetter) -> None:
        self._send(self.topics[1], letter)

    def close(self) -> int:
        """Flush; returns how many records were not acknowledged (failed or still queued)."""
        return flush(self.producer, self.deliveries)
