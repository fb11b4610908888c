"""A real twin writing to an alerts topic of several partitions: a condition and the alert that clears it
on one partition, in that order (so that `alerts route` reads them in order, in one router), each JSON
copy on its alert's partition, and no write to a partition the topic lacks."""

from __future__ import annotations

import dataclasses
import json
import uuid

from infra.kafka import consumer
from infra.topics import create_topics, json_topic
from schemas.codec import default_codec
from streaming.app import TwinApplication
from tests.schemas.test_placement import cleared_pairs
from tests.streaming.test_twin import expected_ids, final_tick, publish, twin_settings, world_events, world_servers


def placed(bootstrap: str, topic: str, count: int, timeout_s: float = 150.0) -> list[tuple[int, bytes]]:
    """The first `count` records of `topic`, each with its partition."""
    client = consumer(bootstrap, uuid.uuid4().hex, [topic])
    found: list[tuple[int, bytes]] = []
    try:
        for _ in range(int(timeout_s / 0.5)):
            if len(found) >= count:
                break
            message = client.poll(0.5)
            if message is not None and message.error() is None:
                found.append((message.partition(), message.value()))
    finally:
        client.close()
    return found


def test_a_condition_and_the_alert_that_clears_it_share_a_partition_of_a_topic_with_fewer_than_configured(
        settings, spark, kafka_bootstrap, topics, tmp_path):
    """The operator made the alerts topic with 3 partitions, the configuration says 8 (the twin starts on a
    partition count other than the configured one); the twin makes the JSON topic with 8. Before, alerts
    went where their key (alert_id) hashed: mbx02's shadows unreachable and messages at risk on one
    partition, its return with a new queue database, which clears them, on another."""
    made = dataclasses.replace(topics, alerts=f"{topics.alerts}.three", alerts_partitions=3)
    create_topics(kafka_bootstrap, made)
    events = world_events()
    alerts, _ = expected_ids(events)
    publish(kafka_bootstrap, topics.events, [*events, final_tick(events)])
    conf = twin_settings(settings, kafka_bootstrap, dataclasses.replace(made, alerts_partitions=8),
                         servers=world_servers())
    conf = dataclasses.replace(conf, twin=dataclasses.replace(conf.twin, json_topics=True))
    with TwinApplication(conf, spark=spark, ticks=False, checkpoint_dir=tmp_path / "checkpoint",
                         say=lambda _: None) as twin:
        records = placed(kafka_bootstrap, made.alerts, len(alerts))
        copies = placed(kafka_bootstrap, json_topic(made.alerts), len(alerts))
        assert twin.restarts == 0 and twin.query.exception() is None, "no write to a partition the topic lacks"
    codec = default_codec()
    partition_of = {codec.decode(value).alert_id: partition for partition, value in records}
    assert set(partition_of) == alerts
    pairs = cleared_pairs([codec.decode(value) for _, value in records])
    assert len(pairs) >= 3, "the world clears conditions"
    assert [(c.type.value, c.alert_id, partition_of[c.alert_id], later.type.value, partition_of[later.alert_id])
            for c, later in pairs if partition_of[c.alert_id] != partition_of[later.alert_id]] == []
    read_at = {alert_id: n for n, alert_id in enumerate(partition_of)}  # a partition's records come in offset order
    assert all(read_at[c.alert_id] < read_at[later.alert_id] for c, later in pairs), "a condition before its clear"
    assert len(set(partition_of.values())) > 1, "the primaries' alerts spread over the partitions"
    assert {json.loads(value)["alert_id"]: partition for partition, value in copies} == partition_of, \
        "each JSON copy on its alert's partition"
