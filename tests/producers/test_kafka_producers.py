"""record, replay and ingest against a real broker: what goes in comes out, nothing else."""

import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from producers.mtl_ingest import KafkaSink, ingest
from producers.recorder import record
from producers.recording import read_events, read_recorded, write_events
from producers.replayer import replay
from producers.synthetic import Workload, generate
from schemas.codec import decode
from infra import kafka as kafka_clients
from tests.producers.test_mtl import EX01, EX02, GARBLED, run, wait_for


def one_partition_topic(bootstrap: str) -> str:
    name = f"test.one-partition.{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    return name


def dead_letters(bootstrap: str, topic: str, expected: int) -> list:
    client = kafka_clients.consumer(bootstrap, f"test-{uuid.uuid4().hex}", [topic])
    found = []
    try:
        wait_for(lambda: found.extend(decode(m.value(), "DeadLetter") for m in client.consume(100, 0.2)
                                      if m.error() is None) or len(found) >= expected, seconds=20)
        found += [decode(m.value(), "DeadLetter") for m in client.consume(100, 1.0) if m.error() is None]
    finally:
        client.close()
    return found


def test_replay_then_record_gives_the_same_events_in_the_same_order(kafka_bootstrap, tmp_path):
    topic = one_partition_topic(kafka_bootstrap)
    events = list(generate(Workload(servers=4, duration_ms=60_000)))
    write_events(tmp_path / "in.avro", events)
    sent = replay(kafka_bootstrap, topic, tmp_path / "in.avro", speed=None)
    assert sent.sent == len(events) and sent.last_event_ms == events[-1].event_time_ms
    got = record(kafka_bootstrap, topic, tmp_path / "out.jsonl", from_beginning=True, seconds=60)
    assert got.reached_end and got.written == len(events) and not got.undecodable
    assert list(read_events(tmp_path / "out.jsonl")) == events


def test_a_recording_keeps_each_events_kafka_timestamp(kafka_bootstrap, tmp_path):
    topic = one_partition_topic(kafka_bootstrap)
    events = list(generate(Workload(servers=2, duration_ms=30_000)))
    write_events(tmp_path / "in.jsonl", events)
    before = int(time.time() * 1000)
    replay(kafka_bootstrap, topic, tmp_path / "in.jsonl")
    after = int(time.time() * 1000)
    for suffix in (".avro", ".jsonl"):
        record(kafka_bootstrap, topic, tmp_path / f"out{suffix}", from_beginning=True, seconds=60)
        recorded = list(read_recorded(tmp_path / f"out{suffix}"))
        assert [event for event, _ in recorded] == events
        assert all(before - 1000 <= at <= after + 1000 for _, at in recorded), "the time Kafka took it in"


def test_record_counts_records_that_do_not_decode_and_stops_at_count(kafka_bootstrap, tmp_path):
    topic = one_partition_topic(kafka_bootstrap)
    events = list(generate(Workload(servers=2, duration_ms=5_000)))
    producer = kafka_clients.producer(kafka_bootstrap)
    producer.produce(topic, value=b"not avro")
    producer.flush(10)
    write_events(tmp_path / "in.jsonl", events)
    replay(kafka_bootstrap, topic, tmp_path / "in.jsonl")
    got = record(kafka_bootstrap, topic, tmp_path / "all.avro", from_beginning=True, seconds=60)
    assert got.written == len(events) and got.undecodable == {"bad magic": 1}
    assert "1 record did not decode" in got.describe()
    first = record(kafka_bootstrap, topic, tmp_path / "some.avro", from_beginning=True, count=3, seconds=60)
    assert first.written == 3 and list(read_events(tmp_path / "some.avro")) == events[:3]


