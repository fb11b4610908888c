"""A real twin run with `twin.json_topics`: every alert and command also on `<topic>.json`, in the
contract's JSON Lines form; `alerts tail`, `commands tail`, `record` and `alerts route` (to a real
HTTP receiver) read the same run."""

from __future__ import annotations

import dataclasses
import json
import uuid

from confluent_kafka import Consumer

from infra.topics import json_topic
from producers.readable import line
from producers.recorder import record
from producers.recording import read_recorded
from schemas import jsonl
from schemas.codec import encode
from schemas.events import Alert, AlertMessage, AlertType, MessageRef, Severity
from shadowtwin.cli import main
from streaming.app import TwinApplication
from streaming.json_copies import json_value
from tests.producers.test_alert_router import Receiver
from tests.streaming.test_twin import (
    collect, expected_ids, final_tick, publish, twin_settings, world_events, world_servers,
)


def json_records(bootstrap: str, topic: str, expected: int) -> list[dict]:
    client = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex, "auto.offset.reset": "earliest"})
    client.subscribe([topic])
    found: list[dict] = []
    try:
        for _ in range(120):
            found += [json.loads(m.value()) for m in client.consume(100, 0.5) if m.error() is None]
            if len(found) >= expected:
                break
    finally:
        client.close()
    return found


def test_alerts_and_commands_also_as_json_and_readable(settings, spark, kafka_bootstrap, topics, tmp_path,
                                                       monkeypatch, capsys):
    events = world_events()
    alerts, commands = expected_ids(events)
    publish(kafka_bootstrap, topics.events, [*events, final_tick(events)])
    twin_conf = twin_settings(settings, kafka_bootstrap, topics, servers=world_servers())
    twin_conf = dataclasses.replace(twin_conf, twin=dataclasses.replace(twin_conf.twin, json_topics=True))
    with TwinApplication(twin_conf, spark=spark, ticks=False, checkpoint_dir=tmp_path / "checkpoint",
                         say=lambda _: None):
        got = collect(kafka_bootstrap, [topics.alerts, topics.commands],
                      lambda g: len(g[topics.alerts]) >= len(alerts) and len(g[topics.commands]) >= len(commands))
        as_json = {t: json_records(kafka_bootstrap, json_topic(t), len(got[t])) for t in (topics.alerts, topics.commands)}
    assert {a.alert_id for a in got[topics.alerts]} == alerts
    for topic in (topics.alerts, topics.commands):
        assert sorted(as_json[topic], key=json.dumps) == sorted((jsonl.to_json(r) for r in got[topic]), key=json.dumps)
        assert [jsonl.from_json(obj) for obj in as_json[topic]], "the JSON copies read back as the contract's records"

    # the readable forms, from the same run
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", kafka_bootstrap)
    monkeypatch.setenv("SHADOWTWIN_TOPICS_DEAD_LETTERS", topics.dead_letters)  # alerts route sets refused ones there
    capsys.readouterr()
    assert main(["alerts", "tail", "--from-beginning", "--topic", topics.alerts]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert sorted(printed) == sorted(line(a) for a in got[topics.alerts])
    assert any("QUEUE_DATABASE_CHANGED_SHADOWS_PROMOTED" in p for p in printed)
    assert main(["commands", "tail", "--from-beginning", "--json", "--topic", topics.commands]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert sorted(json.loads(p)["command_id"] for p in printed) == sorted(commands)
    assert main(["commands", "tail", "-n", "1", "--topic", topics.commands]) == 0
    assert 1 <= len(capsys.readouterr().out.splitlines()) <= topics.commands_partitions, "the last one per partition"

    # record: the alerts topic, which it used to refuse record by record as "wrong schema"
    for suffix in (".avro", ".jsonl"):
        outcome = record(kafka_bootstrap, topics.alerts, tmp_path / f"alerts{suffix}", from_beginning=True,
                         seconds=60, schema=None)
        assert outcome.written == len(got[topics.alerts]) and not outcome.undecodable and outcome.reached_end
        assert "Alert records" in outcome.describe()
        assert sorted(a.alert_id for a, _ in read_recorded(tmp_path / f"alerts{suffix}", "Alert")) == sorted(alerts)

    # alerts route, from the command line, to an Alertmanager and a webhook on a real HTTP receiver
    receiver = Receiver()
    receiver.start()
    try:
        base = f"http://127.0.0.1:{receiver.port}"
        assert main(["alerts", "route", "--alertmanager", base, "--webhook", base + "/hook", "--topic", topics.alerts,
                     "--seconds", "15"]) == 0
        assert f"routed {len(alerts)} alerts" in capsys.readouterr().out
        hooked = receiver.at("/hook")
        assert sorted(h["alert"]["alert_id"] for h in hooked if h["status"] == "firing") == sorted(alerts)
        fired = [a for body in receiver.at("/api/v2/alerts") for a in body if a["labels"]["alert_id"] in alerts]
        assert {a["labels"]["alertname"] for a in fired} == {a.type.value for a in got[topics.alerts]}
    finally:
        receiver.stop()


def test_the_query_writes_an_alerts_json_copy_byte_for_byte_as_the_twin_publishes_its_own(spark):
    """The twin publishes its own alerts (LATE_EVENTS, EVENTS_LOST) from Python (`jsonl.json_copy`), its
    query's from the JVM (`json_value`): the two write one JSON text, non-ASCII, nulls and all."""
    alert = Alert(alert_id="a1", type=AlertType.MESSAGE_AT_RISK, severity=Severity.CRITICAL,
                  servers=("mbx01", "mbx02"), reason='Zoë\'s "queue"\n\tgone: 5 € \\ / \u2028',
                  messages=(AlertMessage(MessageRef("<a@contoso.com>", "1234"), ("zoë@fabrikam.com",)),
                            AlertMessage(MessageRef("<b@contoso.com>", "1235", "f1"))),
                  decided_at_ms=1_795_312_800_123)
    frame = spark.createDataFrame([(encode(alert),)], "value binary")
    (row,) = frame.select(json_value(Alert).cast("binary").alias("copy")).collect()
    assert bytes(row.copy) == jsonl.json_copy(alert)
