"""shadowtwin.testing as someone else uses it: the twin container decides what the reference replay
decides, read back as contract records; the plugin's fixtures reach a test suite through the entry point."""

from __future__ import annotations

import textwrap

import pytest

from schemas.events import ClockTick
from shadowtwin.testing.containers import LABEL, ContainerError, KafkaContainer, TwinContainer
from state.parameters import ModelConfig
from state.replay import replay
from tests.state.world import Crash, Mail, simulate

DELAY_MS = 60_000
# mbx01 crashes and comes back with its queue database, mbx02 with a new one: promotions,
# redelivery commands, duplicates expected.
WORLD = (
    [Mail(0, 1, 5, 3, True), Mail(0, 2, 20, 200, True), Mail(1, 1, 30, 5, True), Mail(1, 2, 40, 300, True),
     Mail(2, 1, 50, 2, False), Mail(0, 1, 70, 5, True)],
    (Crash(100, 300, False), Crash(110, 30, True), None),
)


def test_the_twin_container_decides_what_the_reference_replay_decides(shadowtwin_twin):
    events = [e for e in simulate(*WORLD)[0] if not isinstance(e, ClockTick)]
    end = max(e.event_time_ms for e in events)
    reference = replay(events, ModelConfig(), until_ms=end + 1)
    alerts, commands = {a.alert_id for a in reference.alerts}, {c.command_id for c in reference.commands}
    assert len(alerts) >= 5 and len(commands) >= 2, "the world exercises promotions"

    servers = sorted({name for e in events for name in (e.node, e.primary_server) if name})
    twin = shadowtwin_twin({"twin": {"watermark_delay": f"{DELAY_MS // 1000} seconds", "ticks": False},
                            "spark": {"trigger_interval": "1 second"},
                            "shadow_redundancy": {"servers": servers}})  # the facts every group shares
    with pytest.raises(TimeoutError, match="0 records arrived: {}; the twin container's log ends:(.|\n)*twin running:"):
        twin.wait_for_alerts(timeout_s=0.1)  # nothing published yet
    twin.publish([*events, ClockTick(event_id="final", event_time_ms=end + DELAY_MS + 1, node="test",
                                     primary_server="")])
    got_alerts = twin.wait_for_alerts(lambda got: len(got) >= len(alerts), timeout_s=180)
    got_commands = twin.wait_for_commands(lambda got: len(got) >= len(commands), timeout_s=30)
    assert {a.alert_id for a in got_alerts} == alerts
    assert {c.command_id for c in got_commands} == commands
    assert twin.dead_letters() == []


def test_the_plugin_serves_a_foreign_test_suite_through_its_entry_point(pytester, docker_engine):
    pytester.makepyfile(test_foreign=textwrap.dedent('''
        from confluent_kafka.admin import AdminClient

        def test_kafka_and_topics(shadowtwin_kafka, shadowtwin_topics):
            listed = AdminClient({"bootstrap.servers": shadowtwin_kafka.bootstrap_servers}).list_topics(timeout=10)
            assert shadowtwin_topics.events in listed.topics and shadowtwin_topics.alerts in listed.topics
    '''))
    before = labelled_containers()
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=1)
    assert labelled_containers() == before, "the plugin's Kafka container outlived the foreign test session"


def labelled_containers() -> set[str]:
    import docker

    return {c.id for c in docker.from_env().containers.list(all=True, filters={"label": LABEL})}


def test_a_missing_image_or_a_twin_that_exits_is_a_clear_error_and_leaves_nothing(docker_engine, shadowtwin_kafka,
                                                                                  shadowtwin_topics):
    before = labelled_containers()
    with pytest.raises(ContainerError, match="shadowtwin/kafka:0-never-built is not on this machine: build it with"
                                             " docker/build"):
        KafkaContainer(image="shadowtwin/kafka:0-never-built").start()
    twin = TwinContainer(shadowtwin_kafka.bootstrap_servers, shadowtwin_topics, {"twin": {"watermark_delay": "soon"}})
    with pytest.raises(ContainerError, match="exited before it was ready(.|\n)*twin.watermark_delay = 'soon': expected a Spark"):
        twin.start()
    assert labelled_containers() == before
