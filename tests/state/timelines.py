"""The behaviours the documents make clear, each as a timeline of plain data.

A function per behaviour returns a `Timeline`: the events (the facts every group shares are
derived from them by the engine, see state/facts.py), the ModelConfig, and what the twin
must decide: every alert (type, event time, messages) and every redelivery command (holder,
message, fork, next hop, recipients, event time), nothing more. The scenario tests in this
folder run them through the reference replay; the streaming tests can run exactly the same
timelines through the Spark operator and compare by alert and command id with the replay.

Times are minutes after T0 (`at`), as in tests/state/scenario.py.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from schemas import events as ev
from schemas.events import AlertType, CommandReason, NodeMode, SiteLocality
from state.parameters import ModelConfig, parameters_from
from tests.state.scenario import DAY, HOUR, MINUTE, Org, T0, at, ref


@dataclass(frozen=True)
class Expected:
    """One alert the twin must raise."""

    type: AlertType
    at_ms: int
    messages: tuple[str, ...] = ()  # internal ids, in the alert's order
    recipients: tuple[tuple[str, ...], ...] | None = None  # per message, when the behaviour is about them


@dataclass(frozen=True)
class Command:
    """One redelivery command the twin must send."""

    holder: str
    primary: str
    message: str
    fork: str | None
    next_hop: str | None
    recipients: tuple[str, ...]
    at_ms: int
    reason: CommandReason = CommandReason.PRIMARY_HEARTBEAT_TIMEOUT


@dataclass(frozen=True)
class Timeline:
    name: str
    events: list
    config: ModelConfig = field(default_factory=ModelConfig)
    alerts: tuple[Expected, ...] = ()
    commands: tuple[Command, ...] = ()
    # How the twin stops tracking each message (internal id, result, event time), when the behaviour is about it.
    outcomes: tuple[tuple[str, str, int], ...] | None = None

    def alert_types(self) -> list[AlertType]:
        return [a.type for a in self.alerts]


def observed_alerts(alerts, with_recipients: bool = False) -> list[Expected]:
    """The replay's (or the twin's) alerts in the shape of `Expected`, in event-time order."""
    return [Expected(a.type, a.decided_at_ms, tuple(m.message.internal_id for m in a.messages),
                     tuple(m.recipients for m in a.messages) if with_recipients else None)
            for a in sorted(alerts, key=lambda a: (a.decided_at_ms, a.type.value,
                                                   tuple(m.message.internal_id for m in a.messages)))]


def observed_commands(commands) -> list[Command]:
    return [Command(c.holder, c.primary_server, c.message.internal_id, c.message.fork_id, c.next_hop, c.recipients,
                    c.decided_at_ms, c.reason)
            for c in sorted(commands, key=lambda c: (c.decided_at_ms, c.command_id))]


def _heartbeats_ok(org, shadow, primary, start, stop, every=2, db="dbP1", shadow_db="dbS1"):
    out = []
    minute = start
    while minute < stop:
        out += org.query_ok(shadow, primary, minute, db=db, shadow_db=shadow_db)
        minute += every
    return out


# ---- 1. expiry ------------------------------------------------------------------------

def expiry_in_a_live_primary() -> Timeline:
    """mbx03 keeps refusing m1 (DEFER every 30 min); mbx02's heartbeats to mbx01 keep succeeding.
    Exchange expires m1 at receipt + MessageExpirationTimeout (2 days): one MESSAGE_EXPIRED then,
    no promotion ever, nothing held once mbx02's next query collects the discard."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.received("mbx01", "m1", 0),
              *org.shadowed("mbx01", "mbx02", "m1", 0)]
    for minute in range(1, 2 * 24 * 60, 30):
        events += org.deferred("mbx01", "m1", "mbx03", minute)
    events += _heartbeats_ok(org, "mbx02", "mbx01", 2, 2 * 24 * 60 + 1)
    events += org.query_ok("mbx02", "mbx01", 2 * 24 * 60 + 2, discarded=("m1",))
    events += _heartbeats_ok(org, "mbx02", "mbx01", 2 * 24 * 60 + 4, 2 * 24 * 60 + 60)
    return Timeline("expiry in a live primary", events,
                    alerts=(Expected(AlertType.MESSAGE_EXPIRED, at(0) + 2 * DAY, ("m1",)),))


# ---- 3. forks and side effects ---------------------------------------------------------

def crash_between_forks() -> Timeline:
    """m1 is for a@fabrikam.com and b@tailspin.com. mbx01 hands fork f1 (a) to the Internet gateway,
    which acknowledges, and crashes before it sends anything for b. After ShadowResubmitTimeSpan
    mbx02 promotes: ONE command, for b only. mbx02's last answer (at 1) came before the gateway's
    acknowledgement: without f1's discard notification it resubmits f1's copy on its own, and a gets m1
    twice then. mbx01 returns with the same database and delivers b again: that duplicate names b, never a."""
    org = Org()
    events = [
        *org.started("mbx01", "dbP1", 0),
        *org.received("mbx01", "m1", 0, recipients=(), external=("a@fabrikam.com", "b@tailspin.com")),
        *org.shadowed("mbx01", "mbx02", "m1", 0),
        *org.query_ok("mbx02", "mbx01", 1),
        *org.sent("mbx01", "m1", "gw-fabrikam", 1, fork="f1", recipients=("a@fabrikam.com",), outside=True),
        *org.acked("mbx01", "m1", "gw-fabrikam", 1.5, fork="f1"),
        # mbx01 crashes at minute 2
        *org.heartbeats_failing("mbx02", "mbx01", 3, 4 * 60),
        *org.started("mbx01", "dbP1", 4 * 60),
        *org.query_ok("mbx02", "mbx01", 4 * 60 + 1),
    ]
    promoted_at = at(1) + 3 * HOUR
    return Timeline("crash between forks", events, alerts=(
        Expected(AlertType.DUPLICATE_DELIVERY_EXPECTED, promoted_at, ("m1",), (("a@fabrikam.com",),)),
        Expected(AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, promoted_at, ("m1",)),
        Expected(AlertType.DUPLICATE_DELIVERY_EXPECTED, at(4 * 60), ("m1",), (("b@tailspin.com",),)),
    ), commands=(Command("mbx02", "mbx01", "m1", None, None, ("b@tailspin.com",), promoted_at),))


def crash_with_a_fork_pending() -> Timeline:
    """Both forks were sent; only f1 was acknowledged: the command resends f2 to its own next hop. f1's discard
    notification never reached mbx02 (its last answer came first): mbx02 resends f1's copy on its own, and a@
    gets m1 twice, three hours apart: her mailbox's duplicate detection, which keeps a delivery one hour (004), no
    longer hides it."""
    org = Org()
    events = [
        *org.started("mbx01", "dbP1", 0),
        *org.received("mbx01", "m1", 0, recipients=("a@contoso.com", "b@contoso.com")),
        *org.shadowed("mbx01", "mbx02", "m1", 0),
        *org.query_ok("mbx02", "mbx01", 1),
        *org.sent("mbx01", "m1", "mbx03", 1, fork="f1", recipients=("a@contoso.com",)),
        *org.sent("mbx01", "m1", "mbx04", 1, fork="f2", recipients=("b@contoso.com",)),
        *org.acked("mbx01", "m1", "mbx03", 1.5, fork="f1"),
        *org.heartbeats_failing("mbx02", "mbx01", 3, 4 * 60),
    ]
    promoted_at = at(1) + 3 * HOUR
    return Timeline("crash with a fork pending", events, alerts=(
        Expected(AlertType.DUPLICATE_DELIVERY_EXPECTED, promoted_at, ("m1",), (("a@contoso.com",),)),
        Expected(AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, promoted_at, ("m1",)),
    ), commands=(Command("mbx02", "mbx01", "m1", "f2", "mbx04", ("b@contoso.com",), promoted_at),))


def crash_with_a_side_effect_pending() -> Timeline:
    """m1 reached every recipient, but the DSN it caused (d1) was not sent yet: the promotion
    resends d1 only, never m1. mbx02 had no answered query after m1's delivery, so no discard
    notification emptied mbx03's shadow queue: mbx02 resends m1 there on its own, twice for alice
    (three hours apart: past her mailbox's duplicate detection)."""
    org = Org()
    events = [
        *org.started("mbx01", "dbP1", 0),
        *org.received("mbx01", "m1", 0), *org.shadowed("mbx01", "mbx02", "m1", 0),
        *org.query_ok("mbx02", "mbx01", 1),
        *org.delivered("mbx01", "m1", "mbx03", 1),
        *org.dsn("mbx01", "d1", parent="m1", at=1.2),
        *org.heartbeats_failing("mbx02", "mbx01", 3, 4 * 60),
    ]
    promoted_at = at(1) + 3 * HOUR
    return Timeline("crash with a side effect pending", events, alerts=(
        Expected(AlertType.DUPLICATE_DELIVERY_EXPECTED, promoted_at, ("m1",)),
        Expected(AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, promoted_at, ("m1",)),
    ), commands=(Command("mbx02", "mbx01", "d1", None, None, (), promoted_at),))


# ---- 8. double failure ------------------------------------------------------------------

def double_failure_with_new_databases() -> Timeline:
    """mbx01 (primary of m1) and mbx02 (its shadow) fail together at minute 9; mbx03 goes on.
    mbx01 comes back at 30 with a new, empty queue database: m1's only copy is on mbx02, which is
    down, so m1 is at risk; mbx02 comes back at 40 with a new database too: m1 is lost, which the
    twin says when it learns of mbx02's new database; no redelivery command for a copy that no
    longer exists."""
    org = Org()
    events = [
        *org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0), *org.started("mbx03", "dbX1", 0),
        *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
        *_heartbeats_ok(org, "mbx02", "mbx01", 2, 9),
        *org.busy("mbx03", 0, 60),
        *org.started("mbx01", "dbP2", 30),
        *org.started("mbx02", "dbS2", 40),
        *org.query_ok("mbx02", "mbx01", 41, db="dbP2", shadow_db="dbS2"),
    ]
    return Timeline("double failure with new databases", events, alerts=(
        Expected(AlertType.SHADOW_SERVER_UNREACHABLE, at(8) + 6 * MINUTE, ("m1",)),
        Expected(AlertType.MESSAGE_AT_RISK, at(30), ("m1",)),
        Expected(AlertType.MESSAGE_LOST, at(40), ("m1",)),
    ))


# ---- 6. Exchange 2010 per server ---------------------------------------------------------

def _previous_hop_outage(org, chicago_started: bool) -> list:
    """Chicago (2010 hub) hands n1 to New York (2010 hub) and keeps the shadow; New York dies at 2;
    Chicago's discard queries (every ShadowHeartbeatTimeoutInterval, 5 min) time out from then on."""
    events = [*org.started("newyork", "dbNY", 0, mode=NodeMode.EXCHANGE_2010)]
    if chicago_started:
        events += org.started("chicago", "dbCHI", 0, mode=NodeMode.EXCHANGE_2010)
    events += [
        *org.received("newyork", "n1", 1), *org.shadowed("newyork", "chicago", "n1", 1, db="dbNY"),
        *org.query_ok("chicago", "newyork", 1, db="dbNY", shadow_db="dbCHI"),
        *org.heartbeats_failing("chicago", "newyork", 6, 40, every=5, shadow_db="dbCHI"),
    ]
    return events


def exchange_2010_shadow_from_its_node_started() -> Timeline:
    """A 2013+ deployment with two 2010 hubs that say so in their NodeStarted: Chicago's silence is
    judged by 300 s x 3, and it takes ownership after 3 consecutive timeouts, as 2010 does."""
    return Timeline("Exchange 2010 shadow, mode from NodeStarted", _previous_hop_outage(Org(), True), alerts=(
        Expected(AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, at(16), ("n1",)),
    ), commands=(Command("chicago", "newyork", "n1", None, None, (), at(16)),))


def exchange_2010_shadow_from_node_configuration() -> Timeline:
    """The same with Chicago's mode from its per-node configuration (it publishes no NodeStarted)."""
    config = ModelConfig(nodes={"chicago": parameters_from({"mode": "EXCHANGE_2010"})})
    return Timeline("Exchange 2010 shadow, mode from configuration", _previous_hop_outage(Org(), False), config,
                    alerts=(Expected(AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, at(16), ("n1",)),),
                    commands=(Command("chicago", "newyork", "n1", None, None, (), at(16)),))


# ---- 2. same-site copies -----------------------------------------------------------------

def same_site_copies_after_remote_retries() -> Timeline:
    """dag1 spans site1 (mbx01, mbx02) and site2 (mbx03). mbx03 does not answer: for m1..m3,
    PreferRemote tries it 4 times, then makes the copy on mbx02, in mbx01's own site. m4 gets
    its copy on mbx03 once it answers again. One informational alert names mbx01, mbx02, site1
    and m1..m3, a heartbeat after the first such copy; everything is then delivered and released."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0, site="site1"), *org.started("mbx02", "dbS1", 0, site="site1"),
              *org.started("mbx03", "dbX1", 0, site="site2")]
    for i, mid in enumerate(("m1", "m2", "m3")):
        t = 1 + i * 0.2
        events += org.received("mbx01", mid, t)
        for attempt in range(1, 5):
            events += org.shadow_failed("mbx01", mid, t + attempt * 0.01, locality=SiteLocality.REMOTE,
                                        attempt=attempt, candidate="mbx03")
        events += org.shadowed("mbx01", "mbx02", mid, t + 0.05, locality=SiteLocality.LOCAL)
    events += [*org.received("mbx01", "m4", 2), *org.shadowed("mbx01", "mbx03", "m4", 2, locality=SiteLocality.REMOTE)]
    for mid in ("m1", "m2", "m3", "m4"):
        events += org.delivered("mbx01", mid, "mbx09", 4)
    events += [*org.query_ok("mbx02", "mbx01", 5, discarded=("m1", "m2", "m3")),
               *org.query_ok("mbx03", "mbx01", 5, discarded=("m4",))]
    return Timeline("same-site copies after remote retries", events, alerts=(
        Expected(AlertType.SHADOW_IN_SAME_SITE, at(1.05) + 2 * MINUTE, ("m1", "m2", "m3")),))


def same_site_copies_local_only() -> Timeline:
    """LocalOnly in a DAG that spans sites: every copy is in the primary's site, without any remote
    attempt (the sites are known from the servers' NodeStarted); one grouped alert."""
    org = Org()
    config = ModelConfig(defaults=parameters_from({"shadow_message_preference_setting": "LocalOnly"}))
    events = [*org.started("mbx01", "dbP1", 0, site="site1"), *org.started("mbx02", "dbS1", 0, site="site1"),
              *org.started("mbx03", "dbX1", 0, site="site2")]
    for i, mid in enumerate(("m1", "m2")):
        events += [*org.received("mbx01", mid, 1 + i * 0.1), *org.shadowed("mbx01", "mbx02", mid, 1 + i * 0.1)]
    events += org.tick(3.5)
    return Timeline("same-site copies, LocalOnly", events, config, alerts=(
        Expected(AlertType.SHADOW_IN_SAME_SITE, at(1) + 2 * MINUTE, ("m1", "m2")),))


def _spanning_dag_with_remote_failures(org: Org, mid: str, minute: float, remote_failures: int) -> list[ev.Event]:
    """dag1 spans site1 (mbx01, mbx02) and site2 (mbx03); mbx03 does not answer `remote_failures` attempts at
    `mid`'s copy, 0.01 min apart."""
    return [*org.received("mbx01", mid, minute),
            *(e for attempt in range(1, remote_failures + 1)
              for e in org.shadow_failed("mbx01", mid, minute + attempt * 0.01, locality=SiteLocality.REMOTE,
                                         attempt=attempt, candidate="mbx03"))]


def remote_only_rejects_after_its_remote_retries_without_a_local_attempt() -> Timeline:
    """RemoteOnly and RejectMessageOnShadowFailure $true, dag1 spanning site1 (mbx01, mbx02) and site2
    (mbx03): "RemoteOnly: Try to make shadow copy of the message only on a DAG member in a different Active
    Directory site based on the number of attempts specified by the MaxRetriesForRemoteSiteShadow parameter"
    (4), and "If a shadow copy of the message isn't successfully created after the specified number of
    attempts ... $true: The primary message is rejected with a transient error" (003). mbx03 does not answer
    m1's 4 attempts (1.01 to 1.04): mbx02, in mbx01's own site, is no candidate, so m1 is rejected (451 4.4.0),
    the twin's word once mbx01 has said nothing of it for a minute after its last attempt. m2's third remote
    attempt succeeds: its copy is on mbx03, and nothing is said of it."""
    org = Org()
    config = ModelConfig(defaults=parameters_from({"ShadowMessagePreferenceSetting": "RemoteOnly",
                                                   "RejectMessageOnShadowFailure": "$true"}))
    events = [*org.started("mbx01", "dbP1", 0, site="site1"), *org.started("mbx02", "dbS1", 0, site="site1"),
              *org.started("mbx03", "dbX1", 0, site="site2"),
              *_spanning_dag_with_remote_failures(org, "m1", 1, 4),
              *_spanning_dag_with_remote_failures(org, "m2", 2, 2),
              *org.shadowed("mbx01", "mbx03", "m2", 2.03, db="dbP1", locality=SiteLocality.REMOTE),
              *org.delivered("mbx01", "m2", "mbx09", 3), *org.query_ok("mbx03", "mbx01", 4, discarded=("m2",)),
              *org.tick(5)]
    return Timeline("RemoteOnly rejects after its remote retries without a local attempt", events, config, alerts=(
        Expected(AlertType.REJECTED_NO_SHADOW, at(1.04) + MINUTE, ("m1",)),),
        outcomes=(("m1", "rejected", at(1.04) + MINUTE), ("m2", "delivered", at(4))))


def prefer_remote_rejects_only_once_the_local_retries_are_spent_too() -> Timeline:
    """PreferRemote (the default) and RejectMessageOnShadowFailure $true, dag1 spanning site1 (mbx01, mbx02)
    and site2 (mbx03): "PreferRemote: Try to make a shadow copy of the message on a DAG member in a different
    Active Directory site based on the number of attempts specified by the MaxRetriesForRemoteSiteShadow
    parameter. If the operation fails, try make a shadow copy of the message on a DAG member in the local
    Active Directory site based on the number of attempts specified by the MaxRetriesForLocalSiteShadow
    parameter" (003). m1: 4 remote attempts fail, then both local ones (mbx02 does not answer either): rejected
    with 451 4.4.0 a minute after the last attempt. m2: 4 remote attempts fail, the first local one too, the
    second makes the copy on mbx02: accepted, redundant, not rejected, its copy in mbx01's own site (one
    SHADOW_IN_SAME_SITE a heartbeat later)."""
    org = Org()
    config = ModelConfig(defaults=parameters_from({"RejectMessageOnShadowFailure": "$true"}))
    events = [*org.started("mbx01", "dbP1", 0, site="site1"), *org.started("mbx02", "dbS1", 0, site="site1"),
              *org.started("mbx03", "dbX1", 0, site="site2")]
    for mid, minute, local_failures in (("m1", 1, 2), ("m2", 2, 1)):
        events += _spanning_dag_with_remote_failures(org, mid, minute, 4)
        events += [e for attempt in range(5, 5 + local_failures)
                   for e in org.shadow_failed("mbx01", mid, minute + attempt * 0.01, locality=SiteLocality.LOCAL,
                                              attempt=attempt, candidate="mbx02")]
    events += [*org.shadowed("mbx01", "mbx02", "m2", 2.06, db="dbP1", locality=SiteLocality.LOCAL),
               *org.delivered("mbx01", "m2", "mbx09", 3), *org.query_ok("mbx02", "mbx01", 4, discarded=("m2",)),
               *org.tick(5)]
    return Timeline("PreferRemote rejects only once the local retries are spent too", events, config, alerts=(
        Expected(AlertType.REJECTED_NO_SHADOW, at(1.06) + MINUTE, ("m1",)),
        Expected(AlertType.SHADOW_IN_SAME_SITE, at(2.06) + 2 * MINUTE, ("m2",))),
        outcomes=(("m1", "rejected", at(1.06) + MINUTE), ("m2", "delivered", at(4))))


# ---- 9. deferred delivery -----------------------------------------------------------------

def deferred_then_primary_fails() -> Timeline:
    """mbx03 refuses m1 (DEFER), then mbx01 crashes: m1 is still pending, and the promotion sends it
    to the next hop it was meant for."""
    org = Org()
    events = [
        *org.started("mbx01", "dbP1", 0),
        *org.received("mbx01", "m1", 0), *org.shadowed("mbx01", "mbx02", "m1", 0),
        *org.query_ok("mbx02", "mbx01", 1),
        *org.deferred("mbx01", "m1", "mbx03", 1, fork="f1"),
        *org.heartbeats_failing("mbx02", "mbx01", 3, 4 * 60),
    ]
    promoted_at = at(1) + 3 * HOUR
    return Timeline("deferred, then the primary fails", events, alerts=(
        Expected(AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, promoted_at, ("m1",)),),
        commands=(Command("mbx02", "mbx01", "m1", "f1", "mbx03", ("alice@contoso.com",), promoted_at),))


# ---- issue 12, item 2: idempotent input ------------------------------------------------------

def stream_sent_twice() -> Timeline:
    """A log shipper resends a whole stream (same event ids): the twin decides exactly what one pass
    decides. Here Chicago's failed 2010 discard queries: one promotion at minute 16, with the ids
    of one pass."""
    once = exchange_2010_shadow_from_its_node_started()
    return Timeline("a stream sent twice", once.events + once.events, once.config, once.alerts, once.commands)


# ---- 7. a returning shadow's resubmissions --------------------------------------------------

def returning_shadow_resubmits_what_was_delivered() -> Timeline:
    """The lab's case, in seconds (heartbeat 1 s, ShadowResubmitTimeSpan 8 s). ex02 keeps the shadow
    copies of ex01's o1..o3 and dies at 3 s; ex01 delivers o1..o3 at 5 s, but ex02 never collects
    the discard notifications. Back at 30 s, past the span, ex02 takes ownership of its copies on its
    own and resubmits all three: each reaches the mailbox twice, and each is named, nothing else. ex02's silence
    (6 s) leaves no message unprotected: o1..o3 were delivered (before: SHADOW_SERVER_UNREACHABLE named them)."""
    org = Org()
    second = 1000
    config = ModelConfig(defaults=parameters_from({"shadow_heartbeat_frequency": "1s",
                                                   "shadow_resubmit_time_span": "8s"}))

    def s(x):
        return x * second / MINUTE

    events = [*org.started("ex01", "q1", 0), *org.started("ex02", "q2", 0), *org.started("ex03", "q3", 0)]
    for i, mid in enumerate(("o1", "o2", "o3")):
        events += [*org.received("ex01", mid, s(0.1 + i * 0.1)),
                   *org.shadowed("ex01", "ex02", mid, s(0.1 + i * 0.1), db="q1")]
    for beat in (1, 2, 3):
        events += org.query_ok("ex02", "ex01", s(beat), db="q1", shadow_db="q2")
    for i, mid in enumerate(("o1", "o2", "o3")):
        t = s(5 + i * 0.1)
        events += [*org.delivered("ex01", mid, "sink", t),
                   ev.DiscardStatusSet(**org._header("ex01", "ex01", t, mid), shadow_server="ex02"),
                   ev.MovedToSafetyNet(**org._header("ex01", "ex01", t, mid))]
    for beat in range(4, 40):  # ex01 and ex03 go on: ex03 holds copies of nothing, but publishes
        events += org.received("ex03", f"x{beat}", s(beat))
        events += org.delivered("ex03", f"x{beat}", "sink", s(beat))
    events += [*org.started("ex02", "q2", s(30)),
               ev.DiscardQuerySent(**org._header("ex02", "ex01", s(30.1)), shadow_queue_db_id="q2")]
    for mid in ("o1", "o2", "o3"):
        events += org.promoted("ex02", "ex01", mid, s(30.2))
    return Timeline("a returning shadow resubmits what was delivered", events, config, alerts=(
        *(Expected(AlertType.DUPLICATE_DELIVERY_EXPECTED, at(s(30.2)), (mid,)) for mid in ("o1", "o2", "o3")),
    ))


# ---- 5. a silent feed -------------------------------------------------------------------------

def silent_feed() -> Timeline:
    """Every server falls silent at minute 9 (the feed stopped, not the servers); only the twin's
    clock goes on. Exchange goes on too: mbx02 promotes m1 at the deadline, which the twin
    forecasts, with one alert that events stopped from the whole topology."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0), *org.started("mbx03", "dbX1", 0),
              *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
              *_heartbeats_ok(org, "mbx02", "mbx01", 2, 9),
              *org.busy("mbx03", 0, 9),
              *org.tick(4 * 60)]
    last = at(8)
    return Timeline("a silent feed", events, alerts=(
        Expected(AlertType.EVENTS_STOPPED, last + 6 * MINUTE),
        Expected(AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, at(8) + 3 * HOUR, ("m1",)),
    ), commands=(Command("mbx02", "mbx01", "m1", None, None, (), at(8) + 3 * HOUR),))


def a_feed_that_stops_seconds_after_the_shadows_last_query() -> Timeline:
    """The feed stops as in `silent_feed`, but mbx03's last event (8.2) comes 12 s after mbx02's last query
    (8): at 14, mbx02 silent for the silence span, the others have been for 5.8 minutes only. Both fell
    silent within a heartbeat of each other: the twin waits for the silent-feed rule (at 14.2) and says
    the feed stopped, not that mbx02 is unreachable (before: SHADOW_SERVER_UNREACHABLE at 14, then
    EVENTS_STOPPED at 14.2; seen on simulated logs as the workload ended, hunt seeds 353 and 357)."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0), *org.started("mbx03", "dbX1", 0),
              *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
              *_heartbeats_ok(org, "mbx02", "mbx01", 2, 9), *org.busy("mbx03", 0.2, 9, every=1),
              *org.tick(4 * 60)]
    events.sort(key=lambda e: e.event_time_ms)
    return Timeline("a feed that stops seconds after the shadow's last query", events, alerts=(
        Expected(AlertType.EVENTS_STOPPED, at(8.2) + 6 * MINUTE),
        Expected(AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, at(8) + 3 * HOUR, ("m1",)),
    ), commands=(Command("mbx02", "mbx01", "m1", None, None, (), at(8) + 3 * HOUR),))


def a_shadow_silent_long_before_the_feed_stopped_promotes_nothing() -> Timeline:
    """mbx02, which holds m1's copy, falls silent at 8; mbx03 goes on to 58, then the feed stops. mbx02 was
    silent for the silence span while the feed was alive: SHADOW_SERVER_UNREACHABLE at 14, and the feed's
    stop (EVENTS_STOPPED at 64) does not bring it back: at ShadowResubmitTimeSpan it promotes nothing, and
    m1, whose primary was silent long before the feed stopped too, is at risk, as while others publish.
    (Before: PRIMARY_FAILED_SHADOWS_PROMOTED at 188 with a command to mbx02; hunt seed 3348: ex02 down for
    good at 00:55, unreachable at 01:09, the feed alive to 02:35, 31 messages forecast promoted by ex02 at
    03:54:31.)"""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0), *org.started("mbx03", "dbX1", 0),
              *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
              *_heartbeats_ok(org, "mbx02", "mbx01", 2, 9),
              *org.busy("mbx03", 0, 60),
              *org.tick(4 * 60)]
    return Timeline("a shadow silent long before the feed stopped promotes nothing", events, alerts=(
        Expected(AlertType.SHADOW_SERVER_UNREACHABLE, at(8) + 6 * MINUTE, ("m1",)),
        Expected(AlertType.EVENTS_STOPPED, at(58) + 6 * MINUTE),
        Expected(AlertType.MESSAGE_AT_RISK, at(8) + 3 * HOUR, ("m1",)),
    ))


