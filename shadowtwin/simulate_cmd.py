"""`shadowtwin simulate`: the topology simulator from the command line (see producers/simulator/)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from datetime import timedelta
from pathlib import Path

from infra.settings import Settings
from infra.signals import Stop, stop_on_signals
from producers.recording import check_writable, writable_file
from producers.simulator import run as runs
from producers.simulator.topology import DEFAULT_TOPOLOGY, load_topology
from producers.simulator.mtl_writer import to_mtl
from shadowtwin.arguments import SECONDS, duration_option, events_topic, speed_option, topic
from schemas.convert import is_avro
from schemas.jsonl import iso_time
from shadowtwin.errors import UsageError
from shadowtwin.kafka_options import PARENT as KAFKA_OPTIONS
from state.clock_guard import out_of_range


def add_parser(commands) -> None:
    simulate = commands.add_parser(
        "simulate", help="simulate a topology's servers, workload and faults", parents=[KAFKA_OPTIONS],
        description="Run the topology simulator: servers that make shadow copies, query their primaries and"
                    " promote on their own, a daily workload and a fault schedule, all from a topology file."
                    " Writes the events to FILE (.avro or .jsonl, the same bytes for the same seed) and the ground"
                    " truth beside it; or publishes them to Kafka (--to-kafka), accelerated or in real time;"
                    " --live runs from now in real time and lets the nodes obey the twin's redelivery commands.")
    simulate.add_argument("--topology", default=str(DEFAULT_TOPOLOGY), help="topology file (default: %(default)s)")
    simulate.add_argument("--seed", type=int, default=7, help="random seed: one seed, one run (default: 7)")
    simulate.add_argument("--out", metavar="FILE", help="events file (default: simulation-SEED.avro); with"
                                                        " --format exchange-mtl, the folder of the logs")
    simulate.add_argument("--format", choices=["events", "exchange-mtl"], default="events", type=str.lower,
                          help="events: the contract's events (default); exchange-mtl: the organisation's"
                               " message-tracking logs, a folder per server (producers/simulator/mtl_writer.py),"
                               " and the ground truth in FOLDER/truth.jsonl")
    simulate.add_argument("--truth", metavar="FILE", help="ground-truth file (default: beside the events,"
                                                          " NAME.truth.jsonl)")
    simulate.add_argument("--duration", help="override the topology's duration (e.g. 02:00:00, 90m)")
    simulate.add_argument("--to-kafka", action="store_true", help="publish to the events topic instead of a file")
    simulate.add_argument("--to", "--topic", dest="topic", metavar="TOPIC", type=topic,
                          help="with --to-kafka or --live: the topic to publish to, as replay's, ingest's and"
                               " probe's --to (default: the events topic)")
    simulate.add_argument("--speed", default=None,
                          help="with --to-kafka: seconds of simulated time per second, or max (default: max;"
                               " 1 with --live)")
    simulate.add_argument("--live", action="store_true",
                          help="start now, in real time, and obey the redelivery commands the twin sends")
    simulate.add_argument("--seconds", type=SECONDS, help="with --live: stop after this long (default: Ctrl-C, or"
                                                        " when all mail is delivered after the topology's duration)")
    simulate.set_defaults(run=run)


def run(settings: Settings, args: argparse.Namespace) -> int:
    _refuse_unused_options(args)
    topology = load_topology(args.topology)  # the file's own errors, named
    if args.duration is not None:
        seconds = duration_option(args.duration, "--duration", whole_ms=True)
        topology = dataclasses.replace(topology, duration_ms=int(seconds * 1000))
    if not args.live:  # a live run starts now
        _refuse_times_out_of_range(topology, args.topology or DEFAULT_TOPOLOGY)
    speed = speed_option(args.speed or ("1" if args.live else "max"))
    topics, kafka = settings.topics, settings.kafka
    to = events_topic(topics, args.topic)
    truth = _truth_file(Path(args.truth)) if args.truth else None  # known now, not after the run
    progress = lambda line: print(line, flush=True)  # noqa: E731
    stop = stop_on_signals()
    if args.live:
        outcome = runs.live(topology, args.seed, kafka, to,
                            topics.commands, speed=speed or 1.0, truth_path=truth, progress=progress,
                            seconds=args.seconds, stop=stop, delivery_timeout_s=kafka.delivery_timeout_seconds)
    elif args.to_kafka:
        outcome = runs.to_kafka(topology, args.seed, kafka, to,
                                speed=speed, truth_path=truth, progress=progress, stop=stop,
                                delivery_timeout_s=kafka.delivery_timeout_seconds)
    elif args.format == "exchange-mtl":
        return _to_logs(topology, args, _apart(truth, Path(args.out or f"simulation-{args.seed}-logs")), stop)
    else:
        out = check_writable(Path(args.out or f"simulation-{args.seed}.avro"))
        truth = _apart(truth, out) or writable_file(runs.truth_path_for(out))
        outcome = runs.to_file(topology, args.seed, out, truth, stop=stop)
        print(f"events: {out}")
    print(outcome.describe())
    if outcome.failure is not None:
        print(outcome.failure, file=sys.stderr)
        return 1
    return stop.exit_status()



def _truth_file(truth: Path) -> Path:
    """--truth, refused when named as an Avro recording: the truth is JSON Lines, and such a name is likely a
    recording's, which it would overwrite."""
    if is_avro(truth):
        raise UsageError(f"--truth {truth}: the ground truth is JSON Lines, not Avro: name it NAME.truth.jsonl (the"
                         " events go to --out)")
    return writable_file(truth)


