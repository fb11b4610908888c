"""The streaming twin through real Kafka and Spark, started as the product starts it (`TwinApplication`):
the same decisions as the reference engine, bad records to the dead letters while the query runs
on, a silent topology still noticed, a kill -9 survived, SIGTERM and SIGINT answered."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions

from infra.config import SparkInterval
from infra.kafka import admin, consumer as kafka_consumer, producer
from infra.settings import Settings, TopicSettings
from infra.topics import KAFKA_DEFAULT_MAX_BYTES, create_topics
from schemas import jsonl, wire
from schemas.binary import varint
from schemas.codec import default_codec, encode, kafka_key
from schemas.events import AlertType, ClockTick, Event, KafkaHeader, MessageReceived, MessageRef, ServerProbed
from state.parameters import ModelConfig, model_config_from
from state.replay import replay
from state.summary import message_key
from streaming.app import Ending, TwinApplication
from streaming.views import read_state
from tests.schemas.samples import sample_outputs
from tests.state.scenario import Org
from tests.state.world import Crash, Mail, simulate, spelled_apart

DELAY_MS = 60_000

# Three servers; m1 and m2 primaries crash (same database after 5 h, new database), the
# shadow mbx03 loses its copies: promotions, duplicates, a message at risk then lost.
WORLD = (
    [Mail(0, 1, 5, 3, True), Mail(0, 2, 20, 200, True), Mail(1, 1, 30, 5, True), Mail(1, 2, 40, 300, True),
     Mail(2, 1, 50, 2, False), Mail(2, 2, 60, 400, True), Mail(0, 1, 70, 5, True), Mail(1, 1, 75, 500, True)],
    (Crash(100, 300, False), Crash(110, 30, True), Crash(105, 400, True)),
)


def world_events() -> list[Event]:
    events, _, _ = simulate(*WORLD)
    return [e for e in events if not isinstance(e, ClockTick)]


def with_probes(events: list[Event]) -> list[Event]:
    """The world with an answered and a failed SMTP probe (ServerProbed, contract v3) in its middle."""
    out = list(events)
    for n, answered in ((len(out) // 3, True), (2 * len(out) // 3, False)):
        at, server = out[n].event_time_ms, out[n].primary_server
        out.insert(n, ServerProbed(event_id=f"probe:{server}:{at}", event_time_ms=at, primary_server=server,
                                   node=server if answered else "probe@ops01", server=server, answered=answered))
    return out


def world_servers() -> tuple[str, ...]:
    return tuple(sorted({name for e in world_events() for name in (e.node, e.primary_server) if name}))


def publish(bootstrap: str, topic: str, events: list[Event], raw: list[bytes] = ()) -> None:
    out = producer(bootstrap)
    for event in events:
        if isinstance(event, ClockTick):
            # everything before a tick is acknowledged before the tick is sent: otherwise the twin can
            # read the tick (on one partition) a batch before another partition's last events, which
            # it would then rightly take as late
            assert out.flush(30) == 0
        out.produce(topic, key=kafka_key(event) or None, value=encode(event))
    for value in raw:
        out.produce(topic, key=b"mbx01", value=value)
    assert out.flush(30) == 0


def final_tick(events: list[Event]) -> ClockTick:
    end = max(e.event_time_ms for e in events)
    return ClockTick(event_id=f"final-{end}", event_time_ms=end + DELAY_MS + 1, node="shadowtwin", primary_server="")


def collect(bootstrap: str, topics: list[str], done, timeout_s: float = 150.0) -> dict[str, list]:
    consumer = kafka_consumer(bootstrap, uuid.uuid4().hex, topics)
    codec, got = default_codec(), {t: [] for t in topics}
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline and not done(got):
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                got[message.topic()].append(codec.decode(message.value()))
    finally:
        consumer.close()
    return got


def twin_settings(settings: Settings, kafka_bootstrap: str, topics: TopicSettings, model: ModelConfig | None = None,
                  delay_s: int = DELAY_MS // 1000, servers: tuple[str, ...] = ()) -> Settings:
    """The shipped settings, pointed at the test broker and topics; `servers` declared (the groups
    the facts every group shares are addressed to)."""
    return dataclasses.replace(
        settings, kafka=dataclasses.replace(settings.kafka, bootstrap_servers=kafka_bootstrap), topics=topics,
        shadow_redundancy=dataclasses.replace(model or ModelConfig(), servers=servers),
        spark=dataclasses.replace(settings.spark, trigger_interval=SparkInterval("1 second")),
        twin=dataclasses.replace(settings.twin, watermark_delay=SparkInterval(f"{delay_s} seconds")),
    )


def twin_env(kafka_bootstrap: str, topics: TopicSettings, checkpoints, servers: tuple[str, ...] = ()) -> dict[str, str]:
    """The same, for a twin in another process: through environment variables named after the settings."""
    return dict(os.environ, SHADOWTWIN_KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap,
                SHADOWTWIN_SPARK_TRIGGER_INTERVAL="1 second", SHADOWTWIN_SPARK_CHECKPOINT_DIR=str(checkpoints),
                SHADOWTWIN_TWIN_WATERMARK_DELAY=f"{DELAY_MS // 1000} seconds",
                SHADOWTWIN_SHADOW_REDUNDANCY_SERVERS=",".join(servers),
                **{f"SHADOWTWIN_TOPICS_{k.upper()}": str(v) for k, v in dataclasses.asdict(topics).items()})


def expected_ids(events: list[Event], model: ModelConfig | None = None) -> tuple[set[str], set[str]]:
    reference = replay(events, model, until_ms=final_tick(events).event_time_ms - DELAY_MS)
    return {a.alert_id for a in reference.alerts}, {c.command_id for c in reference.commands}


def disagreeing_records(events: list[Event]) -> dict[str, bytes]:
    """Valid-looking records on which Spark's decoder and the contract's disagree (each with an id of its own)."""
    def variant(n: int) -> Event:
        return dataclasses.replace(events[n], event_id=f"variant-{n:03d}")

    trailing = encode(variant(1)) + b"\x00\x01"  # Spark reads the body and ignores the rest
    as_written = encode(variant(2))
    bad_utf8 = as_written.replace(b"variant-002", b"variant-\xff\xfe2")  # a string that is not UTF-8
    plain = encode(variant(3))
    # The `message` union's index as -2, written after the header fields: the contract's decoder counts
    # it from the end (null), Avro Java refuses it.
    message_index = 10 + sum(len(encode_field(f)) for f in (
        variant(3).event_id, variant(3).event_time_ms, variant(3).node, variant(3).primary_server))
    assert plain[message_index] in (0, 2)
    negative_union = plain[:message_index] + bytes([3 if plain[message_index] == 0 else 1]) + plain[message_index + 1:]
    return {"trailing bytes": trailing, "not UTF-8": bad_utf8, "negative union index": negative_union}


def encode_field(value) -> bytes:
    """Avro binary of a string or long, as in the header of every event."""
    return varint(len(value.encode())) + value.encode() if isinstance(value, str) else varint(value)


def test_same_decisions_as_the_reference_and_bad_records_set_aside(settings, spark, kafka_bootstrap, topics, tmp_path):
    events = with_probes(world_events())
    alerts, commands = expected_ids(events)
    assert len(alerts) >= 8 and len(commands) >= 1, "the world exercises promotions and failures"
    ahead = dataclasses.replace(next(e for e in events if isinstance(e, MessageReceived)), event_id="from-the-future",
                                event_time_ms=int(time.time() * 1000) + 86_400_000)
    good = encode(events[0])
    garbled = [b"not avro at all", good[:2] + b"\x00" * 8 + good[10:], good[:12]]
    disagreeing = disagreeing_records(events)
    # the bad records sit between valid ones: half of the stream, the bad ones, the other half
    half = len(events) // 2
    publish(kafka_bootstrap, topics.events, events[:half], raw=[*garbled, *disagreeing.values()])
    publish(kafka_bootstrap, topics.events, [*events[half:], ahead])
    publish(kafka_bootstrap, topics.events, [final_tick(events)])
    twin = TwinApplication(twin_settings(settings, kafka_bootstrap, topics, servers=world_servers()), spark=spark,
                           ticks=False,
                           checkpoint_dir=tmp_path / "checkpoint", say=lambda line: None)
    with twin:
        got = collect(kafka_bootstrap, [topics.alerts, topics.commands, topics.dead_letters],
                      lambda g: len(g[topics.alerts]) >= len(alerts) and len(g[topics.commands]) >= len(commands)
                      and len(g[topics.dead_letters]) >= 7)
        assert twin.query.isActive and twin.query.exception() is None, "the bad records did not stop the query"
    assert {a.alert_id for a in got[topics.alerts]} == alerts
    assert {c.command_id for c in got[topics.commands]} == commands
    letters = {d.original: d for d in got[topics.dead_letters]}
    assert set(letters) == {*garbled, *disagreeing.values(), encode(ahead)}, "each bad record once, nothing else"
    reasons = sorted(d.reason.split(":")[0] for d in got[topics.dead_letters])
    assert reasons == ["bad magic", "clock skew", "corrupt body", "corrupt body", "corrupt body", "corrupt body",
                       "unknown fingerprint"]
    assert all(d.topic == topics.events and d.offset >= 0 for d in got[topics.dead_letters])


def test_events_stamped_out_of_range_first_are_dead_letters_and_the_query_goes_on(settings, spark, kafka_bootstrap,
                                                                                    topics, tmp_path):
    """A fresh twin's first records stamped year 1, year 1600 and -1 ms: none is behind a watermark yet, and the
    operator's Python holds times as int64 nanoseconds (1677 to 2262). Now each is a dead letter with the reason
    (state.clock_guard.out_of_range, as whatif says it) and the valid events after them decide as the reference."""
    events = world_events()
    alerts, commands = expected_ids(events)
    odd = [dataclasses.replace(events[0], event_id=f"odd-{t}", event_time_ms=t)
           for t in (-62_135_596_800_000, -11_676_096_000_000, -1)]
    publish(kafka_bootstrap, topics.events, odd)
    publish(kafka_bootstrap, topics.events, [*events, final_tick(events)])
    twin = TwinApplication(twin_settings(settings, kafka_bootstrap, topics, servers=world_servers()), spark=spark,
                           ticks=False, checkpoint_dir=tmp_path / "checkpoint", say=lambda line: None)
    with twin:
        got = collect(kafka_bootstrap, [topics.alerts, topics.commands, topics.dead_letters],
                      lambda g: len(g[topics.alerts]) >= len(alerts) and len(g[topics.commands]) >= len(commands)
                      and len(g[topics.dead_letters]) >= len(odd) or twin.restarts > 0)
        assert twin.restarts == 0 and twin.query.exception() is None, "the odd times did not stop the query"
    letters = {d.original: d.reason for d in got[topics.dead_letters]}
    assert set(letters) == {encode(e) for e in odd}
    assert all(r.startswith("event time out of range: ") for r in letters.values()), letters
    assert {a.alert_id for a in got[topics.alerts]} == alerts
    assert {c.command_id for c in got[topics.commands]} == commands


def test_servers_declared_in_capitals_decide_as_one_whatever_case_their_events_spell_them_in(settings, spark,
                                                                                             kafka_bootstrap, topics,
                                                                                             tmp_path):
    """[shadow_redundancy] servers says MBX01 ...; the primaries' events say mbx01, their shadows' MBX02 and name
    their primary Mbx01 (state/names.py): one group per server, fed the facts, deciding as the reference does,
    and saying each server as declared (before, the facts went to groups MBX01 ... that no event reached, and a
    shadow's events about Mbx01 to a group of their own)."""
    events = world_events()
    declared = tuple(s.upper() for s in world_servers())
    model = ModelConfig(servers=declared)
    alerts, commands = expected_ids(events, model)
    publish(kafka_bootstrap, topics.events, [*spelled_apart(events), final_tick(events)])
    with TwinApplication(twin_settings(settings, kafka_bootstrap, topics, model, servers=declared), spark=spark,
                         ticks=False, checkpoint_dir=tmp_path / "checkpoint", say=lambda line: None):
        got = collect(kafka_bootstrap, [topics.alerts, topics.commands],
                      lambda g: len(g[topics.alerts]) >= len(alerts) and len(g[topics.commands]) >= len(commands))
    assert {a.alert_id for a in got[topics.alerts]} == alerts
    assert {c.command_id for c in got[topics.commands]} == commands
    named = {s for a in got[topics.alerts] for s in a.servers} | {c.holder for c in got[topics.commands]}
    assert named == set(declared)


def test_the_largest_record_the_events_topic_takes_is_a_dead_letter_and_the_query_runs_on(settings, spark,
                                                                                          kafka_bootstrap, topics,
                                                                                          tmp_path):
    """A record at Kafka's default limit (1,048,588 bytes a batch) is taken on the events topic; its
    dead letter carries it with its key, topic and reason, and is taken on the dead-letter topic too
    (it used to fail every batch, RecordTooLargeException, until the twin gave up)."""
    events = world_events()
    alerts, _ = expected_ids(events)
    largest = b"x" * 1_048_480  # with its key and Kafka's framing, just under the limit
    out = producer(kafka_bootstrap, **{"message.max.bytes": 2 * len(largest)})
    out.produce(topics.events, key=b"mbx01", value=largest)
    assert out.flush(30) == 0
    publish(kafka_bootstrap, topics.events, [*events, final_tick(events)])
    with TwinApplication(twin_settings(settings, kafka_bootstrap, topics, servers=world_servers()), spark=spark,
                         ticks=False, checkpoint_dir=tmp_path / "checkpoint", say=lambda line: None) as twin:
        got = collect(kafka_bootstrap, [topics.alerts, topics.dead_letters],
                      lambda g: len(g[topics.alerts]) >= len(alerts) and len(g[topics.dead_letters]) >= 1)
        assert twin.restarts == 0 and twin.query.exception() is None
    assert {a.alert_id for a in got[topics.alerts]} == alerts
    assert [(d.original, d.key, d.reason) for d in got[topics.dead_letters]] == [
        (largest, b"mbx01", f"bad magic: {wire.bad_magic_detail('7878')}")]


def lengths_claiming_gigabytes(event: MessageReceived) -> list[bytes]:
    """`event`'s record with its event id's length, then its recipients' count, changed to ones the record cannot
    hold: a gigabyte and more (which Avro Java allocates before reading), and negative."""
    good = encode(event)
    count = good.index(varint(1) + encode_field(event.recipients[0].address))
    return [*(good[:wire.HEADER_SIZE] + varint(n) + good[wire.HEADER_SIZE + 1:] for n in (2**30, 2**31 - 9, -1)),
            *(good[:count] + varint(n) + good[count + 1:] for n in (2**30, 2**31 - 9))]


def test_lengths_claiming_gigabytes_a_tombstone_and_a_keyless_event_leave_the_twin_running(settings, spark,
                                                                                          kafka_bootstrap, topics,
                                                                                          tmp_path):
    """Records of a few dozen bytes whose string or array length claims a gigabyte (or is negative), and a tombstone,
    on the events topic: each is a dead letter with its reason, the query runs on, and the events around them,
    one of them without a key, decide as the reference. Before, a length of 2^30 made Spark's Avro reader allocate
    it: the JVM ran out of heap and the SparkContext ended, at every restart."""
    events = world_events()
    alerts, commands = expected_ids(events)
    received = next(e for e in events if isinstance(e, MessageReceived))
    hostile = [*lengths_claiming_gigabytes(dataclasses.replace(received, event_id="hostile")), None]
    half = len(events) // 2
    publish(kafka_bootstrap, topics.events, events[:half], raw=hostile)
    keyless = producer(kafka_bootstrap)
    keyless.produce(topics.events, key=None, value=encode(events[half]))
    assert keyless.flush(30) == 0
    publish(kafka_bootstrap, topics.events, [*events[half + 1:], final_tick(events)])
    got = run_to_the_end(settings, spark, kafka_bootstrap, topics, tmp_path, alerts, commands, len(hostile))
    letters = sorted((d.original, d.key, d.reason.split(":")[0]) for d in got[topics.dead_letters])
    assert letters == sorted([*((value, b"mbx01", wire.CORRUPT_BODY) for value in hostile[:-1]),
                              (b"", b"mbx01", wire.BAD_MAGIC)])
    assert wire.TOMBSTONE in next(d.reason for d in got[topics.dead_letters] if d.original == b"")
    assert {a.alert_id for a in got[topics.alerts]} == alerts
    assert {c.command_id for c in got[topics.commands]} == commands


def run_to_the_end(settings, spark, kafka_bootstrap: str, topics: TopicSettings, tmp_path, alerts: set[str],
                   commands: set[str], letters: int) -> dict[str, list]:
    """The twin on the world's servers until it published `alerts`, `commands` and `letters` dead letters:
    what it published; it never had to start its query again."""
    with TwinApplication(twin_settings(settings, kafka_bootstrap, topics, servers=world_servers()), spark=spark,
                         ticks=False, checkpoint_dir=tmp_path / "checkpoint", say=lambda line: None) as twin:
        got = collect(kafka_bootstrap, [topics.alerts, topics.commands, topics.dead_letters],
                      lambda g: len(g[topics.alerts]) >= len(alerts) and len(g[topics.commands]) >= len(commands)
                      and len(g[topics.dead_letters]) >= letters or twin.restarts > 0)
        assert twin.restarts == 0 and twin.query.isActive and twin.query.exception() is None
    return got


def console_producer(bootstrap: str, topic: str, lines: list[bytes]) -> None:
    """`lines` sent by Apache Kafka's own kafka-console-producer (`shadowtwin kafka tool`), each line
    `headers<TAB>key<TAB>value`, NULL for a null key or value. The tool reads its input as UTF-8 text."""
    env = dict(os.environ, SHADOWTWIN_KAFKA_BOOTSTRAP_SERVERS=bootstrap)
    sent = subprocess.run(
        [sys.executable, "-m", "shadowtwin", "kafka", "tool", "console-producer", "--topic", topic,
         "--reader-property", "parse.key=true", "--reader-property", "parse.headers=true",
         "--reader-property", "null.marker=NULL", "--producer-property", "max.request.size=2000000"],
        input=b"".join(line + b"\n" for line in lines), capture_output=True, env=env, timeout=180)
    assert sent.returncode == 0, sent.stderr.decode(errors="replace")[-3000:]


def test_what_kafkas_console_producer_and_other_clients_send_by_mistake_are_dead_letters_and_the_query_runs_on(
        settings, spark, kafka_bootstrap, topics, tmp_path):
    """Between the valid events, records an operator sends by mistake: with kafka-console-producer an empty
    value, a tombstone with a key, one with neither key nor value (headers only), an event as JSON text (a line
    of `record events FILE.jsonl`), a huge JSON line, Avro records pasted as text (the tool re-encodes them as
    UTF-8: truncated, with another magic, in Confluent's framing); with a binary client a valid Avro record of
    another schema (an alert), one with another magic byte and one in Confluent's framing. Each is a dead letter
    with its bytes, place and the reason the contract's decoder gives; the query runs on and the valid events
    decide as the reference does."""
    events = world_events()
    alerts, commands = expected_ids(events)
    good = encode(events[0])
    pasted = [good[:20], b"\xc3\x02" + good[2:], b"\x00\x00\x00\x01\x2c" + good[10:]]
    as_text = [b"source:console\tmbx01\t", b"source:console\tmbx01\tNULL", b"source:console\tNULL\tNULL",
               b"source:console\tmbx01\t" + jsonl.dumps(events[1]).encode(),
               b"source:console\tmbx01\t" + json.dumps({"padding": "x" * 1_000_000}).encode(),
               *(b"source:console\tmbx01\t" + value.replace(b"\n", b" ").replace(b"\t", b" ") for value in pasted)]
    binary = [encode(sample_outputs()["Alert"]), b"\xc3\x02" + good[2:], b"\x00\x00\x00\x01\x2c" + good[10:]]
    half = len(events) // 2
    publish(kafka_bootstrap, topics.events, events[:half], raw=binary)
    console_producer(kafka_bootstrap, topics.events, as_text)
    publish(kafka_bootstrap, topics.events, [*events[half:], final_tick(events)])
    sent = {(m.partition(), m.offset()): m for m in read_topic(kafka_bootstrap, topics.events)}
    bad = {place: m.value() for place, m in sent.items()
           if m.value() not in {encode(e) for e in events} | {encode(final_tick(events))}}
    assert len(bad) == len(as_text) + len(binary)
    got = run_to_the_end(settings, spark, kafka_bootstrap, topics, tmp_path, alerts, commands, len(bad))
    assert {a.alert_id for a in got[topics.alerts]} == alerts
    assert {c.command_id for c in got[topics.commands]} == commands
    letters = {(d.partition, d.offset): d for d in got[topics.dead_letters]}
    assert set(letters) == set(bad) and len(got[topics.dead_letters]) == len(bad), "each bad record once"
    for place, value in bad.items():
        letter = letters[place]
        assert (letter.original, letter.topic) == (value or b"", topics.events)
        # what the record carried besides its bytes is kept: the tool's headers, Kafka's timestamp
        assert [(h.key, h.value) for h in letter.headers] == list(sent[place].headers() or [])
        assert letter.timestamp_ms == sent[place].timestamp()[1]
        with pytest.raises(wire.DecodeError) as caught:
            default_codec().decode(value, "Event")
        assert letter.reason and str(caught.value).startswith(letter.reason), (value[:40], letter.reason)
    reasons = [d.reason for d in letters.values()]
    assert sum(wire.TOMBSTONE in r for r in reasons) == 2 and sum(wire.JSON_TEXT in r for r in reasons) == 2
    assert sum("Confluent's framing" in r for r in reasons) == 2
    assert sum(d.headers == (KafkaHeader("source", b"console"),) for d in letters.values()) == len(as_text)
    assert any(r.startswith(wire.WRONG_SCHEMA) for r in reasons), reasons


def read_topic(bootstrap: str, topic: str) -> list:
    """Every record on `topic` now."""
    consumer = kafka_consumer(bootstrap, uuid.uuid4().hex, [topic])
    got, idle = [], time.monotonic() + 10
    try:
        while time.monotonic() < idle:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                got.append(message)
                idle = time.monotonic() + 3
    finally:
        consumer.close()
    return got


def test_an_alert_larger_than_kafkas_default_limit_is_published_and_the_query_runs_on(settings, spark,
                                                                                     kafka_bootstrap, topics, tmp_path):
    """A shadow promotes the copies of 4,000 messages with long ids after a heartbeat timeout: the alert
    naming them all is larger than Kafka's default limit (1,048,588 bytes); it is published, with a
    command per message (such an alert used to fail every batch until the twin gave up)."""
    model = model_config_from({"shadow_resubmit_time_span": "10m"})
    org = Org()
    mids = [f"{n:04d}-" + "x" * 150 for n in range(4000)]
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0)]
    for n, mid in enumerate(mids):
        events += [*org.received("mbx01", mid, n / 8000), *org.shadowed("mbx01", "mbx02", mid, n / 8000)]
    events += [*org.query_ok("mbx02", "mbx01", 0.6), *org.heartbeats_failing("mbx02", "mbx01", 1, 14, every=1)]
    alerts, commands = expected_ids(events, model)
    publish(kafka_bootstrap, topics.events, [*events, final_tick(events)])
    with TwinApplication(twin_settings(settings, kafka_bootstrap, topics, model, servers=("mbx01", "mbx02")),
                         spark=spark, ticks=False, checkpoint_dir=tmp_path / "checkpoint",
                         say=lambda line: None) as twin:
        got = collect(kafka_bootstrap, [topics.alerts, topics.commands],
                      lambda g: len(g[topics.alerts]) >= len(alerts) and len(g[topics.commands]) >= len(commands))
        assert twin.restarts == 0 and twin.query.exception() is None
    largest = max(got[topics.alerts], key=lambda a: len(a.messages))
    assert len(largest.messages) == len(mids) and len(encode(largest)) > 1_048_588
    assert {a.alert_id for a in got[topics.alerts]} == alerts
    assert {c.command_id for c in got[topics.commands]} == commands