def test_the_commands_round_trip_a_recording_through_the_events_topic(kafka_bootstrap, topics, tmp_path):
    """Two partitions: each primary server's events keep their order; all of them arrive, once."""
    events = list(generate(Workload(servers=4, duration_ms=150_000)))
    write_events(tmp_path / "day.jsonl", events)
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap}
    cli = [sys.executable, "-m", "shadowtwin.cli"]
    replayed = subprocess.run([*cli, "replay", str(tmp_path / "day.jsonl"), "--speed", "50", "--to", topics.events],
                              env=env, capture_output=True, text=True, timeout=60)
    assert replayed.returncode == 0, replayed.stderr[-2000:]
    assert f"sent {len(events)} events" in replayed.stdout
    assert "events/s" in replayed.stdout.splitlines()[0] and "event time 20" in replayed.stdout  # progress lines
    # Recorded after the replay, from the beginning: a recorder started alongside could miss
    # what was sent before its subscription took effect.
    recorded = subprocess.run([*cli, "record", topics.events, str(tmp_path / "back.avro"), "--from-beginning",
                               "--seconds", "60"], env=env, capture_output=True, text=True, timeout=90)
    assert recorded.returncode == 0 and f"recorded {len(events)} events" in recorded.stdout, recorded.stderr[-2000:]
    back = list(read_events(tmp_path / "back.avro"))
    assert sorted(back, key=lambda e: e.event_id) == sorted(events, key=lambda e: e.event_id)
    for primary in {e.primary_server for e in events}:
        assert [e for e in back if e.primary_server == primary] == [e for e in events if e.primary_server == primary]
    again = [*cli, "record", topics.events, str(tmp_path / "back.avro"), "--from-beginning", "--count", "3"]
    refused = subprocess.run(again, env=env, capture_output=True, text=True, timeout=90)
    assert refused.returncode == 2 and "exists" in refused.stderr, refused.stderr[-2000:]
    assert len(list(read_events(tmp_path / "back.avro"))) == len(events), "left as it was"
    replaced = subprocess.run([*again, "--force"], env=env, capture_output=True, text=True, timeout=90)
    assert replaced.returncode == 0 and len(list(read_events(tmp_path / "back.avro"))) == 3, replaced.stderr[-2000:]


def test_ingest_publishes_every_good_line_and_dead_letters_every_garbled_one(kafka_bootstrap, topics, tmp_path):
    expected = run([EX01, EX02])[0].events
    sink = KafkaSink(kafka_bootstrap, topics.events, topics.dead_letters)
    counts = ingest([str(EX01), str(EX02)], sink)
    assert sink.close() == 0
    assert sum(counts.events.values()) == len(expected) and counts.dead_letters == len(GARBLED)
    got = record(kafka_bootstrap, topics.events, tmp_path / "events.jsonl", from_beginning=True, seconds=60)
    back = list(read_events(tmp_path / "events.jsonl"))
    assert got.reached_end and sorted(back, key=lambda e: e.event_id) == sorted(expected, key=lambda e: e.event_id)
    letters = dead_letters(kafka_bootstrap, topics.dead_letters, len(GARBLED))
    assert sorted((d.topic, d.offset, d.reason) for d in letters) == [(str(EX01), n, r) for n, r in GARBLED.items()]


def test_ingest_of_a_log_whose_every_line_is_a_dead_letter_says_why_and_fails(kafka_bootstrap, topics, tmp_path):
    """A log whose times carry a zone name (CET), not ISO-8601's: before, '1212 lines: 0 events, 1212 dead letters',
    exit 0, and why only in the dead-letter topic."""
    lines = EX02.read_bytes().split(b"\r\n")
    header = [n for n, line in enumerate(lines) if line.startswith(b"#Fields:")][0]
    zoned = tmp_path / "MSGTRK20261122-1.LOG"
    zoned.write_bytes(b"\r\n".join(lines[:header + 1] + [line.replace(b"Z,", b" CET,", 1)
                                                         for line in lines[header + 1:] if line]) + b"\r\n")
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
           "SHADOWTWIN_TOPICS_DEAD_LETTERS": topics.dead_letters}
    ingested = subprocess.run([sys.executable, "-m", "shadowtwin.cli", "ingest", "exchange-mtl", str(zoned), "--to",
                               topics.events], env=env, capture_output=True, text=True, timeout=90)
    first = f"{zoned} line {header + 2}: date-time '"
    assert ingested.returncode == 2 and ingested.stderr.startswith(
        "shadowtwin ingest: no event published: each of the "), ingested.stderr
    assert first in ingested.stderr and "' is not a valid ISO-8601 time\n" in ingested.stderr
    assert len(ingested.stderr.splitlines()) == 1 and " 0 events, " in ingested.stdout


