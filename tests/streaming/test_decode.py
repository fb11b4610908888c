"""Python encode -> Kafka -> Spark decode -> Spark encode -> Kafka -> Python decode, every record type at once.

One streaming query reads the four input topics (events, alerts, commands, dead letters),
decodes each with its schema, re-encodes what it read to an output topic of the same type,
and sends whatever it could not read to a quarantine topic as DeadLetters. Garbled records
sit between good ones; records of an older and of a newer Event version are in the mix.
"""

from __future__ import annotations

import dataclasses
import functools
import time
import uuid

import pytest
from confluent_kafka import Message
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from schemas import catalogue, codec, wire
from schemas.codec import Codec, DecodeError
from schemas.datum import to_datum
from schemas.events import EVENT_TYPES, ClockTick, SiteLocality
from infra import kafka as kafka_clients
from streaming.decode import classify_events
from tests.streaming.spark_records import decode_events, decode_records, to_kafka
from tests.schemas.samples import T0, sample_events, sample_outputs
from tests.schemas.versions import encode_with, new_kind_datum, next_event, previous_event

CATALOGUE = catalogue.default().with_versions(previous_event(), next_event())
EVENTS = list(sample_events().values())


def create_topics(bootstrap: str, partitions: dict[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the topics exist
    futures = admin.create_topics([NewTopic(name, count, 1) for name, count in partitions.items()])
    for future in futures.values():
        future.result(timeout=30)


def produce(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes]]) -> list[Message]:
    """Send (key, value) pairs in order; the delivery reports, with partition and offset."""
    delivered: list[Message] = []
    producer = kafka_clients.producer(bootstrap)
    for key, value in records:
        producer.produce(topic, key=key, value=value, on_delivery=lambda err, msg: delivered.append(err or msg))
    assert producer.flush(30) == 0
    assert all(isinstance(m, Message) for m in delivered), delivered
    return delivered


def consume(bootstrap: str, topic: str, count: int, timeout_s: float = 60.0) -> list[Message]:
    """The first `count` records of `topic`, then a short wait to show there are no more."""
    consumer = kafka_clients.consumer(bootstrap, f"test-{uuid.uuid4().hex}", [topic])
    records: list[Message] = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline and len(records) < count:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                records.append(message)
        extra = consumer.poll(1.0)
        assert extra is None or extra.error(), f"more than {count} records in {topic}"
    finally:
        consumer.close()
    return records


def start_round_trip(spark, bootstrap: str, inputs: dict[str, str], outputs: dict[str, str], quarantine: str,
                     checkpoint: str):
    raw = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
           .option("subscribe", ",".join(inputs.values())).option("startingOffsets", "earliest").load())
    parts, dead = [], []
    for name, topic in inputs.items():
        mine = raw.where(F.col("topic") == topic)
        records, dead_letters = decode_events(mine, CATALOGUE) if name == "Event" else decode_records(
            mine, name, CATALOGUE)
        parts.append(to_kafka(records, name, topic=outputs[name]))
        dead.append(dead_letters)
    parts.append(to_kafka(functools.reduce(DataFrame.unionByName, dead), "DeadLetter", topic=quarantine))
    return (functools.reduce(DataFrame.unionByName, parts).writeStream.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap).option("checkpointLocation", checkpoint)
            .queryName(f"round-trip:{inputs['Event']}").start())


def versioned_events() -> tuple[list[bytes], list]:
    """Records of the previous and next Event versions, and what the current reader makes of them."""
    received, requested = sample_events()["MessageReceived"], sample_events()["ShadowCopyRequested"]
    old = dataclasses.replace(received, event_id="old/1")
    newer = dataclasses.replace(received, event_id="new/1")
    newer_datum = to_datum(newer)
    newer_datum["body"][1]["priority"] = 9
    cloud = dataclasses.replace(requested, event_id="new/2")
    cloud_datum = to_datum(cloud)
    cloud_datum["body"][1]["locality"] = "CLOUD"
    values = [encode_with(previous_event(), to_datum(old)), encode_with(next_event(), newer_datum),
              encode_with(next_event(), cloud_datum)]
    expected = [dataclasses.replace(old, sender_supports_shadow=True), newer,
                dataclasses.replace(cloud, locality=SiteLocality.UNKNOWN)]
    return values, expected


