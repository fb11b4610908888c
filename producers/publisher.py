"""Publishing events to the events topic, as fast as possible or paced by their event times, with
every record's delivery report counted.

    publisher = Publisher(bootstrap, topic, events, speed=1.0)   # 1.0: real time, 60: a minute a second
    publisher.start(); ...; publisher.stop()
    publisher.deliveries.unacknowledged          # records the broker did not acknowledge

Each event is keyed by its primary server (one stateful group, one partition), encoded with
the contract's codec. Paced publishing waits until `first event time + elapsed x speed`
reaches an event's time before sending it.

With `in_flight_ms`, events (in event-time order) are sent in steps of at most that much event time:
before an event later than its step's first by more, the publisher waits until the broker acknowledged
everything sent. A consumer of several partitions (the twin's query, whose watermark is global) reads
each partition up to where the broker has it, and librdkafka sends each partition's records in batches
of their own, at their own moments: flat out (some 100,000 events a second, a millisecond can be a
quarter of a minute of event time) one partition ran more than the watermark delay ahead of another,
whose events then came in behind the watermark. A step shorter than the watermark delay leaves none
behind it.

A record counts as published only when its delivery report says the broker acknowledged it.
A record not acknowledged within the delivery timeout (`kafka.delivery_timeout_seconds`),
e.g. because no broker answers, fails; the publisher then stops sending, so a dead broker
ends a run after about that long, with the count of what was not acknowledged. A record the
client refuses to send is counted as not acknowledged, with the client's reason, and the publisher
goes on with the next. An event too large to send (larger than the client sends, or than the events
topic takes, `Oversized`: the valid events the broker refused with it are sent again) is counted so
too, and with `dead_letters` (a topic the brokers have) it becomes a dead letter there, with the reason. A topic the
brokers say they do not have is refused before anything is sent (`infra.kafka.NoSuchTopic`),
not waited out.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable

from confluent_kafka import KafkaError, KafkaException, Producer

from schemas.codec import Record, default_codec, encode, kafka_key
from schemas.events import DeadLetter, Event
from infra.kafka import (TOPIC_CHECK_SECONDS, NoSuchTopic, bootstrap_of, check_topics, max_message_bytes, producer,
                         send)

DEFAULT_DELIVERY_TIMEOUT_S = 30.0
POLL_EVERY = 1000
BATCH_SIZE = 1_000_000  # librdkafka's batch.size


@dataclass
class Deliveries:
    """The delivery reports of one producer: what was handed to it, acknowledged, refused, and why."""

    bootstrap: str
    timeout_s: float = DEFAULT_DELIVERY_TIMEOUT_S
    produced: int = 0
    acknowledged: int = 0
    failed: int = 0
    refused: int = 0  # refused by the client before sending (larger than the broker takes, say)
    error: str | None = None  # the first delivery failure
    broker_error: str | None = None  # the last error the client reported about the brokers

    def delivered(self, error: KafkaError | None, _message=None) -> None:
        if error is None:
            self.acknowledged += 1
        else:
            self.failed += 1
            self.error = self.error or error.str()

    def refuse(self, error: KafkaError) -> None:
        """A record the client would not send: not acknowledged, and the reason kept."""
        self.refused += 1
        self.error = self.error or error.str()

    def client_error(self, error: KafkaError) -> None:
        self.broker_error = error.str()

    @property
    def unacknowledged(self) -> int:
        return self.produced - self.acknowledged

    def describe_failure(self) -> str:
        """One line: how many records were not acknowledged, and why."""
        why = self.error or f"no delivery report within {self.timeout_s:g} s"
        if self.broker_error and self.broker_error not in why:
            why += f"; the client last said: {self.broker_error}"
        return (f"{self.unacknowledged} of {self.produced} records were not acknowledged by Kafka at"
                f" {bootstrap_of(self.bootstrap)} ({why})")


def reporting_producer(bootstrap: str, deliveries: Deliveries, topics: Iterable[str] = (), **overrides) -> Producer:
    """A producer that gives up on a record after `deliveries.timeout_s` and tells `deliveries` about
    broker errors (instead of printing librdkafka's log lines on stderr). A topic of `topics` (those
    it will publish to) that the brokers do not have raises NoSuchTopic at once."""
    client = producer(bootstrap, **{"message.timeout.ms": max(1, int(deliveries.timeout_s * 1000)),
                                    "error_cb": deliveries.client_error, "log_level": 2, **overrides})
    check_topics(client, bootstrap, topics, min(TOPIC_CHECK_SECONDS, deliveries.timeout_s))
    client.poll(0)  # hands what the client said meanwhile (a broker that refused the connection) to `deliveries`
    return client


def batches_for(bootstrap: str, topic: str, timeout_s: float) -> dict[str, int]:
    """The producer's batch.size for `topic`: no larger than the topic takes (its max.message.bytes). The broker refuses a
    larger batch as a whole, and each of its events is then sent again alone (`Oversized`): a topic that takes 3,000
    bytes made a replay more than twice as slow."""
    largest = max_message_bytes(bootstrap, topic, min(TOPIC_CHECK_SECONDS, timeout_s))
    return {"batch.size": largest} if largest is not None and largest < BATCH_SIZE else {}


def flush(client: Producer, deliveries: Deliveries) -> int:
    """Wait for the outstanding delivery reports (at most the delivery timeout and a little);
    returns how many records were not acknowledged."""
    client.flush(deliveries.timeout_s + 5)
    return deliveries.unacknowledged


SetAside = Callable[[str, "bytes | None", bytes], DeadLetter]  # (reason, key, value): the dead letter of an event

# The most of an event's bytes its dead letter carries: a producer sends no record over 1,000,000 bytes (librdkafka's
# message.max.bytes), and a dead letter it refused would be lost.
ORIGINAL_KEPT = 512 * 1024


class Oversized:
    """Events too large to send, each set aside as a dead letter in its place. One larger than the client sends
    (its message.max.bytes) is refused as it is produced; one larger than its topic takes (the topic's
    max.message.bytes) the broker refuses, with the whole batch it came in, since it refuses a batch of records as
    one: each event so refused is sent again alone, in a batch of its own, and only one refused alone is too
    large. Either is counted as not acknowledged (with the reason), counted by kind in `not_sent`, and the dead
    letter its `set_aside(reason, key, value)` makes is sent to `dead_letters_topic` in its place; the broker's
    are sent again or set aside when `poll` or `flush` serves their reports."""

    def __init__(self, deliveries: Deliveries, dead_letters_topic: str | None, client: Producer):
        self.deliveries, self.dead_letters_topic, self.client = deliveries, dead_letters_topic, client
        self.not_sent: Counter = Counter()
        self.sent_alone = 0  # events refused with their batch, sent again alone
        self._alone: Producer | None = None  # sends each event refused in a batch in a batch of its own
        self._refused: list[tuple[str, bytes | None, bytes, KafkaError, SetAside | None, Callable | None, bool]] = []

    def report(self, topic: str, set_aside: SetAside | None, on_delivery: Callable | None = None,
               alone: bool = False) -> Callable:
        """The delivery report callback of the events sent to `topic`."""
        counts = counted(self.deliveries, on_delivery)

        def delivered(error, message) -> None:
            if error is not None and error.code() == KafkaError.MSG_SIZE_TOO_LARGE:
                self._refused.append((topic, message.key(), message.value(), error, set_aside, on_delivery, alone))
            else:
                counts(error, message)
        return delivered

    def refused(self, event: Event, error: KafkaError, set_aside: SetAside | None,
                on_delivery: Callable | None = None) -> None:
        """`event`, which the client refused to produce: set aside if it is too large, else counted with its reason."""
        self.refused_record(kafka_key(event) or None, encode(event), error, set_aside, on_delivery)

    def refused_record(self, key: bytes | None, value: bytes, error: KafkaError, set_aside: SetAside | None,
                       on_delivery: Callable | None = None) -> None:
        """An event's record (`key`, encoded `value`) the client refused to produce, as `refused`."""
        if error.code() == KafkaError.MSG_SIZE_TOO_LARGE:
            self._set_aside(key, value, error, set_aside, on_delivery, "Kafka takes")
            return
        self.deliveries.refuse(error)
        if on_delivery is not None:
            on_delivery(error, None)

    def _set_aside(self, key: bytes | None, value: bytes, error: KafkaError, set_aside: SetAside | None,
                   on_delivery: Callable | None, what: str) -> None:
        kind = default_codec().decode_event(value).kind
        self.deliveries.refuse(error)
        self.not_sent[kind] += 1
        if set_aside is None or self.dead_letters_topic is None:
            return
        letter = set_aside(f"its {kind} event of {len(value):,} bytes is larger than {what} ({error.str()})",
                           key, value)
        self.deliveries.produced += 1
        produce(self.client, self.dead_letters_topic, letter, counted(self.deliveries, on_delivery))

    def poll(self) -> None:
        """Serve the delivery reports that have arrived; send again or set aside the events refused as too large."""
        if self._alone is not None:
            self._alone.poll(0)
        while self._refused:
            topic, key, value, error, set_aside, on_delivery, alone = self._refused.pop(0)
            if alone:
                self._set_aside(key, value, error, set_aside, on_delivery,
                                f"the events topic {topic} takes, its max.message.bytes")
                continue
            self._alone = self._alone or reporting_producer(self.deliveries.bootstrap, self.deliveries,
                                                             **{"batch.num.messages": 1})
            self.sent_alone += 1
            self._alone.produce(topic, key=key, value=value,
                                on_delivery=self.report(topic, set_aside, on_delivery, alone=True))

    def flush(self) -> int:
        """Flush `client` (and what is sent again alone) until every report is served; returns how many records
        were not acknowledged."""
        while True:
            flush(self.client, self.deliveries)
            if self._alone is not None:
                flush(self._alone, self.deliveries)
            if not self._refused:
                return self.deliveries.unacknowledged
            self.poll()