def test_ingest_follow_publishes_lines_appended_while_it_runs(kafka_bootstrap, topics, tmp_path):
    lines = EX01.read_bytes().split(b"\r\n")
    log = tmp_path / "MSGTRK20261122-1.LOG"
    log.write_bytes(b"\r\n".join(lines[:6]) + b"\r\n")  # the header and one RECEIVE
    stop, sink = threading.Event(), KafkaSink(kafka_bootstrap, topics.events, topics.dead_letters)
    thread = threading.Thread(target=ingest, args=([str(log)], sink), kwargs=dict(follow=True, stop=stop,
                                                                                   poll_seconds=0.1))
    thread.start()
    recorded = tmp_path / "recorded.jsonl"

    def published(n: int) -> bool:
        return record(kafka_bootstrap, topics.events, recorded, from_beginning=True, seconds=5).written >= n

    try:
        assert wait_for(lambda: published(1), seconds=20)
        assert not published(2)
        with open(log, "ab") as out:
            out.write(b"\r\n".join(lines[6:8]) + b"\r\n")  # HAREDIRECT (2 events) and AGENTINFO (skipped)
        assert wait_for(lambda: published(3), seconds=20)
    finally:
        stop.set()
        thread.join(20)
    assert sink.close() == 0 and not thread.is_alive()
    assert [e.kind for e in read_events(recorded)] == [
        "MessageReceived", "ShadowCopyRequested", "ShadowCopyAcknowledged"]


def test_ingest_follow_dead_letters_an_event_too_large_for_kafka_and_follows_on_past_it(kafka_bootstrap, topics,
                                                                                       tmp_path):
    """Before: the event of a delivery to 60,000 recipients, refused by the producer, ended the followed run
    (its line not acknowledged), and a restart from the saved position met the same line again."""
    from producers.ingest_positions import Positions

    lines = EX01.read_bytes().split(b"\r\n")
    many = ";".join(f"user{i:05d}@contoso.com" for i in range(60_000)).encode()
    large = lines[5].replace(b"ann@contoso.com;bob@contoso.com", many).replace(b",48211,2,", b",48211,60000,")
    log = tmp_path / "MSGTRK20261122-1.LOG"
    log.write_bytes(b"\r\n".join(lines[:5] + [large]) + b"\r\n")
    stop, sink = threading.Event(), KafkaSink(kafka_bootstrap, topics.events, topics.dead_letters)
    positions = Positions(tmp_path / "positions.json")
    thread = threading.Thread(target=ingest, args=([str(log)], sink), kwargs=dict(
        follow=True, stop=stop, poll_seconds=0.1, positions=positions))
    thread.start()
    try:
        (letter,) = dead_letters(kafka_bootstrap, topics.dead_letters, 1)
        assert letter.offset == 6 and "event of 1,380,111 bytes is larger than Kafka takes" in letter.reason
        with open(log, "ab") as out:
            out.write(lines[6] + b"\r\n")  # HAREDIRECT: 2 events
        recorded = tmp_path / "recorded.jsonl"
        assert wait_for(lambda: record(kafka_bootstrap, topics.events, recorded, from_beginning=True,
                                       seconds=5).written >= 2, seconds=20), "still following"
        assert thread.is_alive()
    finally:
        stop.set()
        thread.join(20)
    assert sink.close() == 1 and sink.set_aside == {"MessageReceived": 1}, "not sent: counted"
    assert not thread.is_alive() and positions.refused == 0
    assert positions.save()  # as `ingest --follow` does at its end
    again = ingest([str(log)], KafkaSink(kafka_bootstrap, topics.events, topics.dead_letters),
                   positions=Positions(tmp_path / "positions.json"))
    assert again.published_before == 2 and again.dead_letters == 0, "a restart meets the line no more"


