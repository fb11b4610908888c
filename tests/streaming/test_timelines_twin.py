"""Differential: every timeline the documents make clear (tests/state/timelines.py) through the real
streaming twin (Kafka and Spark) decides exactly what the reference engine decides, by id."""

from __future__ import annotations

import time

import pytest

from schemas.events import ClockTick
from state.replay import replay
from streaming.app import TwinApplication
from tests.state import timelines
from tests.streaming.test_twin import DELAY_MS, collect, publish, twin_settings


@pytest.mark.parametrize("make", timelines.ALL, ids=lambda f: f.__name__)
def test_the_streaming_twin_decides_each_timeline_as_the_reference(make, settings, spark, kafka_bootstrap, topics,
                                                                   tmp_path):
    timeline = make()
    reference = replay(timeline.events, timeline.config)
    alerts = {a.alert_id for a in reference.alerts}
    commands = {c.command_id for c in reference.commands}
    end_ms = reference.end_ms
    last = ClockTick(event_id=f"final-{end_ms}", event_time_ms=end_ms + DELAY_MS, node="shadowtwin", primary_server="")
    publish(kafka_bootstrap, topics.events, [*sorted(timeline.events, key=lambda e: e.event_time_ms), last])
    servers = tuple(sorted({n for e in timeline.events for n in (e.node, e.primary_server) if n} - {"shadowtwin"}))
    config = twin_settings(settings, kafka_bootstrap, topics, timeline.config, servers=servers)
    with TwinApplication(config, spark=spark, ticks=False, checkpoint_dir=tmp_path / "checkpoint",
                         say=lambda line: None) as twin:
        deadline = time.monotonic() + 150
        while twin.watermark_ms < end_ms and time.monotonic() < deadline:
            time.sleep(0.5)
        assert twin.watermark_ms >= end_ms, "the twin's event time never reached the timeline's end"
        got = collect(kafka_bootstrap, [topics.alerts, topics.commands],
                      lambda g: {a.alert_id for a in g[topics.alerts]} >= alerts
                      and {c.command_id for c in g[topics.commands]} >= commands, timeout_s=30)
    assert {a.alert_id for a in got[topics.alerts]} == alerts, [a.type for a in got[topics.alerts]]
    assert {c.command_id for c in got[topics.commands]} == commands
