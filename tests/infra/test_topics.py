"""Topic creation: the configured topics with their partition counts, idempotently."""

import uuid
from collections import Counter
from concurrent.futures import Future
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from infra import topics as topics_module
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


def test_a_topic_of_one_partition_is_said_to_have_one_partition(kafka_bootstrap):
    suffix = uuid.uuid4().hex[:8]
    wanted = TopicSettings(
        events=f"e.{suffix}", alerts=f"a.{suffix}", commands=f"c.{suffix}", dead_letters=f"d.{suffix}", state=f"s.{suffix}",
        events_partitions=1, commands_partitions=2,
    )
    said = {o.topic: o.describe() for o in create_topics(kafka_bootstrap, wanted)}
    assert said[wanted.events] == f"created  {wanted.events} (1 partition)"
    assert said[wanted.commands] == f"created  {wanted.commands} (2 partitions)"


def test_the_state_topic_is_compacted_within_the_hour(kafka_bootstrap):
    """Kafka compacts closed segments only: the state topic's close hourly, not weekly (its default)."""
    suffix = uuid.uuid4().hex[:8]
    wanted = TopicSettings(events=f"e.{suffix}", alerts=f"a.{suffix}", commands=f"c.{suffix}",
                           dead_letters=f"d.{suffix}", state=f"s.{suffix}")
    create_topics(kafka_bootstrap, wanted)
    state = topics_module._configs(AdminClient({"bootstrap.servers": kafka_bootstrap}), [wanted.state], 30)[wanted.state]
    assert state["cleanup.policy"] == "compact" and int(state["segment.ms"]) <= 3_600_000


def test_existing_topics_are_checked_for_what_correctness_depends_on(kafka_bootstrap, tmp_path):
    import subprocess
    import sys

    from confluent_kafka.admin import NewTopic

    suffix = uuid.uuid4().hex[:8]
    wanted = TopicSettings(events=f"e.{suffix}", alerts=f"a.{suffix}", commands=f"c.{suffix}",
                           dead_letters=f"d.{suffix}", state=f"s.{suffix}", events_partitions=3)
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(wanted.events, 2, 1)])[wanted.events].result(30)  # CreateTime, 2 partitions
    outcomes = {o.topic: o for o in create_topics(kafka_bootstrap, wanted)}
    assert not outcomes[wanted.events].created
    assert outcomes[wanted.events].differences == (
        "has 2 partitions, configured 3",
        "message.timestamp.type is CreateTime, must be LogAppendTime (the clock-skew guard compares event time"
        " with the broker's)")
    assert all(outcomes[t].created and not outcomes[t].differences for t in (wanted.alerts, wanted.commands, wanted.state))
    env = {"SHADOWTWIN_TOPICS_" + key.upper(): str(value) for key, value in vars(wanted).items()}
    result = subprocess.run([sys.executable, "-m", "shadowtwin", "topics", "create", "--bootstrap", kafka_bootstrap],
                            capture_output=True, text=True, env={**__import__("os").environ, **env}, timeout=120)
    assert result.returncode == 1, result.stderr
    assert "message.timestamp.type is CreateTime" in result.stdout
    assert result.stderr == (f"1 of 5 topics differ from the configuration in what the twin's correctness depends on:"
                             f" e.{suffix} (recreate them, change [topics], or change their configs:"
                             " kafka-configs --alter)\n")


def test_topics_create_says_nothing_on_stderr_when_all_is_well(kafka_bootstrap):
    """librdkafka's admin client used to print, at exit, in about one run of four: '%6|...|BGQUEUE|
    rdkafka#producer-2| [thrd:background]: Purging 1 unserved events from background queue'."""
    import os
    import subprocess
    import sys

    suffix = uuid.uuid4().hex[:8]
    env = {**os.environ, **{f"SHADOWTWIN_TOPICS_{key.upper()}": f"{key}.{suffix}" for key in
                            ("events", "alerts", "commands", "dead_letters", "state")}}
    for _ in range(12):  # the first creates them; the others check them, as a deployment script does
        result = subprocess.run([sys.executable, "-m", "shadowtwin", "topics", "create", "--bootstrap",
                                 kafka_bootstrap], capture_output=True, text=True, env=env, timeout=120)
        assert (result.returncode, result.stderr) == (0, "")


@pytest.mark.parametrize("which, costs", [
    ("events", "of the events, one per primary server"),
    ("commands", "of the redelivery commands, one per node that must resend"),
    ("dead_letters", "of the dead letters, one per key, and the broker refuses one without a key: the twin's query"
                     " fails on it")])
