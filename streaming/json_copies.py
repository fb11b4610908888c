"""`twin.json_topics`: every alert and command the twin writes, also as JSON on `<topic>.json`.

The copy is the contract's JSON Lines form (`schemas.jsonl`: `kind` first, then the fields in
order, times as ISO-8601 UTC strings under the name without `_ms`, enums as symbols, nulls
written), made in the JVM from the Avro record the twin just wrote (`from_avro`, `to_json`): a
Python UDF after the stateful operator fails in Spark 4.0 (a ClassCastException from
GenericInternalRow to UnsafeRow). tests/streaming/test_json_copies.py checks the copies equal
`schemas.jsonl.to_json` of the Avro records. The copy rides in the same pass as the Avro row
(an `explode` into one or two rows), so the stateful operator runs once. The alerts the twin
publishes itself, outside its query (LATE_EVENTS, EVENTS_LOST: streaming/app.py), get the same
bytes from `schemas.jsonl.json_copy`.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, functions as F
from pyspark.sql.avro.functions import from_avro

from infra.topics import json_topic
from schemas import catalogue, wire
from schemas.jsonl import json_name
from schemas.shape import Nullable, Timestamp, fields_of

ISO_MS = "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"  # the session's time zone is UTC (streaming/session.py)


def json_value(record_type: type) -> Column:
    """The JSON text of the `value` column's record, of `record_type`'s top-level schema."""
    name = record_type.__name__
    record = from_avro(F.expr(f"substring(value, {wire.HEADER_SIZE + 1})"), catalogue.default().current(name).json)
    fields = [F.lit(name).alias("kind")]
    for f in fields_of(record_type):
        shape = f.shape.inner if isinstance(f.shape, Nullable) else f.shape
        value = F.date_format(record[f.name], ISO_MS) if isinstance(shape, Timestamp) else record[f.name]
        fields.append(value.alias(json_name(f)))
    return F.to_json(F.struct(*fields), {"ignoreNullFields": "false"})


def with_json_copies(out: DataFrame, topics: dict[str, type]) -> DataFrame:
    """`out` (topic, key, value, partition) plus, for each row of one of `topics` (topic -> record class), a
    JSON copy on the same partition."""
    row = F.struct("topic", "key", "value", "partition")
    rows = F.array(row)
    for topic, record_type in topics.items():
        copy = F.struct(F.lit(json_topic(topic)).alias("topic"), F.col("key"),
                        json_value(record_type).cast("binary").alias("value"), F.col("partition"))
        rows = F.when(F.col("topic") == topic, F.array(row, copy)).otherwise(rows)
    return out.select(F.explode(rows).alias("row")).select("row.*")
