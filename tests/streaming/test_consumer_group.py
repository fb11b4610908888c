"""What the twin has read, committed to its consumer group for Kafka's tools (streaming/consumer_group.py):
from the progress of a real twin run, and a commit the broker refuses said, not raised."""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from types import SimpleNamespace

from confluent_kafka import Producer, TopicPartition

from infra.kafka import consumer
from producers.topic_reader import watermarks
from streaming.app import TwinApplication
from streaming.consumer_group import GroupCommitter, read_up_to
from tests.infra.test_kafka_tools import tool
from tests.streaming.test_twin import (
    collect, expected_ids, final_tick, publish, twin_settings, world_events, world_servers,
)


def progress_event(progress: dict) -> SimpleNamespace:
    return SimpleNamespace(progress=SimpleNamespace(json=json.dumps(progress)))


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    client = consumer(bootstrap, group)
    try:
        found = client.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return {tp.partition: tp.offset for tp in found}
    finally:
        client.close()


def log_ends(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    client = consumer(bootstrap, uuid.uuid4().hex)
    try:
        return {p: watermarks(client, topic, p)[1] for p in range(partitions)}
    finally:
        client.close()


def test_the_offsets_a_batch_read_up_to_are_those_of_its_end():
    progress = {"sources": [{"startOffset": json.dumps({"events": {"0": 3, "1": 0}}),
                             "endOffset": json.dumps({"events": {"0": 100, "1": 50}}),
                             "latestOffset": json.dumps({"events": {"0": 130, "1": 60}})}]}
    assert sorted((tp.topic, tp.partition, tp.offset) for tp in read_up_to(progress)) == [
        ("events", 0, 100), ("events", 1, 50)]
    assert read_up_to({"sources": [{"endOffset": None}]}) == []
    assert read_up_to({}) == []


def test_a_twin_run_leaves_its_group_at_the_end_of_the_events_it_decided_on(settings, spark, kafka_bootstrap,
                                                                           topics, tmp_path):
    events = world_events()
    alerts, _ = expected_ids(events)
    group = f"twin-{uuid.uuid4().hex[:8]}"
    conf = twin_settings(settings, kafka_bootstrap, topics, servers=world_servers())
    conf = dataclasses.replace(conf, twin=dataclasses.replace(conf.twin, consumer_group=group))
    publish(kafka_bootstrap, topics.events, [*events, final_tick(events)])
    ends = log_ends(kafka_bootstrap, topics.events, topics.events_partitions)
    assert sum(ends.values()) == len(events) + 1
    with TwinApplication(conf, spark=spark, ticks=False, checkpoint_dir=tmp_path / "checkpoint",
                         say=lambda line: None) as twin:
        got = collect(kafka_bootstrap, [topics.alerts], lambda g: len(g[topics.alerts]) >= len(alerts))
        assert {a.alert_id for a in got[topics.alerts]} == alerts
        deadline = time.monotonic() + 60
        while committed(kafka_bootstrap, group, topics.events, topics.events_partitions) != ends \
                and time.monotonic() < deadline:
            twin.wait(seconds=1)
    assert committed(kafka_bootstrap, group, topics.events, topics.events_partitions) == ends
    described = tool("kafka-consumer-groups", "--describe", "--group", group, bootstrap=kafka_bootstrap)
    assert described.returncode == 0, described.stderr
    rows = [line.split() for line in described.stdout.splitlines() if topics.events in line.split()]
    assert {int(row[2]): (int(row[3]), int(row[4]), row[5]) for row in rows} == {
        p: (end, end, "0") for p, end in ends.items()}, "Kafka's own tool: each partition read to its end, lag 0"


def test_a_last_batch_the_listener_never_heard_of_is_committed_from_the_checkpoint_at_close(kafka_bootstrap, topics):
    """Before: a twin stopped (SIGTERM) as a batch ended, its progress event still queued when its listener was
    removed (a live lab twin: group 1300, checkpoint 1302 on each partition), left the group a batch behind, and
    the next start said 'consumer group ... is not where the twin's checkpoint is', as if someone had moved it."""
    group = f"twin-{uuid.uuid4().hex[:8]}"
    committer = GroupCommitter(kafka_bootstrap, group, lambda line: None)
    commit_batch(committer, topics.events, {"0": 1300, "1": 7})
    committer.close({(topics.events, 0): 1302, (topics.events, 1): 9})
    assert committed(kafka_bootstrap, group, topics.events, 2) == {0: 1302, 1: 9}


def test_a_commit_the_broker_refuses_is_said_once_and_the_next_that_works_too(kafka_bootstrap, topics):
    said: list[str] = []
    group = f"refused-{uuid.uuid4().hex[:8]}"
    committer = GroupCommitter(kafka_bootstrap, group, said.append)
    missing = {"sources": [{"endOffset": json.dumps({f"no.such.topic.{uuid.uuid4().hex}": {"0": 5}})}]}
    present = {"sources": [{"endOffset": json.dumps({topics.events: {"0": 0, "1": 0}})}]}

    def until(condition) -> None:
        deadline = time.monotonic() + 30
        while not condition() and time.monotonic() < deadline:
            committer.onQueryIdle(None)  # where the outcomes are delivered between batches
            time.sleep(0.1)

    try:
        committer.onQueryProgress(progress_event(missing))
        until(lambda: said)
        committer.onQueryProgress(progress_event(missing))
        until(lambda: committer._pending == 0)
        assert len(said) == 1 and said[0].startswith(f"could not commit the read offsets to consumer group {group}: ")
        committer.onQueryProgress(progress_event(present))
        until(lambda: committer.committed)
    finally:
        committer.close()
    assert said[1:] == [f"read offsets committed to consumer group {group} again"]
    assert committed(kafka_bootstrap, group, topics.events, 2) == {0: 0, 1: 0}
    # Spark's listener bus may deliver an event queued before the twin removed the listener
    committer.onQueryProgress(progress_event(present))
    committer.onQueryIdle(None)
    committer.close()


def test_a_group_moved_while_the_twin_was_stopped_is_said_when_it_starts(kafka_bootstrap, topics):
    """`kafka-consumer-groups --reset-offsets --execute` on the twin's group, to have the twin read the events
    again: it reads on from its checkpoint and overwrote the group at its next batch; said when it starts, and, on
    a new checkpoint, that it reads from twin.starting_offsets, not from the group."""
    group = f"twin-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for _ in range(7):  # the tool sets no offset beyond a partition's end
        producer.produce(topics.events, value=b"x", partition=1)
    assert producer.flush(30) == 0
    for partition, offset in ((0, 0), (1, 7)):
        reset = tool("kafka-consumer-groups", "--reset-offsets", "--group", group, "--topic",
                     f"{topics.events}:{partition}", "--to-offset", str(offset), "--execute", bootstrap=kafka_bootstrap)
        assert reset.returncode == 0, reset.stderr
    lines: list[str] = []
    committer = GroupCommitter(kafka_bootstrap, group, lines.append)
    try:
        committer.say_where_they_differ(topics.events, {(topics.events, 0): 286, (topics.events, 1): 7}, "earliest")
        committer.say_where_they_differ(topics.events, {}, "earliest")  # a new checkpoint
    finally:
        committer.close()
    # it said 'a new checkpoint does' move it: a new checkpoint reads from starting_offsets, not from the group,
    # and a twin started on one said nothing of the group's offsets it does not read from
    assert lines == [f"consumer group {group} is not where the twin's checkpoint is ({topics.events} partition 0:"
                     f" group 0, checkpoint 286): the twin reads on from its checkpoint, never from the group"
                     f" (kafka-consumer-groups --reset-offsets does not move it; a new checkpoint reads the events"
                     f" from [twin] starting_offsets (earliest), not from the group either), and commits its position"
                     f" there after its next batch",
                     f"consumer group {group} holds offsets for {topics.events} (partition 0: 0, partition 1: 7), but"
                     f" the twin starts on a new checkpoint, which reads the events from [twin] starting_offsets"
                     f" (earliest), never from the group (kafka-consumer-groups --reset-offsets does not move the"
                     f" twin); it commits its position there after its first batch"]


def commit_batch(committer: GroupCommitter, topic: str, offsets: dict[str, int]) -> None:
    """A batch's progress to `committer`, and its commit's outcome."""
    committer.onQueryProgress(progress_event({"sources": [{"endOffset": json.dumps({topic: offsets})}]}))
    deadline = time.monotonic() + 30
    while committer._pending and time.monotonic() < deadline:
        committer.onQueryIdle(None)
        time.sleep(0.1)


def test_a_group_moved_while_the_twin_runs_is_said_at_the_batch_that_overwrites_it(kafka_bootstrap, topics):
    """`kafka-consumer-groups --reset-offsets --execute` on the twin's group while the twin runs: Kafka's tool allows
    it (the group has no members) and the twin's next commit overwrote it, said only at the twin's next start, if
    ever. Now the batch that overwrites it says so, naming the partition and both offsets; another twin committing
    to the same group at each batch is said once, and offsets deleted are not said to be moved."""
    group = f"twin-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for _ in range(5):  # the tool sets no offset beyond a partition's end
        producer.produce(topics.events, value=b"x", partition=0)
    assert producer.flush(30) == 0
    lines: list[str] = []
    committer, other = GroupCommitter(kafka_bootstrap, group, lines.append), GroupCommitter(kafka_bootstrap, group)
    try:
        commit_batch(committer, topics.events, {"0": 3, "1": 0})
        commit_batch(committer, topics.events, {"0": 4, "1": 0})
        assert lines == [], "the twin's own commits are no move"
        reset = tool("kafka-consumer-groups", "--reset-offsets", "--group", group, "--topic", f"{topics.events}:0",
                     "--to-offset", "0", "--execute", bootstrap=kafka_bootstrap)
        assert reset.returncode == 0, reset.stderr
        commit_batch(committer, topics.events, {"0": 5, "1": 0})
        commit_batch(committer, topics.events, {"0": 5, "1": 0})
        for offset in (1, 2, 3):
            commit_batch(other, topics.events, {"0": offset, "1": 0})
            commit_batch(committer, topics.events, {"0": 5, "1": 0})
        # offsets gone, as when the topic is deleted under the twin and made again, are no reset
        gone = tool("kafka-consumer-groups", "--delete-offsets", "--group", group, "--topic", topics.events,
                    bootstrap=kafka_bootstrap)
        assert gone.returncode == 0, gone.stderr
        commit_batch(committer, topics.events, {"0": 5, "1": 0})
    finally:
        other.close()
        committer.close()
    assert lines == [f"consumer group {group} was moved while the twin runs ({topics.events} partition 0: group"
                     f" {moved}, the twin's {own}): kafka-consumer-groups --reset-offsets does not move the twin, which"
                     f" reads on from its checkpoint, and its commit now overwrites the group (to read the events"
                     f" again, stop the twin and start it on a new checkpoint, which reads from [twin]"
                     f" starting_offsets; another twin committing to the same group moves it at each batch, said once)"
                     for moved, own in ((0, 4), (1, 5))]
    assert committed(kafka_bootstrap, group, topics.events, 2) == {0: 5, 1: 0}
