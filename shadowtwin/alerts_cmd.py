"""`shadowtwin alerts tail | route`: read the twin's alerts, or deliver them to webhooks (see producers/alert_router.py)."""

from __future__ import annotations

import argparse
import sys
import urllib.parse

from infra.settings import Settings
from infra.signals import stop_on_signals
from shadowtwin.arguments import SECONDS, topic
from shadowtwin.errors import UsageError
from shadowtwin.kafka_options import PARENT as KAFKA_OPTIONS
from shadowtwin.tail_cmd import add_tail_parser


def add_parser(commands) -> None:
    alerts = commands.add_parser("alerts", help="the twin's alerts: print them, or route them to webhooks",
                                 description="Print the alerts the twin published (tail), or deliver them to an"
                                             " Alertmanager and/or a generic JSON webhook (route).")
    actions = alerts.add_subparsers(dest="alerts_action", required=True, metavar="ACTION")
    add_tail_parser(actions, "alerts")
    add_route_parser(actions)


def add_route_parser(actions) -> None:
    route = actions.add_parser("route", help="deliver the alerts to an Alertmanager and/or a generic webhook",
                               parents=[KAFKA_OPTIONS],
                               description="Consume the alerts topic and deliver every alert to an Alertmanager"
                                           " (/api/v2/alerts: labels, annotations, startsAt, endsAt; resolves when a"
                                           " later alert clears a condition) and/or a generic JSON webhook, retrying"
                                           " with back-off; an alert's offset is committed only once every receiver"
                                           " acknowledged it; a receiver answering 401, 403 or 407 (its credentials, or"
                                           " its proxy's, are wrong) is retried too, saying so. An alert a receiver"
                                           " refuses (another 4xx but 408 and 429) is not retried: it goes to the"
                                           " dead-letter topic with the answer; so does a record that is no alert; 20"
                                           " records of another topic (events, JSON) read before any alert end the run,"
                                           " exit 1. Runs until Ctrl-C or SIGTERM (exit 130 or 143); ended by --seconds,"
                                           " exit 1 if anything was not delivered, saying how many.")
    route.add_argument("--alertmanager", metavar="URL", action="append", default=[],
                       help="Alertmanager's address (e.g. http://127.0.0.1:9093; a user and password in it,"
                            " http://user:password@host:9093, are sent as HTTP Basic auth); repeated for each member"
                            " of a cluster, each gets every alert")
    route.add_argument("--webhook", metavar="URL", action="append", default=[],
                       help="a generic webhook: one JSON object per notification; repeated, each gets every one")
    route.add_argument("--topic", type=topic, help="the topic to read (default: the alerts topic)")
    route.add_argument("--seconds", type=SECONDS, help="stop after this long (default: run until Ctrl-C or SIGTERM)")
    route.set_defaults(run=run_route)


def run_route(settings: Settings, args: argparse.Namespace) -> int:
    from producers.alert_router import AlertRouter, alertmanager, webhook

    receivers = _once([*(alertmanager(_url(url, "--alertmanager")) for url in args.alertmanager),
                       *(webhook(_url(url, "--webhook")) for url in args.webhook)])
    if not receivers:
        raise UsageError("name a receiver: --alertmanager URL and/or --webhook URL")
    stop = stop_on_signals()
    router = AlertRouter(settings.kafka, args.topic or settings.topics.alerts, receivers, settings.alert_routing,
                         settings.topics.dead_letters, say=lambda line: print(line, file=sys.stderr, flush=True))
    counts = router.run(stop, seconds=args.seconds)
    print(counts.describe())
    if not counts.all_done() and not stop.exit_status():  # --seconds ran out, or no alerts topic
        return 1
    return stop.exit_status()


def _once(receivers: list) -> list:
    """`receivers` in their order; one given twice (another member's address meant), written alike or not
    (`http://am:9093` and `http://am:9093/api/v2/alerts`), is refused."""
    seen: set[tuple[str, str]] = set()
    for receiver in receivers:
        if (receiver.name, receiver.url) in seen:
            raise UsageError(f"--{receiver.name} {receiver.shown} is given twice")
        seen.add((receiver.name, receiver.url))
    return receivers


def _url(text: str, option: str) -> str:
    """`text`, an http:// or https:// address; refused in one line that shows no password of it."""
    try:
        parts = urllib.parse.urlsplit(text)
    except ValueError as exc:  # named unless it may hold a password, which cannot be told apart here
        raise UsageError(f"{option}{'' if '@' in text else ' ' + text}: {exc}") from None
    if "@" in text.replace(parts.netloc, "", 1):  # a password cut at its '/', '?' or '#', or no '//' before it
        raise UsageError(f"{option}: an address with an '@' after its host: a password's '/', '?' and '#' are"
                         " written %2F, %3F and %23 (as curl takes them), and a path's '@' %40")
    shown = parts._replace(netloc=f"{parts.username}:***@{parts.netloc.rpartition('@')[2]}") \
        if parts.password is not None else parts
    try:
        parts.port  # raises ValueError for a port that is not a number from 0 to 65535
    except ValueError as exc:
        raise UsageError(f"{option} {shown.geturl()}: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"{option} {shown.geturl()}: expected an http:// or https:// address")
    if any(c.isspace() or not c.isprintable() for c in text):
        raise UsageError(f"{option} {shown.geturl()}: an address has no spaces or control characters")
    return text
