"""Options that refuse what cannot be meant: numbers when the arguments are parsed, a speed or
a duration when the command reads them.

    record.add_argument("--count", type=COUNT)      # -1 or 0: `argument --count: expected ...`, exit 2
    tail.add_argument("-n", type=ZERO_OR_MORE)      # -3: `argument --lines/-n: expected ...`, exit 2
    replay.add_argument("--to", type=topic)         # 'a b': `argument --to: expected a Kafka topic name ...`
    events_topic(settings.topics, args.to)          # the alerts topic: `--to shadowtwin.alerts: the twin writes its alerts there; ...`
    seconds = duration_option(args.duration, "--duration")   # 'abc': `--duration: not a duration ...`, exit 2
    server_name("EX01", {"ex01", "ex02"})           # 'ex01': Exchange's server names are read in any case
    server_name("EX01.contoso.com", {"ex01"})       # 'ex01': and by their host name

A refused value is one line naming the option and the value, exit status 2: argparse's error for
the numbers, a UsageError for the others.
"""

from __future__ import annotations

import argparse
import math
import re
from typing import Callable, Iterable, TypeVar

from infra.config import closest
from infra.settings import TOPIC_NAME, TOPIC_NAME_EXPECTED, TopicSettings
from infra.topics import json_topic

from producers.mtl_events import server as host_name
from producers.replayer import parse_speed
from shadowtwin.errors import UsageError
from state.names import server_key
from state.parameters import parse_duration

N = TypeVar("N", int, float)


def number(kind: Callable[[str], N], test: Callable[[N], bool], expected: str) -> Callable[[str], N]:
    """An argparse `type`: the text as `kind` when `test` accepts it, else an error saying `expected`."""

    def parse(text: str) -> N:
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not test(value):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value

    return parse


COUNT = number(int, lambda n: n >= 1, "a whole number >= 1")
ZERO_OR_MORE = number(int, lambda n: n >= 0, "a whole number >= 0")  # a count where none means something (-n 0)
SECONDS = number(float, lambda s: 0 < s < math.inf, "a number of seconds > 0")  # how long to run
INTERVAL = number(float, lambda s: 0 <= s < math.inf, "a number of seconds >= 0")  # a pause between two acts


def topic(text: str) -> str:
    """An argparse `type`: a name Kafka takes for a topic (`--to 'a b'` was refused by the broker, as no such topic)."""
    if re.fullmatch(TOPIC_NAME, text) is None:
        raise argparse.ArgumentTypeError(f"expected {TOPIC_NAME_EXPECTED} of at most 249 characters, got {text!r}")
    return text


def parse_assignment(assignment: str) -> tuple[str | None, str, str]:
    """(node, or None for every node; name; value) of `name=value` or `node:name=value` (whatif's --set, --compare)."""
    if "=" not in assignment:
        raise ValueError(f"expected NAME=VALUE or NODE:NAME=VALUE, got {assignment!r}")
    name, value = assignment.split("=", 1)
    node, colon, name = name.rpartition(":")
    if colon and not node.strip():
        raise ValueError(f"expected NODE:NAME=VALUE, got {assignment!r} (no node before the colon)")
    if not name.strip():
        raise ValueError(f"expected NAME=VALUE or NODE:NAME=VALUE, got {assignment!r} (no name before the =)")
    return node.strip() or None, name.strip(), value.strip()


def assignment(text: str) -> str:
    """An argparse `type`: `name=value` or `node:name=value`, checked when the option is read: `--set
    ShadowResubmitTimeSpan 01:00:00` (PowerShell's space) said 'unrecognized argument: 01:00:00', not the mistake."""
    try:
        parse_assignment(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def domain(text: str) -> str:
    """An argparse `type`: a mail domain (`contoso.com`; `@contoso.com` is taken for it). An address or a text with
    spaces is refused: no recipient's domain would ever equal it, and every recipient would count as external."""
    name = text.strip().removeprefix("@")
    if not name or "@" in name or any(c.isspace() for c in name):
        raise argparse.ArgumentTypeError(f"expected a domain such as contoso.com, got {text!r}")
    return name


def speed_option(text: str) -> float | None:
    """`--speed`: None for `max`, else seconds of event time per second (producers.replayer.parse_speed);
    a UsageError naming the value otherwise."""
    try:
        return parse_speed(text)
    except ValueError as exc:
        raise UsageError(f"--speed {text}: {exc}") from None


def duration_option(text: str, option: str, *, whole_ms: bool = False) -> float:
    """A duration option (`--duration 90m`, `--max-age 7d`, `--every 00:02:00`) in seconds, longer
    than zero; a UsageError naming the option and the value otherwise. With `whole_ms` (what
    counts whole milliseconds: simulate's --duration) it must be a millisecond at least: a
    shorter one would be nothing there."""
    try:
        seconds = parse_duration(text).total_seconds()
    except ValueError as exc:
        if _negative(text):
            raise UsageError(f"{option} {text}: must be longer than zero") from None
        raise UsageError(f"{option}: {exc}") from None
    if seconds <= 0:
        raise UsageError(f"{option} {text}: must be longer than zero")
    if whole_ms and seconds < 0.001:
        raise UsageError(f"{option} {text}: must be 1ms or longer (it is counted in whole milliseconds)")
    return seconds


def _negative(text: str) -> bool:
    """`-5m`, `-00:05:00`: a duration with a minus before it."""
    try:
        return text.strip().startswith("-") and parse_duration(text.strip()[1:]) is not None
    except ValueError:
        return False


def server_name(name: str, known: Iterable[str]) -> str | None:
    """The server of `known` that `name` names, read in any case as Exchange reads server names, else the one
    whose host name it names (`MBX01.contoso.com`: mbx01, as the message-tracking logs are read); None if none."""
    known = set(known)
    if name in known:
        return name
    same = next((k for k in sorted(known) if server_key(k) == server_key(name)), None)
    hosts = [k for k in sorted(known) if host_name(k) == host_name(name)]
    return same or (hosts[0] if len(hosts) == 1 else None)


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`; did you mean 'mbx06'?` with the server (or topic) of `known` closest to `name` in any case, or "" when none
    is."""
    folded = {server_key(k): k for k in sorted(known)}
    meant = closest(server_key(name), folded)
    return f"; did you mean {folded[meant]!r}?" if meant else ""


def events_topic(topics: TopicSettings, to: str | None) -> str:
    """The topic a command publishes events to: `to`, or the events topic; not one the twin writes its alerts,
    commands, dead letters or state to (or JSON copies of them), where its readers would meet events."""
    if to is None:
        return topics.events
    roles = {topics.alerts: "its alerts", topics.commands: "its redelivery commands",
             topics.dead_letters: "its dead letters", topics.state: "its state"}
    roles |= {json_topic(topics.alerts): "the JSON copies of its alerts",
              json_topic(topics.commands): "the JSON copies of its redelivery commands"}
    if to in roles:
        raise UsageError(f"--to {to}: the twin writes {roles[to]} there; events go to {topics.events}")
    return to