def _apart(truth: Path | None, out: Path) -> Path | None:
    """--truth, refused when it names the events' own file or folder: the truth would overwrite the events."""
    if truth is not None and truth.resolve() == out.resolve():
        raise UsageError(f"--truth {truth}: the same path as the events (--out {out}): the ground truth would"
                         " overwrite them; name another file, or leave --truth out for NAME.truth.jsonl beside them")
    return truth


def _refuse_times_out_of_range(topology, path) -> None:
    """A start and duration whose event times the twin and whatif would leave out (state.clock_guard) is refused."""
    for ms in (topology.start_ms, topology.start_ms + topology.duration_ms):
        if out_of_range(ms):
            raise UsageError(f"{path}: organisation.start {iso_time(topology.start_ms)} and duration"
                             f" {timedelta(milliseconds=topology.duration_ms)}: {out_of_range(ms)}")


def _refuse_unused_options(args: argparse.Namespace) -> None:
    """An option the run would not use is a mistake to say, not to ignore (`--seconds 5` on a file run
    would simulate the whole day)."""
    publishes = args.to_kafka or args.live
    if args.format == "exchange-mtl" and publishes:
        raise UsageError("--format exchange-mtl writes files: it cannot be combined with --to-kafka or --live")
    unused = [(option, "--to-kafka or --live") for option, value in (("--speed", args.speed), ("--to", args.topic))
              if value is not None and not publishes]
    unused += [("--seconds", "--live")] if args.seconds is not None and not args.live else []
    unused += [("--out", "a file run (--to-kafka and --live publish)")] if args.out is not None and publishes else []
    for option, where in unused:
        raise UsageError(f"{option} is only for {where}")


def _to_logs(topology, args: argparse.Namespace, truth: Path | None, stop: Stop) -> int:
    """The logs' run; Ctrl-C or SIGTERM ends it early, as a file run's (they were taken and ignored)."""
    folder = Path(args.out or f"simulation-{args.seed}-logs")
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise UsageError(f"--out {folder}: expected a new or empty folder for the logs")
    folder.mkdir(exist_ok=True)  # in a folder that exists: a missing one is refused, as for every output
    events, lines, simulation = to_mtl(topology, args.seed, folder, truth, stop=stop.is_set)
    results = ", ".join(f"{k} {v}" for k, v in simulation.truth.counts().items() if v)
    done = (f"interrupted after {events:,} events, up to simulated time {iso_time(simulation.now)} of"
            f" {iso_time(simulation.end_ms)}" if stop.is_set() else f"simulated {events:,} events")
    print(f"{done}; wrote {lines:,} message-tracking lines to {folder}; messages: {results}")
    print(f"ground truth: {truth or folder / 'truth.jsonl'}")
    return stop.exit_status()