def a_shadow_known_only_by_its_lines_silent_long_before_the_feed_stopped_still_promotes() -> Timeline:
    """The same with no discard queries (message-tracking logs): mbx01 and mbx02 log lines to 8, mbx03 to 58.
    mbx02's life is inferred from its lines, and a server that logs nothing may be idle, not down (no health
    probe): when the feed stops it is forecast to promote m1 at ShadowResubmitTimeSpan after its last line, as
    state/README.md says of a stopped feed. (Taking it to be down, as the heartbeat case above, turned hunt seed
    3669's forecast promotion, right, into MESSAGE_AT_RISK, a false alert.)"""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0), *org.started("mbx03", "dbX1", 0),
              *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
              *org.busy("mbx01", 2, 9), *org.busy("mbx02", 2, 9), *org.busy("mbx03", 0, 60),
              *org.tick(4 * 60)]
    return Timeline("a shadow known only by its lines silent long before the feed stopped still promotes", events,
                    alerts=(
        # its last line at 8 is known by the liveness fact of the minute from 8 to 9: silent from 9
        Expected(AlertType.SHADOW_SERVER_UNREACHABLE, at(9) + 6 * MINUTE, ("m1",)),
        Expected(AlertType.EVENTS_STOPPED, at(58) + 6 * MINUTE),
        Expected(AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, at(8) + 3 * HOUR, ("m1",)),
    ), commands=(Command("mbx02", "mbx01", "m1", None, None, (), at(8) + 3 * HOUR),))


def silent_shadow_and_primary_while_others_publish() -> Timeline:
    """The contrast: mbx01 and mbx02 stop, mbx03 goes on: mbx02 is down, m1 is at risk."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0), *org.started("mbx03", "dbX1", 0),
              *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
              *_heartbeats_ok(org, "mbx02", "mbx01", 2, 9),
              *org.busy("mbx03", 0, 4 * 60)]
    return Timeline("silent primary and shadow, others publish", events, alerts=(
        Expected(AlertType.SHADOW_SERVER_UNREACHABLE, at(8) + 6 * MINUTE, ("m1",)),
        Expected(AlertType.MESSAGE_AT_RISK, at(8) + 3 * HOUR, ("m1",)),
    ))


def at_risk_then_the_primary_returns_with_the_same_database_and_delivers() -> Timeline:
    """mbx01 (primary of m1) and mbx02 (its shadow) go down at minute 9; mbx03 goes on. At the span m1
    is at risk. mbx01 comes back at 4 h with the SAME queue database and delivers m1 ("it will deliver
    the messages in its queues"): m1 is delivered, not lost. mbx02 never returns: its discard
    notification is dropped after ShadowMessageAutoDiscardInterval and its copy expires unacknowledged."""
    org = Org()
    events = [
        *org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0), *org.started("mbx03", "dbX1", 0),
        *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
        *_heartbeats_ok(org, "mbx02", "mbx01", 2, 9),
        *org.busy("mbx03", 0, 5 * 60, every=5),
        *org.started("mbx01", "dbP1", 4 * 60),
        *org.delivered("mbx01", "m1", "mbx09", 4 * 60 + 1),
        *org.tick(5 * 24 * 60),
    ]
    return Timeline("at risk, then the primary returns with the same database and delivers", events, alerts=(
        Expected(AlertType.SHADOW_SERVER_UNREACHABLE, at(8) + 6 * MINUTE, ("m1",)),
        Expected(AlertType.MESSAGE_AT_RISK, at(8) + 3 * HOUR, ("m1",)),
        Expected(AlertType.DISCARD_EVENTS_DROPPED, at(8) + 2 * DAY, ("m1",)),
        Expected(AlertType.SHADOW_EXPIRED, at(1) + 4 * DAY, ("m1",)),
    ))


def at_risk_then_the_primary_returns_with_the_same_database_and_cannot_deliver() -> Timeline:
    """The same outage, but back with its queue mbx01 cannot deliver m1 (mbx09 defers it every hour):
    m1 is in mbx01's queue again, and expires there at receipt + MessageExpirationTimeout
    (MESSAGE_EXPIRED, 2 days), not lost at the end of SafetyNetHoldTime + MessageExpirationTimeout. Expired
    is processed: mbx01 keeps the discard notification for mbx02 until ShadowMessageAutoDiscardInterval
    after mbx02's last query (8), then deletes it (DISCARD_EVENTS_DROPPED); mbx02's copy, never acknowledged,
    expires at receipt + SafetyNetHoldTime + MessageExpirationTimeout (SHADOW_EXPIRED), and nothing of m1 is held
    after (before: its expiry deadline was spent on the queue's expiry, and m1 and mbx02's pair stayed for good)."""
    org = Org()
    events = [
        *org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0), *org.started("mbx03", "dbX1", 0),
        *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
        *_heartbeats_ok(org, "mbx02", "mbx01", 2, 9),
        *org.busy("mbx03", 0, 5 * 60, every=5),
        *org.started("mbx01", "dbP1", 4 * 60),
    ]
    for minute in range(4 * 60 + 1, 2 * 24 * 60, 60):
        events += org.deferred("mbx01", "m1", "mbx09", minute)
    events += org.tick(5 * 24 * 60)
    return Timeline("at risk, then the primary returns with the same database and cannot deliver", events, alerts=(
        Expected(AlertType.SHADOW_SERVER_UNREACHABLE, at(8) + 6 * MINUTE, ("m1",)),
        Expected(AlertType.MESSAGE_AT_RISK, at(8) + 3 * HOUR, ("m1",)),
        Expected(AlertType.MESSAGE_EXPIRED, at(1) + 2 * DAY, ("m1",)),
        Expected(AlertType.DISCARD_EVENTS_DROPPED, at(8) + 2 * DAY, ("m1",)),
        Expected(AlertType.SHADOW_EXPIRED, at(1) + 4 * DAY, ("m1",)),
    ))


def shadow_back_with_its_copies_after_the_primary_came_back_with_a_new_database() -> Timeline:
    """A feed without discard queries (message-tracking logs, with each server's NodeStarted). mbx01
    (primary of m1) and mbx02 (its shadow) go down at minute 9; mbx03 goes on. mbx01 is back at 30
    with a new, empty queue database: m1's only copy is on mbx02, which is down: at risk. mbx02 is back
    at 60 with the same queue database, its copies with it; "whenever the shadow server detects that
    the queue database ID of the primary server has changed, the shadow server also promotes": it
    promotes m1 then (at its first query, within a heartbeat), not never."""
    org = Org()
    events = [
        *org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0), *org.started("mbx03", "dbX1", 0),
        *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
        *org.busy("mbx02", 0, 9), *org.busy("mbx03", 0, 4 * 60, every=5),
        *org.started("mbx01", "dbP2", 30), *org.busy("mbx01", 31, 4 * 60, every=5),
        *org.started("mbx02", "dbS1", 60), *org.busy("mbx02", 61, 4 * 60, every=5),
    ]
    return Timeline("shadow back with its copies after the primary came back with a new database", events, alerts=(
        Expected(AlertType.SHADOW_SERVER_UNREACHABLE, at(9) + 6 * MINUTE, ("m1",)),  # its last line's minute ends at 9
        Expected(AlertType.MESSAGE_AT_RISK, at(30), ("m1",)),
        Expected(AlertType.QUEUE_DATABASE_CHANGED_SHADOWS_PROMOTED, at(60), ("m1",)),
    ), commands=(Command("mbx02", "mbx01", "m1", None, None, (), at(60),
                         CommandReason.PRIMARY_QUEUE_DATABASE_CHANGED),))


# ---- behaviours of the seeds no other timeline covered (a third review, by timelines) ----------

def primary_back_with_the_same_database_before_the_span() -> Timeline:
    """mbx01 is down from minute 9 to 60 and comes back with the SAME queue database, well before
    ShadowResubmitTimeSpan: mbx02 promotes nothing; mbx01 delivers m1 from its queue and mbx02
    discards its copy at the next query. No alert, no command, nothing held."""
    org = Org()
    events = [
        *org.started("mbx01", "dbP1", 0), *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
        *_heartbeats_ok(org, "mbx02", "mbx01", 2, 10),
        *org.heartbeats_failing("mbx02", "mbx01", 10, 60),
        *org.started("mbx01", "dbP1", 60),
        *org.delivered("mbx01", "m1", "mbx09", 61),
        *org.query_ok("mbx02", "mbx01", 62, discarded=("m1",)),
    ]
    return Timeline("primary back with the same database before the span", events)


def discard_notifications_survive_a_restart_of_the_primary() -> Timeline:
    """"Discard notifications are stored on disk (not in memory) so, if the Microsoft Exchange Transport
    service restarts, the discard notifications persist": mbx01 delivers m1 at 3 and restarts at 3.5 with
    its database; mbx02's next query (4) gets the notification. Nothing promoted, nothing twice."""
    org = Org()
    events = [
        *org.started("mbx01", "dbP1", 0), *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
        *org.query_ok("mbx02", "mbx01", 2),
        *org.delivered("mbx01", "m1", "mbx09", 3),
        ev.DiscardStatusSet(**org._header("mbx01", "mbx01", 3, "m1"), shadow_server="mbx02"),
        *org.started("mbx01", "dbP1", 3.5),
        *org.query_ok("mbx02", "mbx01", 4, discarded=("m1",)),
    ]
    return Timeline("discard notifications survive a restart of the primary", events)


def processed_then_back_with_a_new_database_before_the_discard_was_collected() -> Timeline:
    """mbx01 delivers m1 (for alice, inside, and bob@fabrikam.com) at 3, then fails; its discard
    notification goes with its queue database: back at 5 with a new one, mbx02 sees the new id and
    promotes its copy of m1, which it cannot know was delivered: m1 arrives twice (bob may see it).
    The twin sends no command for it (resubmitting it only delivers it twice)."""
    org = Org()
    events = [
        *org.started("mbx01", "dbP1", 0),
        *org.received("mbx01", "m1", 1, external=("bob@fabrikam.com",)), *org.shadowed("mbx01", "mbx02", "m1", 1),
        *org.query_ok("mbx02", "mbx01", 2),
        *org.sent("mbx01", "m1", "mbx09", 3, recipients=("alice@contoso.com", "bob@fabrikam.com")),
        *org.acked("mbx01", "m1", "mbx09", 3),
        *org.query_failed("mbx02", "mbx01", 4),
        *org.started("mbx01", "dbP2", 5),
        *org.query_ok("mbx02", "mbx01", 6, db="dbP2"),
    ]
    return Timeline("processed, then back with a new database before the discard was collected", events, alerts=(
        Expected(AlertType.DUPLICATE_DELIVERY_EXPECTED, at(5), ("m1",), (("bob@fabrikam.com",),)),))


def expired_then_back_with_a_new_database_before_the_discard_was_collected() -> Timeline:
    """mbx01 expires m1 (for alice, inside, and bob@fabrikam.com) at 3 and returns its non-delivery
    report, then fails; back at 5 with a new queue database, mbx02 sees the new id and promotes its copy
    of m1, whose discard it never collected: m1 is delivered after all (hunt seed 965: 45 expired messages
    resubmitted by their shadows), once, its recipients never had it. So is m2, whose fork to the gateway
    for a@fabrikam.com was acknowledged before it expired: a@ gets it twice, bob@tailspin.com once. Before,
    the twin dropped the copy at the expiry; then it forecast every recipient of both twice (hunt seeds
    965, 1117: delivered once, after the NDR), and named neither promoted. Both end 'promoted' (before, 'expired':
    whatif left them out of the messages delivered, as a shadow's own promotion of them did not)."""
    org = Org()
    events = [
        *org.started("mbx01", "dbP1", 0),
        *org.received("mbx01", "m1", 1, external=("bob@fabrikam.com",)), *org.shadowed("mbx01", "mbx02", "m1", 1),
        *org.received("mbx01", "m2", 1, recipients=(), external=("a@fabrikam.com", "bob@tailspin.com")),
        *org.shadowed("mbx01", "mbx02", "m2", 1),
        *org.query_ok("mbx02", "mbx01", 2),
        *org.sent("mbx01", "m2", "gw-fabrikam", 2.5, fork="f1", recipients=("a@fabrikam.com",)),
        *org.acked("mbx01", "m2", "gw-fabrikam", 2.5, fork="f1"),
        *org.expired("mbx01", "m1", 3), *org.expired("mbx01", "m2", 3),
        *org.query_failed("mbx02", "mbx01", 4),
        *org.started("mbx01", "dbP2", 5),
        *org.query_ok("mbx02", "mbx01", 6, db="dbP2"),
    ]
    return Timeline("expired, then back with a new database before the discard was collected", events, alerts=(
        Expected(AlertType.MESSAGE_EXPIRED, at(3), ("m1",), (("alice@contoso.com", "bob@fabrikam.com"),)),
        Expected(AlertType.MESSAGE_EXPIRED, at(3), ("m2",), (("bob@tailspin.com",),)),
        Expected(AlertType.DUPLICATE_DELIVERY_EXPECTED, at(5), ("m2",), (("a@fabrikam.com",),)),
        Expected(AlertType.QUEUE_DATABASE_CHANGED_SHADOWS_PROMOTED, at(5), ("m1", "m2"))),
        outcomes=(("m1", "promoted", at(5)), ("m2", "promoted", at(5))))


def a_message_in_a_failed_primary_does_not_expire_before_its_shadow_promotes_it() -> Timeline:
    """MessageExpirationTimeout 40 minutes, ShadowResubmitTimeSpan 3 hours: mbx01 takes m1 at 1 and fails
    after 10 (mbx02's queries fail from 12). A server that is down expires nothing: m1 is still in its
    queue at 41, and mbx02 promotes its copy at 10 + 3 hours (hunt seed 1007: ex02 down for good, 53
    messages resubmitted by ex01 and delivered). Before, the twin said MESSAGE_EXPIRED at 41 and dropped m1."""
    org = Org()
    config = ModelConfig(defaults=parameters_from({"message_expiration_timeout": "00:40:00"}))
    events = [
        *org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
        *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
        *_heartbeats_ok(org, "mbx02", "mbx01", 2, 11), *org.heartbeats_failing("mbx02", "mbx01", 12, 4 * 60),
    ]
    return Timeline("a message in a failed primary does not expire before its shadow promotes it", events, config,
                    alerts=(Expected(AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, at(10) + 3 * HOUR, ("m1",)),),
                    commands=(Command("mbx02", "mbx01", "m1", None, None, (), at(10) + 3 * HOUR),))


def only_the_shadow_that_cannot_reach_the_primary_promotes() -> Timeline:
    """mbx01 keeps m1's copy on mbx02 and m2's on mbx03. From minute 10 mbx03 cannot open a session
    to mbx01 (mbx02 can): after ShadowResubmitTimeSpan mbx03, and only mbx03, takes ownership of its
    copies (m2); mbx02 keeps m1 until mbx01 delivers it. mbx01 was up all along and delivers m2 too:
    it arrives twice."""
    org = Org()
    events = [
        *org.started("mbx01", "dbP1", 0),
        *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
        *org.received("mbx01", "m2", 1), *org.shadowed("mbx01", "mbx03", "m2", 1),
        *_heartbeats_ok(org, "mbx02", "mbx01", 2, 200),
        *_heartbeats_ok(org, "mbx03", "mbx01", 2, 10, shadow_db="dbS3"),
        *org.heartbeats_failing("mbx03", "mbx01", 10, 200, shadow_db="dbS3"),
        *org.delivered("mbx01", "m2", "mbx09", 189),
        *org.delivered("mbx01", "m1", "mbx09", 195),
        *org.query_ok("mbx02", "mbx01", 200, discarded=("m1",)),
    ]
    promoted_at = at(8) + 3 * HOUR
    return Timeline("only the shadow that cannot reach the primary promotes", events, alerts=(
        Expected(AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, promoted_at, ("m2",)),
        Expected(AlertType.DUPLICATE_DELIVERY_EXPECTED, at(189), ("m2",)),
    ), commands=(Command("mbx03", "mbx01", "m2", None, None, (), promoted_at),))


def a_2013_primary_ignores_the_senders_shadow_support() -> Timeline:
    """"the Mailbox server isn't concerned about the support or lack of support for shadow redundancy
    by the sending server": a sender without it gets no delayed acknowledgement (that is Exchange
    2010's), m1 is shadowed as any other, and no NOT_REDUNDANT after MaxAcknowledgementDelay."""
    org = Org()
    events = [
        *org.started("mbx01", "dbP1", 0), *org.received("mbx01", "m1", 1, sender_supports_shadow=False),
        *org.shadowed("mbx01", "mbx02", "m1", 1.01), *org.query_ok("mbx02", "mbx01", 2),
        *org.delivered("mbx01", "m1", "mbx09", 3), *org.query_ok("mbx02", "mbx01", 4, discarded=("m1",)),
    ]
    return Timeline("a 2013 primary ignores the sender's shadow support", events)


def reject_on_shadow_failure_is_meaningless_without_shadow_redundancy() -> Timeline:
    """RejectMessageOnShadowFailure "is only meaningful when ShadowRedundancyEnabled is $true": with
    shadow redundancy off and it $true, m1 is accepted and delivered; no 451, no alert."""
    org = Org()
    config = ModelConfig(defaults=parameters_from({"shadow_redundancy_enabled": False,
                                                   "reject_message_on_shadow_failure": True}))
    events = [*org.started("mbx01", "dbP1", 0), *org.received("mbx01", "m1", 1),
              *org.delivered("mbx01", "m1", "mbx09", 3)]
    return Timeline("RejectMessageOnShadowFailure is meaningless without shadow redundancy", events, config)


def exchange_2010_without_shadow_redundancy_delays_no_acknowledgement() -> Timeline:
    """Exchange 2010 with ShadowRedundancyEnabled $false never advertises or issues XSHADOW: a sender
    without shadow support gets no delayed acknowledgement either, so no NOT_REDUNDANT after
    MaxAcknowledgementDelay for a message that takes a minute to reach its next hop."""
    org = Org()
    config = ModelConfig(defaults=parameters_from({"mode": "EXCHANGE_2010", "shadow_redundancy_enabled": False}))
    events = [*org.started("hub01", "db-A", 0, mode=NodeMode.EXCHANGE_2010),
              *org.received("hub01", "m1", 1, sender_supports_shadow=False),
              *org.delivered("hub01", "m1", "hub02", 2)]
    return Timeline("Exchange 2010 without shadow redundancy delays no acknowledgement", events, config)


def a_sender_that_timed_out_resends_and_the_copies_are_unrelated() -> Timeline:
    """The copy of m1 was made on mbx02, but the sender's session timed out before the 250: mbx01
    processes m1 anyway, and the sender sends it again (the same Internet Message-ID, another
    message: m1b), whose copy goes to mbx03. "There's no relationship between the shadow messages":
    each is released by its own discard notification; mbx02's does not release mbx03's copy."""
    org = Org()
    again = [dataclasses.replace(e, message=ev.MessageRef("<m1@contoso.com>", "m1b", None))
             for e in org.received("mbx01", "m1b", 3)]
    events = [
        *org.started("mbx01", "dbP1", 0), *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1)[:3],
        *again, *org.shadowed("mbx01", "mbx03", "m1b", 3),
        *org.delivered("mbx01", "m1", "mbx09", 4), *org.delivered("mbx01", "m1b", "mbx09", 4),
        *org.query_ok("mbx02", "mbx01", 5, discarded=("m1",)),
        *org.query_ok("mbx03", "mbx01", 5, discarded=("m1b",), shadow_db="dbS3"),
    ]
    return Timeline("a sender that timed out resends, and the copies are unrelated", events)


def a_query_answered_exactly_at_the_span_keeps_the_primary() -> Timeline:
    """The boundary: mbx02's queries fail from minute 6, and the one of minute 184, exactly
    ShadowResubmitTimeSpan after the last answer (4), is answered: mbx02 could open a session, so
    nothing is promoted; mbx01 delivers m1 and mbx02 discards its copy."""
    org = Org()
    events = [
        *org.started("mbx01", "dbP1", 0), *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
        *org.query_ok("mbx02", "mbx01", 4),
        *org.heartbeats_failing("mbx02", "mbx01", 6, 184),
        *org.query_ok("mbx02", "mbx01", 184),
        *org.delivered("mbx01", "m1", "mbx09", 185),
        *org.query_ok("mbx02", "mbx01", 186, discarded=("m1",)),
    ]
    return Timeline("a query answered exactly at the span keeps the primary", events)


def exchange_2010_next_hop_reached_exactly_at_the_acknowledgement_delay() -> Timeline:
    """The boundary of MaxAcknowledgementDelay (30 s): m1 reaches its next hop exactly 30 s after it
    arrived, within the delay: redundant, no alert; m2 reaches it 1 s later: the 250 went at 30 s
    anyway, not redundant (NOT_REDUNDANT at 30 s)."""
    org = Org()
    config = ModelConfig(defaults=parameters_from({"mode": "EXCHANGE_2010"}))
    events = [*org.started("hub01", "db-A", 0, mode=NodeMode.EXCHANGE_2010),
              *org.received("hub01", "m1", 1, sender_supports_shadow=False),
              *org.received("hub01", "m2", 1, sender_supports_shadow=False),
              *org.delivered("hub01", "m1", "hub02", 1.5), *org.delivered("hub01", "m2", "hub02", 1.5 + 1 / 60)]
    return Timeline("Exchange 2010: next hop reached exactly at MaxAcknowledgementDelay", events, config, alerts=(
        Expected(AlertType.NOT_REDUNDANT, at(1.5), ("m2",)),))



# ---- behaviours of the seeds a fourth review found decided otherwise -------------------------

def exchange_2010_answers_250_after_the_acknowledgement_delay_whatever_reject_on_shadow_failure_says() -> Timeline:
    """RejectMessageOnShadowFailure is $true for the organisation, but hub01 is an Exchange 2010 hub: "No
    message is accepted or acknowledged by any Mailbox server in the organization until a shadow copy of
    the message is successfully created" (003) is a Mailbox server's rule; a 2010 hub whose sender does
    not support shadow redundancy "enviará un acuse de recibo al servidor de correo de
    envío; esto no garantiza la redundancia del correo pero es la mejor opción (best effort)" (002). m1
    has not reached hub02 after MaxAcknowledgementDelay (30 s): hub01 answers 250 at 1.5, not 451: m1 is
    not redundant, and lost when hub01 comes back at 3 with a new, empty queue database."""
    org = Org()
    config = ModelConfig(defaults=parameters_from({"reject_message_on_shadow_failure": True}))
    events = [*org.started("hub01", "db-A", 0, mode=NodeMode.EXCHANGE_2010),
              *org.received("hub01", "m1", 1, sender_supports_shadow=False),
              *org.sent("hub01", "m1", "hub02", 1.1),
              ev.AcknowledgedToSender(**org._header("hub01", "hub01", 1.5, "m1"), redundant=False),
              *org.started("hub01", "db-B", 3, mode=NodeMode.EXCHANGE_2010)]
    return Timeline("Exchange 2010 answers 250 after MaxAcknowledgementDelay whatever RejectMessageOnShadowFailure says",
                    events, config, alerts=(Expected(AlertType.NOT_REDUNDANT, at(1.5), ("m1",)),
                                            Expected(AlertType.MESSAGE_LOST, at(3), ("m1",))))



def primary_back_with_the_same_database_after_message_expiration_delivers_nothing_twice() -> Timeline:
    """mbx01 fails after minute 1 and mbx02 promotes m1 (for bob@fabrikam.com) at ShadowResubmitTimeSpan.
    mbx01 comes back with the SAME queue database, but three days later: MessageExpirationTimeout is "How
    long a message can remain in a queue before it expires" (2 days), so m1 expires in its queue (FAIL)
    instead of being among "the messages in its queues" it delivers: nothing is delivered twice."""
    org = Org()
    back = 3 * 24 * 60
    events = [*org.started("mbx01", "dbP1", 0),
              *org.received("mbx01", "m1", 0, recipients=(), external=("bob@fabrikam.com",)),
              *org.shadowed("mbx01", "mbx02", "m1", 0), *org.query_ok("mbx02", "mbx01", 1),
              *org.heartbeats_failing("mbx02", "mbx01", 3, 4 * 60),
              *org.started("mbx01", "dbP1", back), *org.expired("mbx01", "m1", back + 0.1)]
    promoted_at = at(1) + 3 * HOUR
    return Timeline("primary back with the same database after MessageExpirationTimeout delivers nothing twice",
                    events, alerts=(Expected(AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, promoted_at, ("m1",)),),
                    commands=(Command("mbx02", "mbx01", "m1", None, None, (), promoted_at),))



def exchange_2010_a_delivered_copy_held_for_want_of_a_route_is_resubmitted_with_the_new_database() -> Timeline:
    """hub02 keeps the copies of hub01's m1 and m2 with no alternate route. hub01 delivers m1 at 3 and
    dies before hub02 collects the discard notification; at 3 x 300 s hub01 is declared failed and "dicho
    mensaje no se volverá a enviar pero permanecerá en la cola de instantáneas" (002): m1's copy too,
    hub02 cannot know it was delivered. hub01 comes back at 60 with a new queue database: "los servidores
    de instantánea detectan que hay una nueva base de datos y vuelven a enviar los mensajes que están en la
    cola de instantáneas para Hub01" (002): m2, with a command, and m1, which arrives twice."""
    org = Org()
    events = [*org.started("hub01", "db-A", 0, mode=NodeMode.EXCHANGE_2010),
              *org.started("hub02", "db-H2", 0, mode=NodeMode.EXCHANGE_2010)]
    for mid in ("m1", "m2"):
        events += [*org.received("hub01", mid, 1),
                   *org.shadowed("hub01", "hub02", mid, 1, db="db-A", alternate_route=False)]
    events += [*org.query_ok("hub02", "hub01", 2, db="db-A"),
               *org.delivered("hub01", "m1", "hub03", 3),
               *org.heartbeats_failing("hub02", "hub01", 7, 60, every=5),
               *org.query_ok("hub02", "hub01", 60, db="db-B")]
    return Timeline("Exchange 2010: a delivered copy held for want of a route is resubmitted with the new database",
                    events, alerts=(
                        Expected(AlertType.HELD_NO_ALTERNATE_ROUTE, at(17), ("m2",)),
                        Expected(AlertType.DUPLICATE_DELIVERY_EXPECTED, at(60), ("m1",)),
                        Expected(AlertType.QUEUE_DATABASE_CHANGED_SHADOWS_PROMOTED, at(60), ("m2",)),
                    ), commands=(Command("hub02", "hub01", "m2", None, None, (), at(60),
                                         CommandReason.PRIMARY_RETURNED_AS_NEW_ROUTE),))


# ---- behaviours of the seeds a fifth review found decided otherwise --------------------------

def a_primary_that_answered_451_is_believed() -> Timeline:
    """The twin's configuration says RejectMessageOnShadowFailure is $false (the default), but mbx01
    answers the sender 451 4.4.0 (RejectedToSender): "If the value of this parameter is $true the primary
    message is rejected with the transient error 451 4.4.0" (003), so mbx01's is $true and its word
    decides, as a node's unredundant 250 is believed. m1: one attempt at a copy failed, the next is never
    made: REJECTED_NO_SHADOW at the 451, not NOT_REDUNDANT ("accepted the message without a shadow
    copy"). m2: no peer at all, so the twin took m2 to be accepted (NOT_REDUNDANT) until the node's 451
    says it was not: REJECTED_NO_SHADOW then. Nothing of either is held afterwards."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0),
              *org.received("mbx01", "m1", 1), *org.shadow_failed("mbx01", "m1", 1.1, locality=SiteLocality.LOCAL),
              ev.RejectedToSender(**org._header("mbx01", "mbx01", 1.2, "m1")),
              *org.received("mbx01", "m2", 2),
              *org.shadow_failed("mbx01", "m2", 2.1, reason=ev.ShadowFailureReason.NO_PEER, candidate=""),
              ev.RejectedToSender(**org._header("mbx01", "mbx01", 2.2, "m2"))]
    return Timeline("a primary that answered 451 is believed", events, alerts=(
        Expected(AlertType.REJECTED_NO_SHADOW, at(1.2), ("m1",)),
        Expected(AlertType.NOT_REDUNDANT, at(2.1), ("m2",)),
        Expected(AlertType.REJECTED_NO_SHADOW, at(2.2), ("m2",))))


def _side_effect_of_a_copy_on_a_silent_shadow(org) -> list:
    """m1 (for a and b) is shadowed on mbx02; mbx01 delivers a's fork and generates a DSN, d1, still pending;
    mbx02 falls silent after its query of minute 8 (mbx04 goes on working: the feed is alive); mbx01 comes
    back at 30 with a new, empty queue database."""
    return [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
            *org.received("mbx01", "m1", 0, recipients=("a@contoso.com", "b@contoso.com")),
            *org.shadowed("mbx01", "mbx02", "m1", 0),
            *org.sent("mbx01", "m1", "mbx03", 0.5, fork="f1", recipients=("a@contoso.com",)),
            *org.acked("mbx01", "m1", "mbx03", 0.6, fork="f1"), *org.dsn("mbx01", "d1", "m1", 0.7),
            *_heartbeats_ok(org, "mbx02", "mbx01", 2, 10), *org.busy("mbx04", 0, 200),
            *org.started("mbx01", "dbP2", 30)]


def a_side_effect_is_protected_by_its_parents_copy_on_a_silent_shadow() -> Timeline:
    """The Shadow Redundancy Manager tracks "side-effect messages like delivery status notifications ...
    to verify that the redundant copy of the message isn't released until all forks of the message are
    fully processed" (003): d1, mbx01's DSN for m1, is protected by m1's copy on mbx02. mbx01 comes back
    with a new database while mbx02 is silent: m1 is at risk (its copy is on a server that is down), and
    d1 with it, not MESSAGE_LOST at once; mbx02 comes back at 50 with its queue database and promotes m1:
    a command for b's fork and one for d1."""
    org = Org()
    events = [*_side_effect_of_a_copy_on_a_silent_shadow(org), *org.started("mbx02", "dbS1", 50)]
    return Timeline("a side effect is protected by its parent's copy on a silent shadow", events, alerts=(
        Expected(AlertType.SHADOW_SERVER_UNREACHABLE, at(14), ("m1",)),
        Expected(AlertType.MESSAGE_AT_RISK, at(30), ("m1",)),
        Expected(AlertType.QUEUE_DATABASE_CHANGED_SHADOWS_PROMOTED, at(50), ("m1",)),
    ), commands=(
        Command("mbx02", "mbx01", "m1", None, None, ("b@contoso.com",), at(50),
                CommandReason.PRIMARY_QUEUE_DATABASE_CHANGED),
        Command("mbx02", "mbx01", "d1", None, None, (), at(50), CommandReason.PRIMARY_QUEUE_DATABASE_CHANGED)))


def a_side_effect_is_lost_with_its_parents_only_copy() -> Timeline:
    """As above, but mbx02 never comes back: m1's copy expires at SafetyNetHoldTime + MessageExpirationTimeout
    and m1 is lost; d1, protected only by that copy, is lost with it, not expired "in mbx01's queue" two
    days after it was made (that queue is gone)."""
    org = Org()
    events = [*_side_effect_of_a_copy_on_a_silent_shadow(org), *org.tick(5 * 24 * 60)]
    return Timeline("a side effect is lost with its parent's only copy", events, alerts=(
        Expected(AlertType.SHADOW_SERVER_UNREACHABLE, at(14), ("m1",)),
        Expected(AlertType.MESSAGE_AT_RISK, at(30), ("m1",)),
        Expected(AlertType.MESSAGE_LOST, at(0) + 4 * DAY, ("m1",))))


def primary_back_with_the_same_database_just_before_the_span_is_reached_by_the_next_heartbeat() -> Timeline:
    """mbx02's last answer from mbx01 is at minute 1; its queries fail every 2 minutes from 2.5 to 180.5.
    mbx01 comes back with the SAME queue database at 180.7, before ShadowResubmitTimeSpan has passed (181);
    mbx02's next heartbeat, at 182.5, is answered. mbx02 promotes only "If the shadow server can't open an
    SMTP session with the primary server after ... ShadowResubmitTimeSpan" (003), and it can: nothing is
    promoted, and the duplicates of "Mailbox01 comes back online with the same database after the value of
    the ShadowResubmitTimeSpan parameter has passed" (003) do not happen; mbx01 delivers m1, mbx02 discards."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
              *org.received("mbx01", "m1", 0), *org.shadowed("mbx01", "mbx02", "m1", 0),
              *org.query_ok("mbx02", "mbx01", 1), *org.heartbeats_failing("mbx02", "mbx01", 2.5, 181),
              *org.started("mbx01", "dbP1", 180.7), *org.query_ok("mbx02", "mbx01", 182.5),
              *org.delivered("mbx01", "m1", "mbx03", 183), *org.query_ok("mbx02", "mbx01", 184.5, discarded=("m1",))]
    return Timeline("primary back with the same database just before the span is reached by the next heartbeat",
                    events)


def primary_back_just_before_the_span_that_delivers_at_once_is_still_reached_by_the_next_heartbeat() -> Timeline:
    """As above, but mbx01, back with the SAME queue database at 180.7, delivers m1 at once (180.8), before
    ShadowResubmitTimeSpan has passed (181), and m2 at 183; mbx02's next heartbeat, at 182.5, is answered and
    collects m1's discard, its next one m2's. A delivery changes nothing of mbx02's sessions: it still reaches
    mbx01 and promotes nothing, so nothing is delivered twice (hunt seed 3726: ex03 back at 05:01:00.000, its
    last contact with ex01 a copy at 04:56:00.675, span 5 minutes; its delivery at 05:01:00.370 brought the
    deadline back to 05:01:00.675: ex01 forecast to promote 6 messages, 8 forecast delivered twice)."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
              *org.received("mbx01", "m1", 0), *org.shadowed("mbx01", "mbx02", "m1", 0),
              *org.received("mbx01", "m2", 0), *org.shadowed("mbx01", "mbx02", "m2", 0),
              *org.query_ok("mbx02", "mbx01", 1), *org.heartbeats_failing("mbx02", "mbx01", 2.5, 181),
              *org.started("mbx01", "dbP1", 180.7), *org.delivered("mbx01", "m1", "mbx03", 180.8),
              *org.query_ok("mbx02", "mbx01", 182.5, discarded=("m1",)),
              *org.delivered("mbx01", "m2", "mbx03", 183), *org.query_ok("mbx02", "mbx01", 184.5, discarded=("m2",))]
    return Timeline("primary back just before the span that delivers at once is still reached by the next heartbeat",
                    events)


