"""A simulation's events published by a second process, while the first runs the simulation.

    outcome = publish_forked(bootstrap, topic, Simulation(topology, seed, flat=True).events(), stop=..., progress=...)

What `producers.publisher` does as fast as possible, split as the simulator's Avro file is
(`producers.simulator.writer`): the simulation's process makes each event a flat tuple and sends
them in batches to a forked child, which encodes each (the Avro body `schemas.binary.flat_writer`
writes behind the Event schema's single-object header: the bytes `schemas.codec.encode` makes of
the event), keys it by its primary server and produces it. On two cores the encoding, the
producer's calls and its delivery reports cost the simulation nothing. The child counts a record
as published as the publisher does (handed to the producer), stops producing at the first record
the broker did not acknowledge, and waits for every delivery report before it answers; a stop or
an error in the simulation closes the pipe after a whole batch, and what was sent is published
and acknowledged before the outcome is told.
"""

from __future__ import annotations

import functools
import itertools
import time
from typing import Callable, Iterable, Iterator

from confluent_kafka import KafkaException

from infra.kafka import Kafka
from producers.publisher import POLL_EVERY, Deliveries, reporting_producer
from producers.replayer import ReplayOutcome
from producers.simulator import writer
from schemas import container, wire
from schemas.codec import default_codec
from schemas.jsonl import iso_time

KIND, EVENT_TIME, PRIMARY = 0, 2, 4  # where a flat tuple has them (`schemas.binary.arguments_flattener`)
LINGER_MS = 50  # as fast as possible, latency is nobody's concern: full batches are


def publish_forked(bootstrap: Kafka, topic: str, events: Iterable[tuple], *, delivery_timeout_s: float,
                   stop: Callable[[], bool] = lambda: False, progress: Callable[[str], None] | None = None,
                   every: float = 2.0) -> ReplayOutcome:
    """Publish the flat `events` from a forked child; `stop` is asked after each batch, `progress` gets
    a line about every `every` seconds (what was handed to the child)."""
    container.flat_writers()  # compiled here, once, not in every child
    header = wire.header(default_codec().catalogue.current("Event").fingerprint)
    started = time.monotonic()
    handed = _Handed(started, progress, every)
    sent, last_ms, deliveries = writer.forked(
        functools.partial(_publish, bootstrap, topic, header, delivery_timeout_s), events,
        lambda batch: handed.add(batch) or stop())
    return ReplayOutcome(sent, time.monotonic() - started, last_ms, stop(), deliveries)


class _Handed:
    """What the child was given, told as progress lines."""

    def __init__(self, started: float, progress: Callable[[str], None] | None, every: float):
        self.count, self.at, self.said, self.said_at = 0, started, 0, started
        self.progress, self.every = progress, every

    def add(self, batch: list[tuple]) -> None:
        self.count += len(batch)
        if self.progress is not None and (now := time.monotonic()) - self.said_at >= self.every:
            rate = (self.count - self.said) / (now - self.said_at)
            where = iso_time(batch[-1][EVENT_TIME])
            self.progress(f"sent {self.count:,} events, event time {where}, {rate:,.0f} events/s")
            self.said, self.said_at = self.count, now


def _publish(bootstrap: Kafka, topic: str, header: bytes, timeout_s: float,
             events: Iterator[tuple]) -> tuple[int, int | None, Deliveries]:
    """The child: produces the events as they come until they end or one is not acknowledged;
    returns how many it produced, the last one's event time, and the delivery reports."""
    deliveries = Deliveries(bootstrap, timeout_s)
    # Only a failure is reported (a report per record cost a sixth of this process); what the producer
    # no longer holds after the flush, neither failed nor refused, the broker acknowledged. Batches
    # that wait up to LINGER_MS fill fuller: fewer requests for this process and the broker to serve.
    client = reporting_producer(bootstrap, deliveries, (topic,), on_delivery=deliveries.delivered,
                                **{"delivery.report.only.error": True, "linger.ms": LINGER_MS})
    writers, produce = container.flat_writers(), client.produce
    sent, last_ms = 0, None
    try:
        while not deliveries.failed and (chunk := list(itertools.islice(events, POLL_EVERY))):
            for flat in chunk:
                value = bytearray(header)
                writers[flat[KIND]](flat, value)
                key = flat[PRIMARY].encode() if flat[PRIMARY] else None
                try:
                    while True:
                        try:
                            produce(topic, bytes(value), key)
                            break
                        except BufferError:  # the local queue is full: let it drain
                            client.poll(0.1)
                except KafkaException as exc:  # this record only (too large, say): counted, and on to the next
                    deliveries.refuse(exc.args[0])
                deliveries.produced += 1
                sent += 1
                last_ms = flat[EVENT_TIME]
            client.poll(0)
    finally:
        client.flush(timeout_s + 5)
        deliveries.acknowledged = deliveries.produced - deliveries.refused - deliveries.failed - len(client)
    return sent, last_ms, deliveries
