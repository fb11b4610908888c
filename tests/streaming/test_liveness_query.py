"""Kafka -> Spark stateful query -> Kafka, with the event-time timeout firing for real."""

import json
import time

from confluent_kafka import Consumer, Producer

from producers.heartbeats import heartbeat
from streaming import liveness_query

T0 = 1_700_000_000_000
TIMEOUT_MS = 5_000


def produce(bootstrap, topic, records):
    producer = Producer({"bootstrap.servers": bootstrap})
    for node, event_time_ms in records:
        producer.produce(topic, key=node.encode(), value=heartbeat(node, event_time_ms))
    producer.produce(topic, value=b"not json at all")  # ignored, never stops the query
    assert producer.flush(10) == 0


def read_all(bootstrap, topic, until, timeout_s=90.0):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    records, deadline = [], time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline and not until(records):
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                records.append(json.loads(message.value()))
    finally:
        consumer.close()
    return records


def test_quiet_node_is_alerted_at_its_event_time_deadline(spark, kafka_bootstrap, topics, tmp_path):
    query = liveness_query.start(spark, liveness_query.LivenessQueryConfig(
        bootstrap_servers=kafka_bootstrap,
        events_topic=topics.events,
        alerts_topic=topics.alerts,
        checkpoint_dir=str(tmp_path / "checkpoint"),
        quiet_timeout_ms=TIMEOUT_MS,
        watermark_delay="1 second",
        trigger_interval="500 milliseconds",
        starting_offsets="earliest",
    ))
    try:
        # mbx01 and mbx02 talk for 4 s of event time; then only mbx01 goes on, for 20 s more.
        produce(kafka_bootstrap, topics.events, [(n, T0 + s * 1000) for s in range(5) for n in ("mbx01", "mbx02")])
        query.processAllAvailable()
        produce(kafka_bootstrap, topics.events, [("mbx01", T0 + s * 1000) for s in range(5, 25)])
        query.processAllAvailable()
        alerts = read_all(kafka_bootstrap, topics.alerts, until=lambda records: len(records) >= 1)
        assert [a["node"] for a in alerts] == ["mbx02"]
        assert alerts[0]["last_seen_ms"] == T0 + 4_000
        assert alerts[0]["decided_at_ms"] == T0 + 4_000 + TIMEOUT_MS
        state_rows = query.lastProgress["stateOperators"][0]["numRowsTotal"]
        assert state_rows == 1, "the alerted node's state is released; only mbx01 remains"
        assert query.exception() is None
    finally:
        query.stop()
