"""Running a simulation: to a file, to Kafka (accelerated or real time), or live with the twin.

    outcome = to_file(topology, seed=7, path=Path("simulation-7.avro"))     # + simulation-7.truth.jsonl
    outcome = to_kafka(topology, seed=7, bootstrap=..., topic=..., speed=None)
    outcome = live(topology, seed=7, bootstrap=..., topic=..., commands_topic=...)

A file run is reproducible byte for byte: the events come from the seed alone and the Avro
sync marker is derived from it. An Avro file is written by a second process from the events made
flat (`Simulation(flat=True)`, `producers.simulator.writer`: the simulation runs on one core, the
encoding and the writing on the other), or, on one core, from the events' bodies, which the
simulation encodes as it goes (`Simulation(encoded=True)`); neither makes the events. Published as
fast as possible, the events are made flat the same way, and a second process encodes and
produces them (`producers.simulator.sender`); paced and live runs publish from this process. Both splits
run with the cyclic garbage collector paused (the simulation makes no cycles: what it drops is
freed by reference counting), what it keeps handed to the oldest generation after (not walked
when the collector resumes). A live run starts at the wall clock's now, paces events in real
time (or `speed` times faster) and lets the nodes obey the twin's redelivery commands.
"""

from __future__ import annotations

import hashlib
import queue
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from infra.kafka import consumer, partitions_of
from producers.publisher import DEFAULT_DELIVERY_TIMEOUT_S
from producers.recording import check_name, write_events
from producers.replayer import publish
from producers.simulator import sender, writer
from producers.simulator.engine import Simulation
from producers.simulator.topology import Topology
from state import collector
from schemas import container
from schemas.convert import is_avro
from schemas.jsonl import iso_time


@dataclass
class SimulationOutcome:
    events: int
    seconds: float
    truth_path: Path | None
    results: dict[str, int]
    drained: bool
    commands_obeyed: int = 0
    interrupted: bool = False
    failure: str | None = None  # how many events the broker did not acknowledge, and why
    reached_ms: int | None = None  # interrupted: the simulated time it got to, of the run's end
    end_ms: int | None = None

    def describe(self) -> str:
        rate = self.events / self.seconds if self.seconds > 0 else 0.0
        results = ", ".join(f"{k} {v}" for k, v in self.results.items() if v)
        reached = (f", up to simulated time {iso_time(self.reached_ms)} of {iso_time(self.end_ms)}"
                   if self.interrupted and self.reached_ms is not None and self.end_ms is not None else "")
        lines = [f"{'interrupted after' if self.interrupted else 'simulated'} {self.events:,} events in"
                 f" {self.seconds:.1f} s ({rate:,.0f} events/s){reached}; messages: {results}"]
        if self.commands_obeyed:
            lines.append(f"redelivery commands obeyed: {self.commands_obeyed}")
        if not self.drained:
            lines.append("some mail was still queued or held when the simulation ended (see 'pending')")
        if self.truth_path is not None:
            lines.append(f"ground truth: {self.truth_path}")
        return "\n".join(lines)


def truth_path_for(path: Path) -> Path:
    """simulation-7.avro -> simulation-7.truth.jsonl; only the recording's suffix goes (day.seed7.avro ->
    day.seed7.truth.jsonl, day.truth.jsonl -> day.truth.truth.jsonl): never another run's truth, nor the events file."""
    return path.with_name(path.name.removesuffix(path.suffix) + ".truth.jsonl")


def sync_marker(seed: int) -> bytes:
    return hashlib.blake2b(f"shadowtwin-simulate-{seed}".encode(), digest_size=16).digest()


def to_file(topology: Topology, seed: int, path: Path, truth_path: Path | None = None, *,
            stop: threading.Event | None = None) -> SimulationOutcome:
    """Write the simulation's events; setting `stop` ends the file early, still a valid recording."""
    avro = is_avro(check_name(path))
    forked = avro and writer.available()
    simulation = Simulation(topology, seed, encoded=avro and not forked, flat=forked)
    if forked:
        container.flat_writers()  # compiled before the clock starts, as the simulation's own flatteners are
    stop = stop or threading.Event()
    started = time.perf_counter()
    with collector.paused(aged=True):
        if forked:
            count = writer.write_forked(path, simulation.events(), sync=sync_marker(seed), stop=stop.is_set)
        else:
            count = write_events(path, simulation.events(), sync=sync_marker(seed), encoded=avro, stop=stop.is_set)
    seconds = time.perf_counter() - started
    if stop.is_set():
        simulation.stopped_early()
    truth_path = truth_path or truth_path_for(path)
    simulation.truth.write(truth_path, seed, count)
    return SimulationOutcome(count, seconds, truth_path, simulation.truth.counts(), simulation.drained,
                             interrupted=stop.is_set(), reached_ms=simulation.now, end_ms=simulation.end_ms)


