"""Events Kafka deleted before the twin read them, said by the twin (streaming/lost_events.py): on a
real broker, records removed as `kafka-delete-records` removes them (the admin client's DeleteRecords)."""

from __future__ import annotations

import dataclasses
import time
from typing import Callable

from confluent_kafka import TopicPartition
from confluent_kafka.admin import NewPartitions

from infra.config import SparkInterval
from infra.kafka import admin, producer
from infra.topics import json_topic
from producers.topic_reader import ReadOutcome, read_topic
from schemas import jsonl
from schemas.events import AlertType
from schemas.placement import alert_partition
from streaming.app import TwinApplication
from streaming.lost_events import checkpoint_positions, say_lost_events
from tests.streaming.test_alert_placement import placed
from tests.streaming.test_consumer_group import log_ends
from tests.streaming.test_twin import twin_settings


def delete_below(bootstrap: str, topic: str, partition: int, offset: int) -> None:
    """What `kafka-delete-records --offset-json-file` does: the partition's oldest offset becomes `offset`."""
    client = admin(bootstrap)  # kept until the answer: a client no longer referred to never gives it
    (future,) = client.delete_records([TopicPartition(topic, partition, offset)]).values()
    assert future.result(30).low_watermark == offset


def fill(bootstrap: str, topic: str, partition: int, n: int) -> None:
    out = producer(bootstrap)
    for i in range(n):
        out.produce(topic, partition=partition, value=b"not an event %d" % i)
    assert out.flush(30) == 0


def test_records_deleted_beyond_where_the_twin_reads_are_said_and_those_it_read_not(kafka_bootstrap, topics):
    fill(kafka_bootstrap, topics.events, 0, 10)
    fill(kafka_bootstrap, topics.events, 1, 10)
    delete_below(kafka_bootstrap, topics.events, 0, 7)
    delete_below(kafka_bootstrap, topics.events, 1, 3)
    lines: list[str] = []
    at = {(topics.events, 0): 4, (topics.events, 1): 5}  # the twin read partition 1 past what was deleted
    assert say_lost_events(kafka_bootstrap, at, lines.append) == 3
    assert lines == [f"events lost: {topics.events} partition 0, offsets 4 to 6 (3 records), deleted by Kafka"
                     f" (retention.ms, retention.bytes or kafka-delete-records) before the twin read them;"
                     f" it goes on from 7"]


def test_a_twin_started_again_says_which_events_were_deleted_while_it_was_stopped(settings, spark, kafka_bootstrap,
                                                                                  topics, tmp_path):
    """`kafka-delete-records` past the twin's position while it is stopped: Spark's source goes on from the
    oldest record left and says so only in an executor's WARN with a stack trace; the twin said nothing."""
    conf = twin_settings(settings, kafka_bootstrap, topics)
    checkpoint = tmp_path / "checkpoint"
    fill(kafka_bootstrap, topics.events, 0, 2)
    with TwinApplication(conf, spark=spark, ticks=False, checkpoint_dir=checkpoint, say=lambda line: None) as twin:
        ends = log_ends(kafka_bootstrap, topics.events, topics.events_partitions)
        deadline = time.monotonic() + 120
        while {p: o for (_, p), o in checkpoint_positions(checkpoint).items()} != ends and time.monotonic() < deadline:
            twin.wait(seconds=1)
    assert checkpoint_positions(checkpoint) == {(topics.events, 0): 2, (topics.events, 1): 0}
    fill(kafka_bootstrap, topics.events, 0, 3)
    delete_below(kafka_bootstrap, topics.events, 0, 5)
    lines: list[str] = []
    with TwinApplication(conf, spark=spark, ticks=False, checkpoint_dir=checkpoint, say=lines.append):
        pass
    assert f"events lost: {topics.events} partition 0, offsets 2 to 4 (3 records), deleted by Kafka" \
           f" (retention.ms, retention.bytes or kafka-delete-records) before the twin read them; it goes on from 5" \
           in lines, lines


def lines_of_a_twin_that(conf, spark, topics, checkpoint, between: Callable[[], None], reads_up_to: tuple[int, int],
                         says: str):
    """What the twin says while it reads 2 records of partition 0, then `between` is done, then it reads
    partition `reads_up_to[0]` up to offset `reads_up_to[1]` and says a line starting with `says` (its listener
    hears of a batch after the checkpoint has it: a twin stopped at once may never say it)."""
    fill(conf.kafka.bootstrap_servers, topics.events, 0, 2)
    lines: list[str] = []
    with TwinApplication(conf, spark=spark, ticks=False, checkpoint_dir=checkpoint, say=lines.append) as twin:
        deadline = time.monotonic() + 120
        while checkpoint_positions(checkpoint).get((topics.events, 0)) != 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        between()
        partition, offset = reads_up_to
        while (checkpoint_positions(checkpoint).get((topics.events, partition)) != offset
               or not any(line.startswith(says) for line in lines)) and time.monotonic() < deadline:
            twin.wait(seconds=0.5)
    return lines


