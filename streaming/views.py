"""What the twin's views read: its output topics folded into one live picture.

    feed = ViewFeed(bootstrap, topics, recent_alerts=20).start()   # a thread reading the topics
    feed.view.snapshot()                                           # servers, messages, counts, recent alerts
    read_state(bootstrap, topic)                                   # the state topic up to its end, once

The state topic (compacted: the latest summary per server and record per message in flight,
state/summary.py) is read from its beginning, so a view started late knows the whole topology
(the live view keeps the server summaries only; `read_state` keeps the message records too);
the alerts, commands and dead-letter topics are read from their beginning too, so the counts are
of everything the twin has decided (Prometheus counters that a restart of the twin does not
reset). No consumer group: nothing is committed, any number of views may read.
"""

from __future__ import annotations

import collections
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from infra.kafka import ANSWER_SECONDS, Kafka, NoSuchTopic, consumer
from infra.settings import TopicSettings
from schemas.codec import default_codec
from schemas.events import Alert, DeadLetter, RedeliveryCommand
from state.names import ServerNames
from state.summary import SERVER_PREFIX, TopologyView


def _consumer(kafka: Kafka) -> Consumer:
    # librdkafka's own log lines stay off stderr: a broker that does not answer is raised once, by the reads
    return consumer(kafka, "shadowtwin-views", log_level=2, error_cb=lambda error: None,
                    **{"enable.partition.eof": True})


def _from_beginning(client: Consumer, topics: list[str], timeout_s: float) -> list[TopicPartition]:
    metadata = client.list_topics(timeout=timeout_s).topics
    missing = [t for t in topics if t not in metadata or metadata[t].error is not None]
    if missing:
        raise NoSuchTopic(f"topic(s) not found: {', '.join(missing)} (shadowtwin topics create makes them)")
    return [TopicPartition(t, p, OFFSET_BEGINNING) for t in topics for p in sorted(metadata[t].partitions)]


def dead_letter_class(reason: str) -> str:
    """A dead letter's reason without its particulars ("corrupt body", "clock skew"): a label of few values."""
    return reason.split(":", 1)[0].strip()[:60] or "unknown"


@dataclass
class LiveView:
    """The picture the metrics and the page show; `apply` is called by one reader, `snapshot` by any thread."""

    recent_alerts: int = 20
    names: ServerNames = field(default_factory=ServerNames)  # the twin's: a server spelled otherwise is not shown
    topology: TopologyView = field(default_factory=TopologyView)
    alerts_by_type: collections.Counter = field(default_factory=collections.Counter)
    alert_messages_by_type: collections.Counter = field(default_factory=collections.Counter)
    commands_by_reason: collections.Counter = field(default_factory=collections.Counter)
    dead_letters_by_reason: collections.Counter = field(default_factory=collections.Counter)
    undecodable: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self.alerts: collections.deque[Alert] = collections.deque(maxlen=self.recent_alerts or None)

    def apply(self, topic: str, key: bytes | None, value: bytes | None, topics: TopicSettings) -> None:
        with self.lock:
            if topic == topics.state:
                # Only the servers' summaries: the page and the metrics need no message record, and a
                # twin's driver should not hold one per message in flight (`where` reads them itself). A
                # server spelled otherwise than the twin spells it is an earlier twin's group that may
                # never be called again to drop its record (README.md, 'Versions').
                if key is not None and key.startswith(SERVER_PREFIX.encode()) and self._spelled_as_now(key):
                    self.topology.apply(key.decode(), None if value is None else json.loads(value))
                return
            if value is None:
                return
            try:
                record = default_codec().decode(value)
            except Exception:  # noqa: BLE001 - a view counts what it cannot read; the twin never writes it
                self.undecodable += 1
                return
            if isinstance(record, Alert):
                self.alerts_by_type[record.type.value] += 1
                self.alert_messages_by_type[record.type.value] += len(record.messages)
                if self.recent_alerts:
                    self.alerts.append(record)
            elif isinstance(record, RedeliveryCommand):
                self.commands_by_reason[record.reason.value] += 1
            elif isinstance(record, DeadLetter):
                self.dead_letters_by_reason[dead_letter_class(record.reason)] += 1

    def _spelled_as_now(self, key: bytes) -> bool:
        server = key[len(SERVER_PREFIX):].decode()
        return self.names.spelling(server) == server

    def snapshot(self) -> dict:
        """A consistent copy: server summaries, counts and the recent alerts (newest first)."""
        with self.lock:
            return {
                "servers": dict(self.topology.servers),
                "alerts_by_type": dict(self.alerts_by_type), "alert_messages_by_type": dict(self.alert_messages_by_type),
                "commands_by_reason": dict(self.commands_by_reason),
                "dead_letters_by_reason": dict(self.dead_letters_by_reason),
                "recent_alerts": list(reversed(self.alerts)),
            }


class ViewFeed:
    """A daemon thread that keeps a `LiveView` up to date from the twin's output topics."""

    def __init__(self, bootstrap: Kafka, topics: TopicSettings, recent_alerts: int = 20,
                 say: Callable[[str], None] = print, names: ServerNames | None = None):
        self.view = LiveView(recent_alerts, names or ServerNames())
        self._say = say
        self._bootstrap, self._topics = bootstrap, topics
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: str | None = None

    def start(self) -> "ViewFeed":
        self._thread = threading.Thread(target=self._run, name="shadowtwin-views", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        topics = self._topics
        client = _consumer(self._bootstrap)
        try:
            client.assign(_from_beginning(client, [topics.state, topics.alerts, topics.commands, topics.dead_letters],
                                          30.0))
            while not self._stop.is_set():
                for message in client.consume(500, 0.5):
                    if message.error() is None:
                        self.view.apply(message.topic(), message.key(), message.value(), topics)
        except Exception as exc:  # noqa: BLE001 - said; the twin decides on, its views stay as they were
            self.error = f"{type(exc).__name__}: {exc}"
            self._say(f"the metrics and the live page stopped following the output topics: {self.error}")
        finally:
            client.close()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)


def read_state(bootstrap: Kafka, topic: str, timeout_s: float = 30.0) -> TopologyView:
    """The state topic read once from its beginning to its end as it is now (within `timeout_s`), folded into a
    view."""
    view = TopologyView()
    for key, value, _ in read_to_end(bootstrap, topic, timeout_s):
        view.apply(key.decode(), None if value is None else json.loads(value))
    return view


def read_to_end(bootstrap: Kafka, topic: str, timeout_s: float = 30.0) -> Iterator[tuple[bytes, bytes | None, int]]:
    """Each keyed record of `topic` from its beginning to its end as it is now (within `timeout_s`):
    (key, value, partition), a tombstone's value None."""
    client = _consumer(bootstrap)
    try:
        partitions = _from_beginning(client, [topic], ANSWER_SECONDS)  # a broker down: said as soon as a tail says it
        ends = {p.partition: client.get_watermark_offsets(p, timeout=ANSWER_SECONDS)[1] for p in partitions}
        todo = {p for p, end in ends.items() if end > 0}
        client.assign(partitions)
        deadline = time.monotonic() + timeout_s
        while todo:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: not read to its end within {timeout_s:.0f} s")
            for message in client.consume(1000, 0.5):
                if message.error() is not None:  # the end as it is now (enable.partition.eof)
                    if message.error().code() == KafkaError._PARTITION_EOF:
                        todo.discard(message.partition())
                    continue
                if message.key() is not None:
                    yield message.key(), message.value(), message.partition()
                if message.offset() + 1 >= ends[message.partition()]:
                    todo.discard(message.partition())
    finally:
        client.close()
