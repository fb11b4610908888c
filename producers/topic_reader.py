"""Reading the contract's records from a Kafka topic: the one reader behind `record`, `alerts tail`
and `commands tail`, and how far the twin has read its events topic (`unread_events`, for `where` and `server`).

    outcome = ReadOutcome()
    for record, kafka_ms in read_topic(bootstrap, "shadowtwin.alerts", outcome, expected="Alert",
                                       from_beginning=True, until_end=True):
        ...

Where it starts: every partition's beginning (`from_beginning`), the last `last` records of each
partition (records a consumer is given: a transaction's markers and aborted records, which take offsets
too, are not counted), or (the default) its end: only what is published from then on. With `until_end`,
it stops once every partition has been read up to where it ended when reading began (a bounded run); else it goes on
until `stop` is set, `seconds` have passed, or `count` records were taken. A partition counts as
read up to its end at its last record, or when the broker says there is nothing more to read:
the last offsets of a topic written through Kafka transactions are a commit marker or aborted
records, which no consumer is ever given. A record that does
not decode (or is of another schema than `expected`) is counted by reason in the outcome and
skipped; nothing is committed (each reader is a group of its own).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterator

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, KafkaError, KafkaException, Message, TopicPartition

from infra.broker import BrokerError
from infra.kafka import Kafka, committed_offsets, consumer, partitions_of
from infra.wording import counted
from schemas.codec import decode
from schemas.events import ClockTick
from schemas.shape import top_level_name
from schemas.wire import DecodeError

UNREAD_READ_AT_MOST = 1_000  # unread records of a partition read to tell the twin's clock ticks from events


@dataclass
class ReadOutcome:
    undecodable: Counter = field(default_factory=Counter)  # reason -> records skipped
    reached_end: bool = False
    schema: str | None = None  # the top-level schema of the records read

    def describe_undecodable(self) -> list[str]:
        bad = sum(self.undecodable.values())
        if not bad:
            return []
        return [f"{counted(bad, 'record')} did not decode and {'was' if bad == 1 else 'were'} left out:",
                *(f"  {n}: {reason}" for reason, n in self.undecodable.most_common())]


def read_topic(bootstrap: Kafka, topic: str, outcome: ReadOutcome, *, expected: str | None = None,
               from_beginning: bool = False, last: int = 0, until_end: bool = False, seconds: float | None = None,
               count: int | None = None, stop: threading.Event | None = None,
               group: str = "shadowtwin-read") -> Iterator[tuple[Any, int | None]]:
    """(record, Kafka timestamp in ms or None) as read; `expected=None` takes the schema of the first record."""
    stop = stop or threading.Event()
    outcome.schema = expected
    # librdkafka's own log lines stay off stderr: a broker that does not answer is raised once, below
    client = consumer(bootstrap, f"{group}-{uuid.uuid4().hex}", log_level=2, error_cb=lambda error: None,
                      **{"enable.partition.eof": until_end})
    try:
        ends = partition_watermarks(client, topic, bootstrap)
        firsts = {p: low if from_beginning else last_records_start(bootstrap, topic, p, low, high, last)
                  for p, (low, high) in ends.items()}
        client.assign([TopicPartition(topic, p, firsts[p]) for p in ends])
        # With until_end: the partitions not yet read up to their end at start.
        pending = {p for p, (_, high) in ends.items() if high > firsts[p]} if until_end else None
        deadline = None if seconds is None else time.monotonic() + seconds
        taken = 0
        while not stop.is_set() and (count is None or taken < count) and pending != set():
            if deadline is not None and time.monotonic() >= deadline:
                break
            message = client.poll(0.2)
            if message is None:
                continue
            if message.error() is not None:
                if message.error().code() == KafkaError._PARTITION_EOF:
                    pending.discard(message.partition())
                    continue
                raise RuntimeError(f"{topic}: {message.error()}")
            if pending is not None and message.offset() + 1 >= ends[message.partition()][1]:
                pending.discard(message.partition())
            try:
                record = decode(message.value() or b"", outcome.schema)
            except DecodeError as exc:
                outcome.undecodable[exc.reason] += 1
                continue
            if outcome.schema is None:
                outcome.schema = top_level_name(type(record))
            taken += 1
            kind, at_ms = message.timestamp()
            yield record, None if kind == TIMESTAMP_NOT_AVAILABLE else at_ms
        outcome.reached_end = pending == set()
    finally:
        client.close()


def last_records_start(kafka: Kafka, topic: str, partition: int, low: int, high: int, last: int) -> int:
    """The offset of the `last`-th record before `high` a consumer is given (`low` if there are fewer):
    offsets held by a transaction's commit or abort markers or by aborted records are skipped."""
    if not last or high <= low:
        return high
    window = last
    while True:
        start = max(low, high - window)
        offsets = record_offsets(kafka, topic, partition, start, high)
        if len(offsets) >= last:
            return offsets[-last]
        if start == low:
            return low
        window *= 2


