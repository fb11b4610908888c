"""The streaming twin through real Kafka and Spark: the same decisions as the reference replay,
bad records to the dead letters, a silent topology still noticed, and a kill -9 survived."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from schemas.codec import default_codec, encode, kafka_key
from schemas.events import AlertType, ClockTick, Event, MessageReceived
from infra.kafka import producer
from state.parameters import ModelConfig, model_config_from
from state.replay import replay
from streaming.twin import TwinConfig, start_twin
from tests.state.scenario import Org
from tests.state.world import Crash, Mail, simulate

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


def publish(bootstrap: str, topic: str, events: list[Event], raw: list[bytes] = ()) -> None:
    out = producer(bootstrap)
    for event in events:
        out.produce(topic, key=kafka_key(event) or None, value=encode(event))
    for value in raw:
        out.produce(topic, key=b"mbx01", value=value)
    assert out.flush(30) == 0


def final_tick(events: list[Event]) -> ClockTick:
    end = max(e.event_time_ms for e in events)
    return ClockTick(event_id=f"final-{end}", event_time_ms=end + DELAY_MS + 1, node="shadowtwin", primary_server="")


def collect(bootstrap: str, topics: list[str], done, timeout_s: float = 150.0) -> dict[str, list]:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex, "auto.offset.reset": "earliest"})
    consumer.subscribe(topics)
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


def twin_config(kafka_bootstrap, topics, checkpoint, model=None) -> TwinConfig:
    return TwinConfig(
        bootstrap_servers=kafka_bootstrap, events_topic=topics.events, alerts_topic=topics.alerts,
        commands_topic=topics.commands, dead_letters_topic=topics.dead_letters, checkpoint_dir=str(checkpoint),
        model=model or ModelConfig(), watermark_delay=f"{DELAY_MS // 1000} seconds", trigger_interval="1 second",
    )


def expected_ids(events: list[Event], model: ModelConfig | None = None) -> tuple[set[str], set[str]]:
    reference = replay(events, model, until_ms=final_tick(events).event_time_ms - DELAY_MS)
    return {a.alert_id for a in reference.alerts}, {c.command_id for c in reference.commands}


def test_same_decisions_as_the_reference_and_bad_records_set_aside(spark, kafka_bootstrap, topics, tmp_path):
    events = world_events()
    alerts, commands = expected_ids(events)
    assert len(alerts) >= 8 and len(commands) >= 2, "the world exercises promotions and failures"
    ahead = dataclasses.replace(next(e for e in events if isinstance(e, MessageReceived)), event_id="from-the-future",
                                event_time_ms=int(time.time() * 1000) + 86_400_000)
    good = encode(events[0])
    garbled = [b"not avro at all", good[:2] + b"\x00" * 8 + good[10:], good[:12]]
    publish(kafka_bootstrap, topics.events, [*events, ahead], raw=garbled)
    publish(kafka_bootstrap, topics.events, [final_tick(events)])
    query = start_twin(spark, twin_config(kafka_bootstrap, topics, tmp_path / "checkpoint"))
    try:
        got = collect(kafka_bootstrap, [topics.alerts, topics.commands, topics.dead_letters],
                      lambda g: len(g[topics.alerts]) >= len(alerts) and len(g[topics.commands]) >= len(commands)
                      and len(g[topics.dead_letters]) >= 4)
        assert query.exception() is None
    finally:
        query.stop()
    assert {a.alert_id for a in got[topics.alerts]} == alerts
    assert {c.command_id for c in got[topics.commands]} == commands
    reasons = sorted(d.reason.split(":")[0] for d in got[topics.dead_letters])
    assert reasons == ["bad magic", "clock skew", "corrupt body", "unknown fingerprint"]
    assert {d.original for d in got[topics.dead_letters]} >= set(garbled)


def test_a_topology_that_goes_silent_is_still_noticed(spark, kafka_bootstrap, topics, tmp_path):
    from streaming.ticker import Ticker

    model = model_config_from({"shadow_heartbeat_frequency": "1s", "shadow_resubmit_time_span": "6s"})
    now_ms = int(time.time() * 1000)
    org = Org()
    events = [*org.received("mbx01", "m1", 0), *org.shadowed("mbx01", "mbx02", "m1", 0), *org.query_ok("mbx02", "mbx01", 0)]
    events = [dataclasses.replace(e, event_time_ms=e.event_time_ms - events[0].event_time_ms + now_ms) for e in events]
    config = dataclasses.replace(twin_config(kafka_bootstrap, topics, tmp_path / "checkpoint", model),
                                 watermark_delay="2 seconds")
    query = start_twin(spark, config)
    ticker = Ticker(kafka_bootstrap, topics.events, interval_s=0.5)
    try:
        publish(kafka_bootstrap, topics.events, events)
        ticker.start()  # from here on, no node says anything: only the twin's clock moves
        got = collect(kafka_bootstrap, [topics.alerts],
                      lambda g: any(a.type is AlertType.MESSAGE_AT_RISK for a in g[topics.alerts]), timeout_s=90)
    finally:
        ticker.stop()
        query.stop()
    at_risk = [a for a in got[topics.alerts] if a.type is AlertType.MESSAGE_AT_RISK]
    assert len(at_risk) == 1, [a.type for a in got[topics.alerts]]
    assert at_risk[0].decided_at_ms == now_ms + 6_000, "decided at the deadline's event time, not when it ran"
    assert AlertType.SHADOW_SERVER_UNREACHABLE in {a.type for a in got[topics.alerts]}


def test_kill_minus_nine_loses_nothing(kafka_bootstrap, topics, tmp_path):
    events = world_events()
    alerts, commands = expected_ids(events)
    conf = tmp_path / "twin.toml"
    conf.write_text(
        f'[kafka]\nbootstrap_servers = "{kafka_bootstrap}"\n'
        f'[topics]\nevents = "{topics.events}"\nalerts = "{topics.alerts}"\ncommands = "{topics.commands}"\n'
        f'dead_letters = "{topics.dead_letters}"\nevents_partitions = 2\ncommands_partitions = 2\n'
        f'[spark]\ntrigger_interval = "1 second"\ncheckpoint_dir = "{tmp_path / "checkpoints"}"\n'
        f'[twin]\nwatermark_delay = "{DELAY_MS // 1000} seconds"\n'
    )
    command = [sys.executable, "-m", "shadowtwin.cli", "--conf", str(conf), "twin", "run", "--no-ticks"]
    log = open(tmp_path / "twin.log", "w")
    middle = events[len(events) // 2].event_time_ms
    # Each half is flushed before the twin reads it, so both partitions advance together in
    # event time (a replay read at a limited rate could drift across partitions and go late).
    publish(kafka_bootstrap, topics.events, [e for e in events if e.event_time_ms < middle])
    first = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and "batch 0:" not in (tmp_path / "twin.log").read_text():
            time.sleep(0.2)
        assert "batch 0:" in (tmp_path / "twin.log").read_text(), (tmp_path / "twin.log").read_text()[-3000:]
        os.killpg(first.pid, signal.SIGKILL)  # mid-stream: its next batch (timeouts) is under way
        first.wait(30)
        partial = collect(kafka_bootstrap, [topics.alerts, topics.commands], lambda g: False, timeout_s=5)
        assert {a.alert_id for a in partial[topics.alerts]} < alerts, "killed before it had finished"
        publish(kafka_bootstrap, topics.events, [*(e for e in events if e.event_time_ms >= middle), final_tick(events)])
        second = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            got = collect(kafka_bootstrap, [topics.alerts, topics.commands],
                          lambda g: {a.alert_id for a in g[topics.alerts]} >= alerts
                          and {c.command_id for c in g[topics.commands]} >= commands, timeout_s=180)
        finally:
            os.killpg(second.pid, signal.SIGTERM)
            second.wait(60)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
        log.close()
    assert {a.alert_id for a in got[topics.alerts]} == alerts, (tmp_path / "twin.log").read_text()[-3000:]
    assert {c.command_id for c in got[topics.commands]} == commands