def primary_back_with_its_database_then_restarted_with_a_new_one_loses_what_it_took_between() -> Timeline:
    """mbx02's queries to mbx01 fail from 3 to 181: it promotes m1 (ShadowResubmitTimeSpan) and, holding
    nothing more, stops querying. mbx01 comes back with its SAME queue database (the feed has no NodeStarted)
    and delivers m1 from its queue at 200, as "After Mailbox01 comes back online, it will deliver the messages
    in its queues" (003) says of a primary back with the same database. It takes m5 alone (no peer) at 210,
    then restarts with a new database, learned only from the copy of m6 mbx03 stores with dbP2 at 230: m5 was in
    the database "unrecoverable due to data corruption or hardware failure" (003) and had no shadow copy: it is
    MESSAGE_LOST at 230 (not MESSAGE_EXPIRED two days later "in mbx01's queue", as if mbx01 had come back
    with dbP2 right after mbx02's last failed query of 181: its delivery of m1 at 200 shows dbP1)."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
              *org.received("mbx01", "m1", 0), *org.shadowed("mbx01", "mbx02", "m1", 0),
              *org.query_ok("mbx02", "mbx01", 1), *org.heartbeats_failing("mbx02", "mbx01", 3, 183),
              *org.delivered("mbx01", "m1", "mbx04", 200),
              *org.received("mbx01", "m5", 210),
              *org.shadow_failed("mbx01", "m5", 210.1, reason=ev.ShadowFailureReason.NO_PEER, candidate=""),
              *org.received("mbx01", "m6", 230), *org.shadowed("mbx01", "mbx03", "m6", 230, db="dbP2"),
              *org.query_ok("mbx03", "mbx01", 232, db="dbP2"), *org.delivered("mbx01", "m6", "mbx04", 233),
              *org.query_ok("mbx03", "mbx01", 234, db="dbP2", discarded=("m6",))]
    return Timeline("primary back with its database, then restarted with a new one, loses what it took between",
                    events, alerts=(
                        Expected(AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, at(181), ("m1",)),
                        Expected(AlertType.DUPLICATE_DELIVERY_EXPECTED, at(200), ("m1",)),
                        Expected(AlertType.NOT_REDUNDANT, at(210.1), ("m5",)),
                        Expected(AlertType.MESSAGE_LOST, at(230), ("m5",))),
                    commands=(Command("mbx02", "mbx01", "m1", None, None, (), at(181)),))


def deliveries_to_two_databases_of_one_mailbox_server_serve_both_recipients() -> Timeline:
    """Exchange keeps a message until "all of the next hops for that message have completed delivery" (004),
    and releases the copy when "all forks of the message are fully processed" (003). m2, taken alone (no
    peer), is for a@ and b@, whose mailboxes are in two databases of mbx05: two DELIVER lines to mbx05, one
    per recipient. m1 (copy on mbx02) is for a@, b@ and c@: mbx01 defers b@ and c@ (a DEFER that names no
    next hop), delivers a@ and then b@ to mbx05, and dies with c@ pending; m3 (copy on mbx02 too), for a@
    and b@, deferred at mbx05, was delivered to a@ only. m2 is delivered (before: the second delivery to
    mbx05 served nobody, and m2 was MESSAGE_EXPIRED two days later); mbx02 promotes m1 and m3 at 181, with
    one command each: m1 for c@ only (before: for b@ and c@, b@'s delivery forgotten), m3 for b@ (before:
    none, and m3 was taken as delivered, a duplicate forecast: a@'s delivery had served the whole fork). The
    forks to mbx05 are known by their hop alone, and mbx05 was still to serve b@ of m3 (and perhaps c@ of m1, whose
    DEFER names no hop) when mbx02 queried at 1: no discard notification emptied mbx05's shadow queue then, so
    mbx02 resends it too, a duplicate of m1 and m3 for the recipients served (duplicate detection hides it)."""
    org = Org()
    both, three = ("a@contoso.com", "b@contoso.com"), ("a@contoso.com", "b@contoso.com", "c@contoso.com")
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
              *org.received("mbx01", "m2", 0, recipients=both),
              *org.shadow_failed("mbx01", "m2", 0.1, reason=ev.ShadowFailureReason.NO_PEER, candidate=""),
              *org.delivered_to_mailbox("mbx01", "m2", "mbx05", 0.5, recipients=both[:1]),
              *org.delivered_to_mailbox("mbx01", "m2", "mbx05", 0.6, recipients=both[1:]),
              *org.received("mbx01", "m1", 0, recipients=three), *org.shadowed("mbx01", "mbx02", "m1", 0),
              *org.deferred("mbx01", "m1", "", 0.5, recipients=three[1:]),
              *org.delivered_to_mailbox("mbx01", "m1", "mbx05", 0.7, recipients=three[:1]),
              *org.delivered_to_mailbox("mbx01", "m1", "mbx05", 0.8, recipients=three[1:2]),
              *org.received("mbx01", "m3", 0, recipients=both), *org.shadowed("mbx01", "mbx02", "m3", 0),
              *org.deferred("mbx01", "m3", "mbx05", 0.5, recipients=both),
              *org.delivered_to_mailbox("mbx01", "m3", "mbx05", 0.7, recipients=both[:1]),
              *org.query_ok("mbx02", "mbx01", 1), *org.heartbeats_failing("mbx02", "mbx01", 3, 183),
              *org.tick(3 * 24 * 60)]
    return Timeline("deliveries to two databases of one mailbox server serve both recipients", events, alerts=(
        Expected(AlertType.NOT_REDUNDANT, at(0.1), ("m2",)),
        Expected(AlertType.DUPLICATE_DELIVERY_EXPECTED, at(181), ("m1", "m3")),
        Expected(AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, at(181), ("m1", "m3"))),
        commands=(Command("mbx02", "mbx01", "m1", "", None, ("c@contoso.com",), at(181)),
                  Command("mbx02", "mbx01", "m3", None, None, ("b@contoso.com",), at(181))))


def _unsaid_failures(org: Org, mid: str, minute: float, candidates: tuple[str, ...]) -> list[ev.Event]:
    """mbx01's failed attempts at `mid`'s copy on `candidates`, 0.01 min apart, none saying its site
    (a message-tracking HAREDIRECTFAIL)."""
    return [e for attempt, candidate in enumerate(candidates, start=1)
            for e in org.shadow_failed("mbx01", mid, minute + attempt * 0.01, locality=SiteLocality.UNKNOWN,
                                       attempt=attempt, candidate=candidate)]


def prefer_remote_counts_failures_by_the_candidates_site_when_the_line_does_not_say() -> Timeline:
    """dag1 spans site1 (mbx01, mbx02) and site2 (mbx03); the failed attempts do not say in which site their
    candidate is (a message-tracking HAREDIRECTFAIL), the servers' NodeStarted do. "PreferRemote: Try to make
    a shadow copy of the message on a DAG member in a different Active Directory site based on the number of
    attempts specified by the MaxRetriesForRemoteSiteShadow parameter. If the operation fails, try make a
    shadow copy of the message on a DAG member in the local Active Directory site based on the number of
    attempts specified by the MaxRetriesForLocalSiteShadow parameter" (003). m1: two attempts on mbx03 fail,
    the third makes the copy there: redundant (before: NOT_REDUNDANT at the second failure, counted against
    the local budget of 2). m2: four attempts on mbx03 and two on mbx02 fail: NOT_REDUNDANT at the sixth,
    not before."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0, site="site1"), *org.started("mbx02", "dbS1", 0, site="site1"),
              *org.started("mbx03", "dbX1", 0, site="site2"), *org.received("mbx01", "m1", 1),
              *_unsaid_failures(org, "m1", 1, ("mbx03",) * 2), *org.shadowed("mbx01", "mbx03", "m1", 1.05),
              *org.received("mbx01", "m2", 2), *_unsaid_failures(org, "m2", 2, ("mbx03",) * 4 + ("mbx02",) * 2)]
    events += [*org.delivered("mbx01", "m1", "mbx09", 4), *org.delivered("mbx01", "m2", "mbx09", 4),
               *org.query_ok("mbx03", "mbx01", 5, discarded=("m1",))]
    return Timeline("PreferRemote counts failures by the candidate's site when the line does not say", events,
                    alerts=(Expected(AlertType.NOT_REDUNDANT, at(2.06), ("m2",)),))


def a_shadows_stale_answer_within_the_clock_skew_allowance_does_not_undo_the_primarys_new_database() -> Timeline:
    """mbx01 restarts with a new queue database at minute 10: its NodeStarted names dbP2. mbx03, its shadow,
    has a clock 30 s fast: its answer naming dbP1, given just before the restart, is stamped 10.5, after the
    NodeStarted but within the clock-skew allowance. "A shadow server detects that the queue database ID of
    the primary server has changed" (003) from the primary, whose own NodeStarted says its database: the
    answer's dbP1 is stale (its contact counts). m1, the copy of dbP1, is promoted once, at 10; m2 (taken
    alone at 10.2) and m3 (shadowed on mbx03 with dbP2 at 10.3) are dbP2's and are delivered. Before, the
    stale answer set dbP1 back at 10.5 (m2 MESSAGE_LOST, m3 promoted with a command) and the next answer,
    naming dbP2, set it again at 12.5."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx03", "dbS3", 0),
              *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx03", "m1", 1),
              *_heartbeats_ok(org, "mbx03", "mbx01", 2.5, 10, shadow_db="dbS3"),
              *org.started("mbx01", "dbP2", 10),
              *org.received("mbx01", "m2", 10.2),
              *org.shadow_failed("mbx01", "m2", 10.2, reason=ev.ShadowFailureReason.NO_PEER, candidate=""),
              *org.received("mbx01", "m3", 10.3), *org.shadowed("mbx01", "mbx03", "m3", 10.3, db="dbP2"),
              *org.query_ok("mbx03", "mbx01", 10.5, db="dbP1", shadow_db="dbS3"),  # given at 10.0 by mbx01's clock
              *org.delivered("mbx01", "m2", "mbx09", 11), *org.delivered("mbx01", "m3", "mbx09", 11),
              *org.query_ok("mbx03", "mbx01", 12.5, db="dbP2", shadow_db="dbS3", discarded=("m3",)),
              *org.query_ok("mbx03", "mbx01", 14.5, db="dbP2", shadow_db="dbS3")]
    return Timeline("a shadow's stale answer within the clock-skew allowance does not undo the primary's new"
                    " database", events, alerts=(
                        Expected(AlertType.QUEUE_DATABASE_CHANGED_SHADOWS_PROMOTED, at(10), ("m1",)),
                        Expected(AlertType.NOT_REDUNDANT, at(10.2), ("m2",))),
                    commands=(Command("mbx03", "mbx01", "m1", None, None, (), at(10),
                                      CommandReason.PRIMARY_QUEUE_DATABASE_CHANGED),))


# ---- behaviours of the seeds a seventh review found decided otherwise ------------------------

def exchange_2010_a_hub_that_fails_during_its_delayed_acknowledgement_acknowledged_nothing() -> Timeline:
    """hub01 (Exchange 2010) delays its acknowledgement of m1 and m2, whose senders do not support shadow
    redundancy, until they reach their next hops. It fails 12 s after m1 arrived and comes back at once with a
    new, empty queue database: "si se produce un error en el servidor de Exchange 2010, el servidor de correo
    que realiza el envío dará por hecho que el mensaje nunca llegó a Exchange y tratará de entregarlo de
    nuevo" (002): no 250 went to m1's sender (no NOT_REDUNDANT at 30 s), and m1 is not lost, nor expired two
    days later from a queue it is not in: its sender has it. m2, whose 250 went at MaxAcknowledgementDelay
    before the failure, is lost with the database (002's Edge example: acknowledged, then the server fails).
    hub02 fails the same way 12 s after m3 arrived but comes back with the same database, and delivers m3:
    no 250 went before the failure either, so no NOT_REDUNDANT."""
    org = Org()
    config = ModelConfig(defaults=parameters_from({"mode": "EXCHANGE_2010"}))
    events = [*org.started("hub01", "db-A", 0, mode=NodeMode.EXCHANGE_2010),
              *org.started("hub02", "db-C", 0, mode=NodeMode.EXCHANGE_2010),
              *org.received("hub01", "m2", 0, sender_supports_shadow=False), *org.sent("hub01", "m2", "hub03", 0.1),
              *org.received("hub01", "m1", 1, sender_supports_shadow=False), *org.sent("hub01", "m1", "hub03", 1.1),
              *org.started("hub01", "db-B", 1.2, mode=NodeMode.EXCHANGE_2010),
              *org.received("hub02", "m3", 1, sender_supports_shadow=False), *org.sent("hub02", "m3", "hub03", 1.1),
              *org.started("hub02", "db-C", 1.2, mode=NodeMode.EXCHANGE_2010),
              *org.delivered("hub02", "m3", "hub03", 2), *org.tick(3 * 24 * 60)]
    return Timeline("Exchange 2010: a hub that fails during its delayed acknowledgement acknowledged nothing",
                    events, config, alerts=(Expected(AlertType.NOT_REDUNDANT, at(0.5), ("m2",)),
                                            Expected(AlertType.MESSAGE_LOST, at(1.2), ("m2",))))


def a_stale_answer_after_another_shadows_failed_query_does_not_bring_back_the_replaced_database() -> Timeline:
    """The stale answer above, with mbx04, another shadow, whose query at 10.1 fails: mbx01's transport service,
    back at 10 with dbP2 (its NodeStarted), is not yet listening. A failed query since the NodeStarted makes an
    answer naming another database a restart the feed did not show (a new database, as mbx06's dbP5b below), but
    dbP1 is the database that NodeStarted replaced, and a primary does not come back to it: "Mailbox01 comes back
    online with a new queue database" (003), and "the original database ID and the current database ID" of a copy
    (003) differ for good. mbx03's answer at 10.5, given before the restart by mbx01's clock, is stale whatever
    failed meanwhile: m0 and m1 promoted once, at 10; m2 (taken alone at 10.2) and m3 (dbP2's copy) delivered.
    Before, the answer set dbP1 back at 10.5: DUPLICATE_DELIVERY_EXPECTED of m0 and m1 (as if mbx01 were back with
    the queue its shadows had promoted), m3 promoted with a command to mbx03; and mbx04's answer naming dbP2 at
    12.1 was taken for a second restart: DUPLICATE_DELIVERY_EXPECTED of m3 and m2 MESSAGE_LOST, while mbx01
    delivers both at 13."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx03", "dbS3", 0), *org.started("mbx04", "dbS4", 0),
              *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx03", "m1", 1),
              *org.received("mbx01", "m0", 1.1), *org.shadowed("mbx01", "mbx04", "m0", 1.1),
              *_heartbeats_ok(org, "mbx03", "mbx01", 2.5, 10, shadow_db="dbS3"),
              *_heartbeats_ok(org, "mbx04", "mbx01", 2.1, 10, shadow_db="dbS4"),
              *org.started("mbx01", "dbP2", 10),
              *org.query_failed("mbx04", "mbx01", 10.1, shadow_db="dbS4"),  # the service is not listening yet
              *org.received("mbx01", "m2", 10.2),
              *org.shadow_failed("mbx01", "m2", 10.2, reason=ev.ShadowFailureReason.NO_PEER, candidate=""),
              *org.received("mbx01", "m3", 10.3), *org.shadowed("mbx01", "mbx03", "m3", 10.3, db="dbP2"),
              *org.query_ok("mbx03", "mbx01", 10.5, db="dbP1", shadow_db="dbS3"),  # given at 10.0 by mbx01's clock
              *_heartbeats_ok(org, "mbx04", "mbx01", 12.1, 16, db="dbP2", shadow_db="dbS4"),
              *org.delivered("mbx01", "m2", "mbx09", 13), *org.delivered("mbx01", "m3", "mbx09", 13),
              *org.query_ok("mbx03", "mbx01", 14.5, db="dbP2", shadow_db="dbS3", discarded=("m3",)),
              *org.query_ok("mbx03", "mbx01", 16.5, db="dbP2", shadow_db="dbS3")]
    events.sort(key=lambda e: e.event_time_ms)
    return Timeline("a stale answer after another shadow's failed query does not bring back the replaced database",
                    events, alerts=(
                        Expected(AlertType.QUEUE_DATABASE_CHANGED_SHADOWS_PROMOTED, at(10), ("m0",)),
                        Expected(AlertType.QUEUE_DATABASE_CHANGED_SHADOWS_PROMOTED, at(10), ("m1",)),
                        Expected(AlertType.NOT_REDUNDANT, at(10.2), ("m2",))),
                    commands=(Command("mbx03", "mbx01", "m1", None, None, (), at(10),
                                      CommandReason.PRIMARY_QUEUE_DATABASE_CHANGED),
                              Command("mbx04", "mbx01", "m0", None, None, (), at(10),
                                      CommandReason.PRIMARY_QUEUE_DATABASE_CHANGED)))


def a_primary_that_fails_before_its_shadow_copy_is_made_acknowledged_nothing() -> Timeline:
    """mbx01 received m1 and opened its session to mbx02 for the shadow copy, but failed before mbx02
    acknowledged it, and came back with a new, empty queue database: "After the primary server receives
    acknowledgment from the shadow server, the primary server acknowledges the receipt of the primary message
    to the original messaging server": no 250 went, and "The sending server will re-deliver the unacknowledged
    message" (003). m1 is not lost, and not expired two days later from a queue it is not in. m2, accepted
    without a shadow copy (mbx02 refused, mbx03 timed out: MaxRetriesForLocalSiteShadow), is lost. The same
    for mbx05, which fails before mbx06 acknowledged m3's copy, and whose new database the twin learns only
    from mbx06's answer at 3 (its query at 1.5 failed): m4, whose copy mbx06 holds, is promoted then; m3 is
    its sender's."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
              *org.received("mbx01", "m2", 0),
              *org.shadow_failed("mbx01", "m2", 0.1, locality=SiteLocality.LOCAL, candidate="mbx02",
                                 reason=ev.ShadowFailureReason.REFUSED),
              *org.shadow_failed("mbx01", "m2", 0.2, locality=SiteLocality.LOCAL, attempt=2, candidate="mbx03"),
              *org.received("mbx01", "m1", 1),
              ev.ShadowCopyRequested(**org._header("mbx01", "mbx01", 1, "m1"), candidate="mbx02",
                                     locality=SiteLocality.LOCAL, attempt=1),
              *org.started("mbx01", "dbP2", 1.5),
              *org.started("mbx05", "dbP5", 0), *org.received("mbx05", "m4", 0),
              *org.shadowed("mbx05", "mbx06", "m4", 0, db="dbP5"),
              *org.received("mbx05", "m3", 1),
              ev.ShadowCopyRequested(**org._header("mbx05", "mbx05", 1, "m3"), candidate="mbx06",
                                     locality=SiteLocality.LOCAL, attempt=1),
              *org.query_failed("mbx06", "mbx05", 1.5, shadow_db="dbS6"),
              *org.query_ok("mbx06", "mbx05", 3, db="dbP5b", shadow_db="dbS6"), *org.tick(3 * 24 * 60)]
    return Timeline("a primary that fails before its shadow copy is made acknowledged nothing", events, alerts=(
        Expected(AlertType.NOT_REDUNDANT, at(0.2), ("m2",)), Expected(AlertType.MESSAGE_LOST, at(1.5), ("m2",)),
        Expected(AlertType.QUEUE_DATABASE_CHANGED_SHADOWS_PROMOTED, at(3), ("m4",))),
        commands=(Command("mbx06", "mbx05", "m4", None, None, (), at(3), CommandReason.PRIMARY_QUEUE_DATABASE_CHANGED),))


# ---- behaviours of the seeds an eighth review (what the twin emits) found decided otherwise --------

def without_shadow_redundancy_the_recorded_copies_protect_nothing() -> Timeline:
    """What if ShadowRedundancyEnabled were $false, over a recording made with it $true: "$false: Shadow
    redundancy is disabled on all Mailbox servers in the organization" (003), and "En caso de que la redundancia
    de instantánea esté deshabilitada en la organización, Exchange nunca anunciará su compatibilidad con la
    redundancia de instantánea ni emitirá comandos XSHADOW" (002): no shadow copy is made, so the recorded
    copies protect nothing. mbx01 holds m1 alone and comes back at 30 with a new, empty queue database: m1 is
    MESSAGE_LOST then (before: mbx02 promoted its copy, with a command). mbx05 is unreachable from 1 to 240 and
    comes back with the SAME database: it delivers m5 from its queue, once (before: mbx06 promoted m5 at 181,
    with a command, and m5 was forecast twice at 240)."""
    org = Org()
    config = ModelConfig(defaults=parameters_from({"shadow_redundancy_enabled": False}))
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
              *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
              *_heartbeats_ok(org, "mbx02", "mbx01", 2, 10), *org.started("mbx01", "dbP2", 30),
              *org.query_ok("mbx02", "mbx01", 31, db="dbP2"),
              *org.started("mbx05", "dbP5", 0), *org.started("mbx06", "dbS6", 0),
              *org.received("mbx05", "m5", 0), *org.shadowed("mbx05", "mbx06", "m5", 0, db="dbP5"),
              *org.query_ok("mbx06", "mbx05", 1, db="dbP5", shadow_db="dbS6"),
              *org.heartbeats_failing("mbx06", "mbx05", 3, 240, shadow_db="dbS6"),
              *org.started("mbx05", "dbP5", 240), *org.delivered("mbx05", "m5", "mbx09", 241),
              *org.query_ok("mbx06", "mbx05", 242, db="dbP5", shadow_db="dbS6", discarded=("m5",))]
    return Timeline("without shadow redundancy, the recorded copies protect nothing", events, config,
                    alerts=(Expected(AlertType.MESSAGE_LOST, at(30), ("m1",)),))


def exchange_2010_the_previous_hop_resubmits_over_an_alternate_route() -> Timeline:
    """002's example: hub01 (Exchange 2010) hands m1, for bob@fabrikam.com, to edge01 and keeps the shadow copy;
    edge01 tries mx.fabrikam.com (DEFER) and dies. After 3 x ShadowHeartbeatTimeoutInterval hub01 "reanuda el
    rol de servidor principal y vuelve a enviar los mensajes que hay en la cola de instantáneas. Los mensajes
    reenviados llegan a otro servidor Transporte perimetral" (002): the command leaves the route to hub01 (any
    route: another Edge), still for bob only (before: next hop mx.fabrikam.com, edge01's own next hop, which
    hub01 reaches only through an Edge). A 2013 shadow, a member of the primary's DAG, "transmits the messages
    to the next hop" (003): deferred_then_primary_fails names it."""
    org = Org()
    events = [*org.started("edge01", "dbE1", 0, mode=NodeMode.EXCHANGE_2010),
              *org.started("hub01", "dbH1", 0, mode=NodeMode.EXCHANGE_2010),
              *org.received("edge01", "m1", 1, recipients=(), external=("bob@fabrikam.com",)),
              *org.shadowed("edge01", "hub01", "m1", 1, db="dbE1"),
              *org.query_ok("hub01", "edge01", 1, db="dbE1", shadow_db="dbH1"),
              *org.deferred("edge01", "m1", "mx.fabrikam.com", 2, recipients=("bob@fabrikam.com",)),
              *org.heartbeats_failing("hub01", "edge01", 6, 40, every=5, shadow_db="dbH1")]
    return Timeline("Exchange 2010: the previous hop resubmits over an alternate route", events, alerts=(
        Expected(AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, at(16), ("m1",)),),
        commands=(Command("hub01", "edge01", "m1", "mx.fabrikam.com", None, ("bob@fabrikam.com",), at(16)),))


