"""The embedded Kafka as three KRaft nodes on loopback; the twin's topics replicated 3 times with
2 in sync; one node killed (kill -9) in the middle of the stream: every alert and command of the
reference replay arrives, and no other."""

from __future__ import annotations

import dataclasses
import os
import signal
import time

import pytest

from infra.broker import EmbeddedKafkaCluster
from infra.settings import TopicSettings
from infra.topics import create_topics
from shadowtwin.testing.containers import free_port
from streaming.app import TwinApplication
from tests.streaming.test_twin import (
    collect, expected_ids, final_tick, publish, twin_settings, world_events, world_servers,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster(settings, tmp_path):
    nodes = [dataclasses.replace(settings.kafka.embedded, port=free_port(), controller_port=free_port(),
                                 data_dir=tmp_path / f"node-{n}", heap="384m") for n in (1, 2, 3)]
    cluster = EmbeddedKafkaCluster(nodes, settings.jars.cache_dir)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def test_a_node_of_three_killed_mid_stream_loses_nothing(settings, spark, cluster, tmp_path):
    bootstrap = cluster.bootstrap_servers
    topics = TopicSettings(events="r3.events", alerts="r3.alerts", commands="r3.commands", dead_letters="r3.dead",
                           events_partitions=2, commands_partitions=2, replication_factor=3, min_insync_replicas=2)
    assert all(o.created for o in create_topics(bootstrap, topics))
    assert not any(o.differences for o in create_topics(bootstrap, topics)), "replicated as configured"
    events = world_events()
    alerts, commands = expected_ids(events)
    middle = events[len(events) // 2].event_time_ms
    lines: list[str] = []
    # The first half is on the topic before the twin starts (as in every twin test): a first batch
    # that met one partition's records before the other's would decide otherwise than the reference.
    publish(bootstrap, topics.events, [e for e in events if e.event_time_ms < middle])
    twin = TwinApplication(twin_settings(settings, bootstrap, topics, servers=world_servers()), spark=spark,
                           ticks=False, checkpoint_dir=tmp_path / "checkpoint", say=lines.append)
    with twin:
        deadline = time.monotonic() + 180
        while twin.progress.batches < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        victim = cluster.nodes[0]
        os.kill(victim.status().pid, signal.SIGKILL)
        publish(bootstrap, topics.events, [*(e for e in events if e.event_time_ms >= middle), final_tick(events)])
        got = collect(bootstrap, [topics.alerts, topics.commands],
                      lambda g: {a.alert_id for a in g[topics.alerts]} >= alerts
                      and {c.command_id for c in g[topics.commands]} >= commands, timeout_s=240)
        assert not victim.status().running and twin.query.isActive, "\n".join(lines[-20:])
    assert {a.alert_id for a in got[topics.alerts]} == alerts, "\n".join(lines[-20:])
    assert {c.command_id for c in got[topics.commands]} == commands