def test_an_output_topic_deleted_while_the_twin_runs_is_created_again(settings, spark, kafka_bootstrap, topics,
                                                                     tmp_path):
    """An operator deletes the alerts topic under the running twin: its sink fails, and the query,
    started again, creates the topic as the twin's start does (it used to fail until the twin gave up)."""
    events = world_events()
    alerts, _ = expected_ids(events)
    conf = twin_settings(settings, kafka_bootstrap, topics, servers=world_servers())
    # the sink gives up on a missing topic within seconds, not Kafka's 60
    conf = dataclasses.replace(conf, kafka=dataclasses.replace(conf.kafka, spark_properties={"max.block.ms": "5000"}))
    with TwinApplication(conf, spark=spark, ticks=False, checkpoint_dir=tmp_path / "checkpoint",
                         say=lambda line: None) as twin:
        client = admin(kafka_bootstrap)
        client.delete_topics([topics.alerts])[topics.alerts].result(30)
        publish(kafka_bootstrap, topics.events, [*events, final_tick(events)])
        got, deadline = {topics.alerts: []}, time.monotonic() + 150
        while len(got[topics.alerts]) < len(alerts) and time.monotonic() < deadline:
            assert twin.wait(seconds=5) is Ending.TIME_UP  # where a failed query is started again
            got = collect(kafka_bootstrap, [topics.alerts], lambda g: len(g[topics.alerts]) >= len(alerts), 3)
        assert twin.restarts >= 1
        # and it goes on: a later failure is started again too (once, in CI, the restarted query wrote every
        # alert and then died of Spark's own NullPointerException in KafkaMicroBatchStream.metrics)
        assert twin.wait(seconds=5) is Ending.TIME_UP and twin.query.isActive
    assert {a.alert_id for a in got[topics.alerts]} == alerts