def exchange_2010_a_copy_held_for_want_of_a_route_that_expires_before_its_primary_returns_is_lost() -> Timeline:
    """hub02 (Exchange 2010) keeps the copy of hub01's m1 with no alternate route. hub01 dies after minute 2 and
    never comes back; hub02 goes on querying it (heartbeats of an hour here). At 3 x ShadowHeartbeatTimeoutInterval
    hub01 is declared failed and "dicho mensaje no se volverá a enviar pero permanecerá en la cola de instantáneas"
    (002), until "Unacknowledged shadow messages eventually expire from Safety Net after the sum of the
    SafetyNetHoldTime and MessageExpirationTimeout" (003) ("will eventually be auto deleted from the redundancy
    queue", 004): nobody delivered m1, whose primary is down and whose only other copy is gone: MESSAGE_LOST then
    (before: SHADOW_EXPIRED, the INFO of a copy whose primary had delivered the message)."""
    org = Org()
    config = ModelConfig(defaults=parameters_from({"mode": "EXCHANGE_2010", "shadow_heartbeat_frequency": "1h",
                                                   "shadow_heartbeat_timeout_interval": "1h"}))
    events = [*org.started("hub01", "db-A", 0, mode=NodeMode.EXCHANGE_2010),
              *org.started("hub02", "db-H2", 0, mode=NodeMode.EXCHANGE_2010),
              *org.received("hub01", "m1", 1),
              *org.shadowed("hub01", "hub02", "m1", 1, db="db-A", alternate_route=False),
              *org.query_ok("hub02", "hub01", 2, db="db-A", shadow_db="db-H2"),
              *org.heartbeats_failing("hub02", "hub01", 62, 5 * 24 * 60, every=60, shadow_db="db-H2")]
    return Timeline("Exchange 2010: a copy held for want of a route that expires before its primary returns is lost",
                    events, config, alerts=(Expected(AlertType.HELD_NO_ALTERNATE_ROUTE, at(182), ("m1",)),
                                            Expected(AlertType.MESSAGE_LOST, at(1) + 4 * DAY, ("m1",))))


def a_failed_query_does_not_keep_the_discard_notifications() -> Timeline:
    """What if ShadowMessageAutoDiscardInterval were 1 hour: mbx02's last query that reached mbx01 is at 2;
    mbx01 delivers m1 at 3 and queues its discard notification; from 4 mbx02 cannot open a session to mbx01
    (its queries fail every 2 minutes). "if the shadow server doesn't query the primary server for the duration
    specified in this parameter, the primary server deletes the queued discard events" (003): a query that never
    reached mbx01 is none, so mbx01 deletes m1's notification at 62: DISCARD_EVENTS_DROPPED then (before: never,
    each failed query counted as one). At ShadowResubmitTimeSpan mbx02 promotes its copy of m1, which mbx01 had
    delivered: it arrives twice."""
    org = Org()
    config = ModelConfig(defaults=parameters_from({"shadow_message_auto_discard_interval": "1h"}))
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
              *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
              *org.query_ok("mbx02", "mbx01", 2), *org.delivered("mbx01", "m1", "mbx09", 3),
              *org.heartbeats_failing("mbx02", "mbx01", 4, 190)]
    return Timeline("a failed query does not keep the discard notifications", events, config, alerts=(
        Expected(AlertType.DISCARD_EVENTS_DROPPED, at(62), ("m1",)),
        Expected(AlertType.DUPLICATE_DELIVERY_EXPECTED, at(182), ("m1",))))


def a_copy_the_primary_makes_on_its_shadow_is_no_query_of_its_shadow() -> Timeline:
    """As a_failed_query_does_not_keep_the_discard_notifications (ShadowMessageAutoDiscardInterval 1 hour,
    mbx02's last query that reached mbx01 at 2, m1 delivered at 3, mbx02's queries failing from 4), but
    mbx01, which can still reach mbx02, makes m2's copy there at 30, and mbx02's queries are answered again
    from 80. The copy is mbx01's session to mbx02, not mbx02 querying mbx01: "if the shadow server doesn't
    query the primary server for the duration specified in this parameter, the primary server deletes the
    queued discard events" (003), so m1's notification is deleted at 62 and the answers from 80 do not bring
    it: DISCARD_EVENTS_DROPPED at 62. Before, the copy counted as mbx02's query: the deletion was put off to
    90, then past every answer, and never said."""
    org = Org()
    config = ModelConfig(defaults=parameters_from({"shadow_message_auto_discard_interval": "1h"}))
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
              *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
              *org.query_ok("mbx02", "mbx01", 2), *org.delivered("mbx01", "m1", "mbx09", 3),
              *org.heartbeats_failing("mbx02", "mbx01", 4, 80),
              *org.received("mbx01", "m2", 30), *org.shadowed("mbx01", "mbx02", "m2", 30),
              *_heartbeats_ok(org, "mbx02", "mbx01", 80, 120)]
    return Timeline("a copy the primary makes on its shadow is no query of its shadow", events, config, alerts=(
        Expected(AlertType.DISCARD_EVENTS_DROPPED, at(62), ("m1",)),))


def a_discard_notification_queued_after_the_interval_ran_out_is_deleted_when_queued() -> Timeline:
    """As a_copy_the_primary_makes_on_its_shadow_is_no_query_of_its_shadow (ShadowMessageAutoDiscardInterval 1 hour,
    mbx02's last query that reached mbx01 at 2, m1 delivered at 3, its queries failing from 4, answered again from
    100), but mbx01 makes m2's copy on mbx02 at 70 and delivers m2 at 75. mbx02 has still not queried mbx01 for the
    interval, so m2's notification goes as soon as it is queued: DISCARD_EVENTS_DROPPED of m2 at 75. Before, the alert
    was dated 62, when the interval ran out, before m2 was even received."""
    org = Org()
    config = ModelConfig(defaults=parameters_from({"shadow_message_auto_discard_interval": "1h"}))
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
              *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
              *org.query_ok("mbx02", "mbx01", 2), *org.delivered("mbx01", "m1", "mbx09", 3),
              *org.heartbeats_failing("mbx02", "mbx01", 4, 100),
              *org.received("mbx01", "m2", 70), *org.shadowed("mbx01", "mbx02", "m2", 70),
              *org.delivered("mbx01", "m2", "mbx09", 75),
              *_heartbeats_ok(org, "mbx02", "mbx01", 100, 140)]
    return Timeline("a discard notification queued after the interval ran out is deleted when queued", events, config,
                    alerts=(Expected(AlertType.DISCARD_EVENTS_DROPPED, at(62), ("m1",)),
                            Expected(AlertType.DISCARD_EVENTS_DROPPED, at(75), ("m2",))))


def a_copy_before_any_answered_query_does_not_restart_the_discard_interval() -> Timeline:
    """As a_copy_the_primary_makes_on_its_shadow_is_no_query_of_its_shadow (ShadowMessageAutoDiscardInterval 1 hour),
    but no query of mbx02's has reached mbx01 yet: m1's copy at 1 starts the pair, mbx02's queries fail from 2 and are
    answered again from 100. m1 is delivered at 3, m2 copied at 50 and delivered at 55. mbx02 has not queried mbx01
    since the pair began, so both notifications go when the interval counted from the first copy runs out:
    DISCARD_EVENTS_DROPPED of m1 and m2 at 61. Before, m2's copy restarted the interval (to 110), and the answers from
    100 were taken to bring both: nothing said, though their copies stay on mbx02 (the simulator's seed-7 world
    with a 30-minute interval: a message delivered twice that the twin did not forecast)."""
    org = Org()
    config = ModelConfig(defaults=parameters_from({"shadow_message_auto_discard_interval": "1h"}))
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
              *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
              *org.heartbeats_failing("mbx02", "mbx01", 2, 100), *org.delivered("mbx01", "m1", "mbx09", 3),
              *org.received("mbx01", "m2", 50), *org.shadowed("mbx01", "mbx02", "m2", 50),
              *org.delivered("mbx01", "m2", "mbx09", 55),
              *_heartbeats_ok(org, "mbx02", "mbx01", 100, 140)]
    return Timeline("a copy before any answered query does not restart the discard interval", events, config,
                    alerts=(Expected(AlertType.DISCARD_EVENTS_DROPPED, at(61), ("m1", "m2")),))


def a_forks_discard_notification_dropped_with_the_message_is_not_collected_later() -> Timeline:
    """As a_copy_the_primary_makes_on_its_shadow_is_no_query_of_its_shadow (ShadowMessageAutoDiscardInterval
    1 hour, mbx02's last query that reached mbx01 at 2, its queries failing from 4, answered again from 80), but
    mbx01 hands m1 to gw-fabrikam as fork f1 (a@fabrikam.com) at 3, then comes back with a new queue database at
    121. "if the shadow server doesn't query the primary server for the duration specified in this parameter, the
    primary server deletes the queued discard events" (003): f1's went at 62 (DISCARD_EVENTS_DROPPED), so the
    answers from 80 bring none, f1's copy stays in that next hop's shadow queue and mbx02 resubmits it when it
    sees the new database: DUPLICATE_DELIVERY_EXPECTED names a@ at 121 (as for a fork known by its hop alone).
    Before, the answer at 80 was taken for f1's notification and nothing was forecast."""
    org = Org()
    config = ModelConfig(defaults=parameters_from({"shadow_message_auto_discard_interval": "1h"}))
    far = ("a@fabrikam.com",)
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
              *org.received("mbx01", "m1", 1, recipients=(), external=far), *org.shadowed("mbx01", "mbx02", "m1", 1),
              *org.query_ok("mbx02", "mbx01", 2),
              *org.sent("mbx01", "m1", "gw-fabrikam", 3, fork="f1", recipients=far, outside=True),
              *org.acked("mbx01", "m1", "gw-fabrikam", 3, fork="f1"),
              *org.heartbeats_failing("mbx02", "mbx01", 4, 80), *_heartbeats_ok(org, "mbx02", "mbx01", 80, 121),
              *org.started("mbx01", "dbP2", 121), *_heartbeats_ok(org, "mbx02", "mbx01", 122, 130, db="dbP2")]
    return Timeline("a fork's discard notification dropped with the message is not collected later", events, config,
                    alerts=(Expected(AlertType.DISCARD_EVENTS_DROPPED, at(62), ("m1",)),
                            Expected(AlertType.DUPLICATE_DELIVERY_EXPECTED, at(121), ("m1",), (far,))))

# ---- behaviours of the seeds a ninth review found decided otherwise -------------------------

def a_shadow_back_with_a_new_database_loses_no_copy_of_what_was_delivered() -> Timeline:
    """mbx02 holds the shadow copies of mbx01's m1 and m2. mbx01 delivers m1 at 3 and queues its discard
    notification; mbx02 restarts at 4 with a new, empty queue database before collecting it: its copies
    are gone. "A successfully delivered message doesn't need to be kept in a shadow queue" (003): m1 lost
    nothing with its copy; only m2, still in mbx01's queue, is no longer redundantly persisted. mbx01
    delivers m2 at 13. Before: SHADOW_SERVER_UNREACHABLE named m1 too, as no longer redundantly persisted."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
              *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
              *org.received("mbx01", "m2", 1), *org.shadowed("mbx01", "mbx02", "m2", 1),
              *org.query_ok("mbx02", "mbx01", 2), *org.delivered("mbx01", "m1", "mbx09", 3),
              *org.started("mbx02", "dbS2", 4), *_heartbeats_ok(org, "mbx02", "mbx01", 5, 13, shadow_db="dbS2"),
              *org.delivered("mbx01", "m2", "mbx09", 13)]
    return Timeline("a shadow back with a new database loses no copy of what was delivered", events, alerts=(
        Expected(AlertType.SHADOW_SERVER_UNREACHABLE, at(4), ("m2",)),))


def a_silent_shadow_loses_no_copy_of_what_was_delivered() -> Timeline:
    """As a_shadow_back_with_a_new_database_loses_no_copy_of_what_was_delivered, but mbx02 falls silent instead
    (its last query at 2) while mbx01 goes on working; mbx01 delivers m1 at 3. "A successfully delivered message
    doesn't need to be kept in a shadow queue" (003): at the silence span (8) only m2, still in mbx01's queue, is
    no longer redundantly protected. mbx01 delivers m2 at 13; mbx02 comes back with its database at 30 and
    collects both discard notifications. Before: SHADOW_SERVER_UNREACHABLE named m1 too."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
              *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
              *org.received("mbx01", "m2", 1), *org.shadowed("mbx01", "mbx02", "m2", 1),
              *org.query_ok("mbx02", "mbx01", 2), *org.delivered("mbx01", "m1", "mbx09", 3),
              *org.busy("mbx01", 4, 30), *org.delivered("mbx01", "m2", "mbx09", 13),
              *org.started("mbx02", "dbS1", 30), *org.query_ok("mbx02", "mbx01", 30, discarded=("m1", "m2"))]
    return Timeline("a silent shadow loses no copy of what was delivered", events, alerts=(
        Expected(AlertType.SHADOW_SERVER_UNREACHABLE, at(8), ("m2",)),))


def a_copy_acknowledged_after_its_shadow_came_back_with_a_new_database_is_gone() -> Timeline:
    """mbx02 stores m1's copy at 9.95 by its clock, 9 s behind mbx01's, and restarts at 10 with a new, empty
    queue database: m0's copy and m1's are gone (SHADOW_SERVER_UNREACHABLE at 10). mbx01's acknowledgement of
    that copy, stamped 10.1 by its own clock, came before the restart: it acknowledges the copy that is gone, not
    a new one (no copy stored since). mbx01 fails for good at 20: mbx02 holds nothing of it to promote, m1 as m0.
    Before, the acknowledgement put m1's copy back on mbx02: PRIMARY_FAILED_SHADOWS_PROMOTED of m1 at 198
    with a command to mbx02, which has no such message: back with "una nueva base de datos de transporte", as
    "la base de datos de transporte no se puede recuperar" (002), it holds nothing of what it stored before."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
              *org.received("mbx01", "m0", 1), *org.shadowed("mbx01", "mbx02", "m0", 1),
              *_heartbeats_ok(org, "mbx02", "mbx01", 2, 10),
              *org.received("mbx01", "m1", 10.1),
              ev.ShadowCopyRequested(**org._header("mbx01", "mbx01", 10.1, "m1"), candidate="mbx02",
                                     locality=SiteLocality.LOCAL, attempt=1),
              ev.ShadowCopyStored(**org._header("mbx02", "mbx01", 9.95, "m1"), primary_queue_db_id="dbP1",
                                  alternate_route=True),
              *org.started("mbx02", "dbS2", 10),
              ev.ShadowCopyAcknowledged(**org._header("mbx01", "mbx01", 10.1, "m1"), shadow_server="mbx02",
                                        locality=SiteLocality.UNKNOWN),
              ev.AcknowledgedToSender(**org._header("mbx01", "mbx01", 10.1, "m1"), redundant=True),
              *_heartbeats_ok(org, "mbx02", "mbx01", 12, 20, shadow_db="dbS2"),
              *org.heartbeats_failing("mbx02", "mbx01", 20, 4 * 60, shadow_db="dbS2")]
    events.sort(key=lambda e: e.event_time_ms)
    return Timeline("a copy acknowledged after its shadow came back with a new database is gone", events, alerts=(
        Expected(AlertType.SHADOW_SERVER_UNREACHABLE, at(10), ("m0", "m1")),))


def a_shadows_query_naming_the_database_its_nodestarted_replaced_loses_no_copy() -> Timeline:
    """mbx02 restarts at 10 with a new, empty queue database, dbS2 (its NodeStarted): m0's copy, in dbS1, is gone
    (SHADOW_SERVER_UNREACHABLE at 10). mbx01 makes m1's copy on mbx02 at 10.5, in dbS2. A DiscardQuerySent naming
    dbS1 comes stamped 10.6 (the old process's query, reported late): a server back with "una nueva base de datos de
    transporte" as "la base de datos de transporte no se puede recuperar" (002) does not go back to the database it
    lost, so the query names the database the NodeStarted replaced and is stale: its contact counts, its database
    does not. mbx01 delivers m1 at 14, mbx02's answer at 16 discards it. Before, the stale query set mbx02's
    database back to dbS1, and its next query, naming dbS2 at 12, was taken for a second restart:
    SHADOW_SERVER_UNREACHABLE of m1 at 12 and m1's copy dropped (mbx01 failing then would promote nothing)."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
              *org.received("mbx01", "m0", 1), *org.shadowed("mbx01", "mbx02", "m0", 1),
              *_heartbeats_ok(org, "mbx02", "mbx01", 2, 10),
              *org.started("mbx02", "dbS2", 10),
              *org.received("mbx01", "m1", 10.5), *org.shadowed("mbx01", "mbx02", "m1", 10.5),
              ev.DiscardQuerySent(**org._header("mbx02", "mbx01", 10.6), shadow_queue_db_id="dbS1"),
              *_heartbeats_ok(org, "mbx02", "mbx01", 12, 16, shadow_db="dbS2"),
              *org.delivered("mbx01", "m0", "mbx09", 13), *org.delivered("mbx01", "m1", "mbx09", 14),
              *org.query_ok("mbx02", "mbx01", 16, shadow_db="dbS2", discarded=("m1",)),
              *_heartbeats_ok(org, "mbx02", "mbx01", 18, 20, shadow_db="dbS2")]
    events.sort(key=lambda e: e.event_time_ms)
    return Timeline("a shadow's query naming the database its NodeStarted replaced loses no copy", events, alerts=(
        Expected(AlertType.SHADOW_SERVER_UNREACHABLE, at(10), ("m0",)),))


def a_copy_the_primary_reported_is_of_the_database_its_first_answer_names() -> Timeline:
    """The twin starts while mbx01 runs: no NodeStarted of it, and its copies are known from its own side
    only (ShadowCopyAcknowledged, as HAREDIRECT; no ShadowCopyStored of mbx02 naming the database). mbx02's
    answers name dbP1 up to 8; mbx01 fails after 8 and comes back with a new, empty queue database, dbP2,
    which mbx02's answer at 12 names. "whenever the shadow server detects that the queue database ID of the
    primary server has changed, the shadow server also promotes itself as the primary server, promotes the
    shadow messages as primary messages" (003): m1's copy, made in the database the first answers named, is
    promoted at 12. Before: the twin knew no database for the copy, so no change of it, and held m1 in a
    queue that no longer existed (to expire there two days later)."""
    org = Org()
    handshake = [e for e in org.shadowed("mbx01", "mbx02", "m1", 1) if not isinstance(e, ev.ShadowCopyStored)]
    events = [*org.received("mbx01", "m1", 1), *handshake, *_heartbeats_ok(org, "mbx02", "mbx01", 2, 10),
              *org.query_failed("mbx02", "mbx01", 10), *_heartbeats_ok(org, "mbx02", "mbx01", 12, 16, db="dbP2")]
    return Timeline("a copy the primary reported is of the database its first answer names", events, alerts=(
        Expected(AlertType.QUEUE_DATABASE_CHANGED_SHADOWS_PROMOTED, at(12), ("m1",)),),
        commands=(Command("mbx02", "mbx01", "m1", None, None, (), at(12), CommandReason.PRIMARY_QUEUE_DATABASE_CHANGED),))


def failures_whose_site_nothing_says_leave_the_copy_to_the_next_attempt() -> Timeline:
    """Message-tracking logs alone: no NodeStarted names a site, and HAREDIRECTFAIL does not say the
    candidate's (locality UNKNOWN). With PreferRemote the primary may have four remote attempts and two local
    ones, or, in a DAG in one site, two (003); the twin cannot tell which. m1: two attempts on mbx03 fail,
    the third makes the copy there: redundant, no alert (before: NOT_REDUNDANT at 1.02, the second failure,
    counted against the local budget of 2; a simulated world with a server alone in its site down 15
    minutes: 8 such alerts). m2: two attempts fail and no line follows: NOT_REDUNDANT a minute after the
    last (NEXT_ATTEMPT_WAIT_MS). m3: six fail, every budget spent: NOT_REDUNDANT at the sixth. m4: two fail,
    and the primary's next line about it is its SEND: NOT_REDUNDANT then, the primary went on without a copy."""
    org = Org()
    events = [*org.received("mbx01", "m1", 1), *_unsaid_failures(org, "m1", 1, ("mbx03",) * 2),
              *org.shadowed("mbx01", "mbx03", "m1", 1.05),
              *org.received("mbx01", "m2", 2), *_unsaid_failures(org, "m2", 2, ("mbx02",) * 2),
              *org.delivered("mbx01", "m2", "mbx09", 3.5),
              *org.received("mbx01", "m3", 4), *_unsaid_failures(org, "m3", 4, ("mbx03",) * 4 + ("mbx02",) * 2),
              *org.delivered("mbx01", "m1", "mbx09", 5), *org.delivered("mbx01", "m3", "mbx09", 5),
              *org.query_ok("mbx03", "mbx01", 5.5, discarded=("m1",)),
              *org.received("mbx01", "m4", 6), *_unsaid_failures(org, "m4", 6, ("mbx02",) * 2),
              *org.delivered("mbx01", "m4", "mbx09", 6.2)]
    return Timeline("failures whose site nothing says leave the copy to the next attempt", events, alerts=(
        Expected(AlertType.NOT_REDUNDANT, at(3.02), ("m2",)), Expected(AlertType.NOT_REDUNDANT, at(4.06), ("m3",)),
        Expected(AlertType.NOT_REDUNDANT, at(6.2), ("m4",))))


def an_unacknowledged_copy_expires_by_the_hold_of_the_server_that_keeps_it() -> Timeline:
    """What if mbx02's MessageExpirationTimeout (Set-TransportService, one server's) were 1 day, the rest
    default. mbx02 keeps the copy of mbx01's m1 and falls silent after its query of minute 8; mbx01 delivers
    m1 at 12 and queues its discard notification, which mbx02 never collects. "Unacknowledged shadow messages
    eventually expire from Safety Net after the sum of the SafetyNetHoldTime and MessageExpirationTimeout
    parameter values on the Set-TransportService cmdlet" (003): mbx02's, whose Safety Net holds the copy: it
    expires at receipt + 2 days + 1 day (before: mbx01's values, 2 + 2 days). mbx02's silence (14) leaves nothing
    unprotected: m1 was delivered (before: SHADOW_SERVER_UNREACHABLE named it)."""
    org = Org()
    config = ModelConfig(nodes={"mbx02": parameters_from({"message_expiration_timeout": "1.00:00:00"})})
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
              *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
              *_heartbeats_ok(org, "mbx02", "mbx01", 2, 10), *org.delivered("mbx01", "m1", "mbx09", 12),
              *org.tick(5 * 24 * 60)]
    return Timeline("an unacknowledged copy expires by the hold of the server that keeps it", events, config, alerts=(
        Expected(AlertType.DISCARD_EVENTS_DROPPED, at(8) + 2 * DAY, ("m1",)),
        Expected(AlertType.SHADOW_EXPIRED, at(1) + 3 * DAY, ("m1",))))


# ---- behaviours of the seeds a tenth review found decided otherwise --------------------------

def _forks_discarded(org: Org, minute: float, *forks) -> list[ev.Event]:
    """mbx02's query to mbx01 at `minute`, answered with the discard notifications of `forks`."""
    return [ev.DiscardQuerySent(**org._header("mbx02", "mbx01", minute), shadow_queue_db_id="dbS1"),
            ev.DiscardQueryAnswered(**org._header("mbx02", "mbx01", minute), primary_queue_db_id="dbP1",
                                    discarded=forks)]


def a_discard_notification_for_one_fork_keeps_the_copy_of_the_others() -> Timeline:
    """m1 is for a@ and b@; mbx01 forks it to mbx03 (f1, a@) and mbx04 (f2, b@). mbx03 acknowledges f1 and
    mbx02's query at 2 gets the discard notification of that fork alone; mbx01 then fails before mbx04
    acknowledges f2. "For messages with multiple recipients, each next hop for the primary message requires
    separate shadow queues", and the manager makes sure "the redundant copy of the message isn't released until
    all forks of the message are fully processed" (003): f2's copy stays on mbx02, which promotes it at
    ShadowResubmitTimeSpan and resends it to mbx04, for b@ only (before: f1's notification released the whole
    copy, and b@'s fork was never delivered, with no alert). m2, forked alike, has both forks acknowledged: the
    notifications of f1 and f2 release its copy."""
    org = Org()
    both = ("a@contoso.com", "b@contoso.com")
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0)]
    for mid in ("m1", "m2"):
        events += [*org.received("mbx01", mid, 0, recipients=both), *org.shadowed("mbx01", "mbx02", mid, 0),
                   *org.sent("mbx01", mid, "mbx03", 1, fork="f1", recipients=both[:1]),
                   *org.sent("mbx01", mid, "mbx04", 1, fork="f2", recipients=both[1:]),
                   *org.acked("mbx01", mid, "mbx03", 1.5, fork="f1")]
    events += [*org.acked("mbx01", "m2", "mbx04", 1.5, fork="f2"),
               *_forks_discarded(org, 2, ref("m1", "f1"), ref("m2", "f1"), ref("m2", "f2")),
               *org.heartbeats_failing("mbx02", "mbx01", 4, 4 * 60), *org.tick(3 * 24 * 60)]
    promoted_at = at(2) + 3 * HOUR
    return Timeline("a discard notification for one fork keeps the copy of the others", events, alerts=(
        Expected(AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, promoted_at, ("m1",)),),
        commands=(Command("mbx02", "mbx01", "m1", "f2", "mbx04", ("b@contoso.com",), promoted_at),))


