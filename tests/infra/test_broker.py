"""The embedded broker: start is idempotent, status tells the truth, stop leaves no process."""

import dataclasses
import os
from pathlib import Path

import pytest

from infra.broker import BrokerError, EmbeddedKafka
from tests.conftest import free_port

pytestmark = pytest.mark.integration


def java_processes_using(folder: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if b"kafka.Kafka" in cmdline and str(folder).encode() in cmdline:
                found.append(int(entry.name))
    return found


def test_start_twice_stop_and_nothing_left(settings, tmp_path):
    embedded = dataclasses.replace(
        settings.kafka.embedded, port=free_port(), controller_port=free_port(), data_dir=tmp_path / "kafka"
    )
    broker = EmbeddedKafka(embedded, settings.jars.cache_dir)
    assert not broker.status().running
    try:
        first = broker.start()
        again = broker.start()
        assert first.running and again.running
        assert first.pid == again.pid, "a second start must reuse the running broker"
        assert java_processes_using(tmp_path) == [first.pid]
        assert (tmp_path / "kafka" / "storage" / "meta.properties").exists(), "storage formatted on first use"
    finally:
        assert broker.stop() is True
    assert not broker.status().running
    assert java_processes_using(tmp_path) == []
    assert broker.stop() is False


def test_a_taken_port_is_refused_with_a_clear_error(settings, tmp_path, kafka_bootstrap):
    taken = int(kafka_bootstrap.rsplit(":", 1)[1])
    embedded = dataclasses.replace(settings.kafka.embedded, port=taken, controller_port=free_port(), data_dir=tmp_path)
    with pytest.raises(BrokerError, match=f"port {taken} is taken"):
        EmbeddedKafka(embedded, settings.jars.cache_dir).start()
    assert java_processes_using(tmp_path) == []
    assert os.listdir(tmp_path) == []
