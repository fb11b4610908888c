"""Typed rows -> Kafka records, in Spark, in the wire format `schemas.codec` decodes.

    to_kafka(alerts, "Alert").writeStream.format("kafka")...    # key, value: what the Kafka sink takes

`to_avro` writes the current schema's binary body and the single-object header (C3 01 and
the schema's fingerprint) goes in front. The columns must be those the matching decoder
gives (`streaming.decode`): an output's fields by name, or for events the header fields
with `event_time` and `body` holding one struct per event kind. Spark's `to_avro` wants a
union's members named `member0`, `member1`... in union order, so the body is renamed so.
Keys follow `schemas.codec.KEY_FIELDS`: an event's primary_server (UTF-8), an alert's id,
a command's holder, a dead letter's original key.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import to_avro

from schemas import catalogue as catalogues
from schemas import wire
from schemas.catalogue import Catalogue
from schemas.codec import KEY_FIELDS
from streaming.decode import EVENT_TIME, kinds


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