def test_ingest_follow_dead_letters_an_event_the_events_topic_refuses_and_follows_on(kafka_bootstrap, topics,
                                                                                     tmp_path):
    """An events topic whose max.message.bytes is smaller than an event (a delivery to 300 recipients): the broker
    refused the record's whole batch, and `ingest --follow` ended there (exit 1), the valid events batched with it
    and every line after it unsent. Now each refused event is sent again alone; the one the topic cannot take
    becomes a dead letter of its line, the run follows on, and its end says how many were not sent (exit 1)."""
    import signal

    from tests.producers.test_signals import start
    from tests.shadowtwin.test_errors import published

    events = f"{topics.events}.small"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(events, 1, 1, config={"max.message.bytes": "3000"})])[events].result(30)
    lines = EX01.read_bytes().split(b"\r\n")
    many = ";".join(f"user{i:03d}@contoso.com" for i in range(300)).encode()
    large = lines[5].replace(b"ann@contoso.com;bob@contoso.com", many).replace(b",48211,2,", b",48211,300,")
    expected = len(run([EX01])[0].events) - 1
    log = tmp_path / "MSGTRK20261122-1.LOG"
    log.write_bytes(b"\r\n".join(lines[:5] + [large] + lines[6:]))
    conf = tmp_path / "topics.toml"
    conf.write_text(f'[topics]\nevents = "{events}"\ndead_letters = "{topics.dead_letters}"\n')
    process = start(kafka_bootstrap, "--conf", conf, "ingest", "exchange-mtl", log, "--follow",
                    "--state", tmp_path / "positions.json", "--internal-domain", "contoso.com")
    try:
        letters = dead_letters(kafka_bootstrap, topics.dead_letters, len(GARBLED) + 1)
        (letter,) = [d for d in letters if d.offset == 6]
        assert letter.original == large and len(letters) == len(GARBLED) + 1
        assert f"larger than the events topic {events} takes, its max.message.bytes" in letter.reason
        assert wait_for(lambda: published(kafka_bootstrap, events) >= expected, seconds=20), "no valid event lost"
        with open(log, "ab") as out:
            out.write(b"\r\n" + lines[6] + b"\r\n")  # HAREDIRECT again: 2 events
        assert wait_for(lambda: published(kafka_bootstrap, events) >= expected + 2, seconds=20), "still following"
        assert process.poll() is None
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
    assert process.returncode == 1, err[-2000:]
    assert "1 events were larger than Kafka or the events topic takes" in out and "not sent" in out, out
    assert f"{expected + 2} events, {len(GARBLED) + 1} dead letters" in out, out
    (line,) = err.strip().splitlines()
    assert line.startswith(f"1 of {expected + 4 + len(GARBLED)} records were not acknowledged") and "Message size too large" in line
    assert published(kafka_bootstrap, events) == expected + 2


def test_replay_sends_the_events_batched_with_one_the_events_topic_refuses_and_dead_letters_it(kafka_bootstrap,
                                                                                               topics, tmp_path):
    """An events topic whose max.message.bytes is smaller than one event of a recording: the broker refused the
    whole batch it came in, and `replay` stopped at that failure, the valid events batched with it and every later
    one unsent. Now the refused events are sent again alone: every valid event is published, the large one is a dead
    letter saying why, and the run exits 1 saying how many were not sent."""
    import dataclasses

    from schemas.codec import encode, kafka_key
    from schemas.events import MessageReceived
    from tests.producers.test_signals import start
    from tests.shadowtwin.test_errors import published

    events = f"{topics.events}.small"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(events, 1, 1, config={"max.message.bytes": "3000"})])[events].result(30)
    day = list(generate(Workload(servers=4, duration_ms=2 * 60_000)))
    large = next(i for i, e in enumerate(day) if isinstance(e, MessageReceived))
    day[large] = dataclasses.replace(day[large], sender="x" * 5000)  # far under the producer's 1 MB
    write_events(tmp_path / "day.jsonl", day)
    conf = tmp_path / "topics.toml"
    conf.write_text(f'[topics]\nevents = "{events}"\ndead_letters = "{topics.dead_letters}"\n')
    process = start(kafka_bootstrap, "--conf", conf, "replay", tmp_path / "day.jsonl")
    out, err = process.communicate(timeout=120)
    assert process.returncode == 1, err[-2000:]
    assert (f"1 events were larger than Kafka or the topic takes: not sent, dead letters in {topics.dead_letters}"
            " instead") in out, out
    (line,) = err.strip().splitlines()
    assert line.startswith(f"1 of {len(day) + 1} records were not acknowledged") and "Message size too large" in line
    assert published(kafka_bootstrap, events) == len(day) - 1, "every valid event sent"
    (letter,) = dead_letters(kafka_bootstrap, topics.dead_letters, 1)
    assert letter.original == encode(day[large]) and letter.key == kafka_key(day[large])
    assert letter.topic == str(tmp_path / "day.jsonl")
    assert letter.reason.startswith(f"its MessageReceived event of {len(encode(day[large])):,} bytes is larger than"
                                    f" the events topic {events} takes, its max.message.bytes ("), letter.reason


