"""Creation and checking of the twin's topics (events in; alerts, commands, dead letters and state out).

Missing topics are created as configured. Existing ones are left as they are but checked for
what correctness depends on: the partition count (a primary server's events stay in one
partition, in order, only while it does not change), LogAppendTime on the events topic (the
clock-skew guard compares event time with the broker's ingestion time: streaming/twin.py),
compaction on the state topic (the latest summary per key: state/summary.py) and on no other
(the events topic is keyed by primary server: compacted, it would keep one event of each), the events
topic's retention.ms against how long the twin needs its events (`events_retention_needed_ms`; a topic just
created too, which has the broker's default) and a finite retention.bytes (a warning), room on the
dead-letter topic for the dead letter of the largest event (`DEAD_LETTER_MAX_BYTES`), on the
alerts topics for an alert about every message of a large queue (`ALERT_MAX_BYTES`), on the state topic
and the JSON commands topic for the record and command of a message as large as the events topic takes
(`STATE_MAX_BYTES`, `COMMAND_JSON_MAX_BYTES`), and the
replication factor and min.insync.replicas (what an acknowledged record survives).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import timedelta

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import ConfigResource, NewTopic

from infra.kafka import Kafka, admin, cluster_metadata
from infra.settings import Settings, TopicSettings
from infra.wording import counted

LOG_APPEND_TIME = "LogAppendTime"
UNKNOWN_TOPIC_PAUSE_SECONDS = 0.2
KAFKA_DEFAULT_MAX_BYTES = 1_048_588  # Kafka's default limit on a record batch (message.max.bytes)
# Twice that: a dead letter holds the largest record the events topic takes with that limit, its key
# again, its topic and its reason.
DEAD_LETTER_MAX_BYTES = 2 * KAFKA_DEFAULT_MAX_BYTES
# An alert names every message it concerns: a shadow that promotes 100,000 copies says so in one alert
# of about 4.5 MB (Avro; 13 MB as a JSON copy). Kafka's default would stop the twin's sink at some
# 23,000 messages (8,000 as JSON).
ALERT_MAX_BYTES = 16 * 1024 * 1024
# A held message's record on the state topic (JSON, streaming/state_rows.py) lists its recipients, and again
# per fork: that of a message as large as the events topic takes is larger than its event (one of 32,700
# recipients, 1,046,481 bytes, made a record of about 1.1 MB, which Kafka's default refused: the twin's query
# failed on it, batch after batch). As much room as for an alert.
STATE_MAX_BYTES = ALERT_MAX_BYTES
# A redelivery command names the recipients its resubmission must still serve: as JSON, those of a message as
# large as the events topic takes run past Kafka's default (32,699 recipients: 1,013,757 bytes of Avro, 1,112,085
# of JSON), which refused the JSON copy, and the twin's query failed on it. As much room as for an alert.
COMMAND_JSON_MAX_BYTES = ALERT_MAX_BYTES
# The twin's sink writes every output topic: it may send the largest record any of them takes
# (streaming/twin.py), under its producer's 32 MiB buffer.
OUTPUT_MAX_BYTES = max(DEAD_LETTER_MAX_BYTES, ALERT_MAX_BYTES)
# Kafka compacts only closed segments, and rolls one after 7 days (or 1 GiB) by default: the state
# topic rolls hourly, so that its readers (`where`, `server`, the views) read the state and at most
# about an hour of records it replaced, not a week of them.
STATE_SEGMENT_MS = 3_600_000


@dataclass(frozen=True)
class TopicOutcome:
    topic: str
    partitions: int
    created: bool
    note: str = ""
    differences: tuple[str, ...] = ()  # how an existing topic differs from the configuration in what matters
    configured_partitions: int = 0

    @property
    def refusals(self) -> tuple[str, ...]:
        """The differences the twin does not start with: all but the partition count, since it reads and
        writes any number of partitions (and names those added to the events topic: streaming/lost_events.py)."""
        count = partitions_difference(self.partitions, self.configured_partitions)
        return tuple(d for d in self.differences if d != count)

    def describe(self) -> str:
        verb = "created" if self.created else "exists"
        said = "; ".join((*self.differences, *([self.note] if self.note else [])))
        return f"{verb:8} {self.topic} ({counted(self.partitions, 'partition')}){' - ' + said if said else ''}"


def json_topic(topic: str) -> str:
    """Where the twin publishes the JSON copies of a topic's records (`twin.json_topics`)."""
    return f"{topic}.json"


