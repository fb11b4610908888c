"""Spark-side readers and writers of every record type, for tests only: the round trip Python ->
Kafka -> Spark -> Kafka -> Python, and the evolution policy in Spark. The twin itself reads events
with `streaming.decode.classify_events` and writes with its operator.

    events, dead_letters = decode_events(spark.readStream.format("kafka")...load())
    to_kafka(alerts, "Alert").writeStream.format("kafka")...    # key, value: what the Kafka sink takes

`to_avro` writes the current schema's binary body and the single-object header (C3 01 and
the schema's fingerprint) goes in front. The columns must be those the matching decoder
gives: an output's fields by name, or for events the header fields with `event_time` and
`body` holding one struct per event kind. Spark's `to_avro` wants a union's members named
`member0`, `member1`... in union order, so the body is renamed so. Keys follow
`schemas.codec.KEY_FIELDS`.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import to_avro

from schemas import catalogue as catalogues
from schemas import wire
from schemas.catalogue import Catalogue
from schemas.codec import KEY_FIELDS
from streaming.decode import EVENT_TIME, HEADERS_TYPE, KAFKA_COLUMNS, REASON, RECORD, decoded, event_kind, kinds


def decode_events(raw: DataFrame, catalogue: Catalogue | None = None) -> tuple[DataFrame, DataFrame]:
    """(events, dead letters) from Kafka records of the events topic.

    events: kind, event_id, event_time (timestamp), node, primary_server, message, body,
    and from the Kafka record its key, value (the original bytes), partition, offset and timestamp.
    """
    catalogue = catalogue or catalogues.default()
    checked = decoded(raw, "Event", catalogue)
    record = F.col(RECORD)
    events = checked.where(F.col(REASON).isNull()).select(
        event_kind(record["body"], kinds(catalogue.current("Event"))).alias("kind"),
        record["event_id"].alias("event_id"),
        record["event_time_ms"].alias(EVENT_TIME),
        record["node"].alias("node"),
        record["primary_server"].alias("primary_server"),
        record["message"].alias("message"),
        record["body"].alias("body"),
        *KAFKA_COLUMNS,
    )
    return events, _dead_letters(checked)


def decode_records(raw: DataFrame, name: str, catalogue: Catalogue | None = None) -> tuple[DataFrame, DataFrame]:
    """(records, dead letters) from Kafka records of one output schema (Alert, RedeliveryCommand, DeadLetter).

    records: the schema's fields as columns.
    """
    checked = decoded(raw, name, catalogue or catalogues.default())
    return checked.where(F.col(REASON).isNull()).select(f"{RECORD}.*"), _dead_letters(checked)


def _dead_letters(checked: DataFrame) -> DataFrame:
    return checked.where(F.col(REASON).isNotNull()).select(
        F.coalesce(F.col("value"), F.unhex(F.lit(""))).alias("original"),  # a tombstone's null value: no bytes
        "key",
        "topic",
        F.col("partition").cast("long").alias("partition"),
        "offset",
        F.col(REASON).alias("reason"),
        F.current_timestamp().alias("at_ms"),
        (F.col("headers") if "headers" in checked.columns else F.array().cast(HEADERS_TYPE)).alias("headers"),
        F.col("timestamp").alias("timestamp_ms"),
    )


def to_kafka(df: DataFrame, name: str, *, topic: str | None = None, catalogue: Catalogue | None = None) -> DataFrame:
    """Kafka records (`key`, `value`, and `topic` when given) for rows of the top-level schema `name`."""
    columns = [kafka_key(name).alias("key"), avro_value(record_struct(name, catalogue), name, catalogue).alias("value")]
    if topic is not None:
        columns.append(F.lit(topic).alias("topic"))
    return df.select(*columns)


def avro_value(struct: Column, name: str, catalogue: Catalogue | None = None) -> Column:
    """The single-object encoding of a struct column with the current version of schema `name`."""
    version = (catalogue or catalogues.default()).current(name)
    header = F.unhex(F.lit(wire.header(version.fingerprint).hex()))
    return F.concat(header, to_avro(struct, version.json))


def kafka_key(name: str) -> Column:
    return F.col(KEY_FIELDS[name]).cast("binary")


def record_struct(name: str, catalogue: Catalogue | None = None) -> Column:
    """The struct `to_avro` takes for rows of schema `name`: its fields, in schema order."""
    version = (catalogue or catalogues.default()).current(name)
    fields = [f["name"] for f in version.schema["fields"]]
    if name != "Event":
        return F.struct(*[F.col(field) for field in fields])
    columns = {field: F.col(field) for field in fields}
    columns["event_time_ms"] = F.col(EVENT_TIME)
    columns["body"] = F.struct(*[F.col("body")[kind].alias(f"member{i}") for i, kind in enumerate(kinds(version))])
    return F.struct(*[columns[field].alias(field) for field in fields])