def test_publishing_to_a_topic_that_takes_small_batches_sends_none_too_large(kafka_bootstrap, topics):
    """An events topic whose max.message.bytes (3,000) is far below the producer's batch.size (1 MB): the broker
    refused nearly every batch, and every event of it was sent again alone, a replay more than twice as slow. Now the
    producer's batches are no larger than the topic takes: each goes once, and each event is acknowledged."""
    from producers.publisher import Publisher

    events = f"{topics.events}.small-batches"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(events, 1, 1, config={"max.message.bytes": "3000"})])[events].result(30)
    wait_for(lambda: admin.list_topics(events, timeout=5).topics[events].error is None, seconds=30)  # a leader
    day = list(generate(Workload(servers=4, duration_ms=2 * 60_000)))
    publisher = Publisher(kafka_bootstrap, events, day)
    publisher.start()
    publisher.join(60)
    assert publisher.deliveries.acknowledged == len(day) and publisher.deliveries.unacknowledged == 0
    assert publisher.oversized.sent_alone == 0, f"{publisher.oversized.sent_alone} of {len(day)} sent again alone"


def test_a_replay_flat_out_keeps_every_partition_within_the_watermark_delay_of_the_others(kafka_bootstrap,
                                                                                          topics, tmp_path):
    """A twin's query reads every partition up to where the broker has it, and its watermark (the latest event
    time it read less the delay) is one for all of them: an event its query reads after one more than the delay
    ahead of it is behind the watermark. Flat out, librdkafka's batches of one partition reached the broker before
    another's by more than that; in steps of half the delay, none is read after one so far ahead (each time the
    broker's end offsets are listed, as the query lists them, while the replay runs)."""
    delay_ms = 30_000
    events = list(generate(Workload(servers=8, messages_per_second=6.0, duration_ms=1_800_000)))
    write_events(tmp_path / "in.avro", events)
    partitions = [TopicPartition(topics.events, p) for p in range(topics.events_partitions)]
    client, ends, done = kafka_clients.admin(kafka_bootstrap), [], threading.Event()

    def list_ends() -> None:
        while not done.is_set():
            listed = client.list_offsets({tp: OffsetSpec.latest() for tp in partitions})
            ends.append([listed[tp].result().offset for tp in partitions])
    lister = threading.Thread(target=list_ends)
    lister.start()
    try:
        sent = replay(kafka_bootstrap, topics.events, tmp_path / "in.avro", speed=None, in_flight_ms=delay_ms // 2)
    finally:
        done.set()
        lister.join()
    assert sent.sent == len(events) and len(ends) > 10
    times = [[] for _ in partitions]  # each partition's event times, by offset
    reader = kafka_clients.consumer(kafka_bootstrap, group_id=f"test-{uuid.uuid4().hex}")
    reader.assign([TopicPartition(topics.events, p, 0) for p in range(len(partitions))])
    while sum(map(len, times)) < len(events):
        for message in reader.consume(1000, timeout=5):
            times[message.partition()].append(decode(message.value()).event_time_ms)
    reader.close()
    behind = []
    for end in ends:
        read = [t for p, at in enumerate(end) for t in times[p][:at]]
        if read:
            later = min((t for p, at in enumerate(end) for t in times[p][at:]), default=None)
            if later is not None and later <= max(read) - delay_ms:
                behind.append((end, max(read) - later))
    assert not behind, f"{len(behind)} of {len(ends)} listings: {behind[:3]}"
