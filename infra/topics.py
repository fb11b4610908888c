"""Creation of the twin's topics (events in; alerts, commands and dead letters out)."""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from infra.settings import TopicSettings


@dataclass(frozen=True)
class TopicOutcome:
    topic: str
    partitions: int
    created: bool
    note: str = ""

    def describe(self) -> str:
        verb = "created" if self.created else "exists"
        return f"{verb:8} {self.topic} ({self.partitions} partitions){' - ' + self.note if self.note else ''}"


def json_topic(topic: str) -> str:
    """Where the twin publishes the JSON copies of a topic's records (`twin.json_topics`)."""
    return f"{topic}.json"


def create_topics(bootstrap_servers: str, topics: TopicSettings, timeout: float = 30.0, *,
                  json_topics: bool = False) -> list[TopicOutcome]:
    """Create every configured topic that does not exist yet; leave existing ones as they are.
    With `json_topics`, the alerts' and commands' JSON topics too."""
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    wanted = topics.partitions()
    if json_topics:
        wanted |= {json_topic(topics.alerts): topics.alerts_partitions,
                   json_topic(topics.commands): topics.commands_partitions}
    existing = admin.list_topics(timeout=timeout).topics
    outcomes: list[TopicOutcome] = []
    missing = [name for name in wanted if name not in existing]
    # The broker stamps each event with its ingestion time: the twin's guard against node
    # clocks running ahead compares event time with it (streaming/twin.py).
    configs = {topics.events: {"message.timestamp.type": "LogAppendTime"}}
    futures = admin.create_topics(
        [NewTopic(name, wanted[name], topics.replication_factor, config=configs.get(name, {})) for name in missing],
        operation_timeout=timeout,
    ) if missing else {}
    for name, future in futures.items():
        try:
            future.result(timeout=timeout)
            outcomes.append(TopicOutcome(name, wanted[name], created=True))
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
            outcomes.append(TopicOutcome(name, wanted[name], created=False))
    for name in wanted:
        if name in existing:
            actual = len(existing[name].partitions)
            note = f"configured {wanted[name]}, left unchanged" if actual != wanted[name] else ""
            outcomes.append(TopicOutcome(name, actual, created=False, note=note))
    return sorted(outcomes, key=lambda o: o.topic)
