"""The `shadowtwin` command line: one entry point, a subcommand per task.

Errors a person can fix (a missing, unreadable or garbled file, a bad argument, an unwritable
output, a refused setting) end here, in `main`: one line on stderr naming the file or argument
and the problem, exit status 2; `--debug` shows the traceback instead. A closed pipe
(`shadowtwin whatif day.avro | head`) ends quietly; Ctrl-C in a command that has no summary to
give (whatif), or while the arguments are read and the commands' modules imported, says it was
interrupted, exit status 130 (`shadowtwin.__main__` answers it while this module is imported).
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import sys
from pathlib import Path
from typing import NoReturn

from confluent_kafka import KafkaError, KafkaException

from infra.broker import BrokerError
from infra.kafka import ANSWER_SECONDS, NoSuchTopic, bootstrap_of, cluster_metadata
from infra.kafka_tools import TOOLS
from infra.topics import TopicsDiffer
from infra.config import closest
from infra.settings import PROJECT_ROOT, ConfigError, Settings, load_settings, setting_variables, spark_master
from producers.ingest_positions import Positions
from infra.signals import Stop, stop_on_signals
from producers.mtl_ingest import KafkaSink, NotATrackingLog, ingest, open_logs
from producers.recorder import record
from producers.recording import (RecordingNameError, check_name, count_events, is_recording, read_events,
                                 writable_file)
from producers.topic_reader import schema_of
from producers.relay.lab import LabError
from producers.replayer import replay
from producers.simulator.topology import TopologyError
from schemas.container import ContainerError
from schemas.convert import ConversionError
from schemas.jsonl import JsonlError
from shadowtwin.arguments import (COUNT, SECONDS, assignment, did_you_mean, domain, duration_option, events_topic,
                                  speed_option, topic)
from shadowtwin.errors import UsageError, interrupted
from shadowtwin.kafka_options import NAMES as KAFKA_OPTION_NAMES, PARENT as KAFKA_OPTIONS, with_kafka_options
from shadowtwin import alerts_cmd, probe_cmd, tail_cmd, where_cmd
from shadowtwin.json_output import as_json

# The lower layers' errors that mean bad input, not a fault of the program (exit 2) ...
BAD_INPUT = (UsageError, ConfigError, ContainerError, ConversionError, JsonlError, RecordingNameError, TopologyError,
             NotATrackingLog)
# ... and those that mean a part the command needs failed: a broker that does not answer, a topic
# it does not have or has with settings the twin would lose records on, a lab process that does not start (exit 1).
FAILED = (KafkaException, BrokerError, LabError, NoSuchTopic, TopicsDiffer)
BROKEN_PIPE_STATUS = 128 + 13  # as if SIGPIPE had ended the process, without its noise
DEFAULT_INGEST_STATE = PROJECT_ROOT / ".run" / "ingest" / "positions.json"


def _kafka(settings: Settings, args: argparse.Namespace) -> int:
    from infra.broker import EmbeddedKafka, EmbeddedKafkaCluster

    if args.action == "tool":
        from infra.kafka_tools import run_tool

        if not args.tool:
            raise UsageError("which tool? (kafka-topics, kafka-consumer-groups, kafka-console-consumer,"
                             " ...; see shadowtwin kafka --help)")
        misplaced = next((a.split("=", 1)[0] for a in args.tool[1:] if a.split("=", 1)[0] in KAFKA_OPTION_NAMES), None)
        if misplaced:
            raise UsageError(f"{misplaced} after the tool's name is the tool's own argument, which no Kafka tool"
                             f" takes: put it before the name (shadowtwin kafka tool {misplaced} ... {args.tool[0]}"
                             f" ...), as every command takes it")
        return run_tool(settings, args.tool[0], args.tool[1:])
    embedded = settings.kafka.embedded
    if embedded.brokers > 1:
        cluster = EmbeddedKafkaCluster.on_ports_after(embedded, settings.jars.cache_dir, embedded.brokers)
        if args.action == "stop":
            print("kafka stopped" if cluster.stop() else "kafka was not running")
            return 0
        statuses = cluster.start() if args.action == "start" else cluster.status()
        for status in statuses:
            print(status.describe())
        return 0 if all(s.running for s in statuses) else 3
    broker = EmbeddedKafka(embedded, settings.jars.cache_dir)
    if args.action == "start":
        print(broker.start().describe())
    elif args.action == "stop":
        print("kafka stopped" if broker.stop() else "kafka was not running")
    else:
        status = broker.status()
        print(as_json(status) if args.json else status.describe())
        return 0 if status.running else 3
    return 0


def _topics(settings: Settings, args: argparse.Namespace) -> int:
    from infra.topics import create_topics, events_retention_needed_ms

    outcomes = create_topics(settings.kafka, settings.topics, ANSWER_SECONDS, json_topics=settings.twin.json_topics,
                             events_retention_ms=events_retention_needed_ms(settings))
    for outcome in outcomes:
        print(outcome.describe())
    differing = [o.topic for o in outcomes if o.differences]
    if differing:
        print(f"{len(differing)} of {len(outcomes)} topics differ from the configuration in what the twin's"
              f" correctness depends on: {', '.join(differing)} (recreate them, change [topics], or change their"
              " configs: kafka-configs --alter)", file=sys.stderr)
        return 1
    return 0


def _jars(settings: Settings, args: argparse.Namespace) -> int:
    from infra import jars

    if args.action == "list":  # for spark-submit --jars
        print(",".join(str(p) for p in jars.ensure(jars.spark_connector_jars(), settings.jars.cache_dir)))
        return 0
    broker = jars.kafka_broker_jars(settings.kafka.embedded.version)
    broker_jars = jars.ensure(broker, settings.jars.cache_dir)
    for jar_set in (broker, jars.kafka_tools_jars(settings.kafka.embedded.version, broker_jars),
                    jars.spark_connector_jars()):
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

    if args.master:
        settings = dataclasses.replace(settings, spark=dataclasses.replace(settings.spark,
                                                                           master=spark_master(args.master)))
    if args.lab_topology:
        settings = dataclasses.replace(settings, shadow_redundancy=load_topology(args.lab_topology).shadow_redundancy)
    twin = TwinApplication(settings, ticks=False if args.no_ticks else None,
                           checkpoint_dir=Path(args.checkpoint).resolve() if args.checkpoint else None,
                           say=lambda line: print(line, flush=True))
    return twin.run(seconds=args.seconds)


def _whatif(settings: Settings, args: argparse.Namespace) -> int:
    from shadowtwin.whatif_cmd import run_whatif

    return run_whatif(settings, Path(args.file), args.set, args.compare, Path(args.out) if args.out else None,
                      as_json=args.json, report=Path(args.report) if args.report else None,
                      truth=Path(args.truth) if args.truth else None, show_progress=args.progress)


def _holds_records(path: Path) -> bool:
    """Whether `path` is a file with records in it (one that cannot be read is taken to hold some)."""
    try:
        return path.is_file() and count_events(path) > 0
    except (OSError, ValueError):
        return True


def _record(settings: Settings, args: argparse.Namespace) -> int:
    # argparse would say 'file' is missing, having taken a recording's name for the topic; or the two are swapped
    if is_recording(Path(args.topic)) and not is_recording(Path(args.file or "")):
        raise UsageError(f"{args.topic} is the recording to write: name the topic to read before it"
                         f" (shadowtwin record {args.file or 'TOPIC'} {args.topic})")
    if args.file is None:
        raise UsageError(f"the recording to write is missing (shadowtwin record {args.topic} FILE)")
    path = check_name(Path(args.file))
    if not args.force and _holds_records(path):  # the topic may no longer hold what it has
        raise UsageError(f"{path}: exists; record does not overwrite a recording (another name, or --force to"
                         " replace it)")
    stop = stop_on_signals()
    outcome = record(settings.kafka, args.topic, path,
                     from_beginning=args.from_beginning, seconds=args.seconds, count=args.count, stop=stop,
                     schema=schema_of(settings.topics, args.topic))
    print(outcome.summary())
    left_out = outcome.read.describe_undecodable()
    if left_out:  # as the tails say it: what was not recorded, on stderr, exit 1
        print("\n".join(left_out), file=sys.stderr)
        return 1
    return stop.exit_status()


def _replay(settings: Settings, args: argparse.Namespace) -> int:
    speed = speed_option(args.speed)
    path = check_name(Path(args.file))
    if not path.is_file():
        raise UsageError(f"{path}: {'Is a directory' if path.is_dir() else 'no such file'}")  # as whatif says
    if next(read_events(path), None) is None:  # nothing to send: the wrong file, as whatif says
        raise UsageError(f"{path}: holds no events")
    stop = stop_on_signals()
    outcome = replay(settings.kafka, events_topic(settings.topics, args.to), path, speed=speed,
                     progress=lambda line: print(line, flush=True), stop=stop,
                     delivery_timeout_s=settings.kafka.delivery_timeout_seconds,
                     dead_letters=settings.topics.dead_letters, in_flight_ms=settings.twin.watermark_delay.ms // 2)
    print(outcome.describe())
    return _published(outcome.failure(), stop)


def _ingest(settings: Settings, args: argparse.Namespace) -> int:
    to = events_topic(settings.topics, args.to)
    max_age_s = duration_option(args.max_age, "--max-age") if args.max_age else None
    logs = open_logs(args.paths, follow=args.follow, max_age_s=max_age_s,  # a mistyped path before the broker
                     say=lambda line: print(line, file=sys.stderr, flush=True))
    state = writable_file(Path(args.state), "--state") if args.state else DEFAULT_INGEST_STATE if args.follow else None
    try:
        positions = Positions(state) if state is not None else None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if positions is not None and not positions.save():  # before anything is published
        raise UsageError(positions.not_saved())
    prober = probe_cmd.agent_prober(settings, args)
    stop = stop_on_signals()
    sink = KafkaSink(settings.kafka, to,
                     settings.topics.dead_letters, settings.kafka.delivery_timeout_seconds)
    probing = probe_cmd.beside(prober, sink.event, stop)
    try:
        counts = ingest(logs, sink, follow=args.follow, stop=stop,
                        internal_domains=frozenset(args.internal_domain), positions=positions, max_age_s=max_age_s,
                        say=lambda line: print(line, file=sys.stderr, flush=True))
    finally:
        probe_cmd.stopped(probing, stop)
        undelivered = sink.close()
        saved = positions is None or positions.save()
    counts.set_aside(sink.set_aside)
    print(counts.describe())
    if prober is not None:
        print(f"probes: {prober.counts.describe()}")
    if not saved:
        print(positions.not_saved(), file=sys.stderr)
    status = _published(sink.deliveries.describe_failure() if undelivered else None, stop)
    if status == 0 and counts.dead_letters and not counts.events and not args.follow:
        print(f"shadowtwin ingest: no event published: each of the {counts.dead_letters:,} lines that were not"
              f" skipped is a dead letter; the first: {counts.first_dead_letter}", file=sys.stderr)
        return 2
    return 1 if status == 0 and not saved else status


def _published(failure: str | None, stop: Stop) -> int:
    """The exit status of a command that publishes: 1 when some records were not acknowledged
    (said on stderr), else 130/143 when a signal stopped it, else 0."""
    if failure is not None:
        print(failure, file=sys.stderr)
        return 1
    return stop.exit_status()


def parser() -> argparse.ArgumentParser:
    top = _Parser(
        prog="shadowtwin",
        description="A live digital twin of a shadow-redundant mail-transport topology.",
    )
    top.add_argument("--conf", help="settings file (default: $SHADOWTWIN_CONF or conf/shadowtwin.toml)")
    top.add_argument("--debug", action="store_true", help="show the traceback of an error, not only its line")
    top.add_argument("--version", action="version", version=f"shadowtwin {_version()}")
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    kafka = commands.add_parser("kafka", help="the embedded Apache Kafka broker, and Kafka's own tools",
                                description="Start, stop or inspect the embedded single-node Kafka broker; or run"
                                            " one of Apache Kafka's command-line tools (from Maven jars, fetched"
                                            " on first use) against the configured brokers, e.g. 'shadowtwin kafka"
                                            " tool kafka-consumer-groups --describe --all-groups'. A tool gets"
                                            " --bootstrap-server and the configured security (or those of the"
                                            " options --bootstrap, --security-protocol ... before its name, as"
                                            " every command takes them) unless its own arguments give them. Tools: " + ", ".join(TOOLS) + ".")
    actions = kafka.add_subparsers(dest="action", required=True, metavar="{start,stop,status,tool}")
    for action in ("start", "stop"):
        actions.add_parser(action, help=f"{action} the embedded broker").set_defaults(json=False, tool=[])
    status = actions.add_parser("status", help="is the embedded broker running (exit 3 if not)")
    status.add_argument("--json", action="store_true", help="one JSON object")
    status.set_defaults(tool=[])
    tool = actions.add_parser("tool", help="run one of Kafka's own tools",
                              description="Run one of Apache Kafka's command-line tools (from Maven jars, fetched on"
                                          " first use) against the configured brokers, e.g. 'shadowtwin kafka tool"
                                          " kafka-consumer-groups --describe --all-groups'. The tool gets"
                                          " --bootstrap-server and the configured security (or those of the options"
                                          " --bootstrap, --security-protocol ... before its name) unless its own"
                                          " arguments give them; brokers that do not answer, or a --topic of"
                                          " console-consumer or console-producer they do not have, end it in one"
                                          " line, exit 1. Tools: " + ", ".join(TOOLS) + ".",
                              parents=[KAFKA_OPTIONS], usage="%(prog)s [KAFKA OPTIONS] TOOL [ARGS]")
    tool.add_argument("tool", nargs=argparse.REMAINDER, metavar="TOOL [ARGS]",
                      help="the tool's name (kafka-topics or topics) and its own arguments")
    tool.set_defaults(json=False)
    kafka.set_defaults(run=_kafka)

    topics = commands.add_parser("topics", help="the twin's Kafka topics", parents=[KAFKA_OPTIONS],
                                 description="Create the topics named in conf/ (idempotent); check those that exist"
                                             " for what correctness depends on (partitions, LogAppendTime on the"
                                             " events topic, replication) and exit 1 naming what differs.")
    topics.add_argument("action", choices=["create"])
    topics.set_defaults(run=_topics)

    jar_cmd = commands.add_parser("jars", help="fetch the Kafka and Spark jars from Maven Central",
                                  description="Resolve the broker and Spark connector jars into the jar cache.")
    jar_cmd.add_argument("action", choices=["fetch", "list"],
                         help="fetch: both sets into the cache; list: the Spark connectors, comma-separated"
                              " (spark-submit --jars)")
    jar_cmd.set_defaults(run=_jars)

    twin = commands.add_parser("twin", help="the streaming twin (the main job)", parents=[KAFKA_OPTIONS],
                               description="Run the streaming twin: events topic -> alerts, redelivery commands,"
                                           " dead letters. Runs until Ctrl-C or SIGTERM (exit 130 or 143).")
    twin.add_argument("action", choices=["run"])
    twin.add_argument("--master", help="Spark master URL (default: from conf/, local mode)")
    twin.add_argument("--checkpoint", help="checkpoint folder (default: <spark.checkpoint_dir>/twin)")
    twin.add_argument("--no-ticks", action="store_true",
                      help="do not publish clock ticks (when replaying a recording, which carries its own)")
    twin.add_argument("--lab-topology", metavar="FILE",
                      help="take the shadow-redundancy parameters of this lab topology (what `lab up --twin` does)")
    twin.add_argument("--seconds", type=SECONDS, help="stop after this long (default: run until Ctrl-C or SIGTERM)")
    twin.set_defaults(run=_twin)

    whatif = commands.add_parser("whatif", help="replay a recording through the model with other parameters",
                                 description="Run the shadow-redundancy model over a recorded event file (.jsonl or"
                                             " .avro) and summarise its decisions; --compare runs a second parameter"
                                             " set beside it. Parameters: Exchange names (ShadowResubmitTimeSpan) or"
                                             " snake case, and the twin's own (track_duplicates,"
                                             " shadow_silence_heartbeats, clock_skew_allowance) for every node;"
                                             " NODE:name=value changes one node.")
    whatif.add_argument("file", help="recorded events (.jsonl or .avro)")
    whatif.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", type=assignment,
                        help="change a parameter for the baseline (repeatable)")
    whatif.add_argument("--compare", action="append", default=[], metavar="NAME=VALUE", type=assignment,
                        help="change a parameter for a second run shown beside the baseline (repeatable)")
    whatif.add_argument("--out", metavar="DIR",
                        help="write JSON Lines into this folder: alerts.jsonl, commands.jsonl, state.jsonl (where"
                             " everything is at the end) and dead_letters.jsonl (events the clock-skew guard left"
                             " out); with --compare, the second set's in DIR/compare")
    whatif.add_argument("--json", action="store_true",
                        help="print the summaries as one JSON object (its keys: README.md, What-if reports)")
    whatif.add_argument("--progress", action="store_true",
                        help="progress on stderr even when it is not a terminal (it is shown on a terminal)")
    whatif.add_argument("--report", metavar="DIR",
                        help="write an HTML report with plots (report.html) and the summary (summary.json) into DIR")
    whatif.add_argument("--truth", metavar="FILE",
                        help="score the baseline's alerts against the simulator's truth file (NAME.truth.jsonl)")
    whatif.set_defaults(run=_whatif)

    # FILE is optional to argparse only so that `_record` can say what is missing: the usage shows it required.
    record = commands.add_parser("record", help="record a topic's records into a file", parents=[KAFKA_OPTIONS],
                                 usage="%(prog)s [KAFKA OPTIONS] TOPIC FILE [--from-beginning] [--seconds SECONDS]"
                                       " [--count COUNT] [--force]",
                                 description="Read the contract's records from a Kafka topic (events, alerts,"
                                             " commands or dead letters; another topic takes the schema of its"
                                             " first record) and write them to FILE"
                                             " (.jsonl or .avro; one that exists only with --force) as they arrive."
                                             " Records that do not decode are counted and reported, not written. Stops at --count, --seconds,"
                                             " Ctrl-C, or (with --from-beginning) at the end of the topic as it was"
                                             " at start.")
    record.add_argument("topic", metavar="TOPIC", help="the topic to read (e.g. the events topic)")
    record.add_argument("file", nargs="?", metavar="FILE", help="the recording to write (.jsonl or .avro)")
    record.add_argument("--from-beginning", action="store_true",
                        help="read from the start of the topic up to its end at start (default: only new events)")
    record.add_argument("--seconds", type=SECONDS, help="stop after this long")
    record.add_argument("--count", type=COUNT, help="stop after this many events")
    record.add_argument("--force", action="store_true", help="replace FILE if it exists (default: refuse)")
    record.set_defaults(run=_record)

    replay = commands.add_parser("replay", help="publish a recording, paced by its event times",
                                 parents=[KAFKA_OPTIONS],
                                 description="Publish a recording (.jsonl or .avro) in its order, keyed by primary"
                                             " server, with its event times unchanged. Prints progress about every"
                                             " 2 seconds.")
    replay.add_argument("file", help="the recording (.jsonl or .avro)")
    replay.add_argument("--speed", default="max",
                        help="seconds of event time per second: 1 real time, 60 a minute a second, max as fast as"
                             " possible (default: max)")
    replay.add_argument("--to", metavar="TOPIC", type=topic, help="the topic to publish to (default: the events topic)")
    replay.set_defaults(run=_replay)

    ingest = commands.add_parser("ingest", help="turn server logs into events", parents=[KAFKA_OPTIONS],
                                 description="Read Exchange message-tracking log files (MSGTRK*.LOG) and publish"
                                             " their shadow-redundancy and transport events; unreadable lines go to"
                                             " the dead-letter topic with their file and line number. Mapping and"
                                             " limits: producers/EXCHANGE_LOGS.md.")
    # metavar: an error names 'argument LOG_FORMAT', not 'argument source'
    ingest.add_argument("source", choices=["exchange-mtl"], type=str.lower, metavar="LOG_FORMAT",
                        help="the log format: exchange-mtl (Exchange's message-tracking logs)")
    ingest.add_argument("paths", nargs="+", metavar="PATH", help="log files, or quoted globs ('logs/MSGTRK*.LOG')")
    ingest.add_argument("--follow", action="store_true",
                        help="keep reading as the files grow, and follow roll-over to new files (until Ctrl-C or"
                             " SIGTERM); each file's position is kept in the state file across restarts")
    ingest.add_argument("--state", metavar="FILE",
                        help="where each file's acknowledged position is kept (default with --follow:"
                             " .run/ingest/positions.json); a restart sends nothing it acknowledged before")
    ingest.add_argument("--max-age", metavar="DURATION",
                        help="leave out files last written longer ago than this (e.g. 7d, 12h, 2.00:00:00)")
    ingest.add_argument("--to", metavar="TOPIC", type=topic, help="the topic to publish events to (default: the events topic)")
    ingest.add_argument("--internal-domain", action="append", default=[], metavar="DOMAIN", type=domain,
                        help="an accepted domain of the organisation: its recipients are internal mailboxes"
                             " (repeatable)")
    probe_cmd.add_agent_options(ingest)
    ingest.set_defaults(run=_ingest)

    from shadowtwin import simulate_cmd

    simulate_cmd.add_parser(commands)
    probe_cmd.add_parser(commands)

    demo = commands.add_parser("demo", help="run the whole pipeline once on the embedded broker",
                               parents=[KAFKA_OPTIONS],
                               description="Broker, topics, streaming query, simulated nodes; prints the alerts.")
    demo.add_argument("--seconds", type=SECONDS, help="stop after this long at the latest (default: from conf/)")
    demo.set_defaults(run=_demo)

    from shadowtwin.lab_cmd import add_lab_parser

    add_lab_parser(commands)

    where_cmd.add_parsers(commands)
    alerts_cmd.add_parser(commands)
    tail_cmd.add_parser(commands)
    _described(top)
    return top


def _described(parser: argparse.ArgumentParser) -> None:
    """Every command's --help opens with what it does: one given no description takes its line of help."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, command in action.choices.items():
                if command.description is None and helps.get(name):
                    command.description = helps[name][:1].upper() + helps[name][1:] + "."
                _described(command)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("shadowtwin")
    except PackageNotFoundError:
        return "(not installed: run from a checkout without pip install)"


