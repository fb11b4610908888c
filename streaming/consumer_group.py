"""What the twin has read, committed to a Kafka consumer group, so that Kafka's own tools see it.

Spark's Kafka source keeps its offsets in the checkpoint and commits none to Kafka: without
this, `kafka-consumer-groups --describe`, Burrow or a Kafka UI cannot show how far the twin
trails its events topic. After each micro-batch, the offsets the batch read up to (its
`endOffset`, the next record to read) are committed to `twin.consumer_group`:

    kafka-consumer-groups.sh --bootstrap-server HOST:9092 --describe --group shadowtwin-twin

The group has no members (the twin commits as a standalone consumer) and is only a reading:
the twin starts again from its checkpoint, never from these offsets, and a new checkpoint from
`twin.starting_offsets`, never from them either. When it starts, it says where they differ from its
checkpoint, or that a new checkpoint does not read from them (`kafka-consumer-groups --reset-offsets`
moved them, say, which moves the twin no more than its own commits do). While it runs, a batch that finds the group
moved since the twin's last commit (`kafka-consumer-groups --reset-offsets` run beside a running twin, which Kafka's
tool allows: the group has no members) says so as it commits its own position over it. Commits are asynchronous;
one that fails is said once (and once more when they work again), and the twin decides on.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Callable

from confluent_kafka import KafkaError, TopicPartition
from pyspark.sql.streaming.listener import StreamingQueryListener

from infra.kafka import Kafka, consumer
from streaming.broker_watch import QUIET_LOG_LEVEL


def read_up_to(progress: dict) -> list[TopicPartition]:
    """The offsets a batch's progress says its sources read up to, as Kafka commits them."""
    offsets = []
    for source in progress.get("sources") or ():
        end = source.get("endOffset")
        data = json.loads(end) if isinstance(end, str) else end
        if not isinstance(data, dict):
            continue
        for topic, partitions in data.items():
            if isinstance(partitions, dict):
                offsets += [TopicPartition(topic, int(p), int(o)) for p, o in partitions.items() if int(o) >= 0]
    return offsets


