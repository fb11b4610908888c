"""The SMTP probe: EHLO to each transport server every ShadowHeartbeatFrequency, published as events.

A log-fed twin knows a server is alive from its own log lines (state/liveness.py); a server
that is alive but idle logs little. The probe does what a shadow's heartbeat does, from
outside: every round it opens SMTP to each server, sends EHLO and QUIT within a timeout (one
deadline for the whole conversation, producers/smtp_talk.py), and publishes one `ServerProbed`
per server, stamped with the prober's clock when the probe began:

- answered (EHLO got 250, or HELO did from a server without ESMTP, which refuses EHLO with
  5xx): `node` is the probed server, so the event counts as that server's activity (a
  `NodeSeen` fact, state/facts.py), as a line in its log would;
- failed (refused, timed out, no 250): `node` is the prober, so it is no activity of the server.

The model does nothing else with it. Servers are `NAME=HOST:PORT` (`NAME=[2001:db8::11]:25` for
an IPv6 address) or a TOML file:

    [[server]]
    name = "mbx01"
    host = "10.0.0.11"
    port = 25
"""

from __future__ import annotations

import ipaddress
import re
import socket
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from infra.wording import counted
from producers.smtp_talk import Conversation, NotSMTP
from schemas.events import ServerProbed

DEFAULT_PORT = 25
_HOST_NAME = re.compile(r"^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")


@dataclass(frozen=True)
class Target:
    """A transport server to probe: its name in the events (as its logs name it) and its SMTP address."""

    name: str
    host: str
    port: int = DEFAULT_PORT


def parse_target(text: str) -> Target:
    """`NAME=HOST:PORT` (or `NAME=HOST`, port 25; an IPv6 address in brackets, `NAME=[::1]:25`);
    ValueError naming what is wrong."""
    name, sep, address = text.partition("=")
    if address.startswith("["):
        host, bracket, rest = address[1:].partition("]")
        colon, port = rest[:1], rest[1:] if rest else str(DEFAULT_PORT)
        if not bracket or (rest and colon != ":"):
            raise ValueError(f"{text!r}: expected NAME=HOST:PORT (an IPv6 address as NAME=[2001:db8::11]:25)")
    elif address.count(":") > 1:
        raise ValueError(f"{text!r}: an IPv6 address goes in brackets, as NAME=[2001:db8::11]:25")
    else:
        host, _, port = address.partition(":") if ":" in address else (address, "", str(DEFAULT_PORT))
    if not sep or not name.strip() or not host.strip():
        raise ValueError(f"{text!r}: expected NAME=HOST:PORT")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text!r}: the port {port!r} is not a number from 1 to 65535")
    return Target(name.strip(), host.strip(), int(port))


def unresolved(target: Target) -> str | None:
    """Why `target`'s host does not resolve (`the host 'x' does not resolve (...)`), or None if it does."""
    try:
        socket.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        return f"the host {target.host!r} does not resolve ({getattr(exc, 'strerror', None) or exc})"
    return None


def load_targets(path: Path) -> list[Target]:
    """The `[[server]]` tables of a TOML file; ValueError naming the file and the entry."""
    try:
        raw = tomllib.loads(path.read_text())
    except OSError as exc:  # a missing file is no TOML to fix
        raise ValueError(f"{path}: {exc.strerror}") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"{path}: cannot be read as TOML ({exc})") from None
    servers = raw.get("server")
    if not isinstance(servers, list) or not servers:
        raise ValueError(f"{path}: expected one [[server]] table per server (name, host, port)")
    targets = []
    for i, entry in enumerate(servers, 1):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not isinstance(
                entry.get("host"), str):
            raise ValueError(f"{path}: server {i}: needs a name and a host (strings)")
        port = entry.get("port", DEFAULT_PORT)
        if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
            raise ValueError(f"{path}: server {i} ({entry['name']}): the port {port!r} is not a number from 1 to 65535")
        host = entry["host"].strip()
        targets.append(Target(entry["name"], host[1:-1] if host.startswith("[") and host.endswith("]") else host, port))
    return targets


