"""Topic creation: the configured topics with their partition counts, idempotently."""

import uuid

from confluent_kafka.admin import AdminClient

from infra.settings import TopicSettings
from infra.topics import create_topics


def test_creates_then_leaves_existing_topics_alone(kafka_bootstrap):
    suffix = uuid.uuid4().hex[:8]
    wanted = TopicSettings(
        events=f"e.{suffix}", alerts=f"a.{suffix}", commands=f"c.{suffix}", dead_letters=f"d.{suffix}", state=f"s.{suffix}",
        events_partitions=3, commands_partitions=2,
    )
    first = create_topics(kafka_bootstrap, wanted)
    assert all(o.created for o in first) and len(first) == 5
    second = create_topics(kafka_bootstrap, wanted)
    assert not any(o.created for o in second)
    existing = AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(timeout=10).topics
    assert {name: len(existing[name].partitions) for name in wanted.partitions()} == wanted.partitions()
