"""Events Kafka deleted before the twin read them, said in the twin's own words when it starts.

Retention (`retention.ms`, `retention.bytes`) or `kafka-delete-records` can remove records of the
events topic the twin has not read yet, while it is stopped. Spark's Kafka source then goes on
from the oldest record Kafka still has (`failOnDataLoss` is off, so that the twin keeps
deciding), and says so only in a WARN of its executor with a stack trace. What those events said
is unknown to the twin, so before its query starts it compares where it reads next (its
checkpoint's position) with each partition's oldest offset, and says which:

    events lost: shadowtwin.events partition 0, offsets 286 to 287 (2 records), deleted by Kafka
    (retention.ms, retention.bytes or kafka-delete-records) before the twin read them; it goes on from 288

Only then: while the query runs, Spark's executors read ahead of the batch they run, so a record
deleted after the position of the latest batch may have been read already.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from confluent_kafka import TopicPartition
from confluent_kafka.admin import OffsetSpec

from infra.kafka import Kafka, admin
from streaming.consumer_group import read_up_to

Positions = dict[tuple[str, int], int]  # (topic, partition) -> the next offset the twin reads


def checkpoint_positions(checkpoint_dir: Path) -> Positions:
    """Where a query started on `checkpoint_dir` reads next: the end offsets of its last committed
    batch (Spark runs a planned but uncommitted batch again from there). Empty for a new checkpoint."""
    commits = [int(p.name) for p in (checkpoint_dir / "commits").glob("[0-9]*") if p.name.isdigit()]
    if not commits:
        return {}
    try:
        lines = (checkpoint_dir / "offsets" / str(max(commits))).read_text().splitlines()
    except OSError:
        return {}
    positions: Positions = {}
    for line in lines[2:]:  # "v1", the batch's metadata, then one line of offsets per source
        try:
            data = json.loads(line)
        except ValueError:
            continue
        positions.update({(t.topic, t.partition): t.offset for t in read_up_to({"sources": [{"endOffset": data}]})})
    return positions


def say_lost_events(kafka: Kafka, positions: Positions, say: Callable[[str], None] = print,
                    timeout_s: float = 10.0) -> int:
    """Say, per partition, the records below its oldest offset that the twin has yet to read
    (reading from `positions`); how many. A broker that does not answer in time: nothing is said."""
    if not positions:
        return 0
    client = admin(kafka)
    try:
        futures = client.list_offsets({TopicPartition(t, p): OffsetSpec.earliest() for t, p in positions},
                                      request_timeout=timeout_s)
        oldest = {(tp.topic, tp.partition): f.result(timeout_s).offset for tp, f in futures.items()}
    except Exception:  # noqa: BLE001 - saying what was lost must not keep the twin from starting
        return 0
    lost = 0
    for (topic, partition), first in sorted(positions.items()):
        upto = oldest.get((topic, partition), -1)
        if upto > first:
            lost += upto - first
            say(f"events lost: {topic} partition {partition}, offsets {first} to {upto - 1} ({upto - first} records),"
                f" deleted by Kafka (retention.ms, retention.bytes or kafka-delete-records) before the twin read them;"
                f" it goes on from {upto}")
    return lost