def wanted_topics(topics: TopicSettings, json_topics: bool = False) -> dict[str, int]:
    """Topic name -> partitions, for every topic the twin writes or reads; with `json_topics`, the
    alerts' and commands' JSON copies too."""
    wanted = topics.partitions()
    if json_topics:
        wanted |= {json_topic(topics.alerts): topics.alerts_partitions,
                   json_topic(topics.commands): topics.commands_partitions}
    return wanted


def alert_partitions(kafka: Kafka, topics: TopicSettings, json_topics: bool = False, timeout: float = 30.0) -> int:
    """On how many partitions the twin places its alerts (schemas/placement.py): `alerts_partitions`, or
    fewer when the alerts topic has fewer (or, with `json_topics`, the topic of their JSON copies, each on
    its alert's partition), as the start check lets it be: a record for a partition a topic lacks fails
    the twin's write. Partitions beyond the setting are left unused, so that where a primary server's
    alerts go moves only when the setting does; a topic the brokers do not list counts as one partition."""
    found = cluster_metadata(kafka, timeout).topics
    names = [topics.alerts, *([json_topic(topics.alerts)] if json_topics else [])]
    return min(topics.alerts_partitions, *(max(len(found[name].partitions) if name in found else 0, 1)
                                           for name in names))


def wanted_configs(topics: TopicSettings, json_topics: bool = False) -> dict[str, dict[str, str]]:
    """Topic name -> the topic configuration the twin creates it with."""
    common = {"min.insync.replicas": str(topics.min_insync_replicas)}
    own = {topics.events: {"message.timestamp.type": LOG_APPEND_TIME},
           topics.state: {"cleanup.policy": "compact", "segment.ms": str(STATE_SEGMENT_MS),
                          "max.message.bytes": str(STATE_MAX_BYTES)},
           topics.dead_letters: {"max.message.bytes": str(DEAD_LETTER_MAX_BYTES)},
           topics.alerts: {"max.message.bytes": str(ALERT_MAX_BYTES)},
           json_topic(topics.alerts): {"max.message.bytes": str(ALERT_MAX_BYTES)},
           json_topic(topics.commands): {"max.message.bytes": str(COMMAND_JSON_MAX_BYTES)}}
    return {name: {**common, **own.get(name, {})} for name in wanted_topics(topics, json_topics)}


def events_retention_needed_ms(settings: Settings) -> int:
    """How long the events topic must keep an event: the longest ShadowResubmitTimeSpan of any server
    plus the watermark delay, the longest the twin may decide on an event after its time (a shadow
    promotes its copies that long after its primary's last answer). An event deleted sooner is lost to
    a twin that was stopped, or fell behind, for as long, and to one started again on a new checkpoint."""
    model = settings.shadow_redundancy
    spans = [model.defaults.shadow_resubmit_time_span, *(p.shadow_resubmit_time_span for p in model.nodes.values())]
    return int(max(spans).total_seconds() * 1000) + settings.twin.watermark_delay.ms