def ehlo_name(wanted: str | None, sock: socket.socket) -> str:
    """What EHLO says (RFC 5321 4.1.3): `wanted` if it is a host name (IDNA-encoded, as DNS has
    it), else the address literal of our end of `sock` (`[10.0.0.5]`, `[IPv6:...]`): a name with
    `_` or spaces gets `501` from Exim, and a reverse lookup of our own name could take longer
    than the probe may."""
    try:
        name = (wanted or "").encode("idna").decode("ascii")
    except UnicodeError:
        name = ""
    if _HOST_NAME.match(name):
        return name
    address = ipaddress.ip_address(sock.getsockname()[0].partition("%")[0])
    return f"[IPv6:{address}]" if address.version == 6 else f"[{address}]"


def ehlo(target: Target, timeout_s: float, local_hostname: str | None = None) -> tuple[bool, str]:
    """Open SMTP, EHLO `local_hostname` (see `ehlo_name`; HELO if EHLO got 5xx), QUIT, all within
    `timeout_s`: (answered with 250, the answer's first line or why there was none: a greeting
    other than 220 such as `421 ... busy`, a timeout, a refusal)."""
    try:
        with Conversation(target.host, target.port, timeout_s) as smtp:
            greeting = smtp.reply("greeting")
            if greeting.code != 220:
                return False, greeting.first()
            me = ehlo_name(local_hostname, smtp.sock)
            answer = smtp.command(f"EHLO {me}")
            reply = answer.first()
            if 500 <= answer.code < 600:  # no ESMTP here: HELO, as RFC 5321 (3.2) has a client do
                refused, answer = answer, smtp.command(f"HELO {me}")
                reply = f"{answer.first()} (HELO, after EHLO got {refused.code})" if answer.code == 250 else reply
            try:
                smtp.command("QUIT")
            except (OSError, NotSMTP):
                pass  # the answer to EHLO is what was asked; a QUIT cut short changes nothing
            return answer.code == 250, reply
    except socket.gaierror:  # resolved at start (`unresolved`), no longer: a DNS failure
        return False, unresolved(target) or f"the host {target.host!r} did not resolve"
    except (OSError, NotSMTP) as exc:
        return False, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


@dataclass
class ProbeCounts:
    rounds: int = 0
    answered: int = 0
    failed: int = 0
    by_server: dict[str, tuple[int, int]] = field(default_factory=dict)  # name -> (answered, failed)

    def describe(self) -> str:
        return (f"{counted(self.rounds, 'round')}: {counted(self.answered + self.failed, 'probe')}, {self.answered} answered,"
                f" {self.failed} failed")


class Prober:
    """Probes `targets` in rounds and hands each event to `publish`."""

    def __init__(self, targets: Iterable[Target], publish: Callable[[ServerProbed], None], *, every_s: float,
                 timeout_s: float, prober: str | None = None, clock: Callable[[], float] = time.time):
        self.targets = list(targets)
        self.publish = publish
        self.every_s = every_s
        self.timeout_s = timeout_s
        self.prober = prober or f"probe@{socket.gethostname()}"
        self.clock = clock
        self.counts = ProbeCounts()

    def probe(self, target: Target) -> ServerProbed:
        started_ms = int(self.clock() * 1000)
        answered, reply = ehlo(target, self.timeout_s, local_hostname=self.prober.partition("@")[2] or None)
        event = ServerProbed(event_id=f"probe:{self.prober}:{target.name}:{started_ms}", event_time_ms=started_ms,
                             node=target.name if answered else self.prober, primary_server=target.name,
                             server=target.name, answered=answered, reply=reply)
        seen = self.counts.by_server.get(target.name, (0, 0))
        self.counts.by_server[target.name] = (seen[0] + answered, seen[1] + (not answered))
        if answered:
            self.counts.answered += 1
        else:
            self.counts.failed += 1
        return event

    def round(self) -> None:
        for target in self.targets:
            self.publish(self.probe(target))
        self.counts.rounds += 1

    def run(self, stop, rounds: int | None = None) -> ProbeCounts:
        """Round after round, one every `every_s` from the first (a slow round delays the next, never
        doubles it), until `stop` (a threading.Event) is set or `rounds` are done."""
        start = time.monotonic()
        while not stop.is_set() and (rounds is None or self.counts.rounds < rounds):
            self.round()
            if rounds is not None and self.counts.rounds >= rounds:
                break
            due = start + self.counts.rounds * self.every_s
            stop.wait(max(0.0, due - time.monotonic()))
        return self.counts
