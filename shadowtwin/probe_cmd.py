"""`shadowtwin probe`: EHLO each transport server every ShadowHeartbeatFrequency and publish the outcomes
(producers/smtp_probe.py; producers/EXCHANGE_LOGS.md, "The SMTP probe")."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from infra.settings import Settings
from infra.signals import stop_on_signals
from producers.publisher import Deliveries, flush, produce, reporting_producer
from producers.smtp_probe import Prober, load_targets, parse_target
from shadowtwin.errors import UsageError
from shadowtwin.kafka_options import PARENT as KAFKA_OPTIONS
from state.parameters import parse_duration

DEFAULT_TIMEOUT_S = 10.0


def add_parser(commands) -> None:
    probe = commands.add_parser(
        "probe", parents=[KAFKA_OPTIONS], help="EHLO each transport server every ShadowHeartbeatFrequency; publish answered or failed",
        description="Open SMTP to each transport server, EHLO and QUIT, every ShadowHeartbeatFrequency (the"
                    " [shadow_redundancy] setting), and publish one ServerProbed event per probe: an answered"
                    " probe counts as the server's activity for a log-fed twin, a failed one does not.")
    probe.add_argument("--server", action="append", default=[], metavar="NAME=HOST:PORT",
                       help="a transport server, named as its logs name it (repeatable)")
    probe.add_argument("--servers", metavar="FILE", help="a TOML file of [[server]] tables (name, host, port)")
    probe.add_argument("--every", metavar="DURATION",
                       help="time between rounds (default: shadow_heartbeat_frequency, e.g. 2m, 00:02:00)")
    probe.add_argument("--timeout", metavar="DURATION",
                       help=f"how long one probe may take (default: {DEFAULT_TIMEOUT_S:g}s, or --every if shorter)")
    probe.add_argument("--rounds", type=int, metavar="N", help="stop after N rounds (default: until Ctrl-C or SIGTERM)")
    probe.add_argument("--name", help="the prober's name: the node of a failed probe (default: probe@<host name>)")
    probe.add_argument("--to", metavar="TOPIC", help="the topic to publish to (default: the events topic)")
    probe.set_defaults(run=run)


def _seconds(text: str, option: str) -> float:
    try:
        seconds = parse_duration(text).total_seconds()
    except ValueError as exc:
        raise UsageError(f"{option}: {exc}") from None
    if seconds <= 0:
        raise UsageError(f"{option} {text}: must be longer than zero")
    return seconds


def _targets(args: argparse.Namespace):
    try:
        targets = [parse_target(text) for text in args.server]
    except ValueError as exc:
        raise UsageError(f"--server {exc}") from None
    try:
        targets += load_targets(Path(args.servers)) if args.servers else []
    except ValueError as exc:
        raise UsageError(f"--servers {exc}") from None
    if not targets:
        raise UsageError("name at least one server (--server NAME=HOST:PORT or --servers FILE)")
    names = [t.name for t in targets]
    if len(set(names)) < len(names):
        raise UsageError(f"a server is named twice ({', '.join(sorted({n for n in names if names.count(n) > 1}))})")
    return targets


def run(settings: Settings, args: argparse.Namespace) -> int:
    targets = _targets(args)
    every_s = (_seconds(args.every, "--every") if args.every
               else settings.shadow_redundancy.timing("").heartbeat_ms / 1000)
    timeout_s = _seconds(args.timeout, "--timeout") if args.timeout else min(DEFAULT_TIMEOUT_S, every_s)
    if args.rounds is not None and args.rounds < 1:
        raise UsageError(f"--rounds {args.rounds}: must be at least 1")
    deliveries = Deliveries(settings.kafka, settings.kafka.delivery_timeout_seconds)
    client = reporting_producer(settings.kafka, deliveries)
    topic = args.to or settings.topics.events

    def publish(event) -> None:
        produce(client, topic, event, deliveries.delivered)
        deliveries.produced += 1

    prober = Prober(targets, publish, every_s=every_s, timeout_s=timeout_s, prober=args.name)
    with stop_on_signals() as stop:
        try:
            counts = prober.run(stop, rounds=args.rounds)
        finally:
            undelivered = flush(client, deliveries)
    print(counts.describe())
    if undelivered:
        print(deliveries.describe_failure(), file=sys.stderr)
        return 1
    return stop.exit_status()