def a_shadows_own_resubmission_is_delivered_twice_only_to_the_recipients_still_pending() -> Timeline:
    """m1 is for a@fabrikam.com and b@tailspin.com. mbx01 hands fork f1 (a@) to the Internet gateway, which
    acknowledges, and mbx02 collects that fork's discard notification at 2; mbx01 fails before it sends anything
    for b@. mbx02 takes ownership on its own at ShadowResubmitTimeSpan (its RESUBMIT, 182). mbx01 comes back at
    240 with the same queue database: "it will deliver the messages in its queues, which have already been
    delivered by the servers that hold shadow copies" (003): its queue holds b@'s delivery only, the gateway
    acknowledged a@'s: the duplicate forecast names b@, never a@, as after the twin's own promotion (crash between
    forks). Before: it named a@ too, whose copy reached the gateway once."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0),
              *org.received("mbx01", "m1", 0, recipients=(), external=("a@fabrikam.com", "b@tailspin.com")),
              *org.shadowed("mbx01", "mbx02", "m1", 0),
              *org.sent("mbx01", "m1", "gw-fabrikam", 1, fork="f1", recipients=("a@fabrikam.com",), outside=True),
              *org.acked("mbx01", "m1", "gw-fabrikam", 1.5, fork="f1"),
              ev.DiscardQuerySent(**org._header("mbx02", "mbx01", 2), shadow_queue_db_id="dbS1"),
              ev.DiscardQueryAnswered(**org._header("mbx02", "mbx01", 2), primary_queue_db_id="dbP1",
                                      discarded=(ref("m1", "f1"),)),
              *org.heartbeats_failing("mbx02", "mbx01", 3, 182), *org.promoted("mbx02", "mbx01", "m1", 182),
              *org.started("mbx01", "dbP1", 4 * 60), *org.query_ok("mbx02", "mbx01", 4 * 60 + 1)]
    return Timeline("a shadow's own resubmission is delivered twice only to the recipients still pending", events,
                    alerts=(Expected(AlertType.DUPLICATE_DELIVERY_EXPECTED, at(4 * 60), ("m1",),
                                     (("b@tailspin.com",),)),))


def a_primary_back_with_its_queue_after_message_expiration_expires_the_message_then() -> Timeline:
    """What if heartbeats came every hour. mbx01 (primary of m1) and mbx02 (its shadow) go down after minute 2;
    mbx03 goes on: at the span m1 is at risk. mbx01 comes back at 3 days with the SAME queue database, m1 in its
    queue: "How long a message can remain in a queue before it expires" (MessageExpirationTimeout, 2 days, 003)
    has passed, so m1 expires then: MESSAGE_EXPIRED at 3 days (before: at receipt + SafetyNetHoldTime +
    MessageExpirationTimeout, 4 days, the end of the copy's hold on mbx02, down all along). hub01 (Exchange
    2010) is declared failed by hub02, which holds the copy of m1b for want of an alternate route; hub01 answers
    again at 3 days with the same database: m1b expires in its queue then (before: at 4 days too)."""
    org = Org()
    config = ModelConfig(defaults=parameters_from({"shadow_heartbeat_frequency": "1h"}),
                         nodes={"hub02": parameters_from({"mode": "EXCHANGE_2010",
                                                          "shadow_heartbeat_timeout_interval": "1h"})})
    back = 3 * 24 * 60
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0), *org.started("mbx03", "dbX1", 0),
              *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
              *org.query_ok("mbx02", "mbx01", 2), *org.busy("mbx03", 0, 5 * 24 * 60, every=60),
              *org.started("mbx01", "dbP1", back),
              *org.started("hub01", "db-A", 0, mode=NodeMode.EXCHANGE_2010),
              *org.started("hub02", "db-H2", 0, mode=NodeMode.EXCHANGE_2010),
              *org.received("hub01", "m1b", 1),
              *org.shadowed("hub01", "hub02", "m1b", 1, db="db-A", alternate_route=False),
              *org.query_ok("hub02", "hub01", 2, db="db-A", shadow_db="db-H2"),
              *org.heartbeats_failing("hub02", "hub01", 62, back, every=60, shadow_db="db-H2"),
              *org.query_ok("hub02", "hub01", back + 2, db="db-A", shadow_db="db-H2"),
              *org.query_ok("hub02", "hub01", back + 62, db="db-A", discarded=("m1b",), shadow_db="db-H2"),
              *_heartbeats_ok(org, "hub02", "hub01", back + 122, 5 * 24 * 60, every=60, db="db-A", shadow_db="db-H2")]
    return Timeline("a primary back with its queue after MessageExpirationTimeout expires the message then", events,
                    config, alerts=(Expected(AlertType.HELD_NO_ALTERNATE_ROUTE, at(2) + 3 * HOUR, ("m1b",)),
                                    Expected(AlertType.MESSAGE_AT_RISK, at(2) + 3 * HOUR, ("m1",)),
                                    Expected(AlertType.SHADOW_SERVER_UNREACHABLE, at(2) + 3 * HOUR, ("m1",)),
                                    Expected(AlertType.MESSAGE_EXPIRED, at(back), ("m1",)),
                                    Expected(AlertType.MESSAGE_EXPIRED, at(back + 2), ("m1b",))))


# ---- behaviours of the seeds an eleventh review found decided otherwise ------------------------

def a_second_hand_off_to_the_same_hop_serves_its_own_recipients() -> Timeline:
    """"When the primary server successfully transmits the message to the next hop, and the next hop
    acknowledges receipt of the message, the primary server updates the discard status of the message as
    delivery complete", and the copy is released once "all forks of the message are fully processed" (003).
    A message-tracking SEND names its recipients, no fork. m1 is for a@ and b@ of fabrikam.com: mbx01 hands a@
    to the gateway at 1 (SEND), defers b@ (a DEFER that names no next hop) and hands b@ to the same gateway at 5
    (SEND): m1 is fully processed then, and mbx02, which queried last at 4 and never reaches mbx01 again,
    resubmits its copy on its own at the span: both recipients get it twice (before: b@'s SEND was taken as a
    repeat of a@'s, m1 stayed unprocessed, and the twin commanded mbx02 to resend it to b@, who had it, with no
    duplicate forecast). m2, for a@ and b@ too, is deferred at the gateway for both (a DEFER naming it), then
    handed over for a@ alone: b@ is still pending, and at the span mbx02 resends m2 to b@ (before: a@'s SEND
    served the whole deferred fork, m2 was taken as delivered and b@ never got it, with no alert). That fork to
    the gateway was not fully processed when mbx02 queried at 4, so no discard notification emptied its shadow
    queue: mbx02 resends it whole, and a@ gets m2 twice (before: no duplicate forecast for m2)."""
    org = Org()
    both = ("a@fabrikam.com", "b@fabrikam.com")
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0)]
    for mid in ("m1", "m2"):
        events += [*org.received("mbx01", mid, 0, recipients=(), external=both), *org.shadowed("mbx01", "mbx02", mid, 0)]
    events += [*org.sent("mbx01", "m1", "gw-fabrikam", 1, recipients=both[:1], outside=True),
               *org.acked("mbx01", "m1", "gw-fabrikam", 1), *org.deferred("mbx01", "m1", "", 1, recipients=both[1:]),
               *org.sent("mbx01", "m1", "gw-fabrikam", 5, recipients=both[1:], outside=True),
               *org.acked("mbx01", "m1", "gw-fabrikam", 5),
               *org.deferred("mbx01", "m2", "gw-fabrikam", 1, recipients=both),
               *org.sent("mbx01", "m2", "gw-fabrikam", 3, recipients=both[:1], outside=True),
               *org.acked("mbx01", "m2", "gw-fabrikam", 3),
               *org.query_ok("mbx02", "mbx01", 2), *org.query_ok("mbx02", "mbx01", 4),
               *org.heartbeats_failing("mbx02", "mbx01", 6, 4 * 60), *org.tick(3 * 24 * 60)]
    promoted_at = at(4) + 3 * HOUR
    return Timeline("a second hand-off to the same hop serves its own recipients", events, alerts=(
        Expected(AlertType.DUPLICATE_DELIVERY_EXPECTED, promoted_at, ("m1", "m2"), (both, both[:1])),
        Expected(AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, promoted_at, ("m2",))),
        commands=(Command("mbx02", "mbx01", "m2", None, None, ("b@fabrikam.com",), promoted_at),))


def a_discard_notification_stamped_before_the_primary_names_its_fork_still_counts() -> Timeline:
    """"Node clocks are never perfectly in sync" (domain.md): mbx02's clock is 30 s behind mbx01's. m1 is for a@ and b@: mbx01 forks it to
    mbx03 (f1, a@) at 1 and to mbx04 (f2, b@) at 1.5, both acknowledged at once; mbx02's query right after gets
    the discard notifications of f1 and f2, stamped 1.1 by its clock, before mbx01's SEND of f2. The primary
    "returns the list of delivered messages and removes the discard information" ("devuelve la lista de mensajes
    entregados y quita la información de descarte", 002): they do not come again, and the shadow removes its copy
    "after all expected discard notifications are received" (003). mbx01 fails at 31: nothing follows (before:
    f2's notification, for a fork the twin did not know yet, was dropped, the copy stayed held and mbx02's
    promotion at the span was forecast to deliver m1 twice). m2, for a@ and b@ too: f2's notification comes as
    early, f1 is deferred at mbx03 and never acknowledged: mbx02 resends f1 to mbx03 for a@ alone."""
    org = Org()
    both = ("a@contoso.com", "b@contoso.com")
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0)]
    for mid in ("m1", "m2"):
        events += [*org.received("mbx01", mid, 0, recipients=both), *org.shadowed("mbx01", "mbx02", mid, 0),
                   *org.sent("mbx01", mid, "mbx04", 1.5, fork="f2", recipients=both[1:]),
                   *org.acked("mbx01", mid, "mbx04", 1.55, fork="f2")]
    events += [*org.sent("mbx01", "m1", "mbx03", 1, fork="f1", recipients=both[:1]),
               *org.acked("mbx01", "m1", "mbx03", 1.05, fork="f1"),
               *org.deferred("mbx01", "m2", "mbx03", 1, fork="f1", recipients=both[:1]),
               *_forks_discarded(org, 1.1, ref("m1", "f1"), ref("m1", "f2"), ref("m2", "f2")),
               *_heartbeats_ok(org, "mbx02", "mbx01", 3, 31), *org.heartbeats_failing("mbx02", "mbx01", 31, 4 * 60),
               *org.tick(3 * 24 * 60)]
    promoted_at = at(29) + 3 * HOUR
    return Timeline("a discard notification stamped before the primary names its fork still counts", events, alerts=(
        Expected(AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, promoted_at, ("m2",)),),
        commands=(Command("mbx02", "mbx01", "m2", "f1", "mbx03", ("a@contoso.com",), promoted_at),))


def a_shadow_that_stopped_querying_promotes_nothing_at_the_span() -> Timeline:
    """ShadowResubmitTimeSpan and ShadowHeartbeatFrequency 5 minutes (silence span 15): mbx02 holds m1's copy,
    queries mbx01 at 2, takes m2's copy at 3 and crashes; mbx01 goes on and delivers m1 at 10, m2 at 30. At 8
    (contact + span) mbx02's query due at 7 never came: a shadow that no longer queries resubmits nothing
    (before: m1 and m2 forecast promoted at 8, with commands for a server that was down, and duplicates at
    their deliveries; hunt seeds 785 and 799, where the log-fed twin rightly said none). At 18 it has been
    silent for the silence span: unreachable, m2's copy (m1 was delivered: before, the alert named it too)."""
    org = Org()
    config = ModelConfig(defaults=parameters_from({"shadow_resubmit_time_span": "00:05:00",
                                                   "shadow_heartbeat_frequency": "00:05:00"}))
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0), *org.started("mbx03", "dbX1", 0),
              *org.received("mbx01", "m1", 0), *org.shadowed("mbx01", "mbx02", "m1", 0),
              *org.query_ok("mbx02", "mbx01", 2),
              *org.received("mbx01", "m2", 3), *org.shadowed("mbx01", "mbx02", "m2", 3),
              *org.busy("mbx03", 0, 40), *org.delivered("mbx01", "m1", "mbx09", 10),
              *org.delivered("mbx01", "m2", "mbx09", 30)]
    events.sort(key=lambda e: e.event_time_ms)
    return Timeline("a shadow that stopped querying promotes nothing at the span", events, config, alerts=(
        Expected(AlertType.SHADOW_SERVER_UNREACHABLE, at(18), ("m2",)),))


def a_processed_fork_whose_discard_never_reached_the_shadow_is_resubmitted_with_the_rest() -> Timeline:
    """m1 and m2 are each for a@fabrikam.com and b@tailspin.com; mbx01 forks both to the Internet gateways: f1
    (a@) to gw-fabrikam, acknowledged at 1.5, f2 (b@) to gw-tailspin, deferred. mbx02's query at 2 collects f1's
    discard notification for m2 only (m1's f1 is acknowledged at 2.5); mbx01 fails after minute 3. "For messages
    with multiple recipients, each next hop for the primary message requires separate shadow queues" (003), and a
    shadow copy leaves them only "after all expected discard notifications are received": at ShadowResubmitTimeSpan
    mbx02 "promotes the shadow messages as primary messages, and transmits the messages to the next hop" (003),
    f1's copy of m1 too, which it cannot know gw-fabrikam has: a@fabrikam.com receives m1 twice (as a whole message
    processed but not yet discarded is, processed_then_back_with_a_new_database_before_the_discard_was_collected),
    and only b@ of m2. The twin's commands still name b@ alone. Before: no duplicate was forecast."""
    org = Org()
    gateways = (("gw-fabrikam", "a@fabrikam.com"), ("gw-tailspin", "b@tailspin.com"))
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0)]
    for mid in ("m1", "m2"):
        events += [*org.received("mbx01", mid, 0, recipients=(), external=tuple(r for _, r in gateways)),
                   *org.shadowed("mbx01", "mbx02", mid, 0)]
        for fork, (hop, rcpt) in zip(("f1", "f2"), gateways):
            events += org.sent("mbx01", mid, hop, 1, fork=fork, recipients=(rcpt,), outside=True)
    events += [*org.acked("mbx01", "m2", "gw-fabrikam", 1.5, fork="f1"),
               *org.deferred("mbx01", "m2", "gw-tailspin", 1.5, fork="f2", recipients=("b@tailspin.com",)),
               *_forks_discarded(org, 2, ref("m2", "f1")),
               *org.acked("mbx01", "m1", "gw-fabrikam", 2.5, fork="f1"),
               *org.deferred("mbx01", "m1", "gw-tailspin", 2.5, fork="f2", recipients=("b@tailspin.com",)),
               *org.heartbeats_failing("mbx02", "mbx01", 4, 4 * 60), *org.tick(3 * 24 * 60)]
    promoted_at = at(2) + 3 * HOUR
    return Timeline("a processed fork whose discard never reached the shadow is resubmitted with the rest", events,
                    alerts=(Expected(AlertType.DUPLICATE_DELIVERY_EXPECTED, promoted_at, ("m1",),
                                     (("a@fabrikam.com",),)),
                            Expected(AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, promoted_at, ("m1", "m2"))),
                    commands=tuple(Command("mbx02", "mbx01", mid, "f2", "gw-tailspin", ("b@tailspin.com",), promoted_at)
                                   for mid in ("m2", "m1")))  # in the order of their ids


def a_shadow_that_promotes_on_its_own_resubmits_the_forks_it_had_no_discard_for() -> Timeline:
    """As a_shadows_own_resubmission_is_delivered_twice_only_to_the_recipients_still_pending, but mbx02's query at 1
    comes before the gateway acknowledges f1 (a@), and none reaches mbx01 after: mbx02's own RESUBMIT at 181 sends
    f1's copy as well as b@'s, "each next hop for the primary message requires separate shadow queues" (003) and it
    had no discard notification for that one: a@fabrikam.com receives m1 twice then. mbx01 back at 240 with the same
    queue database delivers b@'s fork again: that duplicate names b@ alone. Before: only the second was forecast."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0),
              *org.received("mbx01", "m1", 0, recipients=(), external=("a@fabrikam.com", "b@tailspin.com")),
              *org.shadowed("mbx01", "mbx02", "m1", 0), *org.query_ok("mbx02", "mbx01", 1),
              *org.sent("mbx01", "m1", "gw-fabrikam", 1, fork="f1", recipients=("a@fabrikam.com",), outside=True),
              *org.acked("mbx01", "m1", "gw-fabrikam", 1.5, fork="f1"),
              *org.heartbeats_failing("mbx02", "mbx01", 3, 181), *org.promoted("mbx02", "mbx01", "m1", 181),
              *org.started("mbx01", "dbP1", 4 * 60), *org.query_ok("mbx02", "mbx01", 4 * 60 + 1)]
    return Timeline("a shadow that promotes on its own resubmits the forks it had no discard for", events, alerts=(
        Expected(AlertType.DUPLICATE_DELIVERY_EXPECTED, at(181), ("m1",), (("a@fabrikam.com",),)),
        Expected(AlertType.DUPLICATE_DELIVERY_EXPECTED, at(4 * 60), ("m1",), (("b@tailspin.com",),))))


# ---- behaviours of the seeds a thirteenth review found decided otherwise ------------------------

def a_copy_that_expires_before_its_message_does_in_the_primarys_queue_is_promoted_by_nobody() -> Timeline:
    """What if SafetyNetHoldTime were 0 and mbx02's MessageExpirationTimeout (Set-TransportService, one
    server's) 30 minutes, mbx01's the default 2 days. mbx02 keeps the copy of mbx01's m1, received at 1:
    "Unacknowledged shadow messages eventually expire from Safety Net after the sum of the SafetyNetHoldTime
    and MessageExpirationTimeout parameter values" (003), mbx02's: its copy expires at 31 (SHADOW_EXPIRED),
    while m1 stays in mbx01's queue ("How long a message can remain in a queue before it expires": 2 days).
    mbx02's queries fail from 60 to 300, but it holds nothing of mbx01's to promote at the span (before: the
    twin forecast its promotion of m1 at 58 + 3 hours, and duplicates when mbx01, back with its queue at 300,
    delivered m1 itself)."""
    org = Org()
    config = ModelConfig(defaults=parameters_from({"safety_net_hold_time": "00:00:00"}),
                         nodes={"mbx02": parameters_from({"safety_net_hold_time": "00:00:00",
                                                          "message_expiration_timeout": "00:30:00"})})
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
              *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
              *_heartbeats_ok(org, "mbx02", "mbx01", 2, 60), *org.heartbeats_failing("mbx02", "mbx01", 60, 300),
              *org.query_ok("mbx02", "mbx01", 300), *org.delivered("mbx01", "m1", "mbx09", 301)]
    return Timeline("a copy that expires before its message does in the primary's queue is promoted by nobody",
                    events, config, alerts=(Expected(AlertType.SHADOW_EXPIRED, at(31), ("m1",)),))


# ---- behaviours a hunt found decided otherwise ---------------------------------------------

def _delivered_by_a_fast_clock_then_back_with_a_new_database(org: Org, promoted_first: bool) -> list[ev.Event]:
    """mbx01's clock is 4 minutes ahead of mbx02's. By mbx02's clock: mbx01 takes m1 (for alice, inside, and
    bob@fabrikam.com) at 9.4, the copy on mbx02, and delivers it at 9.5; it fails at 10, before mbx02's next query
    collects the discard notification (that query fails); it is back at 11.5 with a new, empty queue database,
    which mbx02's query at 12 sees: mbx02 promotes its copy of m1 on its own. mbx01's receipt and delivery of
    m1 are stamped 13.4 and 13.5 by its clock, after the promotion and the answer naming dbP2."""
    shadowed = [dataclasses.replace(e, event_time_ms=at(9.4)) if isinstance(e, ev.ShadowCopyStored) else e
                for e in org.shadowed("mbx01", "mbx02", "m1", 13.4)]
    promoted = org.promoted("mbx02", "mbx01", "m1", 12)
    answered = org.query_ok("mbx02", "mbx01", 12, db="dbP2")
    return [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
            *_heartbeats_ok(org, "mbx02", "mbx01", 2, 10),
            *org.received("mbx01", "m1", 13.4, external=("bob@fabrikam.com",)), *shadowed,
            *org.sent("mbx01", "m1", "mbx09", 13.5, recipients=("alice@contoso.com", "bob@fabrikam.com")),
            *org.acked("mbx01", "m1", "mbx09", 13.5),
            *org.query_failed("mbx02", "mbx01", 10),
            *(promoted + answered if promoted_first else answered + promoted),
            *org.started("mbx01", "dbP2", 15.5), *_heartbeats_ok(org, "mbx02", "mbx01", 14, 20, db="dbP2")]


def a_primary_whose_clock_is_ahead_delivered_before_its_shadow_promoted_on_its_new_database() -> Timeline:
    """As processed_then_back_with_a_new_database_before_the_discard_was_collected, with mbx01's clock 4 minutes
    ahead (hunt seed 1440: ex02's, 240 s): mbx02's RESUBMIT and the answer naming dbP2 are stamped 12, mbx01's
    delivery of m1 13.5 (_delivered_by_a_fast_clock_then_back_with_a_new_database). m1 arrives twice: the
    shadow "promotes the shadow messages" it held for mbx01 when "the queue database ID of the primary server
    has changed" (003), and mbx01 had delivered it from the database it lost. The delivery names m1 of dbP1,
    whose copy mbx02 resubmitted: DUPLICATE_DELIVERY_EXPECTED at 13.5 (the promotion knew m1 by its copy
    alone, so no recipient outside). Before, the answer naming dbP2 made the twin forget the promotion ("its
    queue is gone: nothing twice") and the delivery, by the event time a fast clock stamped, came after."""
    org = Org()
    return Timeline("a primary whose clock is ahead delivered before its shadow promoted on its new database",
                    _delivered_by_a_fast_clock_then_back_with_a_new_database(org, promoted_first=True),
                    alerts=(Expected(AlertType.DUPLICATE_DELIVERY_EXPECTED, at(13.5), ("m1",), ((),)),))


def a_primary_whose_clock_is_ahead_delivered_before_the_twin_saw_its_new_database() -> Timeline:
    """The same, but the answer naming dbP2 comes before mbx02's RESUBMIT, both stamped 12: the twin forecasts
    the promotion itself (an alert and a command) and must remember it as well, for mbx01's delivery of m1
    stamped 13.5. Before, a promotion for a new queue database kept nothing ("the primary's queue is gone
    already")."""
    org = Org()
    return Timeline("a primary whose clock is ahead delivered before the twin saw its new database",
                    _delivered_by_a_fast_clock_then_back_with_a_new_database(org, promoted_first=False), alerts=(
                        Expected(AlertType.QUEUE_DATABASE_CHANGED_SHADOWS_PROMOTED, at(12), ("m1",)),
                        Expected(AlertType.DUPLICATE_DELIVERY_EXPECTED, at(13.5), ("m1",), ((),))),
                    commands=(Command("mbx02", "mbx01", "m1", None, None, (), at(12),
                                      CommandReason.PRIMARY_QUEUE_DATABASE_CHANGED),))


def a_copy_a_fast_shadow_stored_after_its_answer_had_no_discard_notification() -> Timeline:
    """mbx02's clock is 15 s ahead of mbx01's (hunt seed 1617: ex02's, 10 s). mbx01 takes m1 (for alice, inside,
    and bob@fabrikam.com) at 1 and delivers it at 1.1; mbx02's query, answered at 1.2 by its clock (0.95 by
    mbx01's), came before the copy it stores at 1.25 by its clock (1 by mbx01's): that answer could not bring the
    copy's discard notification, and no query reaches mbx01 after (it fails at 2). At ShadowResubmitTimeSpan mbx02
    "promotes the shadow messages as primary messages" (003): m1 arrives twice. Before, the answer stamped after the
    delivery counted as the notification, and nothing was forecast."""
    org = Org()
    stored = [dataclasses.replace(e, event_time_ms=at(1.25)) if isinstance(e, ev.ShadowCopyStored) else e
              for e in org.shadowed("mbx01", "mbx02", "m1", 1)]
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
              *org.query_ok("mbx02", "mbx01", 0.5),
              *org.received("mbx01", "m1", 1, external=("bob@fabrikam.com",)), *stored,
              *org.sent("mbx01", "m1", "mbx09", 1.1, fork="f1",
                        recipients=("alice@contoso.com", "bob@fabrikam.com")),
              *org.acked("mbx01", "m1", "mbx09", 1.1, fork="f1"), *org.query_ok("mbx02", "mbx01", 1.2),
              *org.heartbeats_failing("mbx02", "mbx01", 2, 4 * 60), *org.tick(3 * 24 * 60)]
    return Timeline("a copy a fast shadow stored after its answer had no discard notification", events, alerts=(
        Expected(AlertType.DUPLICATE_DELIVERY_EXPECTED, at(1.25) + 3 * HOUR, ("m1",),
                 (("alice@contoso.com", "bob@fabrikam.com"),)),))  # alice's too: past her duplicate detection


def a_copy_naming_the_primarys_new_database_promotes_the_copies_of_the_old_one() -> Timeline:
    """mbx01 restarts at 5 with a new, empty queue database, which the feed does not show (no NodeStarted);
    at 10 it takes m2 and makes its copy on mbx02, which stores it with mbx01's queue database id: dbP2, not
    the dbP1 of its copy of m1. The shadow keeps "the original database ID and the current database ID" per
    message, and "whenever the shadow server detects that the queue database ID of the primary server has
    changed, the shadow server also promotes itself" (003): m1 at 10. mbx01 fails again at 11 and mbx02's
    queries fail from 12: m2 (of dbP2) waits for ShadowResubmitTimeSpan after that contact. Before, nothing
    but an answer or a NodeStarted named the new database, so m1 waited with m2 for the span (190)."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
              *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
              *_heartbeats_ok(org, "mbx02", "mbx01", 2, 5),
              *org.received("mbx01", "m2", 10), *org.shadowed("mbx01", "mbx02", "m2", 10, db="dbP2"),
              *org.heartbeats_failing("mbx02", "mbx01", 12, 4 * 60)]
    return Timeline("a copy naming the primary's new database promotes the copies of the old one", events, alerts=(
        Expected(AlertType.QUEUE_DATABASE_CHANGED_SHADOWS_PROMOTED, at(10), ("m1",)),
        Expected(AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, at(10) + 3 * HOUR, ("m2",))), commands=(
        Command("mbx02", "mbx01", "m1", None, None, (), at(10), CommandReason.PRIMARY_QUEUE_DATABASE_CHANGED),
        Command("mbx02", "mbx01", "m2", None, None, (), at(10) + 3 * HOUR)))


def a_shadow_that_stopped_querying_does_not_see_the_primarys_new_database() -> Timeline:
    """mbx02 holds m1's copy and queries mbx01 every 2 minutes; both fail after 8 (mbx02's last query). mbx01
    comes back at 12 with a new, empty queue database: mbx02 would promote m1 when its next query shows the new
    id ("whenever the shadow server detects that the queue database ID of the primary server has changed",
    003), but its query due at 10 never came: a shadow that no longer queries sees nothing. At 14 it has been
    silent for the silence span: unreachable, and m1, whose only copy is on it, at risk; mbx02 comes back with
    its queue database at 40 and promotes m1 at its first query. Before, m1 was forecast promoted at 12, with
    a command for a server that was down (hunt seed 1716: ex01 down for good at 00:44, its primary ex02 back
    with a new database at 00:46, 4 messages; truth: none promoted)."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0), *org.started("mbx03", "dbX1", 0),
              *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
              *_heartbeats_ok(org, "mbx02", "mbx01", 2, 9), *org.busy("mbx03", 0, 60),
              *org.started("mbx01", "dbP2", 12),
              *org.started("mbx02", "dbS1", 40), *org.query_ok("mbx02", "mbx01", 40, db="dbP2")]
    return Timeline("a shadow that stopped querying does not see the primary's new database", events, alerts=(
        Expected(AlertType.MESSAGE_AT_RISK, at(14), ("m1",)),
        Expected(AlertType.SHADOW_SERVER_UNREACHABLE, at(14), ("m1",)),
        Expected(AlertType.QUEUE_DATABASE_CHANGED_SHADOWS_PROMOTED, at(40), ("m1",))), commands=(
        Command("mbx02", "mbx01", "m1", None, None, (), at(40), CommandReason.PRIMARY_QUEUE_DATABASE_CHANGED),))


