"""`shadowtwin record`: the contract's events from a Kafka topic into a recording (.jsonl or .avro).

    outcome = record(bootstrap, "shadowtwin.events", Path("day.avro"), from_beginning=True)
    print(outcome.describe())

Records are decoded with `schemas.codec` and written as they arrive, through
`producers.recording.write_events` (nothing is held in memory), each with its Kafka timestamp
(what a replay's clock-skew guard compares its event time against); a record that does not
decode as an Event is counted by reason and left out. Recording stops at `count` events,
after `seconds`, when `stop` is set (Ctrl-C), and, with `from_beginning`, when every
partition has been read up to where it ended when recording began. Without it, recording
starts at the end of each partition: only what is published from then on.

Order: Kafka keeps order within a partition, i.e. per primary server (the key); events of
different partitions come out in the order the consumer interleaves them. A one-partition
topic round-trips in exactly its order.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, KafkaError, KafkaException, TopicPartition

from producers.recording import write_events
from schemas.codec import decode_event
from schemas.events import Event
from schemas.wire import DecodeError
from infra.kafka import consumer


@dataclass
class RecordOutcome:
    path: Path
    written: int = 0
    undecodable: Counter = field(default_factory=Counter)  # reason -> records left out
    reached_end: bool = False

    def describe(self) -> str:
        lines = [f"recorded {self.written} events to {self.path}"
                 + (" (the end of the topic as it was at start)" if self.reached_end else "")]
        bad = sum(self.undecodable.values())
        if bad:
            lines.append(f"{bad} records did not decode and were left out:")
            lines += [f"  {n}: {reason}" for reason, n in self.undecodable.most_common()]
        return "\n".join(lines)


def record(bootstrap: str, topic: str, path: Path, *, from_beginning: bool = False, seconds: float | None = None,
           count: int | None = None, stop: threading.Event | None = None) -> RecordOutcome:
    outcome = RecordOutcome(path)
    outcome.written = write_events(path, _events(bootstrap, topic, outcome, from_beginning, seconds, count,
                                                 stop or threading.Event()), timestamps=True)
    return outcome


def _events(bootstrap: str, topic: str, outcome: RecordOutcome, from_beginning: bool, seconds: float | None,
            count: int | None, stop: threading.Event) -> Iterator[tuple[Event, int | None]]:

    # librdkafka's own log lines stay off stderr: a broker that does not answer is raised once, below
    client = consumer(bootstrap, f"shadowtwin-record-{uuid.uuid4().hex}", log_level=2, error_cb=lambda error: None)
    try:
        metadata = client.list_topics(topic, timeout=10).topics.get(topic)
        if metadata is None or metadata.error is not None:
            raise ValueError(f"{topic}: no such topic ({metadata.error if metadata else 'not in the metadata'})")
        ends = {p: _watermarks(client, topic, p) for p in metadata.partitions}
        client.assign([TopicPartition(topic, p, low if from_beginning else high) for p, (low, high) in ends.items()])
        # With --from-beginning: the partitions not yet read up to their end at start.
        pending = {p for p, (low, high) in ends.items() if high > low} if from_beginning else None
        deadline = None if seconds is None else time.monotonic() + seconds
        taken = 0
        while not stop.is_set() and (count is None or taken < count) and pending != set():
            if deadline is not None and time.monotonic() >= deadline:
                break
            message = client.poll(0.2)
            if message is None:
                continue
            if message.error() is not None:
                raise RuntimeError(f"{topic}: {message.error()}")
            if pending is not None and message.offset() + 1 >= ends[message.partition()][1]:
                pending.discard(message.partition())
            try:
                event = decode_event(message.value() or b"")
            except DecodeError as exc:
                outcome.undecodable[exc.reason] += 1
                continue
            taken += 1
            kind, at_ms = message.timestamp()
            yield event, None if kind == TIMESTAMP_NOT_AVAILABLE else at_ms
        outcome.reached_end = pending == set()
    finally:
        client.close()


def _watermarks(client, topic: str, partition: int, seconds: float = 15.0) -> tuple[int, int]:
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
