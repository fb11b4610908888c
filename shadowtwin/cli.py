"""The `shadowtwin` command line: one entry point, a subcommand per task."""

from __future__ import annotations

import argparse
import sys

from shadowtwin.config import ConfigError, Settings, load_settings


def _kafka(settings: Settings, args: argparse.Namespace) -> int:
    from shadowtwin.broker import EmbeddedKafka

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
    from shadowtwin.topics import create_topics

    for outcome in create_topics(args.bootstrap or settings.kafka.bootstrap_servers, settings.topics):
        print(outcome.describe())
    return 0


def _jars(settings: Settings, args: argparse.Namespace) -> int:
    from shadowtwin import jars

    for jar_set in (jars.kafka_broker_jars(settings.kafka.embedded.version), jars.spark_connector_jars()):
        paths = jars.ensure(jar_set, settings.jars.cache_dir)
        print(f"{jar_set.name}: {len(paths)} jars in {jar_set.folder(settings.jars.cache_dir)}")
    return 0


def _demo(settings: Settings, args: argparse.Namespace) -> int:
    from shadowtwin.demo import run_demo

    return 0 if run_demo(settings, seconds=args.seconds) > 0 else 1


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

    demo = commands.add_parser("demo", help="run the whole pipeline once on the embedded broker",
                               description="Broker, topics, streaming query, simulated nodes; prints the alerts.")
    demo.add_argument("--seconds", type=float, help="stop after this long at the latest (default: from conf/)")
    demo.set_defaults(run=_demo)
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
