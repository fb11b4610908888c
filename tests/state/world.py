"""A tiny world simulator: three servers, messages, crashes and restarts, as the events they emit.

2013+ behaviour: shadows query every 2 minutes, primaries deliver unless down, restarts
come with the same or a new queue database. Property tests draw worlds with hypothesis;
the streaming tests replay fixed ones through Kafka and Spark.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hypothesis import strategies as st

from schemas.events import ShadowFailureReason
from tests.state.scenario import Org

SERVERS = ("mbx01", "mbx02", "mbx03")
HORIZON = 12 * 60  # minutes of heartbeats; then a final tick after every expiry


@dataclass(frozen=True)
class Crash:
    down_at: int
    down_for: int
    new_db: bool

    def down(self, minute: float) -> bool:
        return self.down_at <= minute < self.down_at + self.down_for


@dataclass(frozen=True)
class Mail:
    primary: int
    shadow_offset: int
    received: int
    delay: int
    shadow_ok: bool


crashes = st.one_of(st.none(), st.builds(Crash, st.integers(0, 120), st.integers(1, 400), st.booleans()))
mails = st.builds(Mail, st.integers(0, 2), st.integers(1, 2), st.integers(0, 90), st.integers(1, 15),
                  st.booleans() | st.just(True))
worlds = st.tuples(st.lists(mails, min_size=1, max_size=8), st.tuples(crashes, crashes, crashes))


def simulate(mail_list, crash_list, org: Org | None = None):
    org = org or Org()
    crash = dict(zip(SERVERS, crash_list))

    def down(server, minute):
        return crash[server] is not None and crash[server].down(minute)

    def db(server, minute):
        c = crash[server]
        return f"db-{server}-2" if c and c.new_db and minute >= c.down_at + c.down_for else f"db-{server}-1"

    events = [e for s in SERVERS for e in org.started(s, db(s, 0), 0)]
    for s, c in crash.items():
        if c is not None:
            events += org.started(s, db(s, c.down_at + c.down_for), c.down_at + c.down_for)
    delivered_at: dict[str, float] = {}
    held: dict[tuple[str, str], dict[str, float]] = {}  # (shadow, primary) -> message -> stored at
    involved: dict[str, tuple[str, str | None]] = {}
    for i, mail in enumerate(mail_list):
        mid, p = f"m{i}", SERVERS[mail.primary]
        s = SERVERS[(mail.primary + mail.shadow_offset) % 3]
        t = mail.received + i / 100
        if down(p, t):
            continue
        events += org.received(p, mid, t)
        if mail.shadow_ok and not down(s, t):
            events += org.shadowed(p, s, mid, t, db=db(p, t))
            held.setdefault((s, p), {})[mid] = t
            involved[mid] = (p, s)
        else:
            events += org.shadow_failed(p, mid, t + 0.01, reason=ShadowFailureReason.NO_PEER)
            involved[mid] = (p, None)
        c, due = crash[p], t + mail.delay
        if c is not None and c.down_at <= due and c.down_at >= t:  # crashed before delivering
            if c.new_db:
                continue
            due = c.down_at + c.down_for + 0.5  # same database: it delivers on return
        events += org.delivered(p, mid, "next-hop", due)
        delivered_at[mid] = due
    for (s, p), messages in held.items():
        start = min(messages.values())
        minute = int(start) + 2
        while minute < HORIZON:
            if not down(s, minute):
                shadow_db = db(s, minute)
                if crash[s] and crash[s].new_db and minute >= crash[s].down_at + crash[s].down_for:
                    messages.clear()  # its shadow queue came back empty
                if down(p, minute):
                    events += org.query_failed(s, p, minute, shadow_db=shadow_db)
                else:
                    done = sorted(m for m in messages if delivered_at.get(m, HORIZON * 10) <= minute)
                    for m in done:
                        del messages[m]
                    events += org.query_ok(s, p, minute, db=db(p, minute), discarded=done, shadow_db=shadow_db)
            minute += 2
    events += org.tick(HORIZON + 10 * 24 * 60)
    return sorted(events, key=lambda e: e.event_time_ms), crash, involved


def spelled_apart(events):
    """The same events as servers spell names in practice: a primary's own events as its logs do (mbx01), its
    shadows naming themselves in capitals (MBX02) and their primary as a person might (Mbx01), the primary
    naming its shadow copy's holder so too (Mbx02). One server each to Exchange (state/names.py)."""
    out = []
    for e in events:
        if e.primary_server and e.node != e.primary_server:
            e = replace(e, node=e.node.upper(), primary_server=e.primary_server.capitalize())
        if getattr(e, "shadow_server", None):
            e = replace(e, shadow_server=e.shadow_server.capitalize())
        out.append(e)
    return out