class _Parser(argparse.ArgumentParser):
    """Bad arguments: one line naming the argument and the problem, exit status 2. An option is
    written whole: a misspelt one is named (`--second`: did you mean --seconds?), not taken for the
    option it begins (argparse's abbreviations), and the commands' parsers are made by this class. A value that
    begins with a minus and a digit (`--duration -5m`) is the option's value, refused by what reads it, as Python
    3.13's argparse takes it: 3.11's took it for an unknown option ('--duration: expected one argument')."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **{"allow_abbrev": False, **kwargs})
        self._negative_number_matcher = re.compile(r"-\.?\d")

    def _get_value(self, action: argparse.Action, text: str):
        """An empty value (`--out "$UNSET"`) is refused: it was taken as not given, or as the current folder."""
        if not text.strip() and action.nargs not in (argparse.PARSER, argparse.REMAINDER):  # a command's, a tool's
            raise argparse.ArgumentError(action, f"expected a value, got {text!r}")
        return super()._get_value(action, text)

    def parse_known_args(self, args=None, namespace=None):
        self._given = _exchange_assignments(list(sys.argv[1:] if args is None else args))
        return super().parse_known_args(self._given, namespace)

    def _check_value(self, action: argparse.Action, value) -> None:
        """An option before the action (`commands --bootstrap B tail`) left its value to be taken for the action:
        'invalid choice: B' named the address as the action; now the option is said to come after the action."""
        given = getattr(self, "_given", [])
        if isinstance(action, argparse._SubParsersAction) and value not in action.choices and value in given:
            before = given[given.index(value) - 1] if given.index(value) else ""
            if before.startswith("-"):
                choices = list(action.choices)
                after = choices[0] if len(choices) == 1 else "ACTION"
                raise argparse.ArgumentError(action, f"{before} {value}: an option comes after the action"
                                                     f" ({self.prog} {after} {before} {value})")
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError as exc:
            if isinstance(action, argparse._SubParsersAction) and (meant := _meant_action(value, action.choices)):
                raise argparse.ArgumentError(action, f"{exc.message}; did you mean {meant!r}?") from None
            raise

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _exchange_assignments(args: list[str]) -> list[str]:
    """`--set -ShadowResubmitTimeSpan=01:00:00`, a parameter as PowerShell writes it, joined to its option: argparse
    took it for an option of its own ('--set: expected one argument'; so `--set -ShadowResubmitTimeSpan 01:00:00`,
    now told to write NAME=VALUE)."""
    joined: list[str] = []
    for arg in args:
        if joined and joined[-1] in ("--set", "--compare") and arg.startswith("-") and not arg.startswith("--") \
                and arg != "-h":
            arg = f"{joined.pop()}={arg}"
        joined.append(arg)
    return joined


# An action named by another word for it (`lab stop`), when the command has no action of that name.
_ACTION_WORDS = {"stop": "down", "start": "up", "shutdown": "down", "halt": "down"}


def _meant_action(word: str, actions) -> str | None:
    """The command's action `word` likely meant (`simulte`: simulate; `lab stop`: down), or None."""
    other = _ACTION_WORDS.get(word)
    return other if other in actions else closest(word, list(actions))