def test_twin_run_does_not_start_on_topics_it_would_lose_or_refuse_records_on(kafka_bootstrap, topics, tmp_path):
    """The operator made the topics beforehand: the commands topic compacted (it would keep one command per node),
    the dead-letter topic taking 1,000 bytes a record, the events topic with a partition more than configured. `twin
    run` used to start anyway, with the differences among its start lines on stdout, then lost commands to
    compaction unsaid, and failed on its first dead letter over 1,000 bytes, batch after batch until it gave up,
    naming no topic. Now it does not start: one line on stderr naming each topic and setting, exit 1. The partition
    count, which the twin reads and writes whatever it is, is said and not refused."""
    client = admin(kafka_bootstrap)
    wrong = {topics.commands: ("cleanup.policy", "compact"), topics.dead_letters: ("max.message.bytes", "1000")}
    for future in client.incremental_alter_configs([ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[
            ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)]) for name, (key, value) in wrong.items()
    ]).values():
        future.result(30)
    client.create_partitions([NewPartitions(topics.events, topics.events_partitions + 1)])[topics.events].result(30)
    run = subprocess.run([sys.executable, "-m", "shadowtwin", "twin", "run", "--seconds", "60"], capture_output=True,
                         text=True, timeout=120, env=twin_env(kafka_bootstrap, topics, tmp_path / "checkpoints"))
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.stderr.count("\n") == 1 and run.stderr.startswith(f"shadowtwin twin: {topics.commands}: cleanup.policy"
                                                                   " is compact, must be delete"), run.stderr
    assert f"{topics.dead_letters}: max.message.bytes is 1000, must be at least" in run.stderr
    assert topics.events not in run.stderr and "twin running" not in run.stdout
    assert f"{topics.events} ({topics.events_partitions + 1} partitions) - has" in run.stdout


