"""`shadowtwin replay`: a recording (.jsonl or .avro) published to a topic, paced by its event times.

    outcome = replay(bootstrap, "shadowtwin.events", Path("day.avro"), speed=60, progress=print)

The events are published with `producers.publisher.Publisher`, as they are: in the file's
order, keyed by primary server, their event times untouched. `speed` is how many seconds of
event time pass per second of wall time (60: a minute a second); None publishes as fast as
possible; `in_flight_ms` (half the twin's watermark delay, from `shadowtwin replay`) keeps every
partition within it of the others in event time (`producers.publisher`), so that a twin reading the
topic as it fills finds no event behind its watermark. While it runs, `progress` gets a line about
every `every` seconds: events sent and acknowledged, the event-time position, the rate; and, while
the broker acknowledges none, what the client says about it (a dead broker is named seconds in, not
at the delivery timeout). The outcome counts what the broker did not acknowledge (see `producers.publisher`), an event too large to
send among them (a dead letter in `dead_letters` if the brokers have it, the recording its topic, its number
its offset); setting `stop` (e.g. `infra.signals.stop_on_signals()`) ends
the run early, after flushing what was sent; the outcome then says how many of the recording's events were not sent.
"""

from __future__ import annotations

import contextlib
import math
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

from infra.kafka import bootstrap_of
from producers.publisher import DEFAULT_DELIVERY_TIMEOUT_S, Deliveries, Publisher
from producers.recording import count_events, read_events
from schemas.container import ContainerError
from schemas.events import Event
from schemas.jsonl import iso_time


MIN_SPEED = 0.001  # a second of event time every 1000 s; slower is no use, and its waits overflow the clock


def parse_speed(text: str) -> float | None:
    """`max` -> None (as fast as possible); else a number of at least MIN_SPEED. The ValueError
    says what is expected (the caller names the option and the value)."""
    if text.strip().lower() == "max":
        return None
    try:
        speed = float(text)
    except ValueError:
        speed = math.nan
    if not speed > 0:
        raise ValueError("expected a positive number of seconds per second, or max")
    if speed < MIN_SPEED:
        raise ValueError(f"too slow to use: expected at least {MIN_SPEED:g} seconds of event time per second, or max")
    return speed


@dataclass
class ReplayOutcome:
    sent: int
    seconds: float
    last_event_ms: int | None
    interrupted: bool = False
    deliveries: Deliveries | None = None
    total: int | None = None  # the recording's events, when it was interrupted
    too_large: int = 0  # events too large to send (`producers.publisher.Oversized`): not sent
    dead_letters: str | None = None  # the topic of their dead letters

    @property
    def unacknowledged(self) -> int:
        return self.deliveries.unacknowledged if self.deliveries is not None else 0

    def describe(self) -> str:
        rate = self.sent / self.seconds if self.seconds > 0 else 0.0
        until = f", up to event time {iso_time(self.last_event_ms)}" if self.last_event_ms is not None else ""
        verb = "interrupted after sending" if self.interrupted else "sent"
        of = f" of {self.total:,} ({self.total - self.sent:,} not sent)" if self.total is not None else ""
        acknowledged = f", {self.deliveries.acknowledged} acknowledged" if self.unacknowledged else ""
        large = "" if not self.too_large else (
            f"; {self.too_large} events were larger than Kafka or the topic takes: not sent, "
            + (f"dead letters in {self.dead_letters} instead" if self.dead_letters else "and no dead-letter topic"))
        return (f"{verb} {self.sent} events{of} in {self.seconds:.1f} s ({rate:,.0f} events/s){until}{acknowledged}"
                f"{large}")

    def failure(self) -> str | None:
        """One line when some events were not acknowledged, else None."""
        return self.deliveries.describe_failure() if self.unacknowledged else None


class _Position:
    """The events, remembering the event time of the last one handed out."""

    def __init__(self, events: Iterable[Event]):
        self.events, self.last_ms = events, None
        self.error: Exception | None = None  # what stopped the reading, raised again by `replay`

    def __iter__(self) -> Iterator[Event]:
        try:
            for event in self.events:
                self.last_ms = event.event_time_ms
                yield event
        except Exception as exc:  # noqa: BLE001 - a bad recording: told to the caller, not lost in the thread
            self.error = exc


