"""A simulation's Avro file written by a forked process: the same bytes as written in one process."""

from __future__ import annotations

import pytest

from producers.recording import read_events
from producers.simulator import run, writer
from producers.simulator.engine import Simulation
from tests.producers.simulator.scenarios import topology

FAULTS = [{"kind": "crash", "server": "mbx02", "at": "00:05:00", "duration": "00:05:00", "restart": "new_database"},
          {"kind": "partition", "servers": ["mbx01", "mbx03"], "at": "00:03:00", "duration": "00:04:00"},
          {"kind": "clock_skew", "server": "mbx03", "at": "00:02:00", "duration": "00:10:00", "offset": "00:00:05"}]
TOPOLOGY = topology(FAULTS, duration="00:15:00", rate=2.0, hubs=True)


@pytest.mark.skipif(not writer.available(), reason="needs fork and two cores")
@pytest.mark.parametrize("seed", [5, 9])
def test_the_file_a_second_process_writes_is_the_one_written_in_one_process(tmp_path, monkeypatch, seed):
    forked = run.to_file(TOPOLOGY, seed, tmp_path / "forked.avro")
    monkeypatch.setattr(writer, "available", lambda: False)
    alone = run.to_file(TOPOLOGY, seed, tmp_path / "alone.avro")
    assert forked.events == alone.events > 2 * writer.BATCH
    assert (tmp_path / "forked.avro").read_bytes() == (tmp_path / "alone.avro").read_bytes()
    assert (tmp_path / "forked.truth.jsonl").read_bytes() == (tmp_path / "alone.truth.jsonl").read_bytes()
    assert list(read_events(tmp_path / "forked.avro")) == list(Simulation(TOPOLOGY, seed).events())


def test_a_stop_ends_the_file_after_a_batch_valid(tmp_path):
    asked = []
    events = Simulation(TOPOLOGY, 5, flat=True).events()
    count = writer.write_forked(tmp_path / "cut.avro", events, sync=bytes(16), stop=lambda: asked.append(1) or True)
    assert count == writer.BATCH and len(asked) == 1
    assert list(read_events(tmp_path / "cut.avro")) == list(Simulation(TOPOLOGY, 5).events())[:writer.BATCH]


def test_a_failing_simulation_leaves_the_file_of_the_batches_sent_and_raises(tmp_path):
    def failing():
        yield from list(Simulation(TOPOLOGY, 5, flat=True).events())[:2 * writer.BATCH + 10]
        raise ZeroDivisionError("the simulation's own mistake")

    with pytest.raises(ZeroDivisionError, match="own mistake"):
        writer.write_forked(tmp_path / "failed.avro", failing(), sync=bytes(16))
    assert list(read_events(tmp_path / "failed.avro")) == list(Simulation(TOPOLOGY, 5).events())[:2 * writer.BATCH]


def test_what_the_writing_process_cannot_do_is_raised_in_the_caller(tmp_path):
    events = Simulation(TOPOLOGY, 5, flat=True).events()
    with pytest.raises(FileNotFoundError, match="missing"):
        writer.write_forked(tmp_path / "missing" / "run.avro", events, sync=bytes(16))
    bad = (0, "e", 1, "n", "p", None, None, "\ud800 not text", "b", 0, True, True, "qdb")  # a NodeStarted: no UTF-8
    with pytest.raises(UnicodeEncodeError):
        writer.write_forked(tmp_path / "bad.avro", iter([bad]), sync=bytes(16))