class GroupCommitter(StreamingQueryListener):
    """Commits each batch's read offsets to one consumer group."""

    def __init__(self, kafka: Kafka, group_id: str, say: Callable[[str], None] = print):
        self.group_id = group_id
        self._say = say
        self._lock = threading.Lock()
        self._pending = 0
        self._failing = False
        self._closed = False  # Spark may still deliver a queued event once the listener is removed
        self.committed = 0  # commits the broker accepted
        self._acknowledged: dict[tuple[str, int], int] = {}  # the offsets of the last commit the broker accepted
        self._moved = False  # the last batch found the group moved by someone else (said once until it is not)
        self._consumer = consumer(kafka, group_id, on_commit=self._on_commit,  # never subscribed: commits only
                                  log_level=QUIET_LOG_LEVEL)  # the twin says a broker away (streaming/broker_watch.py)

    def say_where_they_differ(self, topic: str, positions: dict[tuple[str, int], int], starting_offsets: str,
                              timeout_s: float = 10.0) -> None:
        """Say the partitions of `topic` where the group's offsets are not the twin's `positions` (its
        checkpoint's); for a new checkpoint (no `positions`), that it reads from `starting_offsets`, not from
        the group's offsets, if the group has any."""
        try:
            partitions = positions or {(topic, p): -1 for p in self._consumer.list_topics(
                topic, timeout=timeout_s).topics[topic].partitions}
            found = self._consumer.committed([TopicPartition(t, p) for t, p in partitions], timeout=timeout_s)
        except Exception:  # noqa: BLE001 - a reading for Kafka's tools must not keep the twin from starting
            return
        at = {(tp.topic, tp.partition): tp.offset for tp in found if tp.offset >= 0}
        if not positions and at:
            held = ", ".join(f"partition {p}: {offset}" for (_, p), offset in sorted(at.items()))
            self._say(f"consumer group {self.group_id} holds offsets for {topic} ({held}), but the twin starts on a"
                      f" new checkpoint, which reads the events from [twin] starting_offsets ({starting_offsets}),"
                      f" never from the group (kafka-consumer-groups --reset-offsets does not move the twin); it"
                      f" commits its position there after its first batch")
            return
        differ = [f"{t} partition {p}: group {offset}, checkpoint {positions[(t, p)]}"
                  for (t, p), offset in sorted(at.items()) if offset != positions[(t, p)]]
        if differ:
            self._say(f"consumer group {self.group_id} is not where the twin's checkpoint is ({'; '.join(differ)}):"
                      f" the twin reads on from its checkpoint, never from the group (kafka-consumer-groups"
                      f" --reset-offsets does not move it; a new checkpoint reads the events from [twin]"
                      f" starting_offsets ({starting_offsets}), not from the group either), and commits its position"
                      f" there after its next batch")

    def onQueryStarted(self, event) -> None:
        pass

    def onQueryProgress(self, event) -> None:
        offsets = read_up_to(json.loads(event.progress.json))
        with self._lock:
            if self._closed:
                return
            if offsets:
                self._consumer.poll(0)  # the outcome of the previous commit, before the group is compared with it
                self._say_moved()
                self._commit(offsets)
            self._consumer.poll(0)  # delivers the outcomes of earlier commits

    def _commit(self, offsets: list[TopicPartition]) -> None:
        try:
            self._consumer.commit(offsets=offsets, asynchronous=True)
            self._pending += 1
        except Exception as exc:  # noqa: BLE001 - a reading for Kafka's tools must not stop the twin
            self._failed(exc)

    def _say_moved(self, timeout_s: float = 5.0) -> None:
        """Say the partitions where the group is not where the twin's last commit left it: someone else moved it."""
        if self._pending or self._failing or not self._acknowledged:
            return
        try:
            found = self._consumer.committed([TopicPartition(t, p) for t, p in self._acknowledged], timeout=timeout_s)
        except Exception:  # noqa: BLE001 - a reading for Kafka's tools must not stop the twin
            return
        # an offset gone (the topic deleted and made again, say) is no reset
        moved = [f"{tp.topic} partition {tp.partition}: group {tp.offset}, the twin's"
                 f" {self._acknowledged[(tp.topic, tp.partition)]}" for tp in sorted(found, key=lambda t: t.partition)
                 if 0 <= tp.offset != self._acknowledged[(tp.topic, tp.partition)]]
        if moved and not self._moved:
            self._say(f"consumer group {self.group_id} was moved while the twin runs ({'; '.join(moved)}):"
                      f" kafka-consumer-groups --reset-offsets does not move the twin, which reads on from its"
                      f" checkpoint, and its commit now overwrites the group (to read the events again, stop the twin"
                      f" and start it on a new checkpoint, which reads from [twin] starting_offsets; another twin"
                      f" committing to the same group moves it at each batch, said once)")
        self._moved = bool(moved)

    def onQueryIdle(self, event) -> None:
        with self._lock:
            if not self._closed:
                self._consumer.poll(0)

    def onQueryTerminated(self, event) -> None:
        pass

    def _on_commit(self, error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        self._pending -= 1
        problem = error or next((p.error for p in partitions if p.error), None)
        if problem is not None:
            self._failed(problem)
            return
        self.committed += 1
        self._acknowledged = {(p.topic, p.partition): p.offset for p in partitions}
        if self._failing:
            self._failing = False
            self._say(f"read offsets committed to consumer group {self.group_id} again")

    def _failed(self, problem: object) -> None:
        if not self._failing:
            self._failing = True
            reason = problem.str() if isinstance(problem, KafkaError) else str(problem)
            self._say(f"could not commit the read offsets to consumer group {self.group_id}: {reason};"
                      " the twin decides on (Kafka's tools show its lag as last committed)")

    def close(self, positions: dict[tuple[str, int], int] | None = None, timeout_s: float = 5.0) -> None:
        """Commit `positions` (the stopped query's checkpoint: Spark may end it before this listener hears of its
        last batch, which a restart would then call the group moved), wait for the commits under way (up to
        `timeout_s`), then leave."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            if self._closed:
                return
            if positions:
                self._commit([TopicPartition(t, p, o) for (t, p), o in positions.items()])
            while self._pending > 0 and time.monotonic() < deadline:
                self._consumer.poll(0.1)
            self._closed = True
            self._consumer.close()
