"""`shadowtwin probe`: EHLO each transport server every ShadowHeartbeatFrequency and publish the outcomes
(producers/smtp_probe.py; producers/EXCHANGE_LOGS.md, "The SMTP probe")."""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path

from infra.settings import Settings
from infra.signals import stop_on_signals
from producers.publisher import Deliveries, flush, produce, reporting_producer
from producers.smtp_probe import Prober, load_targets, parse_target, unresolved
from shadowtwin.arguments import COUNT, duration_option, events_topic, topic
from shadowtwin.errors import UsageError
from shadowtwin.kafka_options import PARENT as KAFKA_OPTIONS
from state.names import server_key

DEFAULT_TIMEOUT_S = 10.0


def add_parser(commands) -> None:
    probe = commands.add_parser(
        "probe", parents=[KAFKA_OPTIONS], help="EHLO each transport server every ShadowHeartbeatFrequency; publish answered or failed",
        description="Open SMTP to each transport server, EHLO and QUIT, every ShadowHeartbeatFrequency (the"
                    " [shadow_redundancy] setting), and publish one ServerProbed event per probe: an answered"
                    " probe counts as the server's activity for a log-fed twin, a failed one does not.")
    probe.add_argument("--server", action="append", default=[], metavar="NAME=HOST:PORT",
                       help="a transport server, named as its logs name it (repeatable; an IPv6 address in"
                            " brackets: NAME=[2001:db8::11]:25)")
    probe.add_argument("--servers", metavar="FILE", help="a TOML file of [[server]] tables (name, host, port)")
    probe.add_argument("--every", metavar="DURATION",
                       help="time between rounds (default: shadow_heartbeat_frequency, e.g. 2m, 00:02:00)")
    probe.add_argument("--timeout", metavar="DURATION",
                       help=f"how long one probe may take (default: {DEFAULT_TIMEOUT_S:g}s, or --every if shorter)")
    probe.add_argument("--rounds", type=COUNT, metavar="N", help="stop after N rounds (default: until Ctrl-C or SIGTERM)")
    probe.add_argument("--name", help="the prober's name: the node of a failed probe (default: probe@<host name>)")
    probe.add_argument("--to", metavar="TOPIC", type=topic, help="the topic to publish to (default: the events topic)")
    probe.set_defaults(run=run)


PROBE_OPTIONS = ("--server", "--servers", "--every", "--timeout")  # `shadowtwin probe`'s option names
AGENT_OPTIONS = ("--probe", "--probes", "--probe-every", "--probe-timeout")  # the same, on `ingest`


def _targets(servers: list[str], servers_file: str | None, options: tuple[str, ...]):
    try:
        targets = [parse_target(text) for text in servers]
    except ValueError as exc:
        raise UsageError(f"{options[0]} {exc}") from None
    try:
        targets += load_targets(Path(servers_file)) if servers_file else []
    except ValueError as exc:
        raise UsageError(f"{options[1]} {exc}") from None
    if not targets:
        raise UsageError(f"name at least one server ({options[0]} NAME=HOST:PORT or {options[1]} FILE)")
    keys = [server_key(t.name) for t in targets]  # in any case: MBX01 is mbx01, as the twin reads it
    twice = sorted({t.name for t in targets if keys.count(server_key(t.name)) > 1})
    if twice:
        in_any_case = ": server names are read in any case" if len(twice) > len(set(map(server_key, twice))) else ""
        raise UsageError(f"a server is named twice ({', '.join(twice)}{in_any_case})")
    return targets


def _resolved(targets, given: int, servers_file: str | None, options: tuple[str, ...]) -> None:
    """Each host resolved once, at start (the first `given` targets are the options', the rest the
    file's): a name that does not resolve is a person's mistake, said before any probe (UsageError
    naming the option and the server); one that stops resolving later makes failed probes."""
    for n, target in enumerate(targets):
        problem = unresolved(target)
        if problem:
            where = options[0] if n < given else f"{options[1]} {servers_file}: server"
            raise UsageError(f"{where} {target.name}: {problem}")


def _prober(settings: Settings, servers: list[str], servers_file: str | None, every: str | None,
            timeout: str | None, name: str | None, options: tuple[str, ...] = PROBE_OPTIONS) -> Prober:
    """The prober the options describe (a person's mistake: UsageError naming the option); it
    publishes nothing until its `publish` is set."""
    targets = _targets(servers, servers_file, options)
    every_s = duration_option(every, options[2]) if every else settings.shadow_redundancy.timing("").heartbeat_ms / 1000
    timeout_s = duration_option(timeout, options[3]) if timeout else min(DEFAULT_TIMEOUT_S, every_s)
    _resolved(targets, len(servers), servers_file, options)
    return Prober(targets, lambda event: None, every_s=every_s, timeout_s=timeout_s, prober=name)


# ---- the probe inside `ingest --follow` (one agent beside a server) ------------------------

def add_agent_options(ingest: argparse.ArgumentParser) -> None:
    """`ingest --follow --probe NAME=HOST:PORT ...`: the same probe, run by the ingester."""
    group = ingest.add_argument_group("the SMTP probe, run by the ingester (with --follow)")
    group.add_argument("--probe", action="append", default=[], metavar="NAME=HOST:PORT",
                       help="also EHLO this transport server every ShadowHeartbeatFrequency and publish the outcome"
                            " (repeatable; see `shadowtwin probe`)")
    group.add_argument("--probes", metavar="FILE", help="a TOML file of [[server]] tables to probe (name, host, port)")
    group.add_argument("--probe-every", metavar="DURATION", help="time between probe rounds (default:"
                                                                 " shadow_heartbeat_frequency)")
    group.add_argument("--probe-timeout", metavar="DURATION",
                       help=f"how long one probe may take (default: {DEFAULT_TIMEOUT_S:g}s, or --probe-every if shorter)")
    group.add_argument("--probe-name", help="the prober's name: the node of a failed probe (default: probe@<host name>)")


def agent_prober(settings: Settings, args: argparse.Namespace) -> Prober | None:
    """The prober `ingest` runs beside its files, or None when no server is to be probed."""
    if not (args.probe or args.probes or args.probe_every or args.probe_timeout or args.probe_name):
        return None
    if not args.follow:
        raise UsageError("--probe runs beside --follow (an agent that runs until stopped); add --follow")
    return _prober(settings, args.probe, args.probes, args.probe_every, args.probe_timeout, args.probe_name,
                   AGENT_OPTIONS)


def beside(prober: Prober | None, publish, stop) -> threading.Thread | None:
    """Run the prober's rounds in a thread, each event to `publish`, until `stop` is set."""
    if prober is None:
        return None
    prober.publish = publish
    thread = threading.Thread(target=prober.run, args=(stop,), name="smtp-probe", daemon=True)
    thread.start()
    return thread


def stopped(thread: threading.Thread | None, stop) -> None:
    """Stop the prober's thread (after its probe under way, at most its timeout)."""
    if thread is not None:
        stop.set()
        thread.join()


def run(settings: Settings, args: argparse.Namespace) -> int:
    prober = _prober(settings, args.server, args.servers, args.every, args.timeout, args.name)
    deliveries = Deliveries(settings.kafka, settings.kafka.delivery_timeout_seconds)
    topic = events_topic(settings.topics, args.to)
    client = reporting_producer(settings.kafka, deliveries, (topic,))

    def publish(event) -> None:
        produce(client, topic, event, deliveries.delivered)
        deliveries.produced += 1

    prober.publish = publish
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