def create_topics(kafka: Kafka, topics: TopicSettings, timeout: float = 30.0, *,
                  json_topics: bool = False, events_retention_ms: int = 0) -> list[TopicOutcome]:
    """Create every configured topic that does not exist yet; check the existing ones.
    With `json_topics`, the alerts' and commands' JSON topics too; with `events_retention_ms`, that an
    existing events topic keeps its events at least that long."""
    existing = cluster_metadata(kafka, timeout).topics  # first: refused credentials end here, in one line
    client = admin(kafka)  # librdkafka's info lines not shown (infra.kafka.admin)
    wanted = wanted_topics(topics, json_topics)
    configs = wanted_configs(topics, json_topics)
    outcomes: list[TopicOutcome] = []
    missing = [name for name in wanted if name not in existing]
    futures = client.create_topics(
        [NewTopic(name, wanted[name], topics.replication_factor, config=configs[name]) for name in missing],
        operation_timeout=timeout,
    ) if missing else {}
    present, created = [name for name in wanted if name in existing], []
    for name, future in futures.items():
        try:
            future.result(timeout=timeout)
            created.append(name)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
            present.append(name)  # made meanwhile, or not yet in the metadata we read: checked like the others
    if len(present) > len(wanted) - len(missing):
        existing = _listing(kafka, present, timeout)
    # a topic just created has the broker's defaults for what it was not given: its retention too
    actual_configs = _configs(client, [*present, *created], timeout)
    for name in created:
        found = actual_configs[name]
        outcomes.append(TopicOutcome(name, wanted[name], created=True, note=retention_bytes_note(found),
                                     differences=retention_differences(found, events_retention_ms))
                        if name == topics.events else TopicOutcome(name, wanted[name], created=True))
    for name in present:
        partitions = existing[name].partitions
        replicas = min((len(p.replicas) for p in partitions.values()), default=0)
        outcomes.append(TopicOutcome(
            name, len(partitions), created=False,
            note=retention_bytes_note(actual_configs[name]) if name == topics.events else "",
            differences=differences(wanted[name], len(partitions), topics.replication_factor, replicas, configs[name],
                                    actual_configs[name], events_retention_ms if name == topics.events else 0,
                                    compaction_loss(topics, name)),
            configured_partitions=wanted[name]))
    return sorted(outcomes, key=lambda o: o.topic)


def _listing(kafka: Kafka, names: list[str], timeout: float) -> dict:
    """The cluster's topics once its metadata lists each of `names` with its partitions: a topic
    another client made a moment ago is "already exists" to a create before the metadata we read
    lists it (a loaded broker)."""
    deadline = time.monotonic() + timeout
    while True:
        topics = cluster_metadata(kafka, timeout).topics
        unlisted = [name for name in names if name not in topics or not topics[name].partitions]
        if not unlisted:
            return topics
        if time.monotonic() > deadline:
            raise RuntimeError(f"{', '.join(unlisted)}: the broker says it exists, but its metadata does not list it"
                               f" after {timeout:g} s")
        time.sleep(0.2)


def compaction_loss(topics: TopicSettings, name: str) -> str:
    """What compaction would cost topic `name`, which the twin writes or reads uncompacted, in words."""
    if name == topics.events:
        return "of the events, one per primary server"
    if name == topics.commands or name == json_topic(topics.commands):
        return "of the redelivery commands, one per node that must resend"
    if name == topics.dead_letters:
        return "of the dead letters, one per key, and the broker refuses one without a key: the twin's query fails on it"
    return "of the alerts, one per alert id"


def differences(partitions: int, actual_partitions: int, replication: int, actual_replication: int,
                configs: dict[str, str], actual_configs: dict[str, str], retention_ms: int = 0,
                compaction_costs: str = "") -> tuple[str, ...]:
    """What an existing topic lacks of the configured one, in words, in what correctness depends on;
    `retention_ms`: how long it must keep its records; `compaction_costs`: what compacting it would cost."""
    found = list(retention_differences(actual_configs, retention_ms))
    if actual_partitions != partitions:
        found.append(partitions_difference(actual_partitions, partitions))
    if actual_replication < replication:
        found.append(f"replication factor {actual_replication}, configured {replication}")
    wanted_type = configs.get("message.timestamp.type")
    if wanted_type and actual_configs.get("message.timestamp.type") != wanted_type:
        found.append(f"message.timestamp.type is {actual_configs.get('message.timestamp.type')}, must be {wanted_type}"
                     " (the clock-skew guard compares event time with the broker's)")
    if configs.get("cleanup.policy") == "compact" and "compact" not in actual_configs.get("cleanup.policy", ""):
        found.append(f"cleanup.policy is {actual_configs.get('cleanup.policy')}, must include compact"
                     " (the latest state per key)")
    if configs.get("cleanup.policy") != "compact" and "compact" in actual_configs.get("cleanup.policy", ""):
        found.append(f"cleanup.policy is {actual_configs.get('cleanup.policy')}, must be delete (compaction keeps"
                     f" only the latest record of each key: {compaction_costs})")
    wanted_bytes = configs.get("max.message.bytes")
    if wanted_bytes and int(actual_configs.get("max.message.bytes", "0")) < int(wanted_bytes):
        found.append(f"max.message.bytes is {actual_configs.get('max.message.bytes')}, must be at least {wanted_bytes}"
                     " (the largest record the twin writes there)")
    if int(actual_configs.get("min.insync.replicas", "1")) < int(configs["min.insync.replicas"]):
        found.append(f"min.insync.replicas {actual_configs.get('min.insync.replicas')},"
                     f" configured {configs['min.insync.replicas']}")
    return tuple(found)