def test_events_deleted_while_the_twin_runs_before_it_read_them_are_said_and_alerted(settings, spark, kafka_bootstrap,
                                                                                     topics, tmp_path):
    """`kafka-delete-records` (or retention) past the running twin's position between two batches: Spark's
    source skipped them and said so only in an executor's WARN; the twin's lines and alerts said nothing."""
    conf = twin_settings(settings, kafka_bootstrap, topics)
    conf = dataclasses.replace(conf, spark=dataclasses.replace(conf.spark, trigger_interval=SparkInterval("8 seconds")),
                               twin=dataclasses.replace(conf.twin, json_topics=True))

    def delete_unread() -> None:  # well before the next trigger, 8 s after the last
        fill(kafka_bootstrap, topics.events, 0, 3)
        delete_below(kafka_bootstrap, topics.events, 0, 5)

    lines = lines_of_a_twin_that(conf, spark, topics, tmp_path / "checkpoint", delete_unread, reads_up_to=(0, 5),
                                 says="events lost:")
    said = (f"events lost: {topics.events} partition 0, offsets 2 to 4 (3 records), deleted by Kafka"
            f" (retention.ms, retention.bytes or kafka-delete-records) before the twin read them; it goes on from 5")
    assert said in lines, lines
    alerts = [a for a, _ in read_topic(kafka_bootstrap, topics.alerts, ReadOutcome(), expected="Alert",
                                       from_beginning=True, until_end=True) if a.type is AlertType.EVENTS_LOST]
    assert [a.reason.split(":")[0] for a in alerts] == [said.removeprefix("events lost: ").split(":")[0]]
    (alert,) = alerts
    assert placed(kafka_bootstrap, json_topic(topics.alerts), 1) == [
        (alert_partition(alert, topics.alerts_partitions), jsonl.json_copy(alert))], \
        "its JSON copy (twin.json_topics) on its partition, as the twin's query writes those of its alerts"


def test_partitions_added_to_the_events_topic_while_the_twin_runs_are_read_from_their_start_and_named(
        settings, spark, kafka_bootstrap, topics, tmp_path):
    """`kafka-topics --alter --partitions 6`: Spark's source reads the new partitions from offset 0, nothing
    lost, but the twin named the new count only when started again (`topics create`'s check)."""
    checkpoint = tmp_path / "checkpoint"

    def add_partitions() -> None:
        client = admin(kafka_bootstrap)  # kept until the answer
        client.create_partitions([NewPartitions(topics.events, 6)])[topics.events].result(30)
        fill(kafka_bootstrap, topics.events, 5, 4)

    lines = lines_of_a_twin_that(twin_settings(settings, kafka_bootstrap, topics), spark, topics, checkpoint,
                                 add_partitions, reads_up_to=(5, 4), says=f"events topic {topics.events}: partitions")
    assert checkpoint_positions(checkpoint) == {(topics.events, p): {0: 2, 5: 4}.get(p, 0) for p in range(6)}
    assert f"events topic {topics.events}: partitions {', '.join(map(str, range(topics.events_partitions, 6)))}" \
           f" added since the twin's last batch (6 partitions now); it reads them from their start. A primary" \
           f" server's events may now go to another partition than its earlier ones: set [topics]" \
           f" events_partitions = 6" in lines, lines
    assert not [line for line in lines if line.startswith("events lost")]


def test_a_twin_reads_next_from_the_end_of_its_last_committed_batch(tmp_path):
    """Spark runs a batch planned but not committed again, from the end of the one before it."""
    for batch, offsets in enumerate(({"0": 5, "1": 2}, {"0": 9, "1": 4}, {"0": 12, "1": 8})):
        (tmp_path / "offsets").mkdir(exist_ok=True)
        (tmp_path / "offsets" / str(batch)).write_text(f'v1\n{{"batchWatermarkMs":0}}\n{{"ev":{offsets}}}\n'
                                                       .replace("'", '"'))
    (tmp_path / "commits").mkdir()
    for batch in (0, 1):
        (tmp_path / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}\n')
    assert checkpoint_positions(tmp_path) == {("ev", 0): 9, ("ev", 1): 4}
    assert checkpoint_positions(tmp_path / "new") == {}


def made_again(bootstrap: str, topic: str, partitions: int) -> None:
    """The topic deleted and created again at once (within tens of milliseconds), under the same name."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import NewTopic

    client = admin(bootstrap)
    client.delete_topics([topic])[topic].result(30)
    deadline = time.monotonic() + 30
    while True:
        try:
            client.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
            return
        except Exception as exc:  # noqa: BLE001 - still being deleted: again
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def test_the_events_topic_made_again_while_the_twin_runs_is_said_and_alerted(settings, spark, kafka_bootstrap,
                                                                            topics, tmp_path):
    """The events topic deleted and created again between two batches, its new partition 0 holding 1 record
    where the twin had read 2: Spark's source went on from offset 1, that record unread, and said so only in a
    WARN ('Partition ...'s offset was changed from 2 to 1'); the twin said nothing."""
    conf = twin_settings(settings, kafka_bootstrap, topics)
    conf = dataclasses.replace(conf, spark=dataclasses.replace(conf.spark, trigger_interval=SparkInterval("8 seconds")))

    def make_again() -> None:  # well before the next trigger, 8 s after the last
        made_again(kafka_bootstrap, topics.events, topics.events_partitions)
        fill(kafka_bootstrap, topics.events, 0, 1)

    lines = lines_of_a_twin_that(conf, spark, topics, tmp_path / "checkpoint", make_again, reads_up_to=(0, 1),
                                 says="events lost:")
    said = (f"events lost: {topics.events} partition 0, offsets 0 to 0 (1 record) of it as it is now: its end offset"
            f" went back from 2, where the twin had read to, to 1 (the topic deleted and made again, say); it goes on"
            f" from 1, and what the partition held before is unknown to it")
    assert said in lines, lines
    alerts = [a for a, _ in read_topic(kafka_bootstrap, topics.alerts, ReadOutcome(), expected="Alert",
                                       from_beginning=True, until_end=True) if a.type is AlertType.EVENTS_LOST]
    assert [a.reason.split(":")[0] for a in alerts] == [said.removeprefix("events lost: ").split(":")[0]]
