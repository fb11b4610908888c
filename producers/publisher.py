"""Publishing events to the events topic, as fast as possible or paced by their event times.

    publisher = Publisher(bootstrap, topic, events, speed=1.0)   # 1.0: real time, 60: a minute a second
    publisher.start(); ...; publisher.stop()

Each event is keyed by its primary server (one stateful group, one partition), encoded with
the contract's codec. Paced publishing waits until `first event time + elapsed x speed`
reaches an event's time before sending it.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Iterable

from confluent_kafka import Producer

from schemas.codec import Record, encode, kafka_key
from schemas.events import Event
from infra.kafka import producer


class Publisher(threading.Thread):
    def __init__(self, bootstrap_servers: str, topic: str, events: Iterable[Event], speed: float | None = None,
                 clock: Callable[[], float] = time.monotonic):
        super().__init__(name="shadowtwin-publisher", daemon=True)

        self._producer = producer(bootstrap_servers)
        self._topic = topic
        self._events = events
        self._speed = speed
        self._clock = clock
        self._stopping = threading.Event()
        self.sent = 0

    def run(self) -> None:
        started, first_ms = self._clock(), None
        for event in self._events:
            if self._stopping.is_set():
                break
            if self._speed is not None:
                first_ms = event.event_time_ms if first_ms is None else first_ms
                due = started + (event.event_time_ms - first_ms) / 1000 / self._speed
                if (wait := due - self._clock()) > 0 and self._stopping.wait(wait):
                    break
            self.send(event)
        self._producer.flush(30)

    def send(self, event: Event) -> None:
        produce(self._producer, self._topic, event)
        self.sent += 1

    def stop(self) -> None:
        self._stopping.set()
        self.join(timeout=30)


def produce(producer: Producer, topic: str, record: Record, on_delivery: Callable | None = None) -> None:
    """Send one contract record (event, dead letter, ...) encoded and keyed by the contract; waits while
    the producer's local queue is full."""
    extra = {} if on_delivery is None else {"on_delivery": on_delivery}
    while True:
        try:
            producer.produce(topic, key=kafka_key(record) or None, value=encode(record), **extra)
            break
        except BufferError:  # the local queue is full: let it drain
            producer.poll(0.1)
    producer.poll(0)
