"""confluent-kafka producers and consumers configured the way the twin needs them.

Producers hash keys with `murmur2_random`, the partitioner of the Java client (which
Spark's Kafka sink uses): a key goes to the same partition whether Python or Spark wrote
it, so one primary server's events stay in one partition, in order. librdkafka's own
default (`consistent_random`, CRC32) would scatter them differently.

Overrides are librdkafka settings as they are spelled, dots included:
`producer(bootstrap, **{"linger.ms": 5})`.

Where the brokers are and how to reach them (`[kafka]`: bootstrap servers, `[kafka.security]`:
SASL and TLS, and any other client property) is turned into client properties HERE and only
here: `client_config` for every producer, consumer and admin client (librdkafka's names), and
`spark_options` for Spark's Kafka source and sink (the Java client's names). Each client takes
either the `KafkaSettings` or a bare bootstrap address (no security: tests on loopback).
Passwords are `Secret`s: they reach the clients' properties and nothing else.
"""

from __future__ import annotations

import time
from typing import Any, Iterable, Union

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from infra.config import ConfigError
from infra.settings import KafkaSettings

Kafka = Union[str, KafkaSettings]  # a bare bootstrap address means plaintext, no other property
_JAAS_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}

PRODUCER_DEFAULTS: dict[str, Any] = {
    "partitioner": "murmur2_random",  # the Java client's: same key, same partition as Spark's sink
    "enable.idempotence": True,  # no duplicates or reordering from the producer's own retries
    "linger.ms": 5,
    # a broker with auto.create.topics.enable would make a missing topic on the producer's first metadata request,
    # with its own defaults (one partition, CreateTime), which the twin then refuses: topics are made by `topics create`
    "allow.auto.create.topics": False,
}
CONSUMER_DEFAULTS: dict[str, Any] = {
    "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
}


def bootstrap_of(kafka: Kafka) -> str:
    """The bootstrap servers, for messages (never the security settings)."""
    return kafka if isinstance(kafka, str) else kafka.bootstrap_servers


def client_config(kafka: Kafka) -> dict[str, Any]:
    """librdkafka's properties for reaching `kafka`: bootstrap, security, then `client_properties`."""
    if isinstance(kafka, str):
        return {"bootstrap.servers": kafka}
    security = kafka.security
    config: dict[str, Any] = {"bootstrap.servers": kafka.bootstrap_servers, "security.protocol": security.protocol}
    if security.protocol.startswith("SASL"):
        config.update({"sasl.mechanism": security.sasl_mechanism, "sasl.username": security.sasl_username,
                       "sasl.password": security.sasl_password.reveal()})
    if security.protocol.endswith("SSL"):
        config["ssl.endpoint.identification.algorithm"] = "https" if security.ssl_verify_hostname else "none"
        for key, value in (("ssl.ca.location", security.ssl_ca_file),
                           ("ssl.certificate.location", security.ssl_certificate_file),
                           ("ssl.key.location", security.ssl_key_file)):
            if value is not None:
                config[key] = str(value)
        if security.ssl_key_password:
            config["ssl.key.password"] = security.ssl_key_password.reveal()
    return {**config, **kafka.client_properties}


def spark_options(kafka: Kafka) -> dict[str, str]:
    """The Java client's properties for reaching `kafka`, as Spark's Kafka source and sink take them
    ("kafka."-prefixed): the same settings as `client_config`, then `spark_properties`.

    Spark redacts option values matching `spark.redaction.regex` (the JAAS line contains
    "password") in its plans, UI and logs; a checkpoint keeps offsets, not options."""
    if isinstance(kafka, str):
        return {"kafka.bootstrap.servers": kafka}
    security = kafka.security
    config = {"bootstrap.servers": kafka.bootstrap_servers, "security.protocol": security.protocol}
    if security.protocol.startswith("SASL"):
        config["sasl.mechanism"] = security.sasl_mechanism
        config["sasl.jaas.config"] = (
            f'{_JAAS_MODULES[security.sasl_mechanism]} required username="{_jaas_quoted(security.sasl_username)}"'
            f' password="{_jaas_quoted(security.sasl_password.reveal())}";')
    if security.protocol.endswith("SSL"):
        config["ssl.endpoint.identification.algorithm"] = "https" if security.ssl_verify_hostname else ""
        if security.ssl_ca_file is not None:
            config.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(security.ssl_ca_file)})
        if security.ssl_key_file is not None:
            config.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(security.ssl_key_file)})
        if security.ssl_key_password:
            config["ssl.key.password"] = security.ssl_key_password.reveal()
    config.update(kafka.spark_properties)
    return {f"kafka.{key}": value for key, value in config.items()}


def _jaas_quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def admin(kafka: Kafka, **overrides: Any) -> AdminClient:
    """An admin client for `kafka`; `overrides` win. librdkafka's informational log lines are not
    printed (at exit it could say '%6|...|BGQUEUE|...: Purging 1 unserved events from background
    queue' on stderr, after a command that went well); its warnings and errors are."""
    return AdminClient({**client_config(kafka), "log_level": 5, **overrides})


def producer(kafka: Kafka, **overrides: Any) -> Producer:
    """A producer for `kafka` with the defaults above; `overrides` win."""
    return Producer({**client_config(kafka), **PRODUCER_DEFAULTS, **overrides})


def send(client: Producer, topic: str, key: bytes | None, value: bytes | None, **options: Any) -> None:
    """`client.produce` of one record (`options`: partition, on_delivery), waiting while the producer's local
    queue is full."""
    while True:
        try:
            client.produce(topic, key=key, value=value, **options)
            return
        except BufferError:  # the local queue is full: let it drain
            client.poll(0.1)


