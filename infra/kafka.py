"""confluent-kafka producers and consumers configured the way the twin needs them.

Producers hash keys with `murmur2_random`, the partitioner of the Java client (which
Spark's Kafka sink uses): a key goes to the same partition whether Python or Spark wrote
it, so one primary server's events stay in one partition, in order. librdkafka's own
default (`consistent_random`, CRC32) would scatter them differently.

Overrides are librdkafka settings as they are spelled, dots included:
`producer(bootstrap, **{"linger.ms": 5})`.
"""

from __future__ import annotations

from typing import Any, Iterable

from confluent_kafka import Consumer, Producer

PRODUCER_DEFAULTS: dict[str, Any] = {
    "partitioner": "murmur2_random",  # the Java client's: same key, same partition as Spark's sink
    "enable.idempotence": True,  # no duplicates or reordering from the producer's own retries
    "linger.ms": 5,
}
CONSUMER_DEFAULTS: dict[str, Any] = {
    "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
}


def producer(bootstrap: str, **overrides: Any) -> Producer:
    """A producer for `bootstrap` with the defaults above; `overrides` win."""
    return Producer({"bootstrap.servers": bootstrap, **PRODUCER_DEFAULTS, **overrides})


def consumer(bootstrap: str, group_id: str, topics: Iterable[str] = (), **overrides: Any) -> Consumer:
    """A consumer in `group_id`, subscribed to `topics` when given; reads from the start of a new group."""
    client = Consumer({"bootstrap.servers": bootstrap, "group.id": group_id, **CONSUMER_DEFAULTS, **overrides})
    topics = list(topics)
    if topics:
        client.subscribe(topics)
    return client
