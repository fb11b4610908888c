"""The simulator against the real broker: accelerated runs publish every event; live nodes obey commands."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from producers.publisher import produce
from producers.simulator.engine import Simulation
from producers.simulator.run import live, to_kafka
from schemas import events as ev
from schemas.codec import default_codec
from infra import kafka as kafka_clients
from infra.kafka import NoSuchTopic
from tests.producers.simulator.scenarios import topology

pytestmark = pytest.mark.integration


def read_events(bootstrap: str, topic: str, until, seconds: float = 60) -> list[ev.Event]:
    consumer = kafka_clients.consumer(bootstrap, f"test-{uuid.uuid4().hex}", [topic])
    codec, found, deadline = default_codec(), [], time.monotonic() + seconds
    try:
        while time.monotonic() < deadline and not until(found):
            found += [codec.decode(m.value()) for m in consumer.consume(500, 0.5) if m.error() is None]
    finally:
        consumer.close()
    return found


def test_accelerated_run_publishes_every_event_keyed_by_primary(kafka_bootstrap, topics, tmp_path):
    topo = topology(duration="00:30:00", rate=1.0)
    expected = list(Simulation(topo, 11).events())
    outcome = to_kafka(topo, 11, kafka_bootstrap, topics.events, speed=None, truth_path=tmp_path / "t.jsonl")
    assert outcome.events == len(expected) and (tmp_path / "t.jsonl").exists()
    got = read_events(kafka_bootstrap, topics.events, lambda found: len(found) >= len(expected))
    assert sorted(e.event_id for e in got) == sorted(e.event_id for e in expected)
    assert sorted(got, key=lambda e: e.event_id) == sorted(expected, key=lambda e: e.event_id)


def test_live_nodes_resubmit_when_the_twin_commands_it(kafka_bootstrap, topics):
    """mbx01 dies for good with mail queued; the shadows would wait three hours on their own. A
    redelivery command makes the holder resubmit at once, the servers named in any case."""
    topo = topology([{"kind": "crash", "server": "mbx01", "at": "3s", "duration": "1h", "restart": "never",
                      "backlog": "3s"}], duration="00:00:08", rate=8.0, external_share=0.0)
    outcome = {}
    runner = threading.Thread(target=lambda: outcome.update(result=live(
        topo, 5, kafka_bootstrap, topics.events, topics.commands, seconds=25)), daemon=True)
    runner.start()

    def stored_for_mbx01(found):
        processed = {e.message.internal_id for e in found if isinstance(e, ev.DiscardStatusSet)}
        crashed = any(e.event_time_ms > min(x.event_time_ms for x in found) + 4_000 for e in found)
        return crashed and [e for e in found if isinstance(e, ev.ShadowCopyStored) and e.primary_server == "mbx01"
                            and e.message.internal_id not in processed]

    seen = read_events(kafka_bootstrap, topics.events, stored_for_mbx01, seconds=20)
    held = stored_for_mbx01(seen)
    assert held, "mbx01 died with shadowed mail in its queue"
    copy = held[0]
    # as a twin with [shadow_redundancy] servers = ["MBX01", ...] names them (state/names.py)
    command = ev.RedeliveryCommand(command_id="cmd-1", holder=copy.node.upper(), primary_server="MBX01",
                                   message=copy.message, reason=ev.CommandReason.PRIMARY_HEARTBEAT_TIMEOUT,
                                   decided_at_ms=int(time.time() * 1000))
    producer = kafka_clients.producer(kafka_bootstrap)
    produce(producer, topics.commands, command)
    producer.produce(topics.commands, value=b"garbage")  # ignored, not fatal
    produce(producer, topics.commands, command)  # a repeat: obeyed once
    producer.flush(10)

    def promoted(found):
        return [e for e in found if isinstance(e, ev.ShadowPromoted) and "cmd-1" in e.reason]

    after = read_events(kafka_bootstrap, topics.events, promoted, seconds=30)
    runner.join(40)
    assert [(e.node, e.message.internal_id) for e in promoted(after)] == [(copy.node, copy.message.internal_id)]
    assert outcome["result"].commands_obeyed == 1
    resubmitted = [e for e in after if isinstance(e, ev.MessageReceived) and e.node == copy.node
                   and e.message.message_id == copy.message.message_id]
    assert resubmitted, "the holder took the message as its own and sent it on"


def test_live_nodes_refuse_a_commands_topic_the_broker_does_not_have(kafka_bootstrap, topics):
    """Before: they subscribed to no partition and never heard a command; now nothing is published."""
    missing = f"no.such.commands.{uuid.uuid4().hex}"
    with pytest.raises(NoSuchTopic, match=rf"{missing}: no such topic at {kafka_bootstrap}"):
        live(topology(duration="00:00:05"), 5, kafka_bootstrap, topics.events, missing, seconds=5)