def test_a_compacted_topic_other_than_the_state_is_named(kafka_bootstrap, which, costs):
    """`kafka-configs --alter --add-config cleanup.policy=compact` on the events topic: Kafka then keeps one
    event of each primary server (its key), and a twin started over reads none of the others. It used to
    pass unsaid. Each topic is said with what compaction costs it (a compacted commands or dead-letter topic was
    said to keep one event per primary server)."""
    from confluent_kafka.admin import NewTopic

    suffix = uuid.uuid4().hex[:8]
    wanted = TopicSettings(events=f"e.{suffix}", alerts=f"a.{suffix}", commands=f"c.{suffix}",
                           dead_letters=f"d.{suffix}", state=f"s.{suffix}")
    compacted = getattr(wanted, which)
    config = {**topics_module.wanted_configs(wanted)[compacted], "cleanup.policy": "compact,delete"}
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(compacted, getattr(wanted, f"{which}_partitions"), 1, config=config)])[compacted] \
        .result(30)
    outcomes = {o.topic: o for o in create_topics(kafka_bootstrap, wanted)}
    assert outcomes[compacted].differences == (
        f"cleanup.policy is compact,delete, must be delete (compaction keeps only the latest record of each key:"
        f" {costs})",)
    assert not any(o.differences for o in outcomes.values() if o.topic != compacted)


@pytest.mark.parametrize("which, limit", [("dead_letters", topics_module.DEAD_LETTER_MAX_BYTES),
                                          ("alerts", topics_module.ALERT_MAX_BYTES),
                                          ("state", topics_module.STATE_MAX_BYTES)])
def test_a_topic_too_small_for_the_largest_record_the_twin_writes_there_is_named(kafka_bootstrap, which, limit):
    """The dead letter of the largest event; an alert about every message of a large queue; the state record of a
    message as large as the events topic takes."""
    from confluent_kafka.admin import NewTopic

    suffix = uuid.uuid4().hex[:8]
    wanted = TopicSettings(events=f"e.{suffix}", alerts=f"a.{suffix}", commands=f"c.{suffix}",
                           dead_letters=f"d.{suffix}", state=f"s.{suffix}")
    small = getattr(wanted, which)
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    config = {k: v for k, v in topics_module.wanted_configs(wanted)[small].items() if k != "max.message.bytes"}
    admin.create_topics([NewTopic(small, getattr(wanted, f"{which}_partitions"), 1, config=config)])[small] \
        .result(30)  # the broker's limit
    outcomes = {o.topic: o for o in create_topics(kafka_bootstrap, wanted)}
    assert outcomes[small].differences == (
        f"max.message.bytes is 1048588, must be at least {limit} (the largest record the twin writes there)",)
    assert not any(o.differences for o in outcomes.values() if o.topic != small)


class BrokerLearningOfTopics:
    """An admin client whose broker knows a topic only from its `knows_after`-th question about it on."""

    def __init__(self, knows_after: int):
        self.knows_after, self.asked = knows_after, Counter()

    def describe_configs(self, resources, request_timeout):
        futures = {}
        for resource in resources:
            self.asked[resource.name] += 1
            future = Future()
            if self.asked[resource.name] < self.knows_after:
                future.set_exception(KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)))
            else:
                future.set_result({"cleanup.policy": SimpleNamespace(value="compact")})
            futures[resource] = future
        return futures


def test_a_topic_a_broker_has_not_learnt_of_yet_is_asked_about_again(monkeypatch):
    monkeypatch.setattr(topics_module, "UNKNOWN_TOPIC_PAUSE_SECONDS", 0.0)
    client = BrokerLearningOfTopics(knows_after=3)
    assert topics_module._configs(client, ["s.x", "e.x"], timeout=10) == {
        "s.x": {"cleanup.policy": "compact"}, "e.x": {"cleanup.policy": "compact"}}
    assert client.asked == {"s.x": 3, "e.x": 3}


def test_a_topic_no_broker_learns_of_fails_after_the_timeout(monkeypatch):
    monkeypatch.setattr(topics_module, "UNKNOWN_TOPIC_PAUSE_SECONDS", 0.01)
    with pytest.raises(KafkaException):
        topics_module._configs(BrokerLearningOfTopics(knows_after=10**9), ["s.x"], timeout=0.1)