def a_shadow_that_queried_before_its_copies_were_released_has_heartbeats_with_its_next_copy() -> Timeline:
    """ShadowResubmitTimeSpan and ShadowHeartbeatFrequency 5 minutes (silence span 15): mbx02 queries mbx01 at 2
    and 7, where the answer releases m1's copy, the last it held. It takes m2's copy at 12.5 (delivered at 12.8) and
    m3's at 13, then fails with mbx01: its query due at 12 had nothing to ask, the one due at 17 never comes. mbx02
    had been sending discard queries all along, so the heartbeat rules hold: at 18 (contact + span) it resubmits
    nothing, and at 28 it has been silent for the silence span: unreachable, m3's copy (m2 was delivered: before,
    the alert named it too), and m3, whose primary has been silent as long, at risk. Before, the pair made again at 12.5 had no heartbeat seen since, and its shadow's life was
    inferred from its lines: m3 forecast promoted at 18, with a command to a server that was down, and m2 forecast
    delivered twice (hunt seed 2203: ex02's copy of ex03.53 at 03:13:31, ex02 down for good at 03:17)."""
    org = Org()
    config = ModelConfig(defaults=parameters_from({"shadow_resubmit_time_span": "00:05:00",
                                                   "shadow_heartbeat_frequency": "00:05:00"}))
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0), *org.started("mbx03", "dbX1", 0),
              *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
              *org.query_ok("mbx02", "mbx01", 2), *org.delivered("mbx01", "m1", "mbx09", 3),
              *org.query_ok("mbx02", "mbx01", 7, discarded=("m1",)),
              *org.received("mbx01", "m2", 12.5), *org.shadowed("mbx01", "mbx02", "m2", 12.5),
              *org.delivered("mbx01", "m2", "mbx09", 12.8),
              *org.received("mbx01", "m3", 13), *org.shadowed("mbx01", "mbx02", "m3", 13),
              *org.busy("mbx03", 0, 40)]
    events.sort(key=lambda e: e.event_time_ms)
    return Timeline("a shadow that queried before its copies were released has heartbeats with its next copy",
                    events, config, alerts=(
                        Expected(AlertType.MESSAGE_AT_RISK, at(28), ("m3",)),
                        Expected(AlertType.SHADOW_SERVER_UNREACHABLE, at(28), ("m3",))))



# ---- behaviours of the seeds the nineteenth review found decided otherwise ---------------------

def exchange_2010_a_previous_hop_has_no_discard_notification_of_one_fork() -> Timeline:
    """chicago (Exchange 2010) hands m1, for a@fabrikam.com and b@tailspin.com, to newyork and keeps the shadow
    copy; newyork forks it to london (f1, a@, acknowledged at 1.6) and boston (f2, b@, not acknowledged), answers
    chicago's query at 2 and dies. A 2010 shadow keeps its copy "hasta que confirma que todos los saltos
    siguientes relativos a dicho mensaje se han llevado a cabo correctamente", its shadow queues are "para cada
    salto al que entregó el mensaje principal" (its own next hops, not newyork's), and the primary answers with
    "la lista de mensajes entregados" (002): the answer at 2 brought nothing of f1. At 3 x
    ShadowHeartbeatTimeoutInterval chicago "vuelve a enviar los mensajes que hay en la cola de instantáneas": m1
    whole, so a@ gets it twice (before: the answer at 2 counted as f1's notification, as a 2013 shadow's per next
    hop, and no duplicate was forecast). The command still names b@ alone."""
    org = Org()
    events = [*org.started("newyork", "dbNY", 0, mode=NodeMode.EXCHANGE_2010),
              *org.started("chicago", "dbCH", 0, mode=NodeMode.EXCHANGE_2010),
              *org.received("newyork", "m1", 1, recipients=(), external=("a@fabrikam.com", "b@tailspin.com")),
              *org.shadowed("newyork", "chicago", "m1", 1, db="dbNY"),
              *org.sent("newyork", "m1", "london", 1.5, fork="f1", recipients=("a@fabrikam.com",)),
              *org.sent("newyork", "m1", "boston", 1.5, fork="f2", recipients=("b@tailspin.com",)),
              *org.acked("newyork", "m1", "london", 1.6, fork="f1"),
              *org.query_ok("chicago", "newyork", 2, db="dbNY", shadow_db="dbCH"),
              *org.heartbeats_failing("chicago", "newyork", 7, 40, every=5, shadow_db="dbCH")]
    return Timeline("Exchange 2010: a previous hop has no discard notification of one fork", events, alerts=(
        Expected(AlertType.DUPLICATE_DELIVERY_EXPECTED, at(17), ("m1",), (("a@fabrikam.com",),)),
        Expected(AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, at(17), ("m1",))),
        commands=(Command("chicago", "newyork", "m1", "f2", None, ("b@tailspin.com",), at(17)),))


def a_primary_in_no_dag_gives_up_after_its_local_retries_whatever_the_lines_say() -> Timeline:
    """mbx01 and mbx02 are in site1 and in no DAG (their NodeStarted say so); mbx03, down since before the feed
    began, sent none. mbx01's attempts on mbx03 fail, the lines not saying its site. "If the primary server isn't
    a member of a DAG, the primary server connects to a different Mailbox server in the same Active Directory site
    (regardless of the value of the ShadowMessagePreferenceSetting parameter)", and MaxRetriesForLocalSiteShadow is
    the number of attempts when "The Mailbox server isn't a member of a DAG" (003): m1's second failure (1.02) spends
    them, NOT_REDUNDANT then (before: a minute later, the twin waiting for PreferRemote's remote attempts, which a
    primary in no DAG has not). m2: one failure, then the copy on mbx02: redundant, no alert."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0, dag=None), *org.started("mbx02", "dbS1", 0, dag=None),
              *org.received("mbx01", "m1", 1), *_unsaid_failures(org, "m1", 1, ("mbx03",) * 2),
              *org.received("mbx01", "m2", 2), *_unsaid_failures(org, "m2", 2, ("mbx03",)),
              *org.shadowed("mbx01", "mbx02", "m2", 2.02),
              *org.delivered("mbx01", "m1", "mbx09", 3), *org.delivered("mbx01", "m2", "mbx09", 3),
              *org.query_ok("mbx02", "mbx01", 4, discarded=("m2",))]
    return Timeline("a primary in no DAG gives up after its local retries whatever the lines say", events,
                    alerts=(Expected(AlertType.NOT_REDUNDANT, at(1.02), ("m1",)),))


def a_primary_back_with_a_new_database_keeps_no_discard_notification_for_its_silent_shadow() -> Timeline:
    """mbx02 holds the copies of mbx01's m1 and m2; its last query is at 2 and it falls silent (down, its queue
    database intact); mbx01 delivers m1 at 3 and queues its discard notification for mbx02, then fails and comes
    back at 20 with a new, empty queue database dbP2: m2's only copy is on mbx02, which is down (MESSAGE_AT_RISK).
    m1's notification went with dbP1: a new queue database has no discard status of the old one's messages (mbx02
    resubmits "those messages" when it detects "the new queue database ID", 003), and the twin takes none from it
    (`discard_query_answered`). So ShadowMessageAutoDiscardInterval after mbx02's last query (2 + 2 days) mbx01
    deletes nothing: no DISCARD_EVENTS_DROPPED ("the primary server deletes the queued discard events", 003: there
    are none left to delete). Before, the twin said at 2 + 2 days that mbx01 deletes the discard notifications it
    kept for mbx02 and that m1's copy stays on mbx02 until it expires. mbx02 comes back with its copies at 2 days
    2 hours and sees dbP2: it promotes both, m1 (delivered by mbx01 at 3, two days before: mailbox users see it
    twice) and m2 (a command)."""
    org = Org()
    back = 2 * 24 * 60 + 120
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0), *org.started("mbx03", "dbX1", 0),
              *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
              *org.received("mbx01", "m2", 1), *org.shadowed("mbx01", "mbx02", "m2", 1),
              *org.query_ok("mbx02", "mbx01", 2), *org.delivered("mbx01", "m1", "mbx09", 3),
              *org.busy("mbx03", 0, back + 10, every=60),
              *org.started("mbx01", "dbP2", 20), *org.busy("mbx01", 21, back + 10, every=60),
              *org.started("mbx02", "dbS1", back), *org.query_ok("mbx02", "mbx01", back, db="dbP2")]
    return Timeline("a primary back with a new database keeps no discard notification for its silent shadow", events,
                    alerts=(Expected(AlertType.SHADOW_SERVER_UNREACHABLE, at(8), ("m2",)),
                            Expected(AlertType.MESSAGE_AT_RISK, at(20), ("m2",)),
                            Expected(AlertType.DUPLICATE_DELIVERY_EXPECTED, at(back), ("m1",),
                                     (("alice@contoso.com",),)),
                            Expected(AlertType.QUEUE_DATABASE_CHANGED_SHADOWS_PROMOTED, at(back), ("m2",))),
                    commands=(Command("mbx02", "mbx01", "m2", None, None, (), at(back),
                                      CommandReason.PRIMARY_QUEUE_DATABASE_CHANGED),))


def a_message_at_risk_its_primary_defers_again_is_in_its_queue_and_expires_there() -> Timeline:
    """mbx02 holds the copy of mbx01's m1; its last query is at 2 and it falls silent for good (SHADOW_SERVER_UNREACHABLE
    at 8). mbx01 defers m1 at 3 (mbx09 refuses it), then nothing is heard of mbx01 until 300: at the span (2 + 3
    hours) both servers of m1's redundancy are silent, MESSAGE_AT_RISK. From 300 mbx01 defers m1 again every 30
    minutes, with no restart: m1 is in its queue, and "MessageExpirationTimeout ... How long a message can remain in a
    queue before it expires" (003): mbx01 expires it at 1 + 2 days (MESSAGE_EXPIRED, a non-delivery report to its
    sender); mbx02, still down, never collects the discard status (DISCARD_EVENTS_DROPPED at 2 + 2 days) and its copy
    expires at 1 + 4 days (SHADOW_EXPIRED). Before, m1 stayed at risk whatever mbx01 said of it, and at 1 + 4 days the
    twin said MESSAGE_LOST, 'no server delivered it', of a message its primary held and had expired two days before."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0), *org.started("mbx03", "dbX1", 0),
              *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
              *org.query_ok("mbx02", "mbx01", 2), *org.deferred("mbx01", "m1", "mbx09", 3),
              *org.busy("mbx03", 0, 5 * 24 * 60, every=30)]
    for minute in range(300, 2 * 24 * 60, 30):
        events += org.deferred("mbx01", "m1", "mbx09", minute)
    return Timeline("a message at risk its primary defers again is in its queue and expires there", events, alerts=(
        Expected(AlertType.SHADOW_SERVER_UNREACHABLE, at(8), ("m1",)),
        Expected(AlertType.MESSAGE_AT_RISK, at(2) + 3 * HOUR, ("m1",)),
        Expected(AlertType.MESSAGE_EXPIRED, at(1) + 2 * DAY, ("m1",)),
        Expected(AlertType.DISCARD_EVENTS_DROPPED, at(2) + 2 * DAY, ("m1",)),
        Expected(AlertType.SHADOW_EXPIRED, at(1) + 4 * DAY, ("m1",))))


def _a_fork_refused_for_good(org) -> list:
    """m1 for a@fabrikam.com (f1, acknowledged at 1.5) and bob@tailspin.com (f2, refused for good at 2.5: mbx01
    expires that fork), its copy on mbx02, whose answered query at 2 brought f1's discard notification."""
    return [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
            *org.received("mbx01", "m1", 1, recipients=(), external=("a@fabrikam.com", "bob@tailspin.com")),
            *org.shadowed("mbx01", "mbx02", "m1", 1),
            *org.sent("mbx01", "m1", "gw-fabrikam", 1, fork="f1", recipients=("a@fabrikam.com",), outside=True),
            *org.acked("mbx01", "m1", "gw-fabrikam", 1.5, fork="f1"),
            *org.sent("mbx01", "m1", "gw-tailspin", 1, fork="f2", recipients=("bob@tailspin.com",), outside=True),
            *org.query_ok("mbx02", "mbx01", 2), *org.expired("mbx01", "m1", 2.5, fork="f2")]


def a_fork_that_failed_for_good_is_resubmitted_by_a_shadow_that_had_no_discard_notification_for_it() -> Timeline:
    """m1 is for a@fabrikam.com (fork f1, by gw-fabrikam, acknowledged at 1.5) and bob@tailspin.com (f2, by
    gw-tailspin, refused for good at 2.5: mbx01 expires that fork, bob has a non-delivery report). mbx02's last
    answer, at 2, brought f1's discard notification, not f2's; mbx01 then fails and mbx02's queries fail from 4. "For
    messages with multiple recipients, each next hop for the primary message requires separate shadow queues", and
    the shadow moves a copy into Safety Net "once the shadow server knows the primary server has successfully
    transmitted the message to the next hop" (003): f2's shadow queue on mbx02 still holds m1. At ShadowResubmitTimeSpan
    after its last answer mbx02 "promotes the shadow messages as primary messages, and transmits the messages to the
    next hop" (003): bob gets m1 now, once, after his non-delivery report, as the recipients of a message the primary
    expired do; a@ does not (f1's queue is empty). So PRIMARY_FAILED_SHADOWS_PROMOTED names m1 (no command: the
    twin saw mbx01 process it; no duplicate). Before, the twin said nothing at all of m1's resubmission."""
    org = Org()
    events = [*_a_fork_refused_for_good(org), *org.heartbeats_failing("mbx02", "mbx01", 4, 190)]
    return Timeline("a fork that failed for good is resubmitted by a shadow that had no discard notification for it",
                    events, alerts=(Expected(AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, at(2) + 3 * HOUR, ("m1",)),),
                    outcomes=(("m1", "promoted", at(2) + 3 * HOUR),))


def a_fork_that_failed_for_good_is_resubmitted_by_a_shadow_that_promotes_on_its_own() -> Timeline:
    """As a_fork_that_failed_for_good_is_resubmitted_by_a_shadow_that_had_no_discard_notification_for_it, but the
    feed shows mbx02's own promotion of m1 (its RESUBMIT) at ShadowResubmitTimeSpan after its last answer, before
    the twin's deadline decides it. f2's shadow queue on mbx02 still held m1, so bob gets m1 from mbx02 then, once,
    after his non-delivery report; a@ does not (f1's notification came with the answer at 2): no duplicate.

    | m1's fork | what mbx01 did | mbx02's shadow queue for it | what mbx02's promotion does |
    |---|---|---|---|
    | f1, a@fabrikam.com | acknowledged at 1.5, discard notification collected at 2 | empty | nothing |
    | f2, bob@tailspin.com | refused for good at 2.5 (a non-delivery report) | holds m1 | bob gets m1, once |

    So m1 ends 'promoted' at 182: the shadow's copy is what reaches bob. Before, 'delivered' (the twin saw mbx01
    process it), and nothing the native twin decided named m1 as taken over: a log-fed twin's forecast of its
    promotion counted as a false alert (producers/simulator/mtl_check.py)."""
    org = Org()
    events = [*_a_fork_refused_for_good(org), *org.heartbeats_failing("mbx02", "mbx01", 4, 182),
              *org.promoted("mbx02", "mbx01", "m1", 182)]
    return Timeline("a fork that failed for good is resubmitted by a shadow that promotes on its own", events,
                    outcomes=(("m1", "promoted", at(182)),))