def test_records_of_an_aborted_transaction_are_not_read(settings, spark, kafka_bootstrap, topics, tmp_path):
    """A node that publishes through Kafka transactions (a Connect worker or a Flink job with exactly-once
    delivery) and aborts one: its records are in the topic but never happened; the twin reads committed
    records only, as the contract's own consumers (librdkafka's default) do."""
    events = world_events()
    alerts, commands = expected_ids(events)
    phantom = dataclasses.replace(next(e for e in events if isinstance(e, MessageReceived)), event_id="aborted",
                                  message=MessageRef("<phantom@example.com>", "phantom"))
    node = producer(kafka_bootstrap, **{"transactional.id": f"node-{uuid.uuid4().hex[:8]}"})
    node.init_transactions(30)
    node.begin_transaction()
    node.produce(topics.events, key=kafka_key(phantom), value=encode(phantom))
    node.produce(topics.events, key=b"mbx01", value=b"not an event")  # a dead letter, were it read
    node.flush(30)
    node.abort_transaction(30)
    publish(kafka_bootstrap, topics.events, [*events, final_tick(events)])
    with TwinApplication(twin_settings(settings, kafka_bootstrap, topics, servers=world_servers()), spark=spark,
                         ticks=False, checkpoint_dir=tmp_path / "checkpoint", say=lambda line: None) as twin:
        got = collect(kafka_bootstrap, [topics.alerts, topics.commands, topics.dead_letters],
                      lambda g: len(g[topics.alerts]) >= len(alerts) and len(g[topics.commands]) >= len(commands))
        assert twin.query.exception() is None
    assert {a.alert_id for a in got[topics.alerts]} == alerts
    assert {c.command_id for c in got[topics.commands]} == commands
    assert got[topics.dead_letters] == []
    held = read_state(kafka_bootstrap, topics.state)
    assert held.where("<phantom@example.com>") == []


