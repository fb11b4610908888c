"""A simulation to a file: the events the engine yields, encoded as it goes, with the collector paused."""

from __future__ import annotations

import gc
import weakref

from producers.recording import read_events
from producers.simulator import run
from producers.simulator.engine import Simulation
from schemas.codec import default_codec
from tests.producers.simulator.scenarios import topology

FAULTS = [{"kind": "crash", "server": "mbx02", "at": "00:05:00", "duration": "00:05:00", "restart": "new_database"},
          {"kind": "clock_skew", "server": "mbx03", "at": "00:02:00", "duration": "00:10:00", "offset": "00:00:05"}]
TOPOLOGY = topology(FAULTS, duration="00:15:00", rate=0.5, hubs=True)


def body_of(event) -> bytes:
    out = bytearray()
    default_codec().write_body(event, out)
    return bytes(out)


def test_an_encoded_run_yields_the_bodies_of_the_events_of_a_run():
    events = list(Simulation(TOPOLOGY, 5).events())
    bodies = list(Simulation(TOPOLOGY, 5, encoded=True).events())
    assert len({type(e) for e in events}) > 10
    assert bodies == [body_of(e) for e in events]


def test_a_file_holds_the_events_of_the_run_and_its_truth(tmp_path):
    simulation = Simulation(TOPOLOGY, 5)
    events = list(simulation.events())
    outcome = run.to_file(TOPOLOGY, 5, tmp_path / "run.avro")
    assert outcome.events == len(events)
    assert list(read_events(tmp_path / "run.avro")) == events
    assert outcome.results == simulation.truth.counts()
    jsonl = run.to_file(TOPOLOGY, 5, tmp_path / "run.jsonl")  # made of events, as before
    assert list(read_events(tmp_path / "run.jsonl")) == events and jsonl.events == len(events)
    assert (tmp_path / "run.truth.jsonl").read_bytes() == outcome.truth_path.read_bytes()


def test_the_collector_is_paused_while_simulating_and_running_after(tmp_path, monkeypatch):
    seen = []

    class Watched(Simulation):
        def events(self, drain_ms=None):
            for event in super().events(drain_ms):
                seen.append(gc.isenabled())
                yield event

    monkeypatch.setattr(run, "Simulation", Watched)
    assert gc.isenabled()
    run.to_file(TOPOLOGY, 5, tmp_path / "run.avro")
    assert seen and not any(seen)
    assert gc.isenabled()


def test_a_finished_simulation_is_freed_by_reference_counting():
    """to_file hands what the run kept to the oldest generation: a cycle there would wait for a full collection."""
    simulation = Simulation(TOPOLOGY, 5, encoded=True)
    gc.disable()
    try:
        assert sum(1 for _ in simulation.events()) > 0
        gone = weakref.ref(simulation)
        del simulation
        assert gone() is None
    finally:
        gc.enable()


class StopAfter:
    """A stop event that is set once it has been asked `n` times: a run stopped in its middle."""

    def __init__(self, n: int):
        self.n = n

    def is_set(self) -> bool:
        self.n -= 1
        return self.n < 0


def test_a_run_stopped_early_counts_what_it_had_not_finished_as_pending_not_lost(tmp_path):
    quiet = topology(duration="00:15:00", rate=2.0)  # no fault: nothing can be lost
    outcome = run.to_file(quiet, 5, tmp_path / "cut.jsonl", stop=StopAfter(2_000))
    assert outcome.interrupted
    assert outcome.results["lost"] == 0 and outcome.results["pending"] > 0, outcome.results
    whole = run.to_file(TOPOLOGY, 5, tmp_path / "whole.jsonl")
    assert not whole.interrupted and whole.results["pending"] == 0


class _StopAfter:
    """A stop asked once before each event: set once `count` events were taken."""

    def __init__(self, count: int):
        self.asked, self.count = 0, count

    def is_set(self) -> bool:
        self.asked += 1
        return self.asked > self.count


def test_a_run_stopped_between_any_two_events_reached_the_time_of_the_last_it_wrote(tmp_path):
    """Ctrl-C's summary says the simulated time the run reached. The events due before an action went out with the
    previous action's time (2ec2343), so a run stopped there said it reached a time up to 0.1 s before the last event
    it wrote (tests/shadowtwin/test_simulate_cmd.py's Ctrl-C test failed now and then)."""
    world = topology(duration="00:20:00", rate=2)
    for count in range(100, 3000, 97):
        outcome = run.to_file(world, 5, tmp_path / "run.jsonl", stop=_StopAfter(count))
        written = list(read_events(tmp_path / "run.jsonl"))
        assert len(written) == count and outcome.interrupted
        assert outcome.reached_ms >= max(e.event_time_ms for e in written), count