def _parsed(argv: list[str] | None) -> argparse.Namespace:
    """The arguments; one the command does not take is refused by the command's own parser, naming the
    option it likely meant, or the setting when it names one (`twin run --trigger 5`: [spark] trigger_interval)."""
    top = parser()
    args, unknown = top.parse_known_args(argv)
    if unknown:
        command = _command_parser(top, args)
        command.error(f"unrecognized argument{'s' if len(unknown) > 1 else ''}: {' '.join(unknown)}"
                      f"{_meant(command, unknown, args.conf, top)}")
    return args


def _command_parser(top: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    parser = top
    while sub := next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None):
        if getattr(args, sub.dest, None) not in sub.choices:
            break
        parser = sub.choices[getattr(args, sub.dest)]
    return parser


def _meant(command: argparse.ArgumentParser, unknown: list[str], conf: str | None, top: argparse.ArgumentParser) -> str:
    """`; did you mean --seconds?`, shadowtwin's own option written after the command, the commands that take the
    option, or where the setting an option names is set, with its form; else ""."""
    option, _, value = unknown[0].partition("=")
    if not option.startswith("--"):
        return ""
    if (own := top._option_string_actions.get(option)) is not None:  # `whatif day.avro --conf c.toml`: not --json
        given = " ".join(unknown[:1 if value or own.nargs == 0 else 2])
        return (f"; it is shadowtwin's own option, which comes before the command (shadowtwin {given}"
                f" {command.prog.removeprefix('shadowtwin ')} ...)")
    options = [o for a in command._actions for o in a.option_strings if o.startswith("--")]
    if meant := closest(option, options):
        return f"; did you mean {meant}?"
    if others := _commands_taking(top, option):  # `jars --json`: not the setting json_topics
        return f"; it is an option of {', '.join(others)}"
    word = option[2:].replace("-", "_")
    variables = setting_variables()
    named = [(v, path) for v, path in variables.items() if path[-1] == word or path[-1].startswith(f"{word}_")]
    if len(named) != 1:
        return ""
    variable, path = named[0]
    try:
        now = functools.reduce(getattr, path, load_settings(conf))
    except (ConfigError, OSError):
        return f"; it is a setting, not an option: [{'.'.join(path[:-1])}] {path[-1]}, or ${variable}"
    value = value or (unknown[1] if len(unknown) > 1 else "")
    number, _, unit = str(now).partition(" ")
    example = f"{value} {unit}" if unit and value.replace(".", "", 1).isdigit() and number.replace(".", "", 1).isdigit() \
        else str(now)
    return (f"; it is a setting, not an option: [{'.'.join(path[:-1])}] {path[-1]} = \"{now}\" in the configuration,"
            f" or {variable}=\"{example}\"")