def test_once_every_message_has_ended_no_message_and_no_timer_is_left_in_spark_or_on_the_state_topic(
        settings, spark, kafka_bootstrap, topics, tmp_path):
    """The world's messages end delivered, promoted, or at risk and then lost; a tick a month later fires every
    deadline left. Then the state topic holds no
    message, and Spark's state store no registered timer: nothing would call a group again, nor need to."""
    events = world_events()
    later = ClockTick(event_id="a-month-later", event_time_ms=max(e.event_time_ms for e in events) + 30 * 86_400_000,
                      node="shadowtwin", primary_server="")
    reference = replay(events, until_ms=later.event_time_ms - DELAY_MS)
    assert all(reference.settles(primary) for primary in reference.states), "the reference holds nothing by then"
    alerts = {a.alert_id for a in reference.alerts}
    publish(kafka_bootstrap, topics.events, [*events, later])
    checkpoint = tmp_path / "checkpoint"
    with TwinApplication(twin_settings(settings, kafka_bootstrap, topics, servers=world_servers()), spark=spark,
                         ticks=False, checkpoint_dir=checkpoint, say=lambda line: None) as twin:
        got = collect(kafka_bootstrap, [topics.alerts], lambda g: len(g[topics.alerts]) >= len(alerts))
        deadline = time.monotonic() + 90  # the batch that fired the deadlines may not have committed yet
        while (timers_in(spark, checkpoint) != [] or read_state(kafka_bootstrap, topics.state).messages) \
                and time.monotonic() < deadline:
            time.sleep(1)
        assert twin.query.exception() is None
    assert {a.alert_id for a in got[topics.alerts]} == alerts
    assert read_state(kafka_bootstrap, topics.state).messages == {}
    assert timers_in(spark, checkpoint) == []


def timers_in(spark, checkpoint) -> list | None:
    """The timers registered in the checkpoint's state store as of its last committed batch (Spark's state data
    source); None before the first batch is committed."""
    if not any((checkpoint / "commits").glob("[0-9]*")):
        return None
    return spark.read.format("statestore").option("readRegisteredTimers", "true").load(str(checkpoint)).collect()


def test_a_topology_that_goes_silent_is_still_noticed(settings, spark, kafka_bootstrap, topics, tmp_path):
    model = model_config_from({"shadow_heartbeat_frequency": "1s", "shadow_resubmit_time_span": "6s"})
    now_ms = int(time.time() * 1000)
    org = Org()
    events = [*org.received("mbx01", "m1", 0), *org.shadowed("mbx01", "mbx02", "m1", 0), *org.query_ok("mbx02", "mbx01", 0)]
    events = [dataclasses.replace(e, event_time_ms=e.event_time_ms - events[0].event_time_ms + now_ms) for e in events]
    quick = twin_settings(settings, kafka_bootstrap, topics, model, delay_s=2)
    quick = dataclasses.replace(quick, twin=dataclasses.replace(quick.twin, tick_interval_seconds=0.5))
    # the twin's clock ticks from the start; after these events no node says anything
    with TwinApplication(quick, spark=spark, ticks=True, checkpoint_dir=tmp_path / "checkpoint", say=lambda line: None):
        publish(kafka_bootstrap, topics.events, events)
        got = collect(kafka_bootstrap, [topics.alerts],
                      lambda g: any(a.type is AlertType.MESSAGE_AT_RISK for a in g[topics.alerts]), timeout_s=90)
    at_risk = [a for a in got[topics.alerts] if a.type is AlertType.MESSAGE_AT_RISK]
    assert len(at_risk) == 1, [a.type for a in got[topics.alerts]]
    assert at_risk[0].decided_at_ms == now_ms + 6_000, "decided at the deadline's event time, not when it ran"
    assert AlertType.SHADOW_SERVER_UNREACHABLE in {a.type for a in got[topics.alerts]}