def garbled() -> list[bytes]:
    good = codec.encode(sample_events()["MessageReceived"])
    header = {k: v for k, v in to_datum(sample_events()["ShadowCopyRequested"]).items() if k != "body"}
    return [
        b"\xc3\x02" + good[2:],                           # bad magic
        b"\xc3\x01" + b"\x5a" * 8 + good[10:],             # unknown fingerprint
        good[:40],                                        # corrupt body: cut short
        encode_with(next_event(), new_kind_datum(header)),  # a kind only the next version has
    ]


def test_every_record_type_round_trips_and_garbage_goes_to_the_dead_letters(spark, kafka_bootstrap, topics, tmp_path):
    inputs = {"Event": topics.events, "Alert": topics.alerts, "RedeliveryCommand": topics.commands,
              "DeadLetter": topics.dead_letters}
    outputs = {name: f"{topic}.out" for name, topic in inputs.items()}
    quarantine = f"{topics.dead_letters}.quarantine"
    create_topics(kafka_bootstrap, {outputs["Event"]: topics.events_partitions, outputs["Alert"]: 1,
                                    outputs["RedeliveryCommand"]: 2, outputs["DeadLetter"]: 1, quarantine: 1})
    ticks = [ClockTick(event_id=f"tick/{n}", event_time_ms=T0 + n, node="shadowtwin",
                       primary_server=f"mbx{n:02d}.contoso.com") for n in range(1, 9)]
    versioned_values, versioned_expected = versioned_events()
    bad = garbled()
    key = b"mbx01.contoso.com"
    events_in = produce(kafka_bootstrap, topics.events, [
        *[(codec.kafka_key(e), codec.encode(e)) for e in EVENTS[:12]],
        *[(key, value) for value in bad],
        *[(codec.kafka_key(e), codec.encode(e)) for e in EVENTS[12:] + ticks],
        *[(key, value) for value in versioned_values],
    ])
    for name, record in sample_outputs().items():
        produce(kafka_bootstrap, inputs[name], [(codec.kafka_key(record), codec.encode(record))])

    started_ms = int(time.time() * 1000)
    query = start_round_trip(spark, kafka_bootstrap, inputs, outputs, quarantine, str(tmp_path / "checkpoint"))
    try:
        query.processAllAvailable()
        assert query.isActive and query.exception() is None, "garbage does not stop the query"
        late = ClockTick(event_id="tick/late", event_time_ms=T0 + 99, node="shadowtwin", primary_server="mbx03")
        produce(kafka_bootstrap, topics.events, [(codec.kafka_key(late), codec.encode(late))])
        query.processAllAvailable()
        assert query.isActive and query.exception() is None
    finally:
        query.stop()

    # Every good event arrives, equal to what was sent (older and newer versions resolved).
    expected = EVENTS + ticks + versioned_expected + [late]
    events_out = consume(kafka_bootstrap, outputs["Event"], len(expected))
    decoded = [codec.decode_event(m.value()) for m in events_out]
    assert sorted(map(repr, decoded)) == sorted(map(repr, expected))
    assert all(m.key() == codec.kafka_key(e) for m, e in zip(events_out, decoded))

    # Python's producer (murmur2_random) and Spark's sink put every key in the same partition.
    partition_in = {Codec(CATALOGUE).decode(m.value()).event_id: m.partition() for m in events_in
                    if m.value() not in bad}
    assert len({m.partition() for m in events_out}) == 2, "the keys spread over both partitions"
    assert all(m.partition() == partition_in[e.event_id] for m, e in zip(events_out, decoded) if e.event_id in
               partition_in)

    # The outputs come back as they went.
    for name, record in sample_outputs().items():
        (message,) = consume(kafka_bootstrap, outputs[name], 1)
        assert repr(codec.decode(message.value(), name)) == repr(record)
        assert message.key() == codec.kafka_key(record)

    # Each garbled record is a dead letter: its bytes, key, place, and the reason Python gives too.
    sent = {m.value(): m for m in events_in if m.value() in bad}
    letters = [codec.decode(m.value(), "DeadLetter") for m in consume(kafka_bootstrap, quarantine, len(bad))]
    assert sorted(letter.original for letter in letters) == sorted(bad)
    for letter in letters:
        original = sent[letter.original]
        assert (letter.key, letter.topic, letter.partition, letter.offset) == (
            key, topics.events, original.partition(), original.offset())
        with pytest.raises(DecodeError) as caught:
            Codec(CATALOGUE).decode(letter.original, "Event")
        assert str(caught.value).startswith(letter.reason), (str(caught.value), letter.reason)
        assert started_ms - 5_000 <= letter.at_ms <= time.time() * 1000 + 5_000
    reasons = sorted(letter.reason.split(":")[0] for letter in letters)
    assert reasons == sorted([wire.BAD_MAGIC, wire.UNKNOWN_FINGERPRINT, wire.CORRUPT_BODY, wire.UNKNOWN_EVENT_KIND])


