"""Real lab processes for the relay tests: a topology on free loopback ports, torn down with nothing left."""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest

from producers.relay.lab import Lab
from producers.relay.topology import load_topology
from tests.conftest import free_port


def topology_text(run_dir, nodes: dict[str, str], parameters: dict[str, object] | None = None,
                  **lab: object) -> str:
    """A lab topology file: `nodes` maps node name -> DAG, every port free; a dict in `lab` is a table
    (`transport_service`: a next hop is tried again every second unless the test says otherwise)."""
    values = {"run_dir": str(run_dir), "next_hop_delay_seconds": 1.0, "smtp_timeout_seconds": 3.0, **lab}
    values["transport_service"] = {"transient_failure_retry_interval": "1s", **values.get("transport_service", {})}
    tables = {k: values.pop(k) for k in [k for k, v in values.items() if isinstance(v, dict)]}
    lines = [f"{k} = {_value(v)}" for k, v in values.items()]
    lines += ["[sink]", f"port = {free_port()}"]
    for name, dag in nodes.items():
        lines += ["[[nodes]]", f'name = "{name}"', f"port = {free_port()}", f'dag = "{dag}"']
    sr = {"shadow_heartbeat_frequency": "1s", "shadow_resubmit_time_span": "10s", **(parameters or {})}
    lines += _table("shadow_redundancy", sr)
    for name, table in tables.items():
        lines += _table(name, table)
    return "\n".join(lines) + "\n"


def _value(v) -> str:
    return str(v).lower() if isinstance(v, bool) else json.dumps(v)


def _table(name: str, values: dict) -> list[str]:
    lines = [f"[{name}]"] + [f"{k} = {_value(v)}" for k, v in values.items() if not isinstance(v, dict)]
    for key, value in values.items():
        if isinstance(value, dict):
            lines += _table(f"{name}.{key}", value)
    return lines


@pytest.fixture
def make_lab(tmp_path, kafka_bootstrap, topics):
    labs: list[Lab] = []

    def make(nodes: dict[str, str], parameters: dict | None = None, **lab) -> Lab:
        run_dir = tmp_path / f"lab-{uuid.uuid4().hex[:6]}"
        path = tmp_path / f"{run_dir.name}.toml"
        path.write_text(topology_text(run_dir, nodes, parameters, **lab))
        made = Lab(load_topology(path), path, kafka_bootstrap, topics)
        labs.append(made)
        return made

    yield make
    for lab in labs:
        lab.down()
        assert lab.leftover_pids() == [], "a lab process outlived its test"


def wait_until(predicate, timeout_s: float, step_s: float = 0.2):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step_s)
    return predicate()


def read_topic(bootstrap: str, topic: str, seconds: float = 4.0, until=None, max_s: float = 30.0) -> list:
    """Every record of a topic, decoded (read until `until(records)`, quiet for `seconds`, or `max_s`)."""
    from confluent_kafka import Consumer

    from schemas.codec import default_codec

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    codec, records, quiet_since = default_codec(), [], time.monotonic()
    give_up = quiet_since + max_s
    try:
        while time.monotonic() - quiet_since < seconds and time.monotonic() < give_up and not (until and until(records)):
            message = consumer.poll(0.3)
            if message is not None and not message.error():
                records.append(codec.decode(message.value()))
                quiet_since = time.monotonic()
    finally:
        consumer.close()
    return records


def raw_topic_bytes(bootstrap: str, topic: str, seconds: float = 3.0, max_s: float = 30.0) -> bytes:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    chunks, quiet_since = [], time.monotonic()
    give_up = quiet_since + max_s
    try:
        while time.monotonic() - quiet_since < seconds and time.monotonic() < give_up:
            message = consumer.poll(0.3)
            if message is not None and not message.error():
                chunks.append((message.key() or b"") + b"\n" + message.value())
                quiet_since = time.monotonic()
    finally:
        consumer.close()
    return b"\n".join(chunks)


def settled(events: list, config, after_ms: int = 3_600_000):
    """The reference model over `events`, with event time run on an hour past the last one: every
    short-lived memory (such as the clock-skew allowance for closed messages) has lapsed by then."""
    from state.replay import replay

    return replay(events, config, until_ms=max(e.event_time_ms for e in events) + after_ms)


class Collector(threading.Thread):
    """Reads topics in the background, decoded, into `records[topic]` (for waiting on what arrives)."""

    def __init__(self, bootstrap: str, topics: list[str]):
        super().__init__(daemon=True)
        from confluent_kafka import Consumer

        self._consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                                   "auto.offset.reset": "earliest", "enable.auto.commit": False})
        self._consumer.subscribe(topics)
        self.records: dict[str, list] = {t: [] for t in topics}
        self.arrived_at: dict[str, list[float]] = {t: [] for t in topics}
        self._stopping = threading.Event()

    def run(self) -> None:
        from schemas.codec import default_codec

        codec = default_codec()
        try:
            while not self._stopping.is_set():
                message = self._consumer.poll(0.2)
                if message is not None and not message.error():
                    self.records[message.topic()].append(codec.decode(message.value()))
                    self.arrived_at[message.topic()].append(time.time())
        finally:
            self._consumer.close()

    def stop(self) -> None:
        self._stopping.set()
        self.join(10)