# librdkafka times its errors ("... Connection refused (after 1ms in state CONNECT)"): timed otherwise, it is no news
_WHEN = re.compile(r" \(after \d+ms in state [^)]*\)")


class ProgressLines:
    """A publisher's progress lines: events sent and acknowledged, the event-time position, the rate; and,
    while the broker acknowledges none, what the client says about it (said once, not every line)."""

    def __init__(self, progress: Callable[[str], None] | None):
        self.progress = progress
        self.sent, self.acknowledged, self.at, self.said = 0, 0, time.monotonic(), None

    def say(self, sent: int, acknowledged: int, last_ms: int | None, deliveries: Deliveries) -> None:
        if self.progress is None:
            return
        now = time.monotonic()
        rate = (sent - self.sent) / max(now - self.at, 1e-9)
        where = iso_time(last_ms) if last_ms is not None else "-"
        line = f"sent {sent:,} events, {acknowledged:,} acknowledged, event time {where}, {rate:,.0f} events/s"
        if acknowledged == self.acknowledged and sent > acknowledged and deliveries.broker_error:
            line += f"; Kafka at {bootstrap_of(deliveries.bootstrap)} acknowledged none since the last line"
            said = _WHEN.sub("", deliveries.broker_error)
            if said != self.said:
                line += f" (the client says: {deliveries.broker_error})"
            self.said = said
        self.progress(line)
        self.sent, self.acknowledged, self.at = sent, acknowledged, now


def replay(bootstrap: str, topic: str, path: Path, *, speed: float | None = None,
           progress: Callable[[str], None] | None = None, every: float = 2.0, stop: threading.Event | None = None,
           delivery_timeout_s: float = DEFAULT_DELIVERY_TIMEOUT_S, dead_letters: str | None = None,
           in_flight_ms: int | None = None) -> ReplayOutcome:
    outcome = publish(bootstrap, topic, read_events(path), speed=speed, progress=progress, every=every, stop=stop,
                      delivery_timeout_s=delivery_timeout_s, dead_letters=dead_letters, source=str(path),
                      in_flight_ms=in_flight_ms)
    if outcome.interrupted:  # how much of the recording was not sent (a damaged one was said as it was read)
        with contextlib.suppress(ContainerError):
            outcome.total = count_events(path)
    return outcome


def publish(bootstrap: str, topic: str, events: Iterable[Event], *, speed: float | None = None,
            progress: Callable[[str], None] | None = None, every: float = 2.0,
            stop: threading.Event | None = None,
            delivery_timeout_s: float = DEFAULT_DELIVERY_TIMEOUT_S, dead_letters: str | None = None,
            source: str = "events", in_flight_ms: int | None = None) -> ReplayOutcome:
    """Publish `events` (any stream of them, e.g. a simulation) with progress lines, as `replay` does;
    setting `stop` ends it early. An event too large to send becomes a dead letter in `dead_letters` (its topic
    `source`, its offset its number in `events`). A bad recording is raised again once what was read has been
    flushed. `in_flight_ms`: see `producers.publisher`."""
    position = _Position(events)
    publisher = Publisher(bootstrap, topic, position, speed=speed, delivery_timeout_s=delivery_timeout_s,
                          dead_letters=dead_letters, source=source, in_flight_ms=in_flight_ms)
    started = time.monotonic()
    publisher.start()
    interrupted, lines = False, ProgressLines(progress)
    while publisher.is_alive():
        if stop is None:
            publisher.join(every)
        elif stop.wait(every):
            interrupted = True
            publisher.stop()
        if publisher.is_alive():
            lines.say(publisher.sent, publisher.deliveries.acknowledged, position.last_ms, publisher.deliveries)
    outcome = ReplayOutcome(publisher.sent, time.monotonic() - started, position.last_ms, interrupted,
                            publisher.deliveries, too_large=sum(publisher.oversized.not_sent.values()),
                            dead_letters=publisher.oversized.dead_letters_topic)
    if position.error is not None:
        if progress is not None:
            progress(f"{outcome.describe()}, up to where the recording could be read")
        raise position.error
    return outcome