def _commands_taking(parser: argparse.ArgumentParser, option: str) -> list[str]:
    """The commands (`whatif`, `alerts tail`) whose parser takes `option`."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        takes = any(option in a.option_strings for a in parser._actions)
        return [parser.prog.removeprefix("shadowtwin ")] if takes else []
    children = dict.fromkeys(child for sub in subs for child in sub.choices.values())  # an alias names one parser
    return [name for child in children for name in _commands_taking(child, option)]


def main(argv: list[str] | None = None) -> int:
    args = settings = None
    try:
        args = _parsed(argv)
        settings = with_kafka_options(load_settings(args.conf), args)
        status = args.run(settings, args)
        sys.stdout.flush()  # here, not at exit, where a reader gone away would be reported with a traceback
        return status
    except BrokenPipeError:
        _quiet_stdout()
        return BROKEN_PIPE_STATUS
    except KeyboardInterrupt as exc:  # in a command that does not stop on signals by itself (whatif), or before
        if args is not None and args.debug:  # one runs; whatif's says how far it got
            raise
        return interrupted(f"shadowtwin {args.command}" if args is not None else "shadowtwin", str(exc))
    except (*BAD_INPUT, *FAILED, OSError) as exc:
        if args is None or args.debug or isinstance(exc, OSError) and exc.filename is None:
            raise
        print(f"shadowtwin {args.command}: {_one_line(exc, settings)}", file=sys.stderr)
        return 1 if isinstance(exc, FAILED) else 2


def _one_line(exc: BaseException, settings: Settings | None = None) -> str:
    if isinstance(exc, OSError):
        return f"{exc.filename}: {exc.strerror or exc}"
    if isinstance(exc, KafkaException):
        at = f" at {bootstrap_of(settings.kafka)}" if settings is not None else ""  # which brokers were tried
        return f"Kafka{at}: {exc.args[0].str() if exc.args and isinstance(exc.args[0], KafkaError) else exc}"
    if isinstance(exc, NoSuchTopic) and exc.topic and settings is not None:  # `shadowtwin.event`: the topic meant
        return f"{exc}{did_you_mean(exc.topic, _topics_at(settings))}"
    return " ".join(str(exc).split())


def _topics_at(settings: Settings) -> list[str]:
    """The topics the brokers have, or none when they do not say within a few seconds."""
    try:
        return list(cluster_metadata(settings.kafka, timeout=5).topics)
    except (KafkaException, ConfigError):  # no answer, or credentials refused this time
        return []


def _quiet_stdout() -> None:
    """The reader of stdout went away: send what is still buffered nowhere, so exiting says nothing."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":
    sys.exit(main())
