"""The streaming twin as a query: events topic -> decode -> trusted event time -> model -> alerts, commands, dead letters.

    query = start_query(spark, settings, checkpoint_dir)      # the one place a streaming query is built

- Records that do not decode go to the dead-letter topic with the reason (`streaming.decode`).
  Good and bad records stay in one frame (one scan of the source, one shuffle): the bad ones
  reach the operator under an empty group key, which turns them into dead letters. The
  operator decodes each usable record again with the model's own decoder, whose verdict is
  final (see `streaming.operator`).
- An event stamped further ahead of its Kafka ingestion time than `twin.max_clock_skew_seconds`
  goes there too, before the watermark sees it: one node with a clock in the future (or one
  forged event) can never move event time for everybody and fire every deadline at once.
- So does an event stamped before 1970 or after 2262-04-11 (`state.clock_guard.out_of_range`, as whatif
  refuses it): the operator's Python could not even receive its time.
- The watermark trails the latest event time by `twin.watermark_delay`; rows at or behind it
  are not applied: dropped by Spark (`numRowsDroppedByWatermark`) or (those Spark 4.0 lets
  through, as it filters against the previous batch's watermark) set aside by the operator as
  dead letters (`streaming.operator`, step 2); both counted in the progress and reported.
- Clock ticks (`ClockTick`, published by `streaming.ticker`) move event time when every node
  is quiet; they have no primary server, and the operator drops them (they never reach the model).
- A server is grouped, and its facts addressed, by its one spelling (state/names.py: as declared,
  else in lower case), however an event spells it: MBX01, mbx01 and Mbx01 are one group.
- The facts every group shares (other servers' NodeStarted, and that each server still
  publishes: state/README.md) are copies of rows addressed to every declared server's group,
  in the same pass (`shared_facts`).
- One Kafka sink: each output row names its topic (alerts, commands or dead letters); with
  `twin.json_topics`, alerts and commands also as JSON on `<topic>.json` (`streaming.json_copies`).
  An alert also names its partition, that of its primary server (schemas/placement.py), and its JSON
  copy goes to the same; the other rows are placed by their keys.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable

from pyspark.sql import Column, DataFrame, SparkSession, functions as F
from pyspark.sql.streaming import StreamingQuery

from infra.config import ConfigError
from infra.kafka import spark_options
from infra.settings import Settings
from infra.topics import OUTPUT_MAX_BYTES, alert_partitions
from schemas.events import Alert, RedeliveryCommand
from schemas.jsonl import iso_time
from state.clock_guard import EARLIEST_MS, LATEST_MS, OUT_OF_RANGE
from state.names import FOLD_FROM, FOLD_TO, ServerNames
from streaming.decode import classify_events
from streaming.json_copies import with_json_copies
from streaming.operator import DEAD_LETTER_GROUP, FACT_SEEN, FACT_STARTED, OutputTopics, apply_model

QUERY_NAME = "shadowtwin"


def twin_output(raw: DataFrame, settings: Settings) -> DataFrame:
    """The twin's Kafka rows (topic, key, value, partition) from the events topic's Kafka rows, in one scan;
    the alerts on as many partitions as `infra.topics.alert_partitions` finds now (schemas/placement.py)."""
    max_skew_ms = settings.twin.max_clock_skew_seconds * 1000
    rows = classify_events(raw)
    skew_ms = F.col("event_time").cast("double") * 1000 - F.col("timestamp").cast("double") * 1000
    skewed = F.format_string(
        "clock skew: event time %s is %.0f s ahead of its Kafka ingestion time %s (limit %d s)",
        F.date_format("event_time", "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"), skew_ms / 1000,
        F.date_format("timestamp", "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"), F.lit(max_skew_ms // 1000),
    )
    # An event of no primary server (only a clock tick has none) would reach no model: say so.
    no_primary = F.when((F.col("primary_server") == "") & (F.col("kind") != "ClockTick"), F.format_string(
        "no primary server: a %s event must name the primary server it concerns", F.col("kind")))
    # Spark reads strings without checking them; Python cannot even receive a group key that is
    # not UTF-8 (pyarrow refuses it, and the query would die on it, again and again).
    not_utf8 = F.when(~(F.is_valid_utf8("primary_server") & F.is_valid_utf8("node")), F.lit(
        "corrupt body: the primary server or node name is not UTF-8"))
    # state.clock_guard's range, which Spark's Python workers need too (their times are int64 nanoseconds)
    event_ms = F.col("event_time").cast("double") * 1000
    out_of_range = F.when((event_ms < F.lit(EARLIEST_MS)) | (event_ms > F.lit(LATEST_MS)), F.format_string(
        f"{OUT_OF_RANGE}: %s (%.0f ms) is not between {iso_time(EARLIEST_MS)} and {iso_time(LATEST_MS)}",
        F.date_format("event_time", "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"), event_ms))
    reason = F.coalesce(F.col("reason"), not_utf8, out_of_range, F.when(skew_ms > F.lit(max_skew_ms), skewed),
                        no_primary)
    usable = reason.isNull()
    names = settings.shadow_redundancy.names
    node = spelled(F.col("node"), names)
    primary = spelled(F.col("primary_server"), names)
    own = F.struct(F.when(usable, primary).otherwise(F.lit(DEAD_LETTER_GROUP)).alias("group"),
                   F.lit(None).cast("string").alias("fact"))
    routed = rows.select(
        # An unusable row has no event time, so it can never move the watermark.
        F.when(usable, F.col("event_time")).alias("event_time"),
        F.explode(F.concat(F.array(own), shared_facts(usable, node, settings))).alias("to"),
        "value", "key", "topic", "partition", "offset", reason.alias("reason"),
        F.when(usable, node).alias("node"),
        # kept for a dead letter of the row's own group; most producers' records have none. As JSON (values in
        # base64): handing Python an array of structs cost the JVM a third more per record, even all null (measured)
        F.when(F.size("headers") > 0, F.to_json("headers")).alias("headers"),
        F.unix_millis("timestamp").alias("timestamp_ms"),
    ).select(F.col("to.group").alias("primary_server"), F.col("to.fact").alias("fact"), "event_time",
             F.when(F.col("to.fact") == FACT_SEEN, F.lit(None).cast("binary")).otherwise(F.col("value")).alias("value"),
             "key", "topic", "partition", "offset", "reason", "node",
             *[F.when(F.col("to.fact").isNull(), F.col(name)).alias(name) for name in ("headers", "timestamp_ms")])
    topics = settings.topics
    placed_on = alert_partitions(settings.kafka, topics, settings.twin.json_topics)
    out = apply_model(routed.withWatermark("event_time", str(settings.twin.watermark_delay)),
                      settings.shadow_redundancy, OutputTopics(topics.alerts, topics.commands, topics.dead_letters,
                                                               topics.state, placed_on),
                      settings.twin.watermark_delay.ms)
    return with_json_copies(out, {topics.alerts: Alert, topics.commands: RedeliveryCommand}) \
        if settings.twin.json_topics else out


def spelled(name: Column, names: ServerNames) -> Column:
    """`ServerNames.spelling` in Spark: the declared spelling of the name's key, else the key."""
    key = F.translate(name, FOLD_FROM, FOLD_TO)
    cases = None
    for declared_key, declared in names.declared.items():
        cases = (F.when if cases is None else cases.when)(key == F.lit(declared_key), F.lit(declared))
    return key if cases is None else cases.otherwise(key)