def record_offsets(kafka: Kafka, topic: str, partition: int, start: int, end: int) -> list[int]:
    """The offsets of the records between `start` and `end` (excluded) that a consumer is given."""
    return [message.offset() for message in records_between(kafka, topic, partition, start, end)]


def records_between(kafka: Kafka, topic: str, partition: int, start: int, end: int,
                    seconds: float = 30.0) -> Iterator[Message]:
    """The records between `start` and `end` (excluded) that a consumer is given, as read; BrokerError after
    `seconds` without one (a broker gone: the command fails in one line, exit 1)."""
    client = consumer(kafka, f"shadowtwin-scan-{uuid.uuid4().hex}", log_level=2, error_cb=lambda error: None,
                      **{"enable.partition.eof": True})
    try:
        client.assign([TopicPartition(topic, partition, start)])
        quiet_since = time.monotonic()
        while True:
            message = client.poll(1.0)
            if message is None:
                if time.monotonic() - quiet_since > seconds:
                    raise BrokerError(f"{topic}: partition {partition} not read to offset {end} within {seconds:.0f} s")
                continue
            quiet_since = time.monotonic()
            if message.error() is not None:
                if message.error().code() == KafkaError._PARTITION_EOF:
                    return
                raise RuntimeError(f"{topic}: {message.error()}")
            if message.offset() >= end:
                return
            yield message
    finally:
        client.close()


@dataclass(frozen=True)
class Unread:
    """A partition's records the twin has not read: how many, and when Kafka appended the first."""

    records: int
    first_appended_ms: int | None  # None when its first `read_at_most` unread records are all clock ticks


def unread_events(kafka: Kafka, topic: str, group: str, read_at_most: int = UNREAD_READ_AT_MOST) -> dict[int, Unread]:
    """Partition -> the records of the events `topic` past the offset `group` last committed (the twin commits
    what each batch read up to: streaming/consumer_group.py) that are not the twin's own clock ticks; a
    partition the group holds no offset of, or none past it, is left out. Of a partition's unread records only
    the first `read_at_most` are read to tell ticks from events: the rest count as they are."""
    client = consumer(kafka, group, log_level=2, error_cb=lambda error: None)  # assigned nothing: never joins
    try:
        ends = partition_watermarks(client, topic, kafka)
        committed = committed_offsets(client, [TopicPartition(topic, p) for p in ends])
    finally:
        client.close()
    unread = {}
    for position in committed:
        low, end = ends[position.partition]
        start = max(position.offset, low)  # records past the commit that retention deleted are no one's to read
        if position.offset < 0 or start >= end:
            continue
        read_up_to = min(end, start + read_at_most)
        events = [message.timestamp()[1] for message in records_between(kafka, topic, position.partition, start,
                                                                         read_up_to) if not _is_tick(message.value())]
        if events or end > read_up_to:
            first = events[0] if events and events[0] >= 0 else None  # -1: a record without a timestamp
            unread[position.partition] = Unread(len(events) + end - read_up_to, first)
    return unread


def _is_tick(value: bytes | None) -> bool:
    try:
        return isinstance(decode(value or b"", "Event"), ClockTick)
    except DecodeError:
        return False


def topic_watermarks(bootstrap: Kafka, topic: str) -> dict[int, tuple[int, int]]:
    """Partition -> (low, high) offsets of `topic` as it is now."""
    client = consumer(bootstrap, f"shadowtwin-read-{uuid.uuid4().hex}", log_level=2, error_cb=lambda error: None)
    try:
        return partition_watermarks(client, topic, bootstrap)
    finally:
        client.close()


def partition_watermarks(client, topic: str, bootstrap: Kafka) -> dict[int, tuple[int, int]]:
    """Partition -> (low, high) offsets of `topic`, asked through `client`."""
    return {p: watermarks(client, topic, p) for p in partitions_of(client, topic, kafka=bootstrap)}


def watermarks(client, topic: str, partition: int, seconds: float = 15.0) -> tuple[int, int]:
    """(low, high) offsets of a partition; waits out a new topic's leader election."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return client.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        except KafkaException as exc:
            if not exc.args[0].retriable() and exc.args[0].code() != KafkaError.NOT_LEADER_FOR_PARTITION \
                    or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def schema_of(topics, topic: str) -> str | None:
    """The top-level schema of one of the twin's topics (`infra.settings.TopicSettings`), or None for another topic."""
    return {topics.events: "Event", topics.alerts: "Alert", topics.commands: "RedeliveryCommand",
            topics.dead_letters: "DeadLetter"}.get(topic)