def to_kafka(topology: Topology, seed: int, bootstrap: str, topic: str, *, speed: float | None = None,
             truth_path: Path | None = None, progress: Callable[[str], None] | None = None,
             simulation: Simulation | None = None, stop: threading.Event | None = None,
             delivery_timeout_s: float = DEFAULT_DELIVERY_TIMEOUT_S) -> SimulationOutcome:
    """Publish a simulation's events; `speed` None is as fast as possible, 1 real time."""
    if speed is None and simulation is None and writer.available():  # encoded and produced by a second process
        simulation, stop = Simulation(topology, seed, flat=True), stop or threading.Event()
        with collector.paused(aged=True):
            outcome = sender.publish_forked(bootstrap, topic, simulation.events(), stop=stop.is_set,
                                            progress=progress, delivery_timeout_s=delivery_timeout_s)
    else:
        simulation = simulation or Simulation(topology, seed)
        outcome = publish(bootstrap, topic, simulation.events(), speed=speed, progress=progress, stop=stop,
                          delivery_timeout_s=delivery_timeout_s)
    if outcome.interrupted:
        simulation.stopped_early()
    if truth_path is not None:
        simulation.truth.write(truth_path, seed, outcome.sent)
    return SimulationOutcome(outcome.sent, outcome.seconds, truth_path, simulation.truth.counts(),
                             simulation.drained, simulation.commands_obeyed, outcome.interrupted, outcome.failure(),
                             outcome.last_event_ms, simulation.end_ms)


def live(topology: Topology, seed: int, bootstrap: str, topic: str, commands_topic: str, *, speed: float = 1.0,
         truth_path: Path | None = None, progress: Callable[[str], None] | None = None,
         seconds: float | None = None, stop: threading.Event | None = None,
         delivery_timeout_s: float = DEFAULT_DELIVERY_TIMEOUT_S) -> SimulationOutcome:
    """Real time from now (for at most `seconds`, or until `stop` is set); the nodes act on the
    redelivery commands addressed to them."""
    now_ms = int(time.time() * 1000)
    simulation = Simulation(topology, seed, start_ms=now_ms)
    simulation.inbox = queue.SimpleQueue()
    simulation.clock = lambda: now_ms + int((time.time() * 1000 - now_ms) * speed)
    listener = CommandListener(bootstrap, commands_topic, simulation.inbox)
    listener.start()
    stop, timer = stop or threading.Event(), None
    if seconds is not None:
        timer = threading.Timer(seconds, stop.set)
        timer.daemon = True
        timer.start()
    try:
        return to_kafka(topology, seed, bootstrap, topic, speed=speed, truth_path=truth_path, progress=progress,
                        simulation=simulation, stop=stop, delivery_timeout_s=delivery_timeout_s)
    finally:
        if timer is not None:
            timer.cancel()
        listener.stop()


class CommandListener(threading.Thread):
    """Reads redelivery commands from the commands topic (only those issued from now on)."""

    def __init__(self, bootstrap: str, topic: str, inbox: queue.SimpleQueue):
        super().__init__(name="simulator-commands", daemon=True)
        from confluent_kafka import OFFSET_END, TopicPartition

        self._consumer = consumer(bootstrap, f"shadowtwin-simulator-{id(self)}")
        try:
            partitions = partitions_of(self._consumer, topic, kafka=bootstrap)  # NoSuchTopic: would read nothing
        except BaseException:
            self._consumer.close()
            raise
        self._consumer.assign([TopicPartition(topic, p, OFFSET_END) for p in partitions])
        self._inbox = inbox
        self._stopping = threading.Event()
        self.received = 0

    def run(self) -> None:
        from schemas.codec import default_codec
        from schemas.events import RedeliveryCommand

        codec = default_codec()
        try:
            while not self._stopping.is_set():
                message = self._consumer.poll(0.2)
                if message is None or message.error():
                    continue
                try:
                    record = codec.decode(message.value())
                except Exception:  # noqa: BLE001 - not ours to judge: the twin's dead letters do that
                    continue
                if isinstance(record, RedeliveryCommand):
                    self.received += 1
                    self._inbox.put(record)
        finally:
            self._consumer.close()

    def stop(self) -> None:
        self._stopping.set()
        self.join(timeout=10)