def shared_facts(usable: Column, node: Column, settings: Settings) -> Column:
    """Where a row goes besides its own group, as the facts every group is fed (state/facts.py):
    every event of a server (`node`, spelled as its group is) to every declared server's group as a
    NodeSeen (the model keeps the first of each server and liveness bucket), and a NodeStarted also
    as itself to every other server's group, in the same pass (no second scan of the source). The
    copies carry no bytes, but the operator still meets each: with P declared servers it handles P + 1 rows per event
    (the price of cross-server reasoning; docs/engine-facts.md). Without declared servers
    (`[shadow_redundancy] servers`) no facts are fed, and the model decides as it does without
    them (state/README.md)."""
    servers = settings.shadow_redundancy.servers
    none = F.array().cast("array<struct<group:string,fact:string>>")
    if not servers:
        return none

    def to_all(fact: str) -> Column:
        return F.array(*[F.struct(F.lit(s).alias("group"), F.lit(fact).alias("fact")) for s in servers])

    started = F.filter(to_all(FACT_STARTED), lambda target: target["group"] != node)
    return F.when(usable & (F.col("primary_server") != DEAD_LETTER_GROUP), F.concat(
        to_all(FACT_SEEN), F.when(F.col("kind") == "NodeStarted", started).otherwise(none),
    )).otherwise(none)


