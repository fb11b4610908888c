"""Which partition of the alerts topic an alert goes to: all alerts about one primary server to one.

    out.produce(topic, key=kafka_key(alert), value=encode(alert), partition=alert_partition(alert, n))

An alert's Kafka key is its `alert_id` (schemas/README.md, "Kafka key"), which Kafka's partitioner
would scatter over the partitions: a condition (a primary down, its shadows promoted) and the later
alert that clears it (the primary back) would land on different partitions, and `alerts route`
could read the clear before the condition, or two routers each read half of them, and the condition
stay open. Every alert that clears a condition is about the condition's primary server
(producers/alert_router.py, `CLEARED_BY`), and the twin decides all alerts about one primary in its
one stateful group, in order: placed by that primary, a condition and what clears it share a
partition, in the order the twin decided them. `n` is how many of the topic's partitions the twin
places alerts on (infra.topics.alert_partitions). The place is a CRC-32 of the primary's name, the
same in every process; an alert about no server (LATE_EVENTS, EVENTS_LOST) goes to partition 0.
"""

from __future__ import annotations

import zlib

from schemas.events import Alert, AlertType


def primary_of(alert: Alert) -> str:
    """The primary server an alert is about: the first it names, but SHADOW_SERVER_UNREACHABLE names
    (the shadow, its primary)."""
    at = 1 if alert.type is AlertType.SHADOW_SERVER_UNREACHABLE and len(alert.servers) >= 2 else 0
    return alert.servers[at] if alert.servers else ""


def alert_partition(alert: Alert, partitions: int) -> int:
    """The partition, of `partitions` (at least 1), for `alert`: the same for every alert about its primary."""
    return zlib.crc32(primary_of(alert).encode()) % partitions