def consumer(kafka: Kafka, group_id: str, topics: Iterable[str] = (), **overrides: Any) -> Consumer:
    """A consumer in `group_id`, subscribed to `topics` when given; reads from the start of a new group."""
    client = Consumer({**client_config(kafka), "group.id": group_id, **CONSUMER_DEFAULTS, **overrides})
    topics = list(topics)
    if topics:
        client.subscribe(topics)
    return client


class NoSuchTopic(LookupError):
    """Topics the brokers do not have; the message names them, `topic` the one asked for (when one was)."""

    def __init__(self, message: str, topic: str | None = None):
        super().__init__(message)
        self.topic = topic


# What a broker answers for a topic it does not have, or cannot (an invalid name); any other
# error of a topic's metadata (a leader being elected, say) is no answer about it.
_NO_SUCH_TOPIC = (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.TOPIC_EXCEPTION)
TOPIC_CHECK_SECONDS = 5.0  # how long a publisher waits for the answer before it goes on without it
ANSWER_SECONDS = 10.0  # how long a command a person runs waits for the brokers (a tail, where, topics create)


def partitions_of(client: Consumer | Producer, topic: str, timeout: float = ANSWER_SECONDS, *,
                  kafka: Kafka | None = None) -> list[int]:
    """The topic's partition numbers, from one metadata request; NoSuchTopic when the brokers say
    they do not have it (naming the brokers, given `kafka`), KafkaException for another error or
    no answer within `timeout`. A producer's request creates the topic where the brokers create
    topics on first use, as its first record would."""
    metadata = client.list_topics(topic, timeout=timeout).topics.get(topic)
    error = metadata.error if metadata is not None else None
    if metadata is None or error is not None and error.code() in _NO_SUCH_TOPIC:
        at = f" at {bootstrap_of(kafka)}" if kafka is not None else ""
        raise NoSuchTopic(f"{topic}: no such topic{at} ({error.str() if error else 'not in the metadata'})", topic)
    if error is not None:
        raise KafkaException(error)
    return sorted(metadata.partitions)


_COORDINATOR_MOVING = (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                       KafkaError.COORDINATOR_NOT_AVAILABLE)


def committed_offsets(client: Consumer, partitions: list[TopicPartition], seconds: float = 30.0) -> list:
    """The group's committed offsets of `partitions`, asked again while the brokers answer with a retriable
    error: a group's first question on a loaded broker may meet NOT_COORDINATOR while its coordinator is found."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return client.committed(partitions, timeout=ANSWER_SECONDS)
        except KafkaException as exc:
            error = exc.args[0]
            if not (error.retriable() or error.code() in _COORDINATOR_MOVING) or time.monotonic() >= deadline:
                raise
            time.sleep(0.5)


def check_topics(client: Producer, kafka: Kafka, topics: Iterable[str], timeout: float = TOPIC_CHECK_SECONDS) -> None:
    """Before a producer publishes: NoSuchTopic for a topic the brokers say they do not have (its
    records would wait out the delivery timeout, then fail). Brokers that do not answer within
    `timeout` are let be: the delivery reports say so, as for any record."""
    for topic in topics:
        try:
            partitions_of(client, topic, timeout, kafka=kafka)
        except KafkaException:
            return


def max_message_bytes(kafka: Kafka, topic: str, timeout: float = TOPIC_CHECK_SECONDS) -> int | None:
    """The largest record batch `topic` takes (its max.message.bytes), or None when the brokers do not say
    within `timeout` (no such topic, no answer, a user not allowed to describe it)."""
    client = admin(kafka, log_level=2, error_cb=lambda error: None)  # held until answered: one let go ends its requests
    try:
        futures = client.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)], request_timeout=timeout)
        entry = next(iter(futures.values())).result(timeout=timeout).get("max.message.bytes")
        return int(entry.value) if entry is not None else None
    except (KafkaException, ValueError, TimeoutError):
        return None


class KafkaAccessRefused(ConfigError):
    """The brokers refused the configured credentials or certificates (a setting to fix, not a fault)."""


def cluster_metadata(kafka: Kafka, timeout: float = 30.0):
    """The cluster's metadata (brokers, topics), through an admin client for `kafka`.

    Refused credentials or certificates raise `KafkaAccessRefused` naming the broker's reason and
    the settings to check; a broker that does not answer raises librdkafka's KafkaException."""
    refusals: list[KafkaError] = []

    def note(error: KafkaError) -> None:
        if error.code() in (KafkaError._AUTHENTICATION, KafkaError._SSL):
            refusals.append(error)

    client = admin(kafka, error_cb=note, log_level=0)
    deadline = time.monotonic() + timeout
    while True:  # in short steps, so that a refusal is reported at once, not after `timeout`
        try:
            return client.list_topics(timeout=min(2.0, max(0.1, deadline - time.monotonic())))
        except KafkaException:
            client.poll(0)  # hands the errors seen so far to `note`
            if refusals:
                reason = refusals[0].str().split(": ", 1)[-1]
                raise KafkaAccessRefused(f"Kafka at {bootstrap_of(kafka)} refused the connection: {reason};"
                                         f" check {_what_to_check(kafka, refusals[0])}") from None
            if time.monotonic() >= deadline:
                raise


def _what_to_check(kafka: Kafka, refusal: KafkaError) -> str:
    if isinstance(kafka, str):
        return "[kafka.security] (none is configured)"
    security = kafka.security
    if refusal.code() == KafkaError._AUTHENTICATION:
        return (f"[kafka.security] sasl_username ({security.sasl_username!r}), sasl_password and sasl_mechanism"
                f" ({security.sasl_mechanism})")
    return "[kafka.security] ssl_ca_file, ssl_certificate_file, ssl_key_file and ssl_verify_hostname"
