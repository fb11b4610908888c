"""The first streaming query: node liveness from the events topic to the alerts topic.

Kafka -> JSON events -> event-time watermark -> `applyInPandasWithState` driving
`state.liveness` -> JSON alerts -> Kafka. The shadow-redundancy twin replaces the logic in
the middle; the shape (source, watermark, stateful operator, sink) stays.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import pandas as pd
from pyspark.sql import DataFrame, SparkSession, functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout

from state import liveness

EVENT_SCHEMA = "node STRING, event_time_ms LONG"
ALERT_SCHEMA = "node STRING, last_seen_ms LONG, decided_at_ms LONG, reason STRING"
STATE_SCHEMA = "last_seen_ms LONG"


@dataclass(frozen=True)
class LivenessQueryConfig:
    bootstrap_servers: str
    events_topic: str
    alerts_topic: str
    checkpoint_dir: str
    quiet_timeout_ms: int
    watermark_delay: str = "2 seconds"
    trigger_interval: str = "1 second"
    starting_offsets: str = "latest"


def alerts_from_events(events: DataFrame, quiet_timeout_ms: int, watermark_delay: str) -> DataFrame:
    """Quiet-node alerts from a streaming frame of (node, event_time_ms)."""

    def step(key: tuple, batches: Iterator[pd.DataFrame], group: GroupState) -> Iterator[pd.DataFrame]:
        node = str(key[0])
        if group.hasTimedOut:
            alert = liveness.on_deadline(node, liveness.Liveness(*group.get), quiet_timeout_ms)
            group.remove()
            yield pd.DataFrame([alert.__dict__])
            return
        previous = liveness.Liveness(*group.get) if group.exists else None
        times = [int(t) for batch in batches for t in batch["event_time_ms"]]
        current = liveness.on_events(previous, times)
        group.update((current.last_seen_ms,))
        group.setTimeoutTimestamp(current.deadline_ms(quiet_timeout_ms))

    return (
        events.withColumn("event_time", F.timestamp_millis("event_time_ms"))
        .withWatermark("event_time", watermark_delay)
        .groupBy("node")
        .applyInPandasWithState(step, ALERT_SCHEMA, STATE_SCHEMA, "append", GroupStateTimeout.EventTimeTimeout)
    )


def start(spark: SparkSession, config: LivenessQueryConfig) -> StreamingQuery:
    """Start the Kafka -> liveness -> Kafka query; the caller stops it."""
    raw = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", config.bootstrap_servers)
        .option("subscribe", config.events_topic)
        .option("startingOffsets", config.starting_offsets)
        .load()
    )
    events = raw.select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e")).select("e.*")
    events = events.where(F.col("node").isNotNull() & F.col("event_time_ms").isNotNull())
    alerts = alerts_from_events(events, config.quiet_timeout_ms, config.watermark_delay)
    return (
        alerts.select(F.col("node").alias("key"), F.to_json(F.struct("*")).alias("value"))
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", config.bootstrap_servers)
        .option("topic", config.alerts_topic)
        .option("checkpointLocation", config.checkpoint_dir)
        .trigger(processingTime=config.trigger_interval)
        .queryName(f"liveness:{config.events_topic}")
        .start()
    )
