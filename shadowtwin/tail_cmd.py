"""`shadowtwin alerts tail`, `commands tail` and `dead-letters tail`: the twin's outputs as readable lines.

    shadowtwin alerts tail                    the last 10 alerts of each partition, then exit
    shadowtwin alerts tail --from-beginning   every alert on the topic, then exit
    shadowtwin commands tail --follow --json  new commands as they come, one JSON object a line
    shadowtwin dead-letters tail              the last 10 records set aside, each with where it was read and why

A bounded run (without --follow) ends when it has read each partition to where it ended at
start. Records that do not decode are counted by reason on stderr, and the exit status is 1.
"""

from __future__ import annotations

import argparse
import sys

from infra.settings import Settings
from infra.signals import stop_on_signals
from infra.topics import json_topic
from producers.readable import line
from producers.topic_reader import ReadOutcome, read_topic
from schemas import jsonl
from shadowtwin.arguments import ZERO_OR_MORE, topic
from shadowtwin.errors import UsageError
from shadowtwin.kafka_options import PARENT as KAFKA_OPTIONS

# what is tailed: its topic in the settings ([topics]) and the contract's schema of its records
TAILED = {"alerts": ("alerts", "Alert"), "commands": ("commands", "RedeliveryCommand"),
          "dead letters": ("dead_letters", "DeadLetter")}


def add_tail_parser(actions, what: str) -> None:
    tail = actions.add_parser("tail", help=f"print the twin's {what} as readable lines", parents=[KAFKA_OPTIONS],
                              description=f"Print the {what} topic's records, one line each (or --json, one object"
                                          " a line). Without --follow, stops at the end of the topic as it was at"
                                          " start.")
    tail.add_argument("--json", action="store_true", help="one JSON object a line (the contract's JSON Lines form)")
    tail.add_argument("--from-beginning", action="store_true", help="from the start of the topic")
    tail.add_argument("--lines", "-n", type=ZERO_OR_MORE, default=10, metavar="N",
                      help="without --from-beginning: the last N records of each partition (default 10)")
    tail.add_argument("--follow", "-f", action="store_true", help="go on printing new records until Ctrl-C or SIGTERM")
    tail.add_argument("--topic", type=topic, help=f"the topic to read (default: the {what} topic)")
    tail.set_defaults(run=run_tail, what=what)


def add_parser(commands) -> None:
    cmd = commands.add_parser("commands", help="the twin's redelivery commands",
                              description="Read the redelivery commands the twin published.")
    add_tail_parser(cmd.add_subparsers(dest="commands_action", required=True, metavar="ACTION"), "commands")
    dead = commands.add_parser("dead-letters", help="the records the twin and ingest set aside, with why",
                               description="Read the dead-letter topic: each record the twin (or ingest exchange-mtl)"
                                           " could not use, with where it was read and the reason.")
    add_tail_parser(dead.add_subparsers(dest="dead_letters_action", required=True, metavar="ACTION"), "dead letters")


def run_tail(settings: Settings, args: argparse.Namespace) -> int:
    setting, schema = TAILED[args.what]
    tailed = getattr(settings.topics, setting)
    topic = args.topic or tailed
    if topic == json_topic(tailed):
        raise UsageError(f"{topic} holds the twin's JSON copies of the {args.what} ([twin] json_topics), which any"
                         f" Kafka consumer prints as they are (shadowtwin kafka tool console-consumer --topic {topic});"
                         f" this command reads {tailed}, and prints the same objects with --json")
    stop = stop_on_signals()
    outcome = ReadOutcome()
    for record, _ in read_topic(settings.kafka, topic, outcome, expected=schema,
                                from_beginning=args.from_beginning, last=args.lines,
                                until_end=not args.follow, stop=stop, group="shadowtwin-tail"):
        print(jsonl.dumps(record) if args.json else line(record), flush=args.follow)
    bad = outcome.describe_undecodable()
    if bad:
        print("\n".join(bad), file=sys.stderr)
        return 1
    return stop.exit_status()