def test_kill_minus_nine_loses_nothing(kafka_bootstrap, topics, tmp_path):
    events = world_events()
    alerts, commands = expected_ids(events)
    env = twin_env(kafka_bootstrap, topics, tmp_path / "checkpoints", servers=world_servers())
    command = [sys.executable, "-m", "shadowtwin", "twin", "run", "--no-ticks"]
    log = open(tmp_path / "twin.log", "w")
    middle = events[len(events) // 2].event_time_ms
    # Each half is flushed before the twin reads it, so both partitions advance together in
    # event time (a replay read at a limited rate could drift across partitions and go late).
    publish(kafka_bootstrap, topics.events, [e for e in events if e.event_time_ms < middle])
    first = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    try:
        deadline = time.monotonic() + 240  # Spark's first batch is slow on a busy machine
        while time.monotonic() < deadline and "batch 0:" not in (tmp_path / "twin.log").read_text():
            time.sleep(0.2)
        assert "batch 0:" in (tmp_path / "twin.log").read_text(), (tmp_path / "twin.log").read_text()[-3000:]
        os.killpg(first.pid, signal.SIGKILL)  # mid-stream: its next batch (timeouts) is under way
        first.wait(30)
        partial = collect(kafka_bootstrap, [topics.alerts, topics.commands], lambda g: False, timeout_s=5)
        assert {a.alert_id for a in partial[topics.alerts]} < alerts, "killed before it had finished"
        publish(kafka_bootstrap, topics.events, [*(e for e in events if e.event_time_ms >= middle), final_tick(events)])
        second = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
        try:
            got = collect(kafka_bootstrap, [topics.alerts, topics.commands],
                          lambda g: {a.alert_id for a in g[topics.alerts]} >= alerts
                          and {c.command_id for c in g[topics.commands]} >= commands, timeout_s=180)
        finally:
            os.killpg(second.pid, signal.SIGTERM)
            second.wait(60)
        assert second.returncode == 143, "SIGTERM stops the twin cleanly, with the conventional status"
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
        log.close()
    assert {a.alert_id for a in got[topics.alerts]} == alerts, (tmp_path / "twin.log").read_text()[-3000:]
    assert {c.command_id for c in got[topics.commands]} == commands
    text = (tmp_path / "twin.log").read_text()
    # Spark's notices that say nothing to the twin's user (conf/spark-log4j2.properties), each printed at least once
    # by every run before the logger names followed pyspark 4.1.1's classes
    for notice in ("doesn't contain a value", "spark.sql.adaptive.enabled is not supported", "Disabling AQE"):
        assert notice not in text, notice
    # printed, not logged (streaming/spark_stderr.py): the JVM's at its start, pyspark's driver worker's at the query's
    for notice in ("Using incubator modules", "TransformWithStateInPandas Python worker"):
        assert notice not in text, notice


# Run by every Python process of a twin started with it on its PYTHONPATH (the driver, PySpark's daemon, whose
# forked workers inherit it): the CRASH_CALL-th call of CRASH_AT, across the workers, kills the twin's process group
# (its session's: started in a new session) and the daemon's own with SIGKILL, as a machine that crashes then.
CRASH_HOOK = """
import importlib, os, signal
module_name, _, name = os.environ["CRASH_AT"].partition(":")
owner_name, _, method = name.partition(".")
owner = getattr(importlib.import_module(module_name), owner_name) if method else importlib.import_module(module_name)
real = getattr(owner, method or name)

def crashing(*args, **kwargs):
    calls = len(os.listdir(os.environ["CRASH_DIR"])) + 1
    open(os.path.join(os.environ["CRASH_DIR"], f"{os.getpid()}-{calls}"), "w").close()
    if calls == int(os.environ["CRASH_CALL"]):
        os.killpg(os.getsid(0), signal.SIGKILL)
        os.killpg(os.getpgrp(), signal.SIGKILL)
    return real(*args, **kwargs)

setattr(owner, method or name, crashing)
"""


# A base is written at a group's first call and again once its log's slots are full (streaming.held_state): with
# 100 records a batch each of the world's groups is called in each of the first half's batches, and its second base
# is written in the tenth.
REWRITE_BATCH = 100


@pytest.mark.parametrize("crash_at, crash_call, batch", [
    ("state.snapshot:dump", 2, 0), ("streaming.state_rows:StateWatch.rows", 2, 0),
    ("state.snapshot:dump", len(world_servers()) + 2, REWRITE_BATCH)],
    ids=["writing a base", "writing the state topic", "writing a later base"])
def test_a_twin_killed_while_writing_its_state_decides_as_one_pass_once_started_again(
        kafka_bootstrap, topics, tmp_path, crash_at, crash_call, batch):
    """The twin's processes die (SIGKILL, as in a machine crash) in its first batch, as a group writes its base
    snapshot (streaming.held_state) or its records for the state topic, after another group wrote its own; or,
    reading `batch` records a batch, as a group writes its base again over its first once its log is full, after
    another group wrote its second. Started again on the same checkpoint, it runs that batch again and goes on: the
    alerts and redelivery commands are the reference's, none lost; what a batch run again publishes again (Spark's
    Kafka sink writes at least once; consumers skip a repeated `alert_id` or `command_id`,
    producers/relay/commands.py) is the same record; the state topic holds what the reference still holds."""
    events = world_events()
    end = final_tick(events)
    reference = replay(events, until_ms=end.event_time_ms - DELAY_MS)
    alerts, commands = {a.alert_id for a in reference.alerts}, {c.command_id for c in reference.commands}
    if batch:  # one partition, in event-time order: a batch's share of two could run ahead of the other's, and late
        topics = dataclasses.replace(topics, events=f"{topics.events}.one", events_partitions=1)
        create_topics(kafka_bootstrap, topics)
    hook, crashes = tmp_path / "hook", tmp_path / "crashes"
    hook.mkdir()
    crashes.mkdir()
    (hook / "sitecustomize.py").write_text(CRASH_HOOK)
    env = dict(twin_env(kafka_bootstrap, topics, tmp_path / "checkpoints", servers=world_servers()),
               SHADOWTWIN_TWIN_MAX_OFFSETS_PER_TRIGGER=str(batch))
    crashing = dict(env, PYTHONPATH=os.pathsep.join(filter(None, [str(hook), env.get("PYTHONPATH")])),
                    CRASH_AT=crash_at, CRASH_DIR=str(crashes), CRASH_CALL=str(crash_call))
    command = [sys.executable, "-m", "shadowtwin", "twin", "run", "--no-ticks"]
    middle = events[len(events) // 2].event_time_ms
    publish(kafka_bootstrap, topics.events, [e for e in events if e.event_time_ms < middle])
    with open(tmp_path / "twin.log", "w") as log:
        first = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=crashing)
        try:
            first.wait(240)  # Spark's first batch is slow on a busy machine
        finally:
            if first.poll() is None:
                os.killpg(first.pid, signal.SIGKILL)
        assert first.returncode == -signal.SIGKILL, (tmp_path / "twin.log").read_text()[-3000:]
        assert len(list(crashes.iterdir())) == crash_call, "killed at that call, then nothing ran"
        partial = collect(kafka_bootstrap, [topics.alerts, topics.commands], lambda g: False, timeout_s=5)
        assert {a.alert_id for a in partial[topics.alerts]} < alerts, "killed before it had finished"
        publish(kafka_bootstrap, topics.events, [*(e for e in events if e.event_time_ms >= middle), end])
        second = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
        try:
            got = collect(kafka_bootstrap, [topics.alerts, topics.commands],
                          lambda g: {a.alert_id for a in g[topics.alerts]} >= alerts
                          and {c.command_id for c in g[topics.commands]} >= commands, timeout_s=240)
            deadline = time.monotonic() + 60  # the last batch's state records may come after its alerts
            while read_state(kafka_bootstrap, topics.state).messages.keys() != held_keys(reference) \
                    and time.monotonic() < deadline:
                time.sleep(1)
        finally:
            os.killpg(second.pid, signal.SIGTERM)
            second.wait(60)
    text = (tmp_path / "twin.log").read_text()[-3000:]
    assert {a.alert_id for a in got[topics.alerts]} == alerts, text
    assert {c.command_id for c in got[topics.commands]} == commands, text
    for records, id_of in ((got[topics.alerts], lambda a: a.alert_id), (got[topics.commands], lambda c: c.command_id)):
        by_id = {}
        for record in records:
            assert by_id.setdefault(id_of(record), record) == record, "a repeat is the same record"
    assert read_state(kafka_bootstrap, topics.state).messages.keys() == held_keys(reference)


def held_keys(reference) -> set:
    """The state topic's keys of the messages the reference still holds."""
    return {message_key(primary, internal_id) for primary, state in reference.states.items()
            for internal_id in state.messages}


@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_twin_run_stops_cleanly_on_sigint_and_sigterm(kafka_bootstrap, topics, tmp_path, signum, status):
    log_path = tmp_path / "twin.log"
    with open(log_path, "w") as log:
        twin = subprocess.Popen([sys.executable, "-m", "shadowtwin", "twin", "run"], stdout=log, stderr=subprocess.STDOUT,
                                env=twin_env(kafka_bootstrap, topics, tmp_path / "checkpoints"))
        try:
            deadline = time.monotonic() + 240  # Spark's first batch is slow on a busy machine
            while time.monotonic() < deadline and "batch 1:" not in log_path.read_text():
                time.sleep(0.2)
            assert "batch 1:" in log_path.read_text(), log_path.read_text()[-3000:]
            twin.send_signal(signum)  # as Ctrl-C (to the process, not its group) or a service manager would
            twin.wait(60)
        finally:
            if twin.poll() is None:
                twin.kill()
    text = log_path.read_text()
    assert twin.returncode == status, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    assert f"stopping ({signal.Signals(signum).name})" in text


def test_a_stream_sent_twice_decides_as_one_pass(settings, spark, kafka_bootstrap, topics, tmp_path):
    """A log shipper that resends: every event arrives twice (same ids); the twin decides once."""
    events = world_events()
    alerts, commands = expected_ids(events)
    half = len(events) // 2
    # each half twice, the repeats after the originals, within the watermark delay
    publish(kafka_bootstrap, topics.events, [*events[:half], *events[:half]])
    publish(kafka_bootstrap, topics.events, [*events[half:], *events[half:], final_tick(events)])
    twin = TwinApplication(twin_settings(settings, kafka_bootstrap, topics, servers=world_servers()), spark=spark,
                           ticks=False, checkpoint_dir=tmp_path / "checkpoint", say=lambda line: None)
    with twin:
        got = collect(kafka_bootstrap, [topics.alerts, topics.commands],
                      lambda g: len(g[topics.alerts]) >= len(alerts) and len(g[topics.commands]) >= len(commands))
        time.sleep(5)  # anything decided twice would arrive by now
        got = collect(kafka_bootstrap, [topics.alerts, topics.commands], lambda g: False, timeout_s=10)
    assert {a.alert_id for a in got[topics.alerts]} == alerts
    assert sorted(c.command_id for c in got[topics.commands]) == sorted(commands), "each command once"
    # each alert once (a topology-wide EVENTS_STOPPED comes from every group that notices, one id)
    once = [a.alert_id for a in got[topics.alerts] if a.type is not AlertType.EVENTS_STOPPED]
    assert len(once) == len(set(once))


def test_a_row_spark_lets_through_behind_the_watermark_is_a_dead_letter_not_applied(settings, spark, kafka_bootstrap,
                                                                                     topics, tmp_path):
    """Spark 4.0 drops the rows behind the PREVIOUS batch's watermark; a row between that and the
    watermark its batch is given (event time jumped by more than the delay in the batch before)
    reaches the operator, which sets it aside: a deadline after it may have fired already."""
    org = Org()
    first, jump, late = (org.received("mbx01", mid, minute)[0] for mid, minute in (("m1", 0), ("m2", 10), ("m3", 5)))
    publish(kafka_bootstrap, topics.events, [first, jump])  # one key, one partition: in this order
    traced, sent_ms = producer(kafka_bootstrap), int(time.time() * 1000)
    traced.produce(topics.events, key=kafka_key(late), value=encode(late),
                   headers=[("traceparent", b"00-4bf92f3577b34da6-01"), ("retry", None)])
    assert traced.flush(30) == 0
    one_per_batch = twin_settings(settings, kafka_bootstrap, topics, servers=("mbx01", "mbx02"))
    one_per_batch = dataclasses.replace(one_per_batch, twin=dataclasses.replace(one_per_batch.twin,
                                                                                max_offsets_per_trigger=1))
    # batch 0: m1 (no watermark); batch 1: m2 (watermark 1 min before m1); batch 2: m3, 5 minutes
    # behind m2, ahead of batch 1's watermark (Spark's filter), behind its own (m2 less 1 min)
    said: list[str] = []
    with TwinApplication(one_per_batch, spark=spark, ticks=False, checkpoint_dir=tmp_path / "checkpoint",
                         say=said.append) as twin:
        collect(kafka_bootstrap, [topics.dead_letters], lambda g: len(g[topics.dead_letters]) >= 1, timeout_s=120)
        time.sleep(3)  # a second letter (one per fact row, say) would be there by now
        letters = collect(kafka_bootstrap, [topics.dead_letters], lambda g: False, timeout_s=5)[topics.dead_letters]
        # Spark dropped nothing: the late event the operator set aside is the one the progress counts and alerts
        assert twin.progress.batches >= 3 and twin.progress.late_total == 1, said
        assert [line for line in said if line.startswith("batch 2:")][0].endswith(", late 1"), said
        alerts = collect(kafka_bootstrap, [topics.alerts], lambda g: False, timeout_s=5)[topics.alerts]
    assert [a.reason.split(" (")[0] for a in alerts if a.type is AlertType.LATE_EVENTS] == [
        "1 event(s) arrived behind the watermark"], alerts
    assert [(d.original, d.offset) for d in letters] == [(encode(late), 2)], [d.reason for d in letters]
    assert letters[0].reason.startswith("late event: event time "), letters[0].reason
    assert letters[0].headers == (KafkaHeader("traceparent", b"00-4bf92f3577b34da6-01"), KafkaHeader("retry", None))
    assert sent_ms <= letters[0].timestamp_ms <= letters[0].at_ms, "the record's Kafka timestamp (LogAppendTime)"


def test_a_held_message_as_large_as_the_events_topic_takes_is_in_the_state_topic_and_the_query_runs_on(
        settings, spark, kafka_bootstrap, topics, tmp_path):
    """A message to 32,700 recipients: its MessageReceived (1,046,481 bytes) is just under Kafka's default
    limit, and taken; its record on the state topic, which lists the recipients in JSON, is larger. Kafka's
    default refused it (RecordTooLargeException) and the twin's query failed on that batch, again and again."""
    org = Org()
    recipients = [f"user{n:06d}@contoso.example.com" for n in range(32_700)]
    events = [*org.received("mbx01", "m1", 0, recipients=recipients), *org.shadowed("mbx01", "mbx02", "m1", 0)]
    out = producer(kafka_bootstrap, **{"message.max.bytes": 2 * KAFKA_DEFAULT_MAX_BYTES})
    for event in events:
        out.produce(topics.events, key=kafka_key(event), value=encode(event))
    assert out.flush(30) == 0
    assert len(encode(events[0])) > 0.99 * KAFKA_DEFAULT_MAX_BYTES
    with TwinApplication(twin_settings(settings, kafka_bootstrap, topics), spark=spark, ticks=False,
                         checkpoint_dir=tmp_path / "checkpoint", say=lambda line: None) as twin:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and twin.query.exception() is None and not read_state(
                kafka_bootstrap, topics.state).where(events[0].message.message_id):
            time.sleep(1)
        assert twin.query.exception() is None and twin.restarts == 0
    held = read_state(kafka_bootstrap, topics.state).where(events[0].message.message_id)
    assert [len(record["recipients"]) for record in held] == [32_700]


def test_a_command_for_a_message_as_large_as_the_events_topic_takes_is_published_as_json_too(
        settings, spark, kafka_bootstrap, topics, tmp_path):
    """With `twin.json_topics`: the primary of a message to 32,700 recipients delivered one of them, then went
    silent; its shadow resubmits the copy for the other 32,699. The command fits Kafka's default limit as Avro
    (1,013,757 bytes) but not as JSON (1,112,085): the JSON commands topic refused it and the twin's query
    failed on that batch, again and again."""
    org = Org()
    recipients = [f"user{n:06d}@contoso.example.com" for n in range(32_700)]
    events = [*org.received("mbx01", "m1", 0, recipients=recipients), *org.shadowed("mbx01", "mbx02", "m1", 0),
              *org.query_ok("mbx02", "mbx01", 0),
              *org.sent("mbx01", "m1", "hop1", 1, fork="f1", recipients=recipients[:1]),
              *org.acked("mbx01", "m1", "hop1", 1, fork="f1"),
              *org.sent("mbx01", "m1", "hop2", 1, fork="f2", recipients=recipients[1:]),
              *org.heartbeats_failing("mbx02", "mbx01", 2, 200), *org.tick(400)]
    out = producer(kafka_bootstrap, **{"message.max.bytes": 2 * KAFKA_DEFAULT_MAX_BYTES})
    for event in events:
        out.produce(topics.events, key=kafka_key(event) or None, value=encode(event))
    assert out.flush(30) == 0
    json_twin = twin_settings(settings, kafka_bootstrap, topics)
    json_twin = dataclasses.replace(json_twin, twin=dataclasses.replace(json_twin.twin, json_topics=True))
    with TwinApplication(json_twin, spark=spark, ticks=False, checkpoint_dir=tmp_path / "checkpoint",
                         say=lambda line: None) as twin:
        consumer = kafka_consumer(kafka_bootstrap, uuid.uuid4().hex, [f"{topics.commands}.json"])
        deadline, copies = time.monotonic() + 90, []
        try:
            while time.monotonic() < deadline and twin.query.exception() is None and not copies:
                message = consumer.poll(0.5)
                if message is not None and not message.error():
                    copies.append(json.loads(message.value()))
        finally:
            consumer.close()
        assert twin.query.exception() is None and twin.restarts == 0
    assert [len(copy["recipients"]) for copy in copies] == [32_699]


def test_a_twin_on_a_new_checkpoint_clears_an_earlier_twin_s_state_records_and_one_resumed_keeps_its_own(
        settings, spark, kafka_bootstrap, topics, tmp_path):
    """`make run`'s demo, then `lab up --twin` (another checkpoint, the same topics); or a checkpoint deleted to start
    afresh. The earlier twin's records stayed on the compacted state topic for good, and `where` showed its messages
    as in transit, `server` its queues, though the twin running held nothing of them. Now a twin on a new checkpoint
    tombstones them before it writes; one resumed on its own checkpoint keeps what it wrote."""
    events = world_events()[:len(world_events()) // 3]  # messages still in transit
    earlier = twin_settings(settings, kafka_bootstrap, topics, servers=world_servers())
    checkpoint = tmp_path / "earlier"
    with TwinApplication(earlier, spark=spark, ticks=False, checkpoint_dir=checkpoint, say=lambda line: None):
        publish(kafka_bootstrap, topics.events, events)
        deadline = time.monotonic() + 90
        while not read_state(kafka_bootstrap, topics.state).messages and time.monotonic() < deadline:
            time.sleep(1)
    held = read_state(kafka_bootstrap, topics.state)
    assert held.messages and held.servers
    said: list[str] = []
    with TwinApplication(earlier, spark=spark, ticks=False, checkpoint_dir=checkpoint, say=said.append):
        pass
    assert read_state(kafka_bootstrap, topics.state).messages.keys() == held.messages.keys()
    assert not [line for line in said if "earlier twin" in line], said
    other_events = f"{topics.events}.other"
    create_topics(kafka_bootstrap, dataclasses.replace(topics, events=other_events))
    later = dataclasses.replace(earlier, topics=dataclasses.replace(topics, events=other_events))
    with TwinApplication(later, spark=spark, ticks=False, checkpoint_dir=tmp_path / "later", say=said.append):
        after = read_state(kafka_bootstrap, topics.state)
    records = len(held.messages) + len(held.servers)
    assert f"topic {topics.state}: {records} records of an earlier twin cleared (a new checkpoint)" in said, said
    assert after.messages == {} and after.servers == {}
