"""Benchmark: how fast the topology simulator produces events, alone, to a file and to Kafka.

    .venv/bin/python -m benchmarks.simulator [--duration 06:00:00] [--seed 7] [--no-kafka] [--kafka-runs 2]

Runs the example topology (conf/topology.toml, its workload and fault schedule) for
`--duration` of simulated time three ways: drained in memory (the engine alone), written to
an Avro file (what `shadowtwin simulate` does: on two cores, encoded and written by a second
process), and published to a fresh topic on the configured broker (the embedded one is started
if nothing answers), `--kafka-runs` times: the first run meets a broker just started (its JVM not
yet compiled hot), the later ones a warm broker, as a broker that has run for a while is. Prints
events/s for each.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from pathlib import Path

from producers.simulator.engine import Simulation
from producers.simulator.run import to_file, to_kafka
from producers.simulator.topology import load_topology
from producers.simulator.topology import DEFAULT_TOPOLOGY
from infra.settings import load_settings
from infra.broker import start_if_needed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", default="06:00:00", help="simulated time (default: %(default)s)")
    parser.add_argument("--start", default="2026-01-05T08:00:00Z", help="simulated start (the busy hours)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-kafka", action="store_true", help="skip the Kafka measurement")
    parser.add_argument("--kafka-runs", type=int, default=2, help="publishing runs, each to a fresh topic")
    args = parser.parse_args(argv)
    topology = load_topology(DEFAULT_TOPOLOGY, {"organisation": {
        "domain": "contoso.com", "start": args.start, "duration": args.duration, "users_per_database": 500}})

    started = time.perf_counter()
    count = sum(1 for _ in Simulation(topology, args.seed).events())
    alone = time.perf_counter() - started
    print(f"engine alone:  {count:>10,} events in {alone:6.1f} s = {count / alone:>9,.0f} events/s")

    with tempfile.TemporaryDirectory() as folder:
        outcome = to_file(topology, args.seed, Path(folder) / "bench.avro")
        size = (Path(folder) / "bench.avro").stat().st_size
        print(f"to a file:     {outcome.events:>10,} events in {outcome.seconds:6.1f} s ="
              f" {outcome.events / outcome.seconds:>9,.0f} events/s ({size / outcome.events:.1f} bytes/event, deflate)")

    if args.no_kafka:
        return
    from confluent_kafka.admin import AdminClient, NewTopic

    settings = load_settings()
    broker = start_if_needed(settings, print)
    try:
        bootstrap = settings.kafka.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
        for run in range(1, args.kafka_runs + 1):
            topic = f"bench.simulator.{uuid.uuid4().hex[:8]}"
            admin.create_topics([NewTopic(topic, 4, 1)])[topic].result(30)
            while not admin.list_topics(topic, timeout=10).topics[topic].partitions:  # a broker just started
                time.sleep(0.1)  # lists a topic a moment after creating it; the producer checks it is there
            outcome = to_kafka(topology, args.seed, bootstrap, topic, speed=None)
            which = "the broker just started" if run == 1 and broker is not None else f"run {run}"
            print(f"to Kafka:      {outcome.events:>10,} events in {outcome.seconds:6.1f} s ="
                  f" {outcome.events / outcome.seconds:>9,.0f} events/s (4 partitions, acknowledged; {which})")
    finally:
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    main()