def test_an_events_topic_that_keeps_events_shorter_than_the_twin_needs_them_is_named(kafka_bootstrap, settings):
    """`kafka-configs --alter --add-config retention.ms=600000` on the events topic: Kafka deletes events
    the twin may still need (a promotion comes ShadowResubmitTimeSpan after its primary's last answer), and a
    twin that stops for ten minutes, or starts on a new checkpoint, never learns of them. It used to pass unsaid."""
    from confluent_kafka.admin import NewTopic

    suffix = uuid.uuid4().hex[:8]
    wanted = TopicSettings(events=f"e.{suffix}", alerts=f"a.{suffix}", commands=f"c.{suffix}",
                           dead_letters=f"d.{suffix}", state=f"s.{suffix}")
    config = {**topics_module.wanted_configs(wanted)[wanted.events], "retention.ms": "600000"}
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(wanted.events, wanted.events_partitions, 1, config=config)])[wanted.events].result(30)
    needed = topics_module.events_retention_needed_ms(settings)
    assert needed == (3 * 3600 + 30) * 1000  # the shipped ShadowResubmitTimeSpan and watermark delay
    outcomes = {o.topic: o for o in create_topics(kafka_bootstrap, wanted, events_retention_ms=needed)}
    assert outcomes[wanted.events].differences == (
        "retention.ms is 600000 (0:10:00), must be at least 10830000 (3:00:30: the longest ShadowResubmitTimeSpan"
        " plus the watermark delay; Kafka deletes an event sooner than the twin may need it)",)
    assert not any(o.differences for o in outcomes.values() if o.topic != wanted.events)
    assert not any(o.differences for o in create_topics(kafka_bootstrap, wanted))  # not asked: not checked


def test_a_finite_retention_bytes_on_the_events_topic_is_a_warning_with_the_figure(kafka_bootstrap, settings):
    """`retention.bytes=1073741824` on the events topic: Kafka deletes a partition's oldest events once it holds a
    GiB, however recent, so a busy hour can delete events the twin still needs; how much traffic a GiB holds no
    setting tells, so it is said as a warning with the figure (it used to pass unsaid)."""
    from confluent_kafka.admin import NewTopic

    suffix = uuid.uuid4().hex[:8]
    wanted = TopicSettings(events=f"e.{suffix}", alerts=f"a.{suffix}", commands=f"c.{suffix}",
                           dead_letters=f"d.{suffix}", state=f"s.{suffix}")
    config = {**topics_module.wanted_configs(wanted)[wanted.events], "retention.bytes": str(2**30)}
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(wanted.events, wanted.events_partitions, 1, config=config)])[wanted.events].result(30)
    needed = topics_module.events_retention_needed_ms(settings)
    outcomes = {o.topic: o for o in create_topics(kafka_bootstrap, wanted, events_retention_ms=needed)}
    assert outcomes[wanted.events].note == (
        "warning: retention.bytes is 1073741824 (1,024.0 MiB a partition): Kafka deletes a partition's oldest events"
        " once it holds more, however recent; at the busiest traffic it must still keep the longest"
        " ShadowResubmitTimeSpan plus the watermark delay of events")
    assert outcomes[wanted.events].differences == ()  # a warning: `topics create` still succeeds
    assert not any(o.note for o in outcomes.values() if o.topic != wanted.events)


def test_an_events_topic_created_with_a_broker_default_retention_too_short_is_named(kafka_bootstrap, settings):
    """A cluster whose brokers keep records ten minutes by default (`log.retention.ms=600000`): the events topic
    `topics create` makes inherits it, and deletes events the twin may still need; only a topic that existed
    was checked, so the one just created passed unsaid."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    suffix = uuid.uuid4().hex[:8]
    wanted = TopicSettings(events=f"e.{suffix}", alerts=f"a.{suffix}", commands=f"c.{suffix}",
                           dead_letters=f"d.{suffix}", state=f"s.{suffix}")
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})

    def cluster_default(op: AlterConfigOpType) -> None:  # on each broker (the client refuses the cluster's "")
        entry = ConfigEntry("log.retention.ms", "600000", incremental_operation=op)
        for future in admin.incremental_alter_configs([
                ConfigResource(ConfigResource.Type.BROKER, str(broker), incremental_configs=[entry])
                for broker in admin.list_topics(timeout=30).brokers]).values():
            future.result(30)

    cluster_default(AlterConfigOpType.SET)
    try:
        outcomes = {o.topic: o for o in create_topics(
            kafka_bootstrap, wanted, events_retention_ms=topics_module.events_retention_needed_ms(settings))}
    finally:
        cluster_default(AlterConfigOpType.DELETE)
    assert outcomes[wanted.events].created
    assert outcomes[wanted.events].differences == (
        "retention.ms is 600000 (0:10:00), must be at least 10830000 (3:00:30: the longest ShadowResubmitTimeSpan"
        " plus the watermark delay; Kafka deletes an event sooner than the twin may need it)",)
    assert not any(o.differences for o in outcomes.values() if o.topic != wanted.events)
