"""Kafka records -> typed rows, in Spark; what cannot be read -> dead letters with the reason.

    rows = classify_events(spark.readStream.format("kafka")...load())    # usable or not, with the reason

Each value is single-object encoded (`schemas.wire`): the fingerprint in bytes 3-10 names
the writer schema. For every catalogued writer version the body (from byte 11) goes through
`from_avro(body, writer_json, {"avroSchema": current_json, ...})`, which resolves that
version to the current schema the way Avro does (defaults for added fields, the enum default
for unknown symbols), under `when(fingerprint == that version's)`. PERMISSIVE mode turns a
body that fails into a struct of nulls instead of failing the query; a null in the schema's
first required field tells it.

Union members get stable names (`enableStableIdentifiersForUnionType`, empty prefix), so
`body` is a struct with one field per event kind, named after it: `body.MessageReceived`,
all null but the event's own.

A record that cannot be used becomes a row of the DeadLetter schema: original bytes, key,
topic, partition, offset, headers, Kafka timestamp, `reason` ("bad magic: ...", "truncated header: ...", "unknown
fingerprint: ...", "wrong schema: ...", "unknown event kind: ...", "corrupt body: ..."; the
same texts as `schemas.codec.DecodeError`), and `at_ms`, when it was set aside.
"""

from __future__ import annotations

from typing import Iterable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro

from schemas import catalogue as catalogues
from schemas import wire
from schemas.catalogue import Catalogue, SchemaVersion

READ_OPTIONS = {
    "mode": "PERMISSIVE",
    "enableStableIdentifiersForUnionType": "true",
    "stableIdentifierPrefixForUnionType": "",
}
# The Event header's time is `event_time` (a timestamp) in Spark; on the wire it is `event_time_ms`.
EVENT_TIME = "event_time"
# Kept from the Kafka record: the original key and bytes (to re-decode in Python, or to set the
# record aside later as a dead letter), and where and when Kafka stored it.
KAFKA_COLUMNS = ("key", "value", "partition", "offset", "timestamp")
# The Kafka source's `headers` column (with `includeHeaders`): kept for a dead letter.
HEADERS_TYPE = "array<struct<key:string,value:binary>>"

RECORD, REASON = "_record", "_reason"


def classify_events(raw: DataFrame, catalogue: Catalogue | None = None) -> DataFrame:
    """Every Kafka record of the events topic in ONE frame, usable or not: a single scan of the source.

    Columns: kind, event_time, primary_server and node (null when unusable), the Kafka key, value,
    topic, partition, offset, timestamp and headers (null when the source was read without them), and
    `reason` (null when usable, else why not).
    Splitting into two frames makes a streaming query that writes both scan the source once per branch.
    """
    catalogue = catalogue or catalogues.default()
    checked = decoded(raw, "Event", catalogue)
    record, usable = F.col(RECORD), F.col(REASON).isNull()
    return checked.select(
        F.when(usable, event_kind(record["body"], kinds(catalogue.current("Event")))).alias("kind"),
        F.when(usable, record["event_time_ms"]).alias(EVENT_TIME),
        F.when(usable, record["primary_server"]).alias("primary_server"),
        F.when(usable, record["node"]).alias("node"),
        "key", "value", "topic", "partition", "offset", "timestamp",
        F.col("headers") if "headers" in raw.columns else F.lit(None).cast(HEADERS_TYPE).alias("headers"),
        F.col(REASON).alias("reason"),
    )


def event_kind(body: Column, kinds: Iterable[str]) -> Column:
    """The kind of an event: the name of the one body member that is set."""
    return F.coalesce(*[F.when(body[kind].isNotNull(), F.lit(kind)) for kind in kinds])


def kinds(version: SchemaVersion) -> list[str]:
    """The event kinds of an Event schema version, in body-union order."""
    body = next(f for f in version.schema["fields"] if f["name"] == "body")
    return [member["name"] if isinstance(member, dict) else member for member in body["type"]]


def decoded(raw: DataFrame, name: str, catalogue: Catalogue) -> DataFrame:
    """The raw records with `_record` (the current schema's struct) and `_reason` (null when usable)."""
    current = catalogue.current(name)
    fingerprint = F.substring("value", 3, wire.FINGERPRINT_SIZE)  # bytes, compared as bytes (hex only in a reason)
    body = F.col("value").substr(F.lit(wire.HEADER_SIZE + 1), F.length("value"))
    versions = catalogue.versions(name)
    record = _by_fingerprint(fingerprint, {v: _read(body, v, current) for v in versions})
    with_record = raw.withColumn(RECORD, record)
    reason = _reason(fingerprint, body, name, catalogue)
    return with_record.withColumn(REASON, reason)


def _read(body: Column, writer: SchemaVersion, current: SchemaVersion) -> Column:
    """The body as the current schema's struct; null when it is not a valid record of `writer`."""
    if writer.fingerprint == current.fingerprint:
        return from_avro(body, current.json, READ_OPTIONS)
    return from_avro(body, writer.json, {**READ_OPTIONS, "avroSchema": current.json})