def start_query(spark: SparkSession, settings: Settings, checkpoint_dir: Path | str,
                transform: Callable[[DataFrame, Settings], DataFrame] = twin_output,
                query_name: str = QUERY_NAME) -> StreamingQuery:
    """Start the streaming query: the events topic through `transform` into the output topics.

    `transform` is the twin; the benchmark passes a pass-through to measure the ceiling.
    """
    if transform is twin_output:
        refuse_previous_operator(Path(checkpoint_dir))
    kafka, twin = spark_options(settings.kafka), settings.twin
    reader = (
        spark.readStream.format("kafka")
        # a transaction's records only once committed, as librdkafka's readers of the contract take them
        # (the Java client's default reads aborted ones too); `kafka.spark_properties` may say otherwise
        .option("kafka.isolation.level", "read_committed")
        .options(**kafka)
        .option("subscribe", settings.topics.events)
        .option("startingOffsets", twin.starting_offsets)
        .option("failOnDataLoss", "false")
        .option("includeHeaders", "true")
    )
    if twin.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(twin.max_offsets_per_trigger))
    return (
        transform(reader.load(), settings)
        .writeStream.format("kafka")
        .option("kafka.max.request.size", str(OUTPUT_MAX_BYTES))
        .options(**kafka)
        .option("checkpointLocation", str(checkpoint_dir))
        .trigger(processingTime=str(settings.spark.trigger_interval))
        .queryName(query_name)
        .start()
    )


def refuse_checkpoint_in_a_file(checkpoint_dir: Path) -> None:
    """A checkpoint folder that is a file, or lies under one (a mistyped `--checkpoint`): said in one
    line before anything starts, not by Spark's stack trace when the query starts."""
    for place in (checkpoint_dir, *checkpoint_dir.parents):
        if place.exists():
            if not place.is_dir():
                raise ConfigError(f"checkpoint {checkpoint_dir}: {place} is a file, not a folder")
            return


def made_checkpoint(checkpoint_dir: Path) -> None:
    """The checkpoint folder, made now (Spark makes it when the query starts): one that cannot be made or written
    (`--checkpoint /proc/x`, a folder of another user's) is said in one line, not by Spark's stack trace."""
    refuse_checkpoint_in_a_file(checkpoint_dir)
    try:
        checkpoint_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"checkpoint {checkpoint_dir}: cannot be made ({exc.strerror})") from None
    if not os.access(checkpoint_dir, os.W_OK | os.X_OK):
        raise ConfigError(f"checkpoint {checkpoint_dir}: cannot be written (Permission denied)")


def refuse_previous_operator(checkpoint_dir: Path) -> None:
    """A checkpoint written by the twin's previous operator (`applyInPandasWithState`, one snapshot
    per group) cannot be resumed by this one (a base and a log per group, streaming/held_state.py):
    said in one line, before Spark would fail on it batch after batch."""
    metadata = checkpoint_dir / "state" / "0" / "_metadata" / "metadata"
    if metadata.is_file() and '"operatorName":"applyInPandasWithState"' in metadata.read_text(errors="replace"):
        raise ConfigError(f"checkpoint {checkpoint_dir} was written by an earlier twin (applyInPandasWithState"
                          f" state), which this twin cannot resume: give it a new checkpoint directory"
                          f" (it reads the events topic again from twin.starting_offsets)")


def stop_between_batches(query: StreamingQuery, timeout_s: float = 30.0) -> None:
    """Stop the query while no micro-batch runs, if one ends within `timeout_s`: stopping
    mid-batch kills its tasks, which Spark reports as errors although nothing is lost."""
    deadline = time.monotonic() + timeout_s
    while query.isActive and query.status.get("isTriggerActive") and time.monotonic() < deadline:
        time.sleep(0.05)
    query.stop()
