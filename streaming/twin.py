"""The streaming twin: events topic -> decode -> trusted event time -> model -> alerts, commands, dead letters.

    query = start_twin(spark, TwinConfig(...))

- Records that do not decode go to the dead-letter topic with the reason (`streaming.decode`).
  Good and bad records stay in one frame (one scan of the source, one shuffle): the bad ones
  reach the operator under an empty group key, which turns them into dead letters.
- An event stamped further ahead of its Kafka ingestion time than `max_clock_skew` goes there
  too, before the watermark sees it: one node with a clock in the future (or one forged
  event) can never move event time for everybody and fire every deadline at once.
- The watermark trails the latest event time by `watermark_delay`; rows older than it are
  dropped by Spark, counted in the progress (`numRowsDroppedByWatermark`) and reported.
- Clock ticks (`ClockTick`, published by `streaming.ticker`) move event time when every node
  is quiet; they have no primary server, and the operator drops them (they never reach the model).
- One Kafka sink: each output row names its topic (alerts, commands or dead letters).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession, functions as F
from pyspark.sql.streaming import StreamingQuery

from state.parameters import ModelConfig
from streaming.decode import classify_events
from streaming.operator import DEAD_LETTER_GROUP, OutputTopics, apply_model

@dataclass(frozen=True)
class TwinConfig:
    bootstrap_servers: str
    events_topic: str
    alerts_topic: str
    commands_topic: str
    dead_letters_topic: str
    checkpoint_dir: str
    model: ModelConfig
    watermark_delay: str = "30 seconds"
    max_clock_skew_ms: int = 300_000
    trigger_interval: str = "2 seconds"
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    query_name: str = "shadowtwin"


def twin_output(raw: DataFrame, config: TwinConfig) -> DataFrame:
    """The twin's Kafka rows (topic, key, value) from the events topic's Kafka rows, in one scan."""
    rows = classify_events(raw)
    skew_ms = F.col("event_time").cast("double") * 1000 - F.col("timestamp").cast("double") * 1000
    skewed = F.format_string(
        "clock skew: event time %s is %.0f s ahead of its Kafka ingestion time %s (limit %d s)",
        F.date_format("event_time", "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"), skew_ms / 1000,
        F.date_format("timestamp", "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"), F.lit(config.max_clock_skew_ms // 1000),
    )
    reason = F.coalesce(F.col("reason"), F.when(skew_ms > F.lit(config.max_clock_skew_ms), skewed))
    usable = reason.isNull()

    def only_for_dead_letters(column: str):
        return F.when(~usable, F.col(column)).alias(column)

    routed = rows.select(
        # An unusable row has no event time, so it can never move the watermark.
        F.when(usable, F.col("event_time")).alias("event_time"),
        F.when(usable, F.col("primary_server")).otherwise(F.lit(DEAD_LETTER_GROUP)).alias("primary_server"),
        "value", *(only_for_dead_letters(c) for c in ("key", "topic", "partition", "offset")), reason.alias("reason"),
    )
    return apply_model(routed.withWatermark("event_time", config.watermark_delay), config.model,
                       OutputTopics(config.alerts_topic, config.commands_topic, config.dead_letters_topic))


def start_twin(spark: SparkSession, config: TwinConfig) -> StreamingQuery:
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", config.bootstrap_servers)
        .option("subscribe", config.events_topic)
        .option("startingOffsets", config.starting_offsets)
        .option("failOnDataLoss", "false")
    )
    if config.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(config.max_offsets_per_trigger))
    return (
        twin_output(reader.load(), config)
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", config.bootstrap_servers)
        .option("checkpointLocation", config.checkpoint_dir)
        .trigger(processingTime=config.trigger_interval)
        .queryName(config.query_name)
        .start()
    )


def stop_between_batches(query: StreamingQuery, timeout_s: float = 15.0) -> None:
    """Stop the query while no micro-batch runs, if one ends within `timeout_s`: stopping
    mid-batch kills its tasks, which Spark reports as errors although nothing is lost."""
    deadline = time.monotonic() + timeout_s
    while query.isActive and query.status.get("isTriggerActive") and time.monotonic() < deadline:
        time.sleep(0.05)
    query.stop()