def each_fork_of_a_message_delivered_twice_is_forgotten_by_duplicate_detection_on_its_own() -> Timeline:
    """mbx01 takes m1 at 1 for alice@contoso.com (a mailbox user) and bob@fabrikam.com, its copy on mbx02, whose
    answered query at 2 is its last: from 4 its queries fail (a partition; mbx01 goes on). mbx01 delivers fork f1 to
    alice's mailbox at 5; fork f2 to the gateway is acknowledged at 70. mbx01 restarts at 72 with a new queue
    database: mbx02 promotes m1 and resubmits it whole, no discard notification having reached it since 2.

    | m1's fork | first copy (mbx01) | second copy (mbx02's resubmission) | seen twice? |
    |---|---|---|---|
    | f1, alice@contoso.com (mailbox) | 5 | 72 | yes: her DeliveredTo entry is gone after 1 hour (004) |
    | f2, bob@fabrikam.com (outside) | 70 | 72 | yes: no duplicate detection outside the organisation |

    "Whenever a message gets delivered to a user, the DeliveredTo database is checked for an entry for the message. If
    there are no existing entries, a new entry is created", and "The default duration for tracking duplicates is 1
    hour" (004): alice's entry dates from her own copy, at 5, so the resubmitted copy, 67 minutes later, is new to her
    store. Before, the twin dated every fork's first copy by m1's processing as a whole (its last fork, at 70):
    'mailbox users see none', listing bob alone."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
              *org.received("mbx01", "m1", 1, external=("bob@fabrikam.com",)),
              *org.shadowed("mbx01", "mbx02", "m1", 1), *org.query_ok("mbx02", "mbx01", 2),
              *org.query_failed("mbx02", "mbx01", 4),
              *org.delivered_to_mailbox("mbx01", "m1", "mbx05", 5, fork="f1"),
              *org.sent("mbx01", "m1", "gw-fabrikam", 5, fork="f2", recipients=("bob@fabrikam.com",), outside=True),
              *org.heartbeats_failing("mbx02", "mbx01", 6, 72),
              *org.acked("mbx01", "m1", "gw-fabrikam", 70, fork="f2"), *org.started("mbx01", "dbP2", 72)]
    return Timeline("each fork of a message delivered twice is forgotten by duplicate detection on its own", events,
                    alerts=(Expected(AlertType.DUPLICATE_DELIVERY_EXPECTED, at(72), ("m1",),
                                     (("alice@contoso.com", "bob@fabrikam.com"),)),))


def a_shadow_whose_every_query_is_answered_promotes_nothing_however_short_the_resubmit_span() -> Timeline:
    """What if ShadowResubmitTimeSpan were 1 minute, ShadowHeartbeatFrequency the default 2: mbx02 holds the copy of
    m1 (received at 1, deferred by mbx09 at 1.5: still in mbx01's queue) and queries mbx01 every 2 minutes.

    | when | mbx02's session to mbx01 | what mbx02 does |
    |---|---|---|
    | 2 to 8, every 2 minutes | answered (mbx01 up, logging all along) | nothing: it never failed to reach mbx01 |
    | 9 | | (mbx01 fails) |
    | 10 | fails, 2 minutes after the last answer | promotes m1 and sends it to mbx09 |

    "If the shadow server can't open an SMTP session with the primary server after a preconfigured time interval (the
    ShadowResubmitTimeSpan parameter ...) the shadow server promotes itself" (003): a shadow whose every session
    reached its primary has found nothing unreachable, however long ago the last one was; the first one that fails
    after the span promotes. Before, the twin promoted m1 at 3 (a minute after the answer at 2, 'mbx02 has had no answer
    from mbx01 since 00:02'), forecast its duplicate at 4 when the next answer came ('came back with the same queue
    database'), and said nothing at mbx01's real failure."""
    org = Org()
    config = ModelConfig(defaults=parameters_from({"shadow_resubmit_time_span": "00:01:00"}))
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
              *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
              *org.deferred("mbx01", "m1", "mbx09", 1.5), *_heartbeats_ok(org, "mbx02", "mbx01", 2, 10),
              *org.busy("mbx01", 1, 9), *org.busy("mbx02", 1, 30), *org.heartbeats_failing("mbx02", "mbx01", 10, 30)]
    return Timeline("a shadow whose every query is answered promotes nothing, however short the resubmit span",
                    sorted(events, key=lambda e: e.event_time_ms), config,
                    alerts=(Expected(AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, at(10), ("m1",)),),
                    commands=(Command("mbx02", "mbx01", "m1", "mbx09", "mbx09", ("alice@contoso.com",), at(10)),))


def a_shadow_that_promotes_on_its_own_a_moment_before_the_twins_deadline_is_said_to() -> Timeline:
    """ShadowResubmitTimeSpan 6 minutes: mbx02 holds the copies of m1 and m2 (deferred by mbx09: still in mbx01's
    queue) and queries mbx01 every 2 minutes, each answer stamped 20 ms after its query, as the simulator's are.

    | when | mbx02's session to mbx01 | what mbx02 does |
    |---|---|---|
    | 2, 4 | answered 20 ms later | its last contact: 4 (its query), 4 + 20 ms (the answer's stamp) |
    | 5 | | (mbx01 fails) |
    | 6, 8 | fails | nothing yet |
    | 10 | fails | promotes m1 and m2 at 10, the span after its query at 4 |

    The twin's deadline, counted from the answer, is 10 + 20 ms: mbx02's own ShadowPromoted came first, and the
    twin closed both messages 'promoted' without a word: no PRIMARY_FAILED_SHADOWS_PROMOTED, no command, and a
    whatif scored them missed (simulate at 0.1 messages/s: 10 promotions said of 15). Now the twin promotes with
    it, at 10."""
    org = Org()
    config = ModelConfig(defaults=parameters_from({"shadow_resubmit_time_span": "00:06:00"}))
    answered_later = [dataclasses.replace(e, event_time_ms=e.event_time_ms + 20)
                      if isinstance(e, ev.DiscardQueryAnswered) else e
                      for e in _heartbeats_ok(org, "mbx02", "mbx01", 2, 5)]
    failing = [dataclasses.replace(e, event_time_ms=e.event_time_ms + 30) if isinstance(e, ev.DiscardQueryFailed)
               else e for e in org.heartbeats_failing("mbx02", "mbx01", 6, 11)]
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
              *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
              *org.received("mbx01", "m2", 1.2), *org.shadowed("mbx01", "mbx02", "m2", 1.2),
              *org.deferred("mbx01", "m1", "mbx09", 1.5), *org.deferred("mbx01", "m2", "mbx09", 1.6),
              *answered_later, *org.busy("mbx01", 1, 5), *org.busy("mbx02", 1, 30), *failing,
              *org.promoted("mbx02", "mbx01", "m1", 10), *org.promoted("mbx02", "mbx01", "m2", 10)]
    return Timeline("a shadow that promotes on its own a moment before the twin's deadline is said to",
                    sorted(events, key=lambda e: e.event_time_ms), config,
                    alerts=(Expected(AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, at(10), ("m1", "m2")),),
                    commands=(Command("mbx02", "mbx01", "m2", "mbx09", "mbx09", ("alice@contoso.com",), at(10)),
                              Command("mbx02", "mbx01", "m1", "mbx09", "mbx09", ("alice@contoso.com",), at(10))))

def a_duplicate_after_a_promotion_the_shadow_reported_counts_from_its_resubmission() -> Timeline:
    """The timeline above, and mbx01 back at 71 with the same queue database: it delivers m1 and m2 again, 61
    minutes after mbx02 resubmitted them at 10 (its own ShadowPromoted says when). Alice's store's duplicate
    detection keeps a Message-ID for an hour (004): she sees both copies. Before, the twin counted the gap from 12,
    a heartbeat after the promotion (the latest a shadow resubmits after the twin's deadline, when the twin decides
    it), and named nobody: 'mailbox users see none'."""
    before = a_shadow_that_promotes_on_its_own_a_moment_before_the_twins_deadline_is_said_to()
    org = Org()
    back = [dataclasses.replace(e, event_id=f"back{e.event_id}") for e in
            [*org.started("mbx01", "dbP1", 71), *org.busy("mbx02", 30, 75)]]
    return Timeline("a duplicate after a promotion the shadow reported counts from its resubmission",
                    sorted([*before.events, *back], key=lambda e: e.event_time_ms), before.config,
                    alerts=(*before.alerts, Expected(AlertType.DUPLICATE_DELIVERY_EXPECTED, at(71), ("m1", "m2"),
                                                     (("alice@contoso.com",), ("alice@contoso.com",)))),
                    commands=before.commands)

def a_shadow_that_promotes_the_old_databases_copies_keeps_the_one_it_just_stored() -> Timeline:
    """Message-tracking logs (no queue-database id, no discard query); ShadowResubmitTimeSpan and
    ShadowHeartbeatFrequency 5 minutes. mbx01 takes m1 at 1 (its copy on mbx02; mbx09 defers it) and fails at 3.

    | when | mbx01's log | mbx02's log |
    |---|---|---|
    | 1 | RECEIVE m1, HAREDIRECT to mbx02 | HARECEIVE m1 |
    | 3 to 5 | nothing: down, back with a new, empty queue database (loads nothing) | |
    | 6 | RECEIVE m2, HAREDIRECT to mbx02, delivers m2 at 6.2 | HARECEIVE m2 |
    | 7 | | RESUBMIT m1 (it saw the new ID), HADISCARD m2 (the answer brought its notification) |

    "If the shadow server detects that the queue database ID of the primary server has changed, ... the shadow server
    resubmits the shadow messages" of the old database at once (003); m2's copy, stored in a session with mbx01 a
    minute before, is of the new one, and its notification came. So m1 is resubmitted, once, and m2 delivered once.
    Before, mbx02's RESUBMIT less than a heartbeat before the twin's deadline (6 + 5 minutes) was taken for its
    promotion for want of contact, of every copy it held (hunt seed 7572): m1's command, and m2 forecast delivered
    twice (DUPLICATE_DELIVERY_EXPECTED)."""
    org = Org()
    config = ModelConfig(defaults=parameters_from({"shadow_resubmit_time_span": "00:05:00",
                                                   "shadow_heartbeat_frequency": "00:05:00"}))
    discarded = ev.ShadowDiscarded(**{**org._header("mbx02", "mbx01", 7, "m2"), "event_time_ms": at(7) + 25})
    events = [*org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1, db=""),
              *org.deferred("mbx01", "m1", "mbx09", 1.5), *org.busy("mbx01", 1, 3, every=1),
              *org.busy("mbx01", 5, 20, every=1),
              *org.received("mbx01", "m2", 6), *org.shadowed("mbx01", "mbx02", "m2", 6, db=""),
              *org.delivered("mbx01", "m2", "mbx09", 6.2),
              *org.promoted("mbx02", "mbx01", "m1", 7), discarded,
              *org.busy("mbx02", 1, 20, every=1), *org.busy("mbx03", 1, 20, every=1), *org.tick(30)]
    return Timeline("a shadow that promotes the old database's copies keeps the one it just stored",
                    sorted(events, key=lambda e: e.event_time_ms), config)


def _a_log_fed_shadow_back_from_its_own_outage(org: Org, answered: bool) -> list[ev.Event]:
    """Log input: mbx01 takes m1 and m2 at 1, their copies on mbx02; mbx02 logs until 9 and is down 10 to 129.5;
    mbx01 delivers both at 11 and logs until 70, then is idle (its log shows no health probe); mbx03 logs throughout.
    mbx02 is back at 129.5 (LOAD of its two copies) and, `answered`, logs their HADISCARD at 130.7."""
    back = org.discarded("mbx02", "mbx01", ("m1", "m2"), 130.7) if answered else []
    return [*org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1, db=""),
            *org.received("mbx01", "m2", 1), *org.shadowed("mbx01", "mbx02", "m2", 1, db=""),
            *org.busy("mbx01", 2, 71), *org.busy("mbx02", 2, 10), *org.busy("mbx03", 0, 140),
            *org.delivered("mbx01", "m1", "mbx09", 11), *org.delivered("mbx01", "m2", "mbx09", 11),
            *org.loaded("mbx02", "mbx01", "m1", 129.5), *org.loaded("mbx02", "mbx01", "m2", 129.5),
            *org.busy("mbx02", 130, 140), *back]


_SPAN_AN_HOUR = ModelConfig(defaults=parameters_from({"shadow_resubmit_time_span": "01:00:00"}))


def a_log_fed_shadow_back_from_its_own_outage_is_judged_by_its_first_query() -> Timeline:
    """ShadowResubmitTimeSpan 1 hour, ShadowHeartbeatFrequency 2 minutes (_a_log_fed_shadow_back_from_its_own_outage).

    | when | mbx01's log | mbx02's log |
    |---|---|---|
    | 1 | RECEIVE m1, m2; HAREDIRECT to mbx02 | HARECEIVE m1, m2 |
    | 10 to 129.5 | SEND m1, m2 at 11 (their discard notifications wait for mbx02); lines until 70 | nothing: down |
    | 129.5 | | LOAD m1, m2 (back with the same queue database) |
    | 130.7 | | HADISCARD m1, m2: its first discard query since, answered with their notifications |

    The shadow promotes when it "can't open an SMTP session with the primary server after ... ShadowResubmitTimeSpan"
    (003); down, it opened none, and back it opens one within ShadowHeartbeatFrequency ("the shadow server will
    automatically open an SMTP session with the primary server after a preconfigured time interval", 003): that
    session decides. mbx01's lines while mbx02 was down were no contact with it. mbx01 answered (the HADISCARD lines),
    so nothing is promoted and nothing delivered twice, as the twin fed the servers' own events says (hunt seed 8861).
    Before, mbx01's last line (70) + the span, 130, came 30 s after mbx02's return and found it up and mbx01 silent: m1
    and m2 forecast resubmitted by mbx02 and delivered twice (DUPLICATE_DELIVERY_EXPECTED) at 130."""
    org = Org()
    events = _a_log_fed_shadow_back_from_its_own_outage(org, answered=True)
    return Timeline("a log-fed shadow back from its own outage is judged by its first query",
                    sorted(events, key=lambda e: e.event_time_ms), _SPAN_AN_HOUR)


def a_log_fed_shadow_back_from_its_own_outage_whose_first_query_finds_nothing_promotes_then() -> Timeline:
    """As a_log_fed_shadow_back_from_its_own_outage_is_judged_by_its_first_query, but mbx02 logs no HADISCARD once
    back: nothing shows that mbx01 answered, and mbx01 has shown no life since 70, more than the span before. Its
    first query, at most a heartbeat after its return (129.5 + 2), found it unreachable: mbx02 resubmits its copies
    then, and m1 and m2, which mbx01 had delivered, are delivered twice. (Before: at 130, mbx01's last line + the
    span, 30 s after mbx02's return, before any query of it could have been sent.)"""
    org = Org()
    events = _a_log_fed_shadow_back_from_its_own_outage(org, answered=False)
    return Timeline("a log-fed shadow back from its own outage whose first query finds nothing promotes then",
                    sorted(events, key=lambda e: e.event_time_ms), _SPAN_AN_HOUR, alerts=(
                        Expected(AlertType.DUPLICATE_DELIVERY_EXPECTED, at(131.5), ("m1", "m2")),))


def a_log_fed_primary_idle_while_its_shadow_collects_discards_is_alive_until_its_last_answer() -> Timeline:
    """Log input, ShadowResubmitTimeSpan 1 hour: mbx01 takes m1 and m2 at 1, m3 at 19, their copies on mbx02;
    it delivers m1 and m2 at 19, its last line, then fails; mbx02 and mbx03 log throughout.

    | when | mbx01's log | mbx02's log |
    |---|---|---|
    | 1 | RECEIVE m1, m2; HAREDIRECT to mbx02 | HARECEIVE m1, m2 |
    | 19 | RECEIVE m3, HAREDIRECT to mbx02; SEND m1, m2 (its last line) | HARECEIVE m3 |
    | 20.5 | | HADISCARD m1, m2 |

    "After the shadow server opens an SMTP session with the primary server, the primary server responds with the
    discard notifications for messages that apply to the querying shadow server" (003): mbx02's HADISCARD at 20.5
    is mbx01's answer, its last sign of life, which the log adapter publishes (Org.discarded), so mbx02 promotes m3
    at 20.5 + the span, 80.5 (hunt seed 8861: ex01's HADISCARD of 3 ex02 messages at 03:14:58.029, ex02's answer
    at 03:14:58.024 in the native events). Before, the adapter read HADISCARD as the release of the copies only,
    and the twin promoted at mbx01's last line + the span, 79."""
    org = Org()
    events = [*org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1, db=""),
              *org.received("mbx01", "m2", 1), *org.shadowed("mbx01", "mbx02", "m2", 1, db=""),
              *org.busy("mbx01", 2, 19), *org.received("mbx01", "m3", 19),
              *org.shadowed("mbx01", "mbx02", "m3", 19, db=""),
              *org.delivered("mbx01", "m1", "mbx09", 19), *org.delivered("mbx01", "m2", "mbx09", 19),
              *org.discarded("mbx02", "mbx01", ("m1", "m2"), 20.5),
              *org.busy("mbx02", 0, 140), *org.busy("mbx03", 0, 140)]
    return Timeline("a log-fed primary idle while its shadow collects discards is alive until its last answer",
                    sorted(events, key=lambda e: e.event_time_ms), _SPAN_AN_HOUR,
                    alerts=(Expected(AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, at(80.5), ("m3",)),),
                    commands=(Command("mbx02", "mbx01", "m3", None, None, (), at(80.5)),))


def exchange_2010_a_hub_whose_logs_show_a_restart_during_its_delayed_acknowledgement_acknowledged_nothing() -> Timeline:
    """Log input (no queue-database id), Exchange 2010: hub01 holds h0, whose copy its previous hop hub02 keeps, and
    takes h1 at 5.8 from a sender without shadow support, its acknowledgement delayed (MaxAcknowledgementDelay, 30
    s). hub01 restarts: its LOAD at 6 names no message it held, and nothing it held is heard of by 8
    (ShadowHeartbeatFrequency later): a new, empty database, hub02 resubmits h0. hub01 never answered 250 for h1:
    "si se produce un error en el servidor de Exchange 2010, el servidor de correo que realiza el envío dará por hecho
    que el mensaje nunca llegó a Exchange y tratará de entregarlo de nuevo" (002). So h1 is its sender's: neither
    NOT_REDUNDANT (no 250 went, best effort or not) nor lost, as when a NodeStarted shows the restart
    (exchange_2010_a_hub_that_fails_during_its_delayed_acknowledgement_acknowledged_nothing). Before, the twin said
    NOT_REDUNDANT of h1 at 6.3, after the restart, and MESSAGE_LOST of it at 8."""
    org = Org()
    events = [*org.received("hub01", "h0", 1), *org.shadowed("hub01", "hub02", "h0", 1, db=""),
              *org.received("hub01", "h1", 5.8, sender_supports_shadow=False),
              *org.loaded("hub01", "hub01", "x8", 6),
              *org.busy("hub02", 2, 30, every=1), *org.busy("hub01", 7, 30, every=1)]
    config = ModelConfig(defaults=parameters_from({"mode": "EXCHANGE_2010"}))
    return Timeline("exchange 2010: a hub whose logs show a restart during its delayed acknowledgement acknowledged"
                    " nothing", events, config, alerts=(
                        Expected(AlertType.RESTARTED_QUEUE_DATABASE_UNKNOWN, at(6), ("h0", "h1")),
                        Expected(AlertType.QUEUE_DATABASE_CHANGED_SHADOWS_PROMOTED, at(8), ("h0",)),
                        Expected(AlertType.RESTART_QUEUE_DATABASE_SETTLED, at(8))),
                    commands=(Command("hub02", "hub01", "h0", None, None, (), at(8),
                                      CommandReason.PRIMARY_QUEUE_DATABASE_CHANGED),))

def a_primary_that_answers_another_shadow_is_up_and_keeps_what_its_silent_shadow_holds() -> Timeline:
    """mbx01 holds m1 (its copy on mbx02) and m2 (its copy on mbx03), both deferred at 3 (mbx09 refuses them), and logs
    nothing more of its own. mbx02's last query is at 2 (it falls silent for good: SHADOW_SERVER_UNREACHABLE at 8);
    mbx03 queries mbx01 every 2 minutes and is answered, naming dbP1, throughout. "The SMTP communication between the
    shadow server and the primary server is used as the heartbeat that determines the availability of the servers"
    (003): mbx01 is up, with its queue, and m1 is in it; only one server of m1's redundancy failed, not "two or more
    ... at the same time" (003). So at the span (2 + 3 hours) m1 is not at risk, and "MessageExpirationTimeout ... How
    long a message can remain in a queue before it expires" (003): mbx01 expires m1 and m2 at 1 + 2 days
    (MESSAGE_EXPIRED); mbx03 collects m2's discard, mbx02 never collects m1's (DISCARD_EVENTS_DROPPED at 2 + 2 days)
    and its copy expires at 1 + 4 days (SHADOW_EXPIRED). Before, the twin took mbx01 for silent (no event of its own):
    MESSAGE_AT_RISK of m1 at the span, 'mbx01 has been unreachable', and MESSAGE_LOST at 1 + 4 days, 'no server
    delivered it', of a message its primary held and expired two days before, as it expired m2."""
    org = Org()
    day = 24 * 60
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0), *org.started("mbx03", "dbX1", 0),
              *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
              *org.received("mbx01", "m2", 1), *org.shadowed("mbx01", "mbx03", "m2", 1),
              *org.query_ok("mbx02", "mbx01", 2), *org.query_ok("mbx03", "mbx01", 2, shadow_db="dbX1"),
              *org.deferred("mbx01", "m1", "mbx09", 3), *org.deferred("mbx01", "m2", "mbx09", 3),
              *_heartbeats_ok(org, "mbx03", "mbx01", 4, 2 * day + 2, shadow_db="dbX1"),
              *org.query_ok("mbx03", "mbx01", 2 * day + 2, discarded=("m2",), shadow_db="dbX1"),
              *org.tick(4 * day + 10)]
    return Timeline("a primary that answers another shadow is up and keeps what its silent shadow holds", events,
                    alerts=(Expected(AlertType.SHADOW_SERVER_UNREACHABLE, at(8), ("m1",)),
                            Expected(AlertType.MESSAGE_EXPIRED, at(1) + 2 * DAY, ("m1",)),
                            Expected(AlertType.MESSAGE_EXPIRED, at(1) + 2 * DAY, ("m2",)),
                            Expected(AlertType.DISCARD_EVENTS_DROPPED, at(2) + 2 * DAY, ("m1",)),
                            Expected(AlertType.SHADOW_EXPIRED, at(1) + 4 * DAY, ("m1",))))


def a_primary_that_answers_another_shadow_expires_what_a_cut_off_shadow_holds() -> Timeline:
    """ShadowResubmitTimeSpan 3 days, longer than MessageExpirationTimeout (2 days). mbx01 holds m1 (its copy on mbx02)
    and m2 (its copy on mbx03), both deferred at 3, and logs nothing more of its own. From 4 mbx02's queries fail (cut
    off from mbx01, it goes on asking); mbx03's are answered every 2 minutes, naming dbP1. "The SMTP communication
    between the shadow server and the primary server is used as the heartbeat that determines the availability of the
    servers" (003): mbx01 is up, and "MessageExpirationTimeout ... How long a message can remain in a queue before it
    expires" (003): it expires m1 and m2 at 1 + 2 days (MESSAGE_EXPIRED, a non-delivery report to their senders).
    mbx02 never collects m1's discard (DISCARD_EVENTS_DROPPED at 2 + 2 days) and at 2 + 3 days promotes its copy: m1
    reaches alice once, after the report (PRIMARY_FAILED_SHADOWS_PROMOTED, no command: mbx01 processed it). Before,
    the twin took mbx01 for down ('a server that is down expires nothing': mbx02's queries unanswered, mbx01 showing
    no event of its own) and never expired m1; at 2 + 3 days it commanded mbx02 to send m1 to mbx09 as a message
    still in flight."""
    org = Org()
    day = 24 * 60
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0), *org.started("mbx03", "dbX1", 0),
              *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
              *org.received("mbx01", "m2", 1), *org.shadowed("mbx01", "mbx03", "m2", 1),
              *org.query_ok("mbx02", "mbx01", 2), *org.query_ok("mbx03", "mbx01", 2, shadow_db="dbX1"),
              *org.deferred("mbx01", "m1", "mbx09", 3), *org.deferred("mbx01", "m2", "mbx09", 3),
              *org.heartbeats_failing("mbx02", "mbx01", 4, 3 * day + 30),
              *_heartbeats_ok(org, "mbx03", "mbx01", 4, 2 * day + 2, shadow_db="dbX1"),
              *org.query_ok("mbx03", "mbx01", 2 * day + 2, discarded=("m2",), shadow_db="dbX1")]
    config = ModelConfig(defaults=parameters_from({"shadow_resubmit_time_span": "3.00:00:00"}))
    return Timeline("a primary that answers another shadow expires what a cut-off shadow holds", events, config,
                    alerts=(Expected(AlertType.MESSAGE_EXPIRED, at(1) + 2 * DAY, ("m1",)),
                            Expected(AlertType.MESSAGE_EXPIRED, at(1) + 2 * DAY, ("m2",)),
                            Expected(AlertType.DISCARD_EVENTS_DROPPED, at(2) + 2 * DAY, ("m1",)),
                            Expected(AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, at(2) + 3 * DAY, ("m1",))))


def a_new_database_reported_by_a_clock_behind_waits_for_each_shadows_own_answer() -> Timeline:
    """mbx02's clock is 4 minutes behind mbx01's and mbx03's (hunt seed 7083: ex01's, 240 s); mbx03 queries mbx01
    every 5 minutes (ShadowHeartbeatFrequency). By mbx01's clock: it takes m1 at 16, its copy on mbx03, and delivers
    it at 16.5; m2 at 17, its copy on mbx02; mbx03's answer at 19.5 collects m1's discard notification; m4 at 19.7,
    its copy on mbx03. mbx01 fails at 20 and is back at 22 with a new, empty queue database (its NodeStarted names
    dbP2); it takes m3 at 22.1, whose copy mbx02 stores with dbP2, stamped 18.1 by its clock, and delivers it at
    22.3 (mbx02's answer at 24, stamped 20, collects its notification). The feed shows dbP2 first in that copy, at
    18.1: a restart, and mbx02, whose copy of m2 is dbP1's, promotes it (003: the shadow keeps "the original
    database ID and the current database ID"). But "a shadow server detects that the queue database ID of the
    primary server has changed" at its own session with the primary: mbx03 learns of dbP2 from the answer to its
    own query or, as the twin forecasts, at mbx01's NodeStarted: m4 at 22, m1 discarded before. And mbx03's answer
    at 19.5 naming dbP1, the database dbP2 replaced, less than the clock-skew allowance after mbx02's report, was
    given before the restart: its discard notification counts, its database does not. Before, the twin promoted
    mbx03's m1 at 18.1 too (DUPLICATE_DELIVERY_EXPECTED: it was processed), took the answer at 19.5 for mbx01 back
    with dbP1 (m2 forecast delivered twice, "came back with the same queue database"; m3, dbP2's, promoted with a
    command to mbx02) and mbx02's answer naming dbP2 for yet another restart (m3 forecast delivered twice), and
    promoted m4 only at mbx03's answer at 24.5."""
    org = Org()

    def behind(events):  # mbx02's events, stamped by its clock
        return [dataclasses.replace(e, event_time_ms=e.event_time_ms - 4 * MINUTE) if e.node == "mbx02" else e
                for e in events]

    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS2", 0), *org.started("mbx03", "dbS3", 0),
              *_heartbeats_ok(org, "mbx03", "mbx01", 4.5, 10, every=5, shadow_db="dbS3"),
              *org.received("mbx01", "m0", 14), *org.shadowed("mbx01", "mbx03", "m0", 14),
              *org.delivered("mbx01", "m0", "mbx09", 14.2),
              *org.query_ok("mbx03", "mbx01", 14.5, discarded=("m0",), shadow_db="dbS3"),
              *org.received("mbx01", "m1", 16), *org.shadowed("mbx01", "mbx03", "m1", 16),
              *org.delivered("mbx01", "m1", "mbx09", 16.5),
              *org.received("mbx01", "m2", 17), *behind(org.shadowed("mbx01", "mbx02", "m2", 17)),
              *org.query_ok("mbx03", "mbx01", 19.5, discarded=("m1",), shadow_db="dbS3"),
              *org.received("mbx01", "m4", 19.7), *org.shadowed("mbx01", "mbx03", "m4", 19.7),
              *org.started("mbx01", "dbP2", 22),
              *org.received("mbx01", "m3", 22.1), *behind(org.shadowed("mbx01", "mbx02", "m3", 22.1, db="dbP2")),
              *org.delivered("mbx01", "m3", "mbx09", 22.3),
              *behind(org.query_ok("mbx02", "mbx01", 24, db="dbP2", discarded=("m3",), shadow_db="dbS2")),
              *org.query_ok("mbx03", "mbx01", 24.5, db="dbP2", shadow_db="dbS3")]
    events.sort(key=lambda e: e.event_time_ms)
    config = ModelConfig(defaults=parameters_from({"shadow_heartbeat_frequency": "00:05:00"}))
    return Timeline("a new database reported by a clock behind waits for each shadow's own answer", events, config,
                    alerts=(
                        Expected(AlertType.QUEUE_DATABASE_CHANGED_SHADOWS_PROMOTED, at(18.1), ("m2",)),
                        Expected(AlertType.QUEUE_DATABASE_CHANGED_SHADOWS_PROMOTED, at(22), ("m4",))),
                    commands=(Command("mbx02", "mbx01", "m2", None, None, (), at(18.1),
                                      CommandReason.PRIMARY_QUEUE_DATABASE_CHANGED),
                              Command("mbx03", "mbx01", "m4", None, None, (), at(22),
                                      CommandReason.PRIMARY_QUEUE_DATABASE_CHANGED)))


def a_shadows_queries_while_it_held_nothing_are_the_heartbeat_of_its_next_copy() -> Timeline:
    """ShadowHeartbeatFrequency 5 minutes (silence span 15). mbx03's answer at 4.5 collects m0's discard notification,
    the last copy it held for mbx01; it queries mbx01 again at 9.5 and 14.5 holding nothing for it ("If the shadow
    server opens an SMTP session with the primary server for any reason ... the shadow server issues the XQDISCARD
    command", 003). mbx01 takes m1 at 16 (its copy on mbx03; delivered at 17) and m2 at 17.2 (its copy on mbx03),
    fails at 17.5 and is back at 18.1 with a new, empty queue database. "The SMTP communication between the shadow
    server and the primary server is used as the heartbeat" (003): mbx03's last one was at 14.5, less than a heartbeat
    before, so its query due by 19.5 sees the new ID and it promotes both copies, as the twin forecasts at the
    NodeStarted: m2 resubmitted, m1, whose discard notification went with the old database, delivered twice. Before,
    the twin had forgotten the queries of a shadow that held nothing: m1's and m2's copy looked overdue at 18.1 (its
    last query seen at 4.5), and their promotion, command and duplicate were decided only at mbx03's next answer."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS2", 0), *org.started("mbx03", "dbS3", 0),
              *org.received("mbx01", "m0", 1), *org.shadowed("mbx01", "mbx03", "m0", 1),
              *org.delivered("mbx01", "m0", "mbx09", 3),
              *org.query_ok("mbx03", "mbx01", 4.5, discarded=("m0",), shadow_db="dbS3"),
              *org.query_ok("mbx03", "mbx01", 9.5, shadow_db="dbS3"),
              *org.query_ok("mbx03", "mbx01", 14.5, shadow_db="dbS3"),
              *org.received("mbx01", "m1", 16), *org.shadowed("mbx01", "mbx03", "m1", 16),
              *org.delivered("mbx01", "m1", "mbx09", 17),
              *org.received("mbx01", "m2", 17.2), *org.shadowed("mbx01", "mbx03", "m2", 17.2),
              *org.started("mbx01", "dbP2", 18.1),
              *org.query_ok("mbx03", "mbx01", 19.5, db="dbP2", shadow_db="dbS3"), *org.busy("mbx02", 0, 40)]
    events.sort(key=lambda e: e.event_time_ms)
    config = ModelConfig(defaults=parameters_from({"shadow_heartbeat_frequency": "00:05:00"}))
    return Timeline("a shadow's queries while it held nothing are the heartbeat of its next copy", events, config,
                    alerts=(Expected(AlertType.DUPLICATE_DELIVERY_EXPECTED, at(18.1), ("m1",)),
                            Expected(AlertType.QUEUE_DATABASE_CHANGED_SHADOWS_PROMOTED, at(18.1), ("m2",))),
                    commands=(Command("mbx03", "mbx01", "m2", None, None, (), at(18.1),
                                      CommandReason.PRIMARY_QUEUE_DATABASE_CHANGED),))


def a_shadow_known_only_by_its_lines_is_silent_from_the_end_of_its_last_lines_minute() -> Timeline:
    """Message-tracking logs, no discard queries: mbx02's life is read from its lines, which reach the twin as one
    liveness fact per server and minute, stamped with its first line in that minute (state/facts.py). mbx02 logs at
    8.1 and 8.9, then at 14.5 (5.6 minutes later; the silence span is 6). Counted from 8.1, the fact's time, it was
    silent at 14.1, and the twin said SHADOW_SERVER_UNREACHABLE though it never stopped (hunt seed 7323: lines
    5:54 apart, counted 6:18). Its silence now counts from the end of that minute, 9: none."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0), *org.started("mbx03", "dbX1", 0),
              *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
              *org.busy("mbx01", 2, 30), *org.busy("mbx03", 0, 30), *org.busy("mbx02", 2, 7),
              *org.busy("mbx02", 8.1, 9), *org.busy("mbx02", 8.9, 9), *org.busy("mbx02", 14.5, 30)]
    return Timeline("a shadow known only by its lines is silent from the end of its last line's minute",
                    sorted(events, key=lambda e: e.event_time_ms))



def a_feed_that_stops_seconds_after_the_end_of_a_log_fed_shadows_last_minute() -> Timeline:
    """Message-tracking logs, no discard queries: mbx02, which holds m1's copy, logs last at 8.1, mbx01 at 8, mbx03 at
    9.2, then the feed stops (the logs end). mbx02 may have logged until 9, the end of the minute of its last liveness
    fact, so its silence counts from 9 and runs out at 15 (the silence span is 6 minutes); mbx03's last line came 12 s
    after that minute ended, within the facts' grain: all fell silent together as far as the facts can tell, so the
    twin waits for the silent-feed rule (15.2) and says the feed stopped, as when the shadow's last query is 12 s
    before the stop (a_feed_that_stops_seconds_after_the_shadows_last_query). Before, mbx03's line was measured from
    8.1, the fact's stamp, 1.1 minutes before: SHADOW_SERVER_UNREACHABLE at 15, then EVENTS_STOPPED at 15.2 (hunt seed
    7814: ex01's last line 01:00:06, ex03's 01:01:14, the logs' end; ex01 was alive)."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0), *org.started("mbx03", "dbX1", 0),
              *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
              *org.busy("mbx01", 2, 9), *org.busy("mbx02", 2.1, 9), *org.busy("mbx03", 1.2, 10), *org.tick(4 * 60)]
    return Timeline("a feed that stops seconds after the end of a log-fed shadow's last minute",
                    sorted(events, key=lambda e: e.event_time_ms), alerts=(
                        Expected(AlertType.EVENTS_STOPPED, at(9.2) + 6 * MINUTE),
                        Expected(AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, at(8) + 3 * HOUR, ("m1",)),
                    ), commands=(Command("mbx02", "mbx01", "m1", None, None, (), at(8) + 3 * HOUR),))

def _partly_delivered(org: Org, mid: str, minute: float, retries: tuple[float, ...]) -> list[ev.Event]:
    """The lab relay ex01's attempts at `mid`, for ok@ and busy@: mailbox01 takes ok@ at `minute` and defers busy@,
    and defers busy@ again at each of `retries` (a SEND of busy@ alone, then its DEFER)."""
    both = ("ok@contoso.com", "busy@contoso.com")
    events = [*org.sent("ex01", mid, "mailbox01", minute, recipients=both),
              *org.delivered_to_mailbox("ex01", mid, "mailbox01", minute, recipients=both[:1]),
              *org.deferred("ex01", mid, "mailbox01", minute, recipients=both[1:])]
    for retry in retries:
        events += [*org.sent("ex01", mid, "mailbox01", retry, recipients=both[1:]),
                   *org.deferred("ex01", mid, "mailbox01", retry, recipients=both[1:])]
    return events


def a_message_partly_delivered_is_pending_only_for_the_recipients_not_delivered() -> Timeline:
    """The lab's relay ex01 (copies on ex02, MessageExpirationTimeout 2 hours, ShadowResubmitTimeSpan 1 hour) hands
    m1, m2 and m3, each for ok@ and busy@contoso.com, to mailbox01, which delivers ok@ and defers busy@ every time
    ex01 tries again (a SEND of busy@ alone, then a DEFER). "Messages that are successfully processed or delivered to
    a mailbox recipient ... are moved into Safety Net" (003): ok@ has each message; busy@ does not.
    | time | what happens | the twin |
    | 120 | ex01 expires m1 (MessageExpired) | MESSAGE_EXPIRED names busy@ alone (before: ok@ and busy@) |
    | 121 | ex02's query collects m1's discard notification | m1 is released |
    | 130 | ex01 expires m2, and fails before ex02 queries again | MESSAGE_EXPIRED names busy@ alone |
    | 189 | ex02 has had no answer for ShadowResubmitTimeSpan: it promotes m2 and m3 | one command, m3 for busy@ |
    mailbox01's fork of each message was never fully processed (busy@ waits), so no discard notification emptied its
    shadow queue ("after all expected discard notifications are received", 003): ex02 resends the copy whole, and
    ok@ gets m2 and m3 twice (an hour after her first copy, duplicate detection no longer knows it), busy@ gets m2
    once, after its non-delivery report. Before: ex01's SEND of busy@ alone took back ok@'s delivery, both
    MESSAGE_EXPIRED named ok@ too, m3 had a command for ok@ as well as busy@'s, and no duplicate was forecast."""
    org = Org()
    config = ModelConfig(defaults=parameters_from({"message_expiration_timeout": "02:00:00",
                                                   "shadow_resubmit_time_span": "01:00:00"}))
    both = ("ok@contoso.com", "busy@contoso.com")
    events = [*org.started("ex01", "dbP1", 0), *org.started("ex02", "dbS1", 0)]
    for mid, received in (("m1", 0), ("m2", 10), ("m3", 100)):
        events += [*org.received("ex01", mid, received, recipients=both),
                   *org.shadowed("ex01", "ex02", mid, received),
                   *_partly_delivered(org, mid, received + 1,
                                      tuple(t for t in (received + 6, received + 16, received + 46, received + 106)
                                            if t < 131))]
    events += [*org.expired("ex01", "m1", 120), *org.expired("ex01", "m2", 130),
               *_heartbeats_ok(org, "ex02", "ex01", 1, 121), *org.query_ok("ex02", "ex01", 121, discarded=("m1",)),
               *_heartbeats_ok(org, "ex02", "ex01", 123, 131),
               *org.heartbeats_failing("ex02", "ex01", 131, 4 * 60), *org.tick(12 * 60)]
    promoted_at = at(129) + HOUR
    return Timeline("a message partly delivered is pending only for the recipients not delivered",
                    sorted(events, key=lambda e: e.event_time_ms), config, alerts=(
                        Expected(AlertType.MESSAGE_EXPIRED, at(120), ("m1",), (both[1:],)),
                        Expected(AlertType.MESSAGE_EXPIRED, at(130), ("m2",), (both[1:],)),
                        Expected(AlertType.DUPLICATE_DELIVERY_EXPECTED, promoted_at, ("m2", "m3"),
                                 (both[:1], both[:1])),
                        Expected(AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, promoted_at, ("m3", "m2"))),
                    commands=(Command("ex02", "ex01", "m3", None, None, both[1:], promoted_at),))