def partitions_difference(actual_partitions: int, partitions: int) -> str:
    return f"has {counted(actual_partitions, 'partition')}, configured {partitions}"


class TopicsDiffer(Exception):
    """Existing topics on which the twin would lose or refuse records: it does not start on them."""

    def __init__(self, outcomes: list[TopicOutcome]):
        said = "; ".join(f"{o.topic}: {'; '.join(o.refusals)}" for o in outcomes)
        super().__init__(f"{said} - the twin does not start on topics that would lose or refuse its records"
                         " (recreate them, change [topics], or change their configs: kafka-configs --alter)")


def refuse_differing(outcomes: list[TopicOutcome]) -> None:
    """Raise `TopicsDiffer` naming every topic whose differences the twin does not start with."""
    refused = [o for o in outcomes if o.refusals]
    if refused:
        raise TopicsDiffer(refused)


def retention_differences(actual_configs: dict[str, str], retention_ms: int) -> tuple[str, ...]:
    """retention.ms shorter than `retention_ms` (how long the events topic must keep its records), in words."""
    kept_ms = int(actual_configs.get("retention.ms", "-1"))
    if not retention_ms or not 0 <= kept_ms < retention_ms:
        return ()
    return (f"retention.ms is {kept_ms} ({timedelta(milliseconds=kept_ms)}), must be at least {retention_ms}"
            f" ({timedelta(milliseconds=retention_ms)}: the longest ShadowResubmitTimeSpan plus the watermark"
            " delay; Kafka deletes an event sooner than the twin may need it)",)


def retention_bytes_note(actual_configs: dict[str, str]) -> str:
    """A finite retention.bytes, said as a warning: Kafka then deletes a partition's oldest events once it
    holds more, however recent they are, which no configuration of the twin can judge (it depends on the
    traffic)."""
    kept_bytes = int(actual_configs.get("retention.bytes", "-1"))
    if kept_bytes < 0:
        return ""
    return (f"warning: retention.bytes is {kept_bytes} ({kept_bytes / 2**20:,.1f} MiB a partition): Kafka deletes a"
            " partition's oldest events once it holds more, however recent; at the busiest traffic it must still"
            " keep the longest ShadowResubmitTimeSpan plus the watermark delay of events")


def _configs(client, names: list[str], timeout: float) -> dict[str, dict[str, str]]:
    """Each topic's configuration. A broker may not know a topic the metadata already listed (a
    cluster's brokers learn of a new topic one after another): it is asked again until `timeout`."""
    found: dict[str, dict[str, str]] = {}
    deadline = time.monotonic() + timeout
    while names:
        futures = client.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, name) for name in names],
                                          request_timeout=timeout)
        unknown = []
        for resource, future in futures.items():
            try:
                found[resource.name] = {key: entry.value for key, entry in future.result(timeout=timeout).items()}
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART or time.monotonic() >= deadline:
                    raise
                unknown.append(resource.name)
        names = unknown
        if names:
            time.sleep(UNKNOWN_TOPIC_PAUSE_SECONDS)
    return found