def _reason(fingerprint: Column, body: Column, name: str, catalogue: Catalogue) -> Column:
    """Why a record cannot be used (see `schemas.wire`), or null."""
    value = F.col("value")
    size = F.coalesce(F.length(value), F.lit(0))
    first_two = F.substring(value, 1, 2)
    first_two_text = F.when(size == 0, F.lit("nothing")).otherwise(_hex(first_two))
    first = F.substring(value, 1, 1)
    looks_like = (  # wire.looks_like
        F.when(value.isNull(), F.lit(wire.TOMBSTONE))
        .when(size == 0, F.lit(wire.EMPTY))
        .when((size >= wire.CONFLUENT_HEADER_SIZE) & (first == F.lit(wire.CONFLUENT_FIRST_BYTE)), F.format_string(
            wire.confluent_framing("%s"), F.conv(_hex(F.substring(value, 2, wire.CONFLUENT_HEADER_SIZE - 1)), 16, 10)))
        .when(F.substring(value, 1, len(wire.REPLACEMENT_CHARACTER)) == F.lit(wire.REPLACEMENT_CHARACTER),
              F.lit(wire.TYPED_TEXT))
        .when(first == F.lit(wire.JSON_FIRST_BYTE), F.lit(wire.JSON_TEXT))
        .otherwise(F.lit(""))
    )
    current = catalogue.current(name)
    versions = catalogue.versions(name)
    others = [v for v in catalogue.all_versions() if v.name != name]
    return (
        F.when(value.isNull() | (first_two != F.lit(wire.MAGIC)),
               _text(wire.BAD_MAGIC, wire.bad_magic_detail("%s", "%s"), first_two_text, looks_like))
        .when(size < wire.HEADER_SIZE, _text(wire.TRUNCATED_HEADER, wire.truncated_detail("%d"), size))
        .when(~fingerprint.isin([F.lit(v.fingerprint) for v in [*versions, *others]]),
              _text(wire.UNKNOWN_FINGERPRINT, wire.unknown_fingerprint_detail("%s"), _hex(fingerprint)))
        .when(fingerprint.isin([F.lit(v.fingerprint) for v in others]), _by_fingerprint(fingerprint, {
            v: F.lit(f"{wire.WRONG_SCHEMA}: {wire.wrong_schema_detail(str(v), name)}") for v in others}))
        .when(_unknown_kind(fingerprint, body, versions, current).isNotNull(),
              _unknown_kind(fingerprint, body, versions, current))
        .when(_failed(F.col(RECORD), current), _by_fingerprint(fingerprint, {
            v: F.lit(f"{wire.CORRUPT_BODY}: {wire.corrupt_body_detail(str(v))}") for v in versions}))
    )


def _unknown_kind(fingerprint: Column, body: Column, versions: list[SchemaVersion], current: SchemaVersion) -> Column:
    """For writer versions with event kinds the current schema lacks: the reason, when the record is one.

    This must be asked before trusting the resolved record: Avro Java resolves a union member
    it cannot find by name to the first reader member of compatible structure, so a new kind
    would silently read as an old one whose fields all have defaults (or have none).
    """
    reasons = {}
    for writer in versions:
        unknown = [k for k in kinds(writer) if k not in kinds(current)] if writer.name == "Event" else []
        if unknown:
            # Read with the writer's own schema, which has every member: is one of the new ones set?
            as_written = from_avro(body, writer.json, READ_OPTIONS)["body"]
            reasons[writer] = F.coalesce(*[
                F.when(as_written[k].isNotNull(),
                       F.lit(f"{wire.UNKNOWN_EVENT_KIND}: {wire.unknown_kind_detail(k, str(writer))}"))
                for k in unknown])
    return _by_fingerprint(fingerprint, reasons)


def _failed(record: Column, version: SchemaVersion) -> Column:
    """Whether from_avro failed: PERMISSIVE mode gives a struct of nulls, so a required field is null."""
    required = next(f["name"] for f in version.schema["fields"] if not _nullable(f["type"]))
    return record.isNull() | record[required].isNull()


def _nullable(avro_type: object) -> bool:
    return isinstance(avro_type, list) and "null" in avro_type


def _by_fingerprint(fingerprint: Column, columns: dict[SchemaVersion, Column]) -> Column:
    """The column of the version whose fingerprint the record has (null for none)."""
    chain = None
    for version, column in columns.items():
        condition = fingerprint == F.lit(version.fingerprint)
        chain = F.when(condition, column) if chain is None else chain.when(condition, column)
    return chain if chain is not None else F.lit(None).cast("string")


def _hex(data: Column) -> Column:
    """Bytes as lower-case hex, for a reason's text (comparisons use the bytes: cheaper per record)."""
    return F.lower(F.hex(data))


def _text(reason: str, template: str, *values: Column) -> Column:
    return F.format_string(f"{reason}: {template}", *values)