def counted(deliveries: Deliveries, on_delivery: Callable | None) -> Callable:
    """A delivery report callback that counts the report in `deliveries`, then hands it to `on_delivery`."""
    if on_delivery is None:
        return deliveries.delivered

    def delivered(error, message) -> None:
        deliveries.delivered(error)
        on_delivery(error, message)
    return delivered


class Publisher(threading.Thread):
    def __init__(self, bootstrap_servers: str, topic: str, events: Iterable[Event], speed: float | None = None,
                 clock: Callable[[], float] = time.monotonic, delivery_timeout_s: float = DEFAULT_DELIVERY_TIMEOUT_S,
                 dead_letters: str | None = None, source: str = "events", in_flight_ms: int | None = None):
        super().__init__(name="shadowtwin-publisher", daemon=True)
        self.deliveries = Deliveries(bootstrap_servers, delivery_timeout_s)
        self._producer = reporting_producer(bootstrap_servers, self.deliveries, (topic,),
                                            **batches_for(bootstrap_servers, topic, delivery_timeout_s))
        if dead_letters is not None:  # a broker without one (not made by `topics create`) takes the events all the same
            try:
                check_topics(self._producer, bootstrap_servers, (dead_letters,),
                             min(TOPIC_CHECK_SECONDS, delivery_timeout_s))
            except NoSuchTopic:
                dead_letters = None
        self.oversized = Oversized(self.deliveries, dead_letters, self._producer)
        self._delivered = self.oversized.report(topic, self._dead_letter)
        self._source = source
        self._topic = topic
        self._events = events
        self._speed = speed
        self._clock = clock
        self._stopping = threading.Event()
        self._in_flight_ms = in_flight_ms
        self._step_ends_ms: int | None = None  # the event time the current step reaches (with `in_flight_ms`)
        self.sent = 0

    def run(self) -> None:
        if self._speed is None:
            self._flat_out()
        else:
            self._paced()
        self.oversized.flush()

    def _paced(self) -> None:
        started, first_ms = self._clock(), None
        for event in self._events:
            if self._stopping.is_set() or self.deliveries.failed:
                return
            first_ms = event.event_time_ms if first_ms is None else first_ms
            due = started + (event.event_time_ms - first_ms) / 1000 / self._speed
            if not self._wait_until(due):
                return
            self._send((event,))

    def _wait_until(self, due: float) -> bool:
        """Waits until `due`, serving the delivery reports meanwhile; False when stopped or a record failed."""
        while (wait := due - self._clock()) > 0:
            if self._stopping.wait(min(wait, 1.0)):
                return False
            self._producer.poll(0)
            self.oversized.poll()
            if self.deliveries.failed:
                return False
        return True

    def _flat_out(self) -> None:
        # As fast as possible, POLL_EVERY records at a time: the delivery reports, the stop and the
        # failures are looked at between them (a poll per record cost a quarter of the publishing
        # time; the rest of the per-record bookkeeping, another sixth).
        events = iter(self._events)
        while not (self._stopping.is_set() or self.deliveries.failed):
            chunk = list(itertools.islice(events, POLL_EVERY))
            if not chunk:
                return
            self._send(chunk)

    def _dead_letter(self, reason: str, key: bytes | None, value: bytes) -> DeadLetter:
        """The dead letter of an event of the source, set aside for `reason`."""
        cut = f" (its first {ORIGINAL_KEPT:,} bytes are kept)" if len(value) > ORIGINAL_KEPT else ""
        return DeadLetter(original=value[:ORIGINAL_KEPT], key=key, topic=self._source, reason=reason + cut,
                          at_ms=int(time.time() * 1000))

    def _acknowledged(self) -> bool:
        """Waits until the broker answered every record sent; False when stopped or a record failed."""
        deliveries = self.deliveries
        while deliveries.produced > deliveries.acknowledged + deliveries.failed + deliveries.refused:
            if self._stopping.is_set() or deliveries.failed:
                return False
            self._producer.flush(0.1)
            self.oversized.poll()
        return not deliveries.failed

    def _send(self, events: Iterable[Event]) -> None:
        client, topic, oversized, delivered = self._producer, self._topic, self.oversized, self._delivered
        for event in events:
            if self._in_flight_ms is not None and (self._step_ends_ms is None
                                                   or event.event_time_ms > self._step_ends_ms):
                if self._step_ends_ms is not None and not self._acknowledged():
                    return
                self._step_ends_ms = event.event_time_ms + self._in_flight_ms
            try:
                produce(client, topic, event, delivered, poll=False)
            except KafkaException as exc:  # this record only (too large, say): counted, and on to the next
                oversized.refused(event, exc.args[0], self._dead_letter)
            self.deliveries.produced += 1
            self.sent += 1
        client.poll(0)
        oversized.poll()

    def stop(self) -> None:
        self._stopping.set()
        self.join(timeout=self.deliveries.timeout_s + 10)


def produce(producer: Producer, topic: str, record: Record, on_delivery: Callable | None = None,
            poll: bool = True) -> None:
    """Send one contract record (event, dead letter, ...) encoded and keyed by the contract; waits while
    the producer's local queue is full. `poll` serves the delivery reports that came back."""
    send(producer, topic, kafka_key(record) or None, encode(record), on_delivery=on_delivery)
    if poll:
        producer.poll(0)