def test_decoded_events_have_typed_columns_and_a_body_member_per_kind(spark):
    raw = spark.createDataFrame(
        [(codec.encode(e), codec.kafka_key(e), "events", 0, offset, None, 0) for offset, e in enumerate(EVENTS)],
        "value binary, key binary, topic string, partition int, offset long, timestamp timestamp, timestampType int")
    events, dead_letters = decode_events(raw)
    assert events.columns == ["kind", "event_id", "event_time", "node", "primary_server", "message", "body",
                              "key", "value", "partition", "offset", "timestamp"]
    assert dict(events.dtypes)["event_time"] == "timestamp"
    assert events.schema["body"].dataType.names == list(EVENT_TYPES)
    rows = events.orderBy("offset").select("*", F.unix_millis("event_time").alias("ms")).collect()
    assert [row.kind for row in rows] == list(EVENT_TYPES)
    assert [row.ms for row in rows] == [e.event_time_ms for e in EVENTS]
    received = rows[list(EVENT_TYPES).index("MessageReceived")]
    assert received.body.MessageReceived.recipients[1].address == "bob@fabrikam.com"
    assert received.body.MessageReceived.source == "OUTSIDE_BOUNDARY"
    assert received.body.NodeStarted is None and received.message.fork_id == "2"
    assert codec.decode_event(received.value) == sample_events()["MessageReceived"], "the original bytes are kept"
    assert dead_letters.count() == 0


def test_python_fingerprints_are_the_ones_java_avro_computes(spark):
    jvm = spark.sparkContext._jvm
    for version in CATALOGUE.all_versions():
        schema = jvm.org.apache.avro.Schema.Parser().parse(version.json)
        java = jvm.org.apache.avro.SchemaNormalization.parsingFingerprint64(schema)
        assert java == int.from_bytes(version.fingerprint, "little", signed=True), str(version)


def test_short_and_empty_values_get_the_reasons_the_contracts_decoder_gives(spark):
    """Spark compares the magic and the fingerprint as bytes; the reasons still name them in hex. What other
    Kafka clients write is named: a tombstone, Confluent's framing (a schema registry's serializer), JSON text
    (kafka-console-producer), an event a text tool wrote (kafka-console-producer again: U+FFFD for c3), an empty
    value (its empty line); before, each was only "starts with ..." in hex, a tombstone as an empty value."""
    good = codec.encode(EVENTS[0])
    confluent, json_line = b"\x00\x00\x00\x01\x2c" + good[10:], b'{"kind": "NodeStarted"}\n'
    typed = good.decode("utf-8", errors="replace").encode()
    values = [None, b"", b"\xc3", b"\x00\x01" + good[2:], good[:7], b"\xc3\x01" + b"\xab" * 8 + good[10:],
              confluent, json_line, typed, good]
    raw = spark.createDataFrame(
        [(value, b"k", "events", 0, offset, None, 0) for offset, value in enumerate(values)],
        "value binary, key binary, topic string, partition int, offset long, timestamp timestamp, timestampType int")
    reasons = [row.reason for row in classify_events(raw, CATALOGUE).orderBy("offset").collect()]
    for value, reason in zip(values[:-1], reasons[:-1]):
        with pytest.raises(DecodeError) as caught:
            Codec(CATALOGUE).decode(value, "Event")
        assert reason is not None and str(caught.value).startswith(reason), (value, reason, str(caught.value))
    assert reasons[0] == f"{wire.BAD_MAGIC}: {wire.bad_magic_detail('')}{wire.TOMBSTONE}", "a tombstone"
    assert reasons[1] == f"{wire.BAD_MAGIC}: {wire.bad_magic_detail('')}{wire.EMPTY}", "an empty value is no tombstone"
    assert wire.bad_magic_detail("0001") in reasons[3] and "abababababababab" in reasons[5]
    assert reasons[6].endswith("perhaps Confluent's framing (byte 0, then schema id 300 of a schema registry),"
                               " which the twin does not read")
    assert reasons[7].startswith("bad magic: starts with 7b22") and wire.JSON_TEXT in reasons[7]
    assert reasons[8].startswith("bad magic: starts with efbf") and reasons[8].endswith(wire.TYPED_TEXT)
    assert reasons[-1] is None