def a_delivery_stamped_before_its_receipt_by_a_clock_set_back_is_a_delivery() -> Timeline:
    """mbx01's clock is set back a minute while it holds m1 (hunt seed 8566: ex02's, 60 s). By its clock: it takes m1
    at 10, mbx02 times out twice storing the copy and mbx01 answers 250 without one at 10.03; its clock steps back at
    10.05, and it delivers m1 to mbx03 at 10.1, stamped 9.1, before the receipt. Exchange delivered m1: nothing is
    left to expire. The twin keeps the primary's word about a message it has not received yet for the clock-skew
    allowance, and applies it at the receipt: m1 is delivered, at 9.1 by mbx01's clock (so, as a delivery before the
    copy's attempts ended, no NOT_REDUNDANT for it). Before, the delivery found no message and was dropped: m1 was
    NOT_REDUNDANT at 10.02 and stayed in mbx01's queue, MESSAGE_EXPIRED at 10 + 2 days (MessageExpirationTimeout) of a
    message delivered."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
              *org.received("mbx01", "m1", 10),
              *org.shadow_failed("mbx01", "m1", 10.01, ev.SiteLocality.LOCAL, 1, candidate="mbx02"),
              *org.shadow_failed("mbx01", "m1", 10.02, ev.SiteLocality.LOCAL, 2, candidate="mbx02"),
              ev.AcknowledgedToSender(**org._header("mbx01", "mbx01", 10.03, "m1"), redundant=False),
              *org.delivered("mbx01", "m1", "mbx03", 9.1), *org.tick(3 * 24 * 60)]
    return Timeline("a delivery stamped before its receipt by a clock set back is a delivery",
                    sorted(events, key=lambda e: e.event_time_ms), outcomes=(("m1", "delivered", at(9.1)),))


_SPAN_TEN_MINUTES = ModelConfig(defaults=parameters_from({"shadow_resubmit_time_span": "00:10:00"}))


def _busy_deferred_at_mbx05_without_the_receipt(org: Org) -> list[ev.Event]:
    """m1's copy on mbx02 at 1, its receipt unseen; fork f1 to mbx05 at 2 for ok@ and busy@contoso.com: mbx05
    delivers ok@ and defers busy@."""
    both = ("ok@contoso.com", "busy@contoso.com")
    return [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
            *org.shadowed("mbx01", "mbx02", "m1", 1),
            *org.sent("mbx01", "m1", "mbx05", 2, fork="f1", recipients=both),
            *org.delivered_to_mailbox("mbx01", "m1", "mbx05", 2, fork="f1", recipients=both[:1]),
            *org.deferred("mbx01", "m1", "mbx05", 2, fork="f1", recipients=both[1:])]


def a_recipient_waiting_at_a_forks_next_hop_is_pending_without_the_receipt() -> Timeline:
    """The twin's feed of mbx01 starts after m1's receipt (its RECEIVE line was not read): it first sees m1 at mbx02's
    copy, at 1, so it does not know m1's recipients. mbx01 hands fork f1 to mbx05 at 2 for ok@ and busy@contoso.com;
    mbx05 delivers ok@ and defers busy@ (ShadowResubmitTimeSpan 10 minutes).

    | time | what happens | the twin |
    |---|---|---|
    | 2 | mbx05 delivers ok@, defers busy@ | f1 served in part: busy@ waits at mbx05, m1 is not processed |
    | 3 to 9 | mbx02's queries answered | no discard notification of f1 (busy@ still waits) |
    | 10 | mbx01 fails; mbx02's queries fail from 11 | |
    | 19 | no answer for ShadowResubmitTimeSpan: mbx02 promotes m1 | a command for busy@ |

    "Messages that are successfully processed or delivered to a mailbox recipient ... are moved into Safety Net"
    (003): busy@ was not, so m1 is still mbx01's to deliver, and mbx02's resubmission is the first copy busy@ gets.
    Before, the twin took m1 for processed at 2 (every fork it saw was acknowledged), closed it 'delivered' at 19 and
    sent no command: busy@, known only from f1's DEFER, was named nowhere."""
    org = Org()
    events = [*_busy_deferred_at_mbx05_without_the_receipt(org),
              *_heartbeats_ok(org, "mbx02", "mbx01", 3, 10), *org.heartbeats_failing("mbx02", "mbx01", 11, 40)]
    return Timeline("a recipient waiting at a fork's next hop is pending without the receipt",
                    sorted(events, key=lambda e: e.event_time_ms), _SPAN_TEN_MINUTES,
                    alerts=(Expected(AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, at(19), ("m1",)),),
                    commands=(Command("mbx02", "mbx01", "m1", None, None, ("busy@contoso.com",), at(19)),),
                    outcomes=(("m1", "promoted", at(19)),))


def a_recipient_waiting_at_a_forks_next_hop_is_served_by_a_hub_that_took_her_without_the_receipt() -> Timeline:
    """As a_recipient_waiting_at_a_forks_next_hop_is_pending_without_the_receipt (the twin never saw m1's receipt), but
    busy@ goes another way: mbx01 hands fork f2 for her to the hub mbx06 at 4, which acknowledges it (a SEND, no
    DELIVER: the acknowledgement names no recipient, the hand-off does). mbx01 fails at 4.5, its discard notification
    not yet collected: mbx02's last answered query is at 3, and it promotes m1 at 13.

    | time | what happens | the twin |
    |---|---|---|
    | 2 | mbx05 delivers ok@, defers busy@ | f1 served in part: busy@ waits at mbx05 |
    | 4 | mbx06 acknowledges f2, busy@'s | busy@ waits no more: every recipient served, m1 processed |
    | 13 | mbx02 promotes m1 | a duplicate forecast, no command: nothing is left to deliver |

    "Messages that are successfully processed ... are moved into Safety Net" (003): ok@ and busy@ both had their
    copy, as the twin says when it saw the receipt (the same events with m1's RECEIVE). Before, busy@ still waited at
    f1's next hop, m1 was taken for pending, and its promotion sent a command to resend m1 whole, every recipient a
    second time."""
    org = Org()
    events = [*_busy_deferred_at_mbx05_without_the_receipt(org), *_heartbeats_ok(org, "mbx02", "mbx01", 3, 5),
              *org.sent("mbx01", "m1", "mbx06", 4, fork="f2", recipients=("busy@contoso.com",)),
              *org.acked("mbx01", "m1", "mbx06", 4, fork="f2"), *org.heartbeats_failing("mbx02", "mbx01", 5, 40)]
    return Timeline("a recipient waiting at a fork's next hop is served by a hub that took her without the receipt",
                    sorted(events, key=lambda e: e.event_time_ms), _SPAN_TEN_MINUTES,
                    alerts=(Expected(AlertType.DUPLICATE_DELIVERY_EXPECTED, at(13), ("m1",)),),
                    outcomes=(("m1", "delivered", at(13)),))


def a_message_expiring_without_the_receipt_names_the_recipient_waiting_at_a_forks_next_hop() -> Timeline:
    """As a_recipient_waiting_at_a_forks_next_hop_is_pending_without_the_receipt (the twin never saw m1's receipt:
    mbx05 delivered ok@ and deferred busy@ at 2), but mbx01 stays up and expires m1 at 2 days 1 minute
    (MessageExpirationTimeout), and mbx02's next query collects m1's discard notification.

    | time | what happens | the twin |
    |---|---|---|
    | 2 | mbx05 delivers ok@, defers busy@ | busy@ waits at mbx05 |
    | 2 days 1 min | mbx01 expires m1 | MESSAGE_EXPIRED names busy@, as when it saw the receipt |

    Exchange "returns a non-delivery report to the sender" for busy@ alone: ok@ had her copy. Before, the alert named
    no recipient (read: every one), the receipt's recipients being the only ones it looked at."""
    org = Org()
    expires = 2 * 24 * 60 + 1
    events = [*_busy_deferred_at_mbx05_without_the_receipt(org),
              *_heartbeats_ok(org, "mbx02", "mbx01", 3, expires + 10, every=2), *org.expired("mbx01", "m1", expires),
              *org.query_ok("mbx02", "mbx01", expires + 11, discarded=("m1",)), *org.tick(expires + 600)]
    return Timeline("a message expiring without the receipt names the recipient waiting at a fork's next hop",
                    sorted(events, key=lambda e: e.event_time_ms), _SPAN_TEN_MINUTES,
                    alerts=(Expected(AlertType.MESSAGE_EXPIRED, at(expires), ("m1",), (("busy@contoso.com",),)),),
                    outcomes=(("m1", "expired", at(expires + 11)),))


def a_recipient_delivered_late_is_forgotten_by_duplicate_detection_from_its_own_copy() -> Timeline:
    """mbx01 takes m1 at 1 for alice@ and carol@contoso.com (mailbox users), its copy on mbx02, whose answered query
    at 2 is its last: from 4 its queries fail (a partition; mbx01 goes on). mbx05 takes fork f1 at 5 for alice and
    defers carol, and delivers carol at 40. mbx01 restarts at 72 with a new queue database: mbx02 promotes m1 and
    resubmits it whole, no discard notification having reached it since 2.

    | recipient | first copy (mbx01's f1) | second copy (mbx02's resubmission) | seen twice? |
    |---|---|---|---|
    | alice@contoso.com | 5 | 72 | yes: her DeliveredTo entry is gone after 1 hour (004) |
    | carol@contoso.com | 40 | 72 | no: her entry, 32 minutes old, hides it |

    "Whenever a message gets delivered to a user, the DeliveredTo database is checked for an entry for the message"
    and "The default duration for tracking duplicates is 1 hour" (004): carol's entry dates from her own delivery.
    Before, the twin dated her copy by f1's first acknowledgement (alice's, at 5) and named her too."""
    org = Org()
    both = ("alice@contoso.com", "carol@contoso.com")
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
              *org.received("mbx01", "m1", 1, recipients=both),
              *org.shadowed("mbx01", "mbx02", "m1", 1), *org.query_ok("mbx02", "mbx01", 2),
              *org.query_failed("mbx02", "mbx01", 4),
              *org.sent("mbx01", "m1", "mbx05", 5, fork="f1", recipients=both),
              *org.delivered_to_mailbox("mbx01", "m1", "mbx05", 5, fork="f1", recipients=both[:1]),
              *org.deferred("mbx01", "m1", "mbx05", 5, fork="f1", recipients=both[1:]),
              *org.heartbeats_failing("mbx02", "mbx01", 6, 72),
              *org.delivered_to_mailbox("mbx01", "m1", "mbx05", 40, fork="f1", recipients=both[1:]),
              *org.started("mbx01", "dbP2", 72)]
    return Timeline("a recipient delivered late is forgotten by duplicate detection from its own copy",
                    sorted(events, key=lambda e: e.event_time_ms),
                    alerts=(Expected(AlertType.DUPLICATE_DELIVERY_EXPECTED, at(72), ("m1",), (both[:1],)),))


def _of_an_earlier_queue(events: list[ev.Event]) -> list[ev.Event]:
    """`events` about another message (another Message-ID) under the same internal id: one of the queue database
    before a restart, whose ids started again."""
    return [dataclasses.replace(e, message=dataclasses.replace(e.message, message_id="<earlier@contoso.com>"))
            for e in events]


def a_primarys_word_before_a_receipt_is_not_of_another_message_under_the_same_id() -> Timeline:
    """mbx01 delivers a message of its queue database dbP1 at 10 whose receipt the twin never saw (its feed started
    later), internal id m5. It restarts at 11 with a new queue database dbP2, whose internal ids start again: at 12
    it takes another message, another Message-ID, as m5, its copy on mbx02; mbx05 defers it at 12.5. mbx01 fails
    at 20 (ShadowResubmitTimeSpan 10 minutes): mbx02 has had no answer since 19 and promotes m5 at 29.

    The delivery at 10 is of the earlier message: the twin keeps a primary's word about a message it has not received
    (a clock set back, `handled_early`) for the clock-skew allowance, and applies it at the receipt of that message,
    the same Message-ID. Before, it applied it to the new m5 at its receipt: m5 closed 'delivered' at 10, though
    still in mbx01's queue, and nothing was said when mbx02 took it over."""
    org = Org()
    config = ModelConfig(defaults=parameters_from({"shadow_resubmit_time_span": "00:10:00"}))
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
              *_of_an_earlier_queue(org.delivered("mbx01", "m5", "mbx05", 10)), *org.started("mbx01", "dbP2", 11),
              *org.received("mbx01", "m5", 12), *org.shadowed("mbx01", "mbx02", "m5", 12, db="dbP2"),
              *org.deferred("mbx01", "m5", "mbx05", 12.5), *_heartbeats_ok(org, "mbx02", "mbx01", 13, 20, db="dbP2"),
              *org.heartbeats_failing("mbx02", "mbx01", 21, 40)]
    return Timeline("a primary's word before a receipt is not of another message under the same id",
                    sorted(events, key=lambda e: e.event_time_ms), config,
                    alerts=(Expected(AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, at(29), ("m5",)),),
                    commands=(Command("mbx02", "mbx01", "m5", "mbx05", "mbx05", ("alice@contoso.com",), at(29)),),
                    outcomes=(("m5", "promoted", at(29)),))


ALL = (
    expiry_in_a_live_primary, crash_between_forks, crash_with_a_fork_pending, crash_with_a_side_effect_pending,
    double_failure_with_new_databases, exchange_2010_shadow_from_its_node_started,
    exchange_2010_shadow_from_node_configuration, same_site_copies_after_remote_retries, same_site_copies_local_only,
    deferred_then_primary_fails, stream_sent_twice, returning_shadow_resubmits_what_was_delivered, silent_feed,
    silent_shadow_and_primary_while_others_publish, a_shadow_silent_long_before_the_feed_stopped_promotes_nothing,
    a_shadow_known_only_by_its_lines_silent_long_before_the_feed_stopped_still_promotes,
    at_risk_then_the_primary_returns_with_the_same_database_and_delivers,
    at_risk_then_the_primary_returns_with_the_same_database_and_cannot_deliver,
    shadow_back_with_its_copies_after_the_primary_came_back_with_a_new_database,
    a_shadow_known_only_by_its_lines_is_silent_from_the_end_of_its_last_lines_minute,
    a_feed_that_stops_seconds_after_the_end_of_a_log_fed_shadows_last_minute,
    a_delivery_stamped_before_its_receipt_by_a_clock_set_back_is_a_delivery,
    primary_back_with_the_same_database_before_the_span, discard_notifications_survive_a_restart_of_the_primary,
    processed_then_back_with_a_new_database_before_the_discard_was_collected,
    expired_then_back_with_a_new_database_before_the_discard_was_collected,
    a_message_in_a_failed_primary_does_not_expire_before_its_shadow_promotes_it,
    only_the_shadow_that_cannot_reach_the_primary_promotes, a_2013_primary_ignores_the_senders_shadow_support,
    reject_on_shadow_failure_is_meaningless_without_shadow_redundancy,
    exchange_2010_without_shadow_redundancy_delays_no_acknowledgement,
    a_sender_that_timed_out_resends_and_the_copies_are_unrelated,
    a_query_answered_exactly_at_the_span_keeps_the_primary,
    exchange_2010_next_hop_reached_exactly_at_the_acknowledgement_delay,
    exchange_2010_answers_250_after_the_acknowledgement_delay_whatever_reject_on_shadow_failure_says,
    primary_back_with_the_same_database_after_message_expiration_delivers_nothing_twice,
    exchange_2010_a_delivered_copy_held_for_want_of_a_route_is_resubmitted_with_the_new_database,
    a_primary_that_answered_451_is_believed, a_side_effect_is_protected_by_its_parents_copy_on_a_silent_shadow,
    a_side_effect_is_lost_with_its_parents_only_copy,
    primary_back_with_the_same_database_just_before_the_span_is_reached_by_the_next_heartbeat,
    primary_back_just_before_the_span_that_delivers_at_once_is_still_reached_by_the_next_heartbeat,
    primary_back_with_its_database_then_restarted_with_a_new_one_loses_what_it_took_between,
    deliveries_to_two_databases_of_one_mailbox_server_serve_both_recipients,
    prefer_remote_counts_failures_by_the_candidates_site_when_the_line_does_not_say,
    a_shadows_stale_answer_within_the_clock_skew_allowance_does_not_undo_the_primarys_new_database,
    exchange_2010_a_hub_that_fails_during_its_delayed_acknowledgement_acknowledged_nothing,
    a_primary_that_fails_before_its_shadow_copy_is_made_acknowledged_nothing,
    without_shadow_redundancy_the_recorded_copies_protect_nothing,
    exchange_2010_the_previous_hop_resubmits_over_an_alternate_route,
    exchange_2010_a_copy_held_for_want_of_a_route_that_expires_before_its_primary_returns_is_lost,
    a_failed_query_does_not_keep_the_discard_notifications,
    a_copy_the_primary_makes_on_its_shadow_is_no_query_of_its_shadow,
    a_discard_notification_queued_after_the_interval_ran_out_is_deleted_when_queued,
    a_copy_before_any_answered_query_does_not_restart_the_discard_interval,
    a_shadow_back_with_a_new_database_loses_no_copy_of_what_was_delivered,
    a_silent_shadow_loses_no_copy_of_what_was_delivered,
    a_copy_the_primary_reported_is_of_the_database_its_first_answer_names,
    an_unacknowledged_copy_expires_by_the_hold_of_the_server_that_keeps_it,
    a_discard_notification_for_one_fork_keeps_the_copy_of_the_others,
    a_shadows_own_resubmission_is_delivered_twice_only_to_the_recipients_still_pending,
    a_primary_back_with_its_queue_after_message_expiration_expires_the_message_then,
    failures_whose_site_nothing_says_leave_the_copy_to_the_next_attempt,
    a_feed_that_stops_seconds_after_the_shadows_last_query,
    a_second_hand_off_to_the_same_hop_serves_its_own_recipients,
    a_discard_notification_stamped_before_the_primary_names_its_fork_still_counts,
    a_shadow_that_stopped_querying_promotes_nothing_at_the_span,
    a_processed_fork_whose_discard_never_reached_the_shadow_is_resubmitted_with_the_rest,
    a_shadow_that_promotes_on_its_own_resubmits_the_forks_it_had_no_discard_for,
    a_copy_that_expires_before_its_message_does_in_the_primarys_queue_is_promoted_by_nobody,
    a_primary_whose_clock_is_ahead_delivered_before_its_shadow_promoted_on_its_new_database,
    a_primary_whose_clock_is_ahead_delivered_before_the_twin_saw_its_new_database,
    a_copy_a_fast_shadow_stored_after_its_answer_had_no_discard_notification,
    a_copy_naming_the_primarys_new_database_promotes_the_copies_of_the_old_one,
    a_forks_discard_notification_dropped_with_the_message_is_not_collected_later,
    a_shadow_that_stopped_querying_does_not_see_the_primarys_new_database,
    a_shadow_that_queried_before_its_copies_were_released_has_heartbeats_with_its_next_copy,
    exchange_2010_a_previous_hop_has_no_discard_notification_of_one_fork,
    a_primary_in_no_dag_gives_up_after_its_local_retries_whatever_the_lines_say,
    a_stale_answer_after_another_shadows_failed_query_does_not_bring_back_the_replaced_database,
    a_copy_acknowledged_after_its_shadow_came_back_with_a_new_database_is_gone,
    a_shadows_query_naming_the_database_its_nodestarted_replaced_loses_no_copy,
    a_primary_back_with_a_new_database_keeps_no_discard_notification_for_its_silent_shadow,
    a_message_at_risk_its_primary_defers_again_is_in_its_queue_and_expires_there,
    a_fork_that_failed_for_good_is_resubmitted_by_a_shadow_that_had_no_discard_notification_for_it,
    exchange_2010_a_hub_whose_logs_show_a_restart_during_its_delayed_acknowledgement_acknowledged_nothing,
    a_primary_that_answers_another_shadow_is_up_and_keeps_what_its_silent_shadow_holds,
    a_primary_that_answers_another_shadow_expires_what_a_cut_off_shadow_holds,
    a_fork_that_failed_for_good_is_resubmitted_by_a_shadow_that_promotes_on_its_own,
    each_fork_of_a_message_delivered_twice_is_forgotten_by_duplicate_detection_on_its_own,
    a_shadow_whose_every_query_is_answered_promotes_nothing_however_short_the_resubmit_span,
    a_shadow_that_promotes_on_its_own_a_moment_before_the_twins_deadline_is_said_to,
    a_duplicate_after_a_promotion_the_shadow_reported_counts_from_its_resubmission,
    a_new_database_reported_by_a_clock_behind_waits_for_each_shadows_own_answer,
    a_shadows_queries_while_it_held_nothing_are_the_heartbeat_of_its_next_copy,
    remote_only_rejects_after_its_remote_retries_without_a_local_attempt,
    prefer_remote_rejects_only_once_the_local_retries_are_spent_too,
    a_shadow_that_promotes_the_old_databases_copies_keeps_the_one_it_just_stored,
    a_log_fed_shadow_back_from_its_own_outage_is_judged_by_its_first_query,
    a_log_fed_shadow_back_from_its_own_outage_whose_first_query_finds_nothing_promotes_then,
    a_log_fed_primary_idle_while_its_shadow_collects_discards_is_alive_until_its_last_answer,
    a_message_partly_delivered_is_pending_only_for_the_recipients_not_delivered,
    a_recipient_waiting_at_a_forks_next_hop_is_pending_without_the_receipt,
    a_recipient_waiting_at_a_forks_next_hop_is_served_by_a_hub_that_took_her_without_the_receipt,
    a_message_expiring_without_the_receipt_names_the_recipient_waiting_at_a_forks_next_hop,
    a_recipient_delivered_late_is_forgotten_by_duplicate_detection_from_its_own_copy,
    a_primarys_word_before_a_receipt_is_not_of_another_message_under_the_same_id,
)

# These timelines end with every copy released: nothing may be held afterwards.
SETTLED = (a_primary_that_answered_451_is_believed,
           a_delivery_stamped_before_its_receipt_by_a_clock_set_back_is_a_delivery,
           at_risk_then_the_primary_returns_with_the_same_database_and_cannot_deliver, a_side_effect_is_protected_by_its_parents_copy_on_a_silent_shadow,
           a_side_effect_is_lost_with_its_parents_only_copy,
           primary_back_with_the_same_database_just_before_the_span_is_reached_by_the_next_heartbeat,
           primary_back_just_before_the_span_that_delivers_at_once_is_still_reached_by_the_next_heartbeat,
           primary_back_with_its_database_then_restarted_with_a_new_one_loses_what_it_took_between,
           deliveries_to_two_databases_of_one_mailbox_server_serve_both_recipients,
           prefer_remote_counts_failures_by_the_candidates_site_when_the_line_does_not_say,
           a_shadows_stale_answer_within_the_clock_skew_allowance_does_not_undo_the_primarys_new_database,
           exchange_2010_a_hub_that_fails_during_its_delayed_acknowledgement_acknowledged_nothing,
           a_primary_that_fails_before_its_shadow_copy_is_made_acknowledged_nothing,
           without_shadow_redundancy_the_recorded_copies_protect_nothing,
           exchange_2010_a_copy_held_for_want_of_a_route_that_expires_before_its_primary_returns_is_lost,
           a_failed_query_does_not_keep_the_discard_notifications,
           a_shadow_back_with_a_new_database_loses_no_copy_of_what_was_delivered,
           a_silent_shadow_loses_no_copy_of_what_was_delivered,
           a_copy_the_primary_reported_is_of_the_database_its_first_answer_names,
           an_unacknowledged_copy_expires_by_the_hold_of_the_server_that_keeps_it,
           a_discard_notification_for_one_fork_keeps_the_copy_of_the_others,
           a_shadows_own_resubmission_is_delivered_twice_only_to_the_recipients_still_pending,
           a_primary_back_with_its_queue_after_message_expiration_expires_the_message_then,
           failures_whose_site_nothing_says_leave_the_copy_to_the_next_attempt,
           a_second_hand_off_to_the_same_hop_serves_its_own_recipients,
           a_discard_notification_stamped_before_the_primary_names_its_fork_still_counts,
           a_processed_fork_whose_discard_never_reached_the_shadow_is_resubmitted_with_the_rest,
           a_shadow_that_promotes_on_its_own_resubmits_the_forks_it_had_no_discard_for,
           a_copy_that_expires_before_its_message_does_in_the_primarys_queue_is_promoted_by_nobody,
           a_primary_whose_clock_is_ahead_delivered_before_its_shadow_promoted_on_its_new_database,
           a_primary_whose_clock_is_ahead_delivered_before_the_twin_saw_its_new_database,
           a_copy_a_fast_shadow_stored_after_its_answer_had_no_discard_notification,
           a_forks_discard_notification_dropped_with_the_message_is_not_collected_later,
           a_primary_in_no_dag_gives_up_after_its_local_retries_whatever_the_lines_say,
           a_stale_answer_after_another_shadows_failed_query_does_not_bring_back_the_replaced_database,
           a_shadows_query_naming_the_database_its_nodestarted_replaced_loses_no_copy,
           a_primary_back_with_a_new_database_keeps_no_discard_notification_for_its_silent_shadow,
           a_message_at_risk_its_primary_defers_again_is_in_its_queue_and_expires_there,
           a_fork_that_failed_for_good_is_resubmitted_by_a_shadow_that_had_no_discard_notification_for_it,
           exchange_2010_a_hub_whose_logs_show_a_restart_during_its_delayed_acknowledgement_acknowledged_nothing,
           a_primary_that_answers_another_shadow_is_up_and_keeps_what_its_silent_shadow_holds,
           a_primary_that_answers_another_shadow_expires_what_a_cut_off_shadow_holds,
           a_fork_that_failed_for_good_is_resubmitted_by_a_shadow_that_promotes_on_its_own,
           each_fork_of_a_message_delivered_twice_is_forgotten_by_duplicate_detection_on_its_own,
           a_new_database_reported_by_a_clock_behind_waits_for_each_shadows_own_answer,
           a_shadows_queries_while_it_held_nothing_are_the_heartbeat_of_its_next_copy,
           remote_only_rejects_after_its_remote_retries_without_a_local_attempt,
           prefer_remote_rejects_only_once_the_local_retries_are_spent_too,
           a_message_partly_delivered_is_pending_only_for_the_recipients_not_delivered,
           a_log_fed_shadow_back_from_its_own_outage_is_judged_by_its_first_query)

