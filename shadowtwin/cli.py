"""The `shadowtwin` command line: one entry point, a subcommand per task."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from infra.settings import ConfigError, Settings, load_settings


def _kafka(settings: Settings, args: argparse.Namespace) -> int:
    from infra.broker import EmbeddedKafka

    broker = EmbeddedKafka(settings.kafka.embedded, settings.jars.cache_dir)
    if args.action == "start":
        print(broker.start().describe())
    elif args.action == "stop":
        print("kafka stopped" if broker.stop() else "kafka was not running")
    else:
        status = broker.status()
        print(status.describe())
        return 0 if status.running else 3
    return 0


def _topics(settings: Settings, args: argparse.Namespace) -> int:
    from infra.topics import create_topics

    for outcome in create_topics(args.bootstrap or settings.kafka.bootstrap_servers, settings.topics):
        print(outcome.describe())
    return 0


def _jars(settings: Settings, args: argparse.Namespace) -> int:
    from infra import jars

    for jar_set in (jars.kafka_broker_jars(settings.kafka.embedded.version), jars.spark_connector_jars()):
        paths = jars.ensure(jar_set, settings.jars.cache_dir)
        print(f"{jar_set.name}: {len(paths)} jars in {jar_set.folder(settings.jars.cache_dir)}")
    return 0


def _demo(settings: Settings, args: argparse.Namespace) -> int:
    from shadowtwin.demo import run_demo

    return 0 if run_demo(settings, seconds=args.seconds) > 0 else 1


def _twin(settings: Settings, args: argparse.Namespace) -> int:
    import dataclasses

    from producers.relay.topology import load_topology
    from streaming.app import TwinApplication

    if args.bootstrap:
        settings = dataclasses.replace(settings, kafka=dataclasses.replace(settings.kafka,
                                                                            bootstrap_servers=args.bootstrap))
    if args.master:
        settings = dataclasses.replace(settings, spark=dataclasses.replace(settings.spark, master=args.master))
    if args.lab_topology:
        settings = dataclasses.replace(settings, shadow_redundancy=load_topology(args.lab_topology).shadow_redundancy)
    twin = TwinApplication(settings, ticks=False if args.no_ticks else None,
                           checkpoint_dir=Path(args.checkpoint).resolve() if args.checkpoint else None,
                           say=lambda line: print(line, flush=True))
    return twin.run(seconds=args.seconds)


def _whatif(settings: Settings, args: argparse.Namespace) -> int:
    from shadowtwin.whatif_cmd import run_whatif

    return run_whatif(settings, Path(args.file), args.set, args.compare, Path(args.out) if args.out else None)


def _record(settings: Settings, args: argparse.Namespace) -> int:
    from producers.interrupt import stop_on_interrupt
    from producers.recorder import record

    outcome = record(settings.kafka.bootstrap_servers, args.topic, Path(args.file), from_beginning=args.from_beginning,
                     seconds=args.seconds, count=args.count, stop=stop_on_interrupt())
    print(outcome.describe())
    return 0


def _replay(settings: Settings, args: argparse.Namespace) -> int:
    from producers.replayer import parse_speed, replay

    try:
        speed = parse_speed(args.speed)
    except ValueError as exc:
        print(f"shadowtwin replay: {exc}", file=sys.stderr)
        return 2
    outcome = replay(settings.kafka.bootstrap_servers, args.to or settings.topics.events, Path(args.file),
                     speed=speed, progress=lambda line: print(line, flush=True))
    print(outcome.describe())
    return 130 if outcome.interrupted else 0


def _ingest(settings: Settings, args: argparse.Namespace) -> int:
    from producers.interrupt import stop_on_interrupt
    from producers.mtl_ingest import KafkaSink, ingest

    sink = KafkaSink(settings.kafka.bootstrap_servers, args.to or settings.topics.events, settings.topics.dead_letters)
    try:
        counts = ingest(args.paths, sink, follow=args.follow, stop=stop_on_interrupt(),
                        internal_domains=frozenset(args.internal_domain))
    except FileNotFoundError as exc:
        print(f"shadowtwin ingest: {exc}", file=sys.stderr)
        return 2
    finally:
        undelivered = sink.close()
    print(counts.describe())
    if undelivered:
        print(f"{undelivered} records were not delivered to Kafka ({sink.error or 'flush timed out'})", file=sys.stderr)
        return 1
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="shadowtwin",
        description="A live digital twin of a shadow-redundant mail-transport topology.",
    )
    top.add_argument("--conf", help="settings file (default: $SHADOWTWIN_CONF or conf/shadowtwin.toml)")
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    kafka = commands.add_parser("kafka", help="the embedded Apache Kafka broker",
                                description="Start, stop or inspect the embedded single-node Kafka broker.")
    kafka.add_argument("action", choices=["start", "stop", "status"])
    kafka.set_defaults(run=_kafka)

    topics = commands.add_parser("topics", help="the twin's Kafka topics",
                                 description="Create the topics named in conf/ (idempotent).")
    topics.add_argument("action", choices=["create"])
    topics.add_argument("--bootstrap", help="Kafka bootstrap servers (default: from conf/)")
    topics.set_defaults(run=_topics)

    jar_cmd = commands.add_parser("jars", help="fetch the Kafka and Spark jars from Maven Central",
                                  description="Resolve the broker and Spark connector jars into the jar cache.")
    jar_cmd.add_argument("action", choices=["fetch"])
    jar_cmd.set_defaults(run=_jars)

    twin = commands.add_parser("twin", help="the streaming twin (the main job)",
                               description="Run the streaming twin: events topic -> alerts, redelivery commands,"
                                           " dead letters. Runs until Ctrl-C or SIGTERM (exit 130 or 143).")
    twin.add_argument("action", choices=["run"])
    twin.add_argument("--master", help="Spark master URL (default: from conf/, local mode)")
    twin.add_argument("--bootstrap", help="Kafka bootstrap servers of a cluster (default: from conf/)")
    twin.add_argument("--checkpoint", help="checkpoint folder (default: <spark.checkpoint_dir>/twin)")
    twin.add_argument("--no-ticks", action="store_true",
                      help="do not publish clock ticks (when replaying a recording, which carries its own)")
    twin.add_argument("--lab-topology", metavar="FILE",
                      help="take the shadow-redundancy parameters of this lab topology (what `lab up --twin` does)")
    twin.add_argument("--seconds", type=float, help="stop after this long (default: run until Ctrl-C or SIGTERM)")
    twin.set_defaults(run=_twin)

    whatif = commands.add_parser("whatif", help="replay a recording through the model with other parameters",
                                 description="Run the shadow-redundancy model over a recorded event file (.jsonl or"
                                             " .avro) and summarise its decisions; --compare runs a second parameter"
                                             " set beside it. Parameters: Exchange names (ShadowResubmitTimeSpan) or"
                                             " snake case; NODE:name=value changes one node.")
    whatif.add_argument("file", help="recorded events (.jsonl or .avro)")
    whatif.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="change a parameter for the baseline (repeatable)")
    whatif.add_argument("--compare", action="append", default=[], metavar="NAME=VALUE",
                        help="change a parameter for a second run shown beside the baseline (repeatable)")
    whatif.add_argument("--out", help="write the alerts and commands as JSON Lines into this folder")
    whatif.set_defaults(run=_whatif)

    record = commands.add_parser("record", help="record a topic's events into a file",
                                 description="Read the contract's events from a Kafka topic and write them to FILE"
                                             " (.jsonl or .avro) as they arrive. Records that do not decode are"
                                             " counted and reported, not written. Stops at --count, --seconds,"
                                             " Ctrl-C, or (with --from-beginning) at the end of the topic as it was"
                                             " at start.")
    record.add_argument("topic", help="the topic to read (e.g. the events topic)")
    record.add_argument("file", help="the recording to write (.jsonl or .avro)")
    record.add_argument("--from-beginning", action="store_true",
                        help="read from the start of the topic up to its end at start (default: only new events)")
    record.add_argument("--seconds", type=float, help="stop after this long")
    record.add_argument("--count", type=int, help="stop after this many events")
    record.set_defaults(run=_record)

    replay = commands.add_parser("replay", help="publish a recording, paced by its event times",
                                 description="Publish a recording (.jsonl or .avro) in its order, keyed by primary"
                                             " server, with its event times unchanged. Prints progress about every"
                                             " 2 seconds.")
    replay.add_argument("file", help="the recording (.jsonl or .avro)")
    replay.add_argument("--speed", default="max",
                        help="seconds of event time per second: 1 real time, 60 a minute a second, max as fast as"
                             " possible (default: max)")
    replay.add_argument("--to", metavar="TOPIC", help="the topic to publish to (default: the events topic)")
    replay.set_defaults(run=_replay)

    ingest = commands.add_parser("ingest", help="turn server logs into events",
                                 description="Read Exchange message-tracking log files (MSGTRK*.LOG) and publish"
                                             " their shadow-redundancy and transport events; unreadable lines go to"
                                             " the dead-letter topic with their file and line number. Mapping and"
                                             " limits: producers/EXCHANGE_LOGS.md.")
    ingest.add_argument("source", choices=["exchange-mtl"], help="the log format")
    ingest.add_argument("paths", nargs="+", metavar="PATH", help="log files, or quoted globs ('logs/MSGTRK*.LOG')")
    ingest.add_argument("--follow", action="store_true",
                        help="keep reading as the files grow, and follow roll-over to new files (until Ctrl-C)")
    ingest.add_argument("--to", metavar="TOPIC", help="the topic to publish events to (default: the events topic)")
    ingest.add_argument("--internal-domain", action="append", default=[], metavar="DOMAIN",
                        help="an accepted domain of the organisation: its recipients are internal mailboxes"
                             " (repeatable)")
    ingest.set_defaults(run=_ingest)

    from shadowtwin import simulate_cmd

    simulate_cmd.add_parser(commands)

    demo = commands.add_parser("demo", help="run the whole pipeline once on the embedded broker",
                               description="Broker, topics, streaming query, simulated nodes; prints the alerts.")
    demo.add_argument("--seconds", type=float, help="stop after this long at the latest (default: from conf/)")
    demo.set_defaults(run=_demo)

    from shadowtwin.lab_cmd import add_lab_parser

    add_lab_parser(commands)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        settings = load_settings(args.conf)
    except ConfigError as exc:
        print(f"shadowtwin: {exc}", file=sys.stderr)
        return 2
    return args.run(settings, args)


if __name__ == "__main__":
    sys.exit(main())
