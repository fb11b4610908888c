"""A simulation's events published by a second process, while the first runs the simulation.

    outcome = publish_forked(bootstrap, topic, Simulation(topology, seed, flat=True).events(), stop=..., progress=...)

What `producers.publisher` does as fast as possible, split as the simulator's Avro file is
(`producers.simulator.writer`): the simulation's process makes each event a flat tuple and sends
them in batches to a forked child, which encodes each (the Avro body `schemas.binary.flat_writer`
writes behind the Event schema's single-object header: the bytes `schemas.codec.encode` makes of
the event), keys it by its primary server and produces it. On two cores the encoding, the
producer's calls and its delivery reports cost the simulation nothing. The child counts a record
as published as the publisher does (handed to the producer), sends again alone the events of a batch the
events topic refused as too large and counts the one too large alone as not acknowledged, as the publisher
does (`producers.publisher.Oversized`), stops producing at the first record the broker did not acknowledge
otherwise, and waits for every delivery report before it answers; a stop or
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
from producers.publisher import POLL_EVERY, Deliveries, Oversized, batches_for, reporting_producer
from producers.replayer import ProgressLines, ReplayOutcome
from producers.simulator import writer
from schemas import container, wire
from schemas.codec import default_codec

KIND, EVENT_TIME, PRIMARY = 0, 2, 4  # where a flat tuple has them (`schemas.binary.arguments_flattener`)
LINGER_MS = 50  # as fast as possible, latency is nobody's concern: full batches are


def publish_forked(bootstrap: Kafka, topic: str, events: Iterable[tuple], *, delivery_timeout_s: float,
                   stop: Callable[[], bool] = lambda: False, progress: Callable[[str], None] | None = None,
                   every: float = 2.0) -> ReplayOutcome:
    """Publish the flat `events` from a forked child; `stop` is asked after each batch, `progress` gets
    a line about every `every` seconds from the child (what it sent, and what was acknowledged)."""
    container.flat_writers()  # compiled here, once, not in every child
    header = wire.header(default_codec().catalogue.current("Event").fingerprint)
    started = time.monotonic()
    sent, last_ms, deliveries = writer.forked(
        functools.partial(_publish, bootstrap, topic, header, delivery_timeout_s, progress, every), events,
        lambda batch: stop())
    return ReplayOutcome(sent, time.monotonic() - started, last_ms, stop(), deliveries)


def _publish(bootstrap: Kafka, topic: str, header: bytes, timeout_s: float, progress: Callable[[str], None] | None,
             every: float, events: Iterator[tuple]) -> tuple[int, int | None, Deliveries]:
    """The child: produces the events as they come until they end or one is not acknowledged, saying
    its progress (it alone knows what was acknowledged; the first process may be waiting to hand it more);
    returns how many it produced, the last one's event time, and the delivery reports."""
    deliveries = Deliveries(bootstrap, timeout_s)
    lines, said_at = ProgressLines(progress), time.monotonic()

    def tell() -> None:
        nonlocal said_at
        if progress is not None and (now := time.monotonic()) - said_at >= every:
            # a failed record is counted in its report, while the client may still count it: never below 0
            lines.say(sent, max(0, deliveries.produced - deliveries.refused - deliveries.failed - len(client)),
                      last_ms, deliveries)
            said_at = now

    # Only a failure is reported (a report per record cost a sixth of this process); what the producer
    # no longer holds after the flush, neither failed nor refused, the broker acknowledged. Batches
    # that wait up to LINGER_MS fill fuller: fewer requests for this process and the broker to serve.
    client = reporting_producer(bootstrap, deliveries, (topic,), on_delivery=lambda *report: delivered(*report),
                                **{"delivery.report.only.error": True, "linger.ms": LINGER_MS},
                                **batches_for(bootstrap, topic, timeout_s))
    oversized = Oversized(deliveries, None, client)
    delivered = oversized.report(topic, None)
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
                            tell()
                except KafkaException as exc:  # this record only (too large, say): counted, and on to the next
                    oversized.refused_record(key, bytes(value), exc.args[0], None)
                deliveries.produced += 1
                sent += 1
                last_ms = flat[EVENT_TIME]
            client.poll(0)
            oversized.poll()
            tell()
    finally:
        deadline = time.monotonic() + timeout_s + 5
        while len(client) and (left := deadline - time.monotonic()) > 0:  # the delivery reports, said as they come
            client.flush(min(left, every))
            tell()
        oversized.flush()  # and those of the events sent again alone
        deliveries.acknowledged = deliveries.produced - deliveries.refused - deliveries.failed - len(client)
    return sent, last_ms, deliveries
