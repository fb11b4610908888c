"""A restart whose queue database is unknown: the message-tracking log's LOAD (`MessageLoaded`).

A server that restarts logs LOAD for each message it loads from its queue database at boot,
but no log line names the database (producers/EXCHANGE_LOGS.md, "What the logs cannot tell").
After an outage of the primary the two cases the documents distinguish lead to opposite
outcomes (docs/domain.md, the outage table):

- the SAME database came back: the primary delivers its queue; the shadows' copies are
  discarded once it has; messages its shadows already resubmitted are delivered twice;
- a NEW, empty one: every shadow holding copies for it promotes them at once (a heartbeat
  after it sees the new id); a message it held without a shadow copy is lost; what the
  shadows resubmitted is delivered once.

So the primary's first LOAD, while it holds unprocessed messages or its shadows have promoted
some, opens the question: one RESTARTED_QUEUE_DATABASE_UNKNOWN alert naming both outcomes
(which messages, which holders). Later events settle it, with one
RESTART_QUEUE_DATABASE_SETTLED alert saying which and why:

- the same database: a line of the primary about a message it held before the restart (its
  LOAD, a SEND, a DELIVER, a DEFER...): that message was in the database it opened;
- a new one: a shadow's promotion (RESUBMIT) of such a message, or ShadowHeartbeatFrequency
  after the restart with neither (no message it held was loaded or sent on: they were not
  in the database it opened). The shadows are then promoted as for a new queue-database id.

A LOAD that itself names a message the primary held settles at once (one alert, no question).
The open question is one deadline (SETTLE_RESTART, key "", due at the restart +
ShadowHeartbeatFrequency), so it needs no state of its own and is stored with the deadlines.
A shadow's LOAD (its own copies survived its restart) is its sign of life, nothing more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from schemas import events as ev
from schemas.events import Alert, AlertMessage, AlertType, CommandReason, NodeMode, Severity
from state.records import DeadlineKind, Message

if TYPE_CHECKING:
    from state.model import _Transition

KEY = ""


def window_ms(run: "_Transition") -> int:
    """How long after a restart its loading is over and a new database would have been acted on."""
    return run.config.timing(run.s.primary).heartbeat_ms


def since(run: "_Transition") -> int | None:
    """When the open restart question began, or None."""
    due = run.s.deadlines.get(DeadlineKind.SETTLE_RESTART, KEY)
    return None if due is None else due - window_ms(run)


def held_before(run: "_Transition", internal_id: str, start: int) -> bool:
    """The primary held this message before `start` (tracked, or promoted by its shadow)."""
    s = run.s
    m = s.messages.get(internal_id)
    return (m is not None and m.received_ms < start) or internal_id in s.promoted


def message_loaded(run: "_Transition", e: ev.MessageLoaded) -> None:
    s = run.s
    if e.node != s.primary or e.message is None or s.queue_db_id:  # a known database id decides (model.py)
        return
    t, internal_id = e.event_time_ms, e.message.internal_id
    start = since(run)
    if start is None:
        start = t
        if not held_before(run, internal_id, start):
            if _unprocessed(run, start) or s.promoted:
                _open(run, start)
            return
    if held_before(run, internal_id, start):
        same_database(run, start, t, f"it loaded {e.message.message_id or internal_id}, which it held before")


def mentioned(run: "_Transition", e: ev.Event) -> None:
    """An event of the primary about a message, while the question is open."""
    start = since(run)
    if start is not None and e.node == run.s.primary and held_before(run, e.message.internal_id, start):
        same_database(run, start, e.event_time_ms,
                      f"its {e.kind} of {e.message.message_id or e.message.internal_id}, which it held before")


def promoted_by_shadow(run: "_Transition", e: ev.ShadowPromoted) -> None:
    """A shadow's own promotion of a message the primary held before the restart."""
    start = since(run)
    if start is not None and e.node != run.s.primary and held_before(run, e.message.internal_id, start):
        if (pair := run.s.pairs.get(e.node)) is not None:
            pair.held.discard(e.message.internal_id)  # promoted already: the model records it next
        new_database(run, start, e.event_time_ms,
                     f"{e.node} promoted its copy of {e.message.message_id or e.message.internal_id} on its own")


def fire_settle(run: "_Transition", key: str, at_ms: int) -> None:
    new_database(run, at_ms - window_ms(run), at_ms,
                 "no message it held before was loaded or sent on within ShadowHeartbeatFrequency")


# ---- the question and its two answers ------------------------------------------------

def _unprocessed(run: "_Transition", start: int) -> list[Message]:
    return [m for m in run.s.messages.values() if m.primary_done_ms is None and m.received_ms < start]


def _acknowledgement_delayed(run: "_Transition", m: Message, start: int) -> bool:
    """Whether a 2010 primary's delayed acknowledgement of `m` (its sender without shadow support) had not run out
    when it restarted at `start`: it never answered 250."""
    return not m.decided and not m.sender_supports_shadow and run.mode_of(run.s.primary) is NodeMode.EXCHANGE_2010 \
        and m.received_ms + run.primary_timing.max_ack_delay_ms > start


def _open(run: "_Transition", start: int) -> None:
    s, primary = run.s, run.s.primary
    s.deadlines.set(DeadlineKind.SETTLE_RESTART, KEY, start + window_ms(run))
    # It restarted before its delayed acknowledgements ran out: no 250 follows, whichever database it opened, as at a
    # NodeStarted (`unacknowledged_at_restart`).
    run.unacknowledged_at_restart(start, start, new_database=False)
    waiting = sorted(_unprocessed(run, start), key=lambda m: m.ref.internal_id)
    copies = [m for m in waiting if m.shadow_held]
    alone = [m for m in waiting if not m.shadow_held and not _acknowledgement_delayed(run, m, start)]
    promoted = sorted(s.promoted.values(), key=lambda r: r.ref.internal_id)
    holders = sorted({m.shadow_server for m in copies})
    resubmitters = sorted({r.holder for r in promoted})
    reason = (
        f"{primary} restarted at {_iso(start)} (it logged LOAD: messages loaded at boot); the logs do not say which"
        f" queue database it opened. If the same: it delivers its queue, the {len(copies)} shadow copies on"
        f" {_names(holders)} are discarded once it has, and the {len(promoted)} message(s) already resubmitted by"
        f" {_names(resubmitters)} are delivered twice. If a new, empty one: {_names(holders)} promote their"
        f" {len(copies)} copies at once and resubmit them, {len(alone)} message(s) it held without a shadow copy are"
        f" lost, and the resubmitted ones arrive once. Settled by its next line about a message it held (the same"
        f" database) or a shadow's promotion of one (a new one); with neither by {_iso(start + window_ms(run))},"
        " a new one")
    refs = [AlertMessage(m.ref) for m in waiting] + [AlertMessage(r.ref) for r in promoted]
    _alert(run, AlertType.RESTARTED_QUEUE_DATABASE_UNKNOWN, Severity.WARNING,
           [primary, *holders, *resubmitters], refs, start, reason)


def same_database(run: "_Transition", start: int, t: int, evidence: str) -> None:
    """Settled: the primary opened the database it had. It delivers its queue; what its shadows
    resubmitted arrives twice."""
    s = run.s
    s.deadlines.clear(DeadlineKind.SETTLE_RESTART, KEY)
    copies = [m for m in _unprocessed(run, start) if m.shadow_held]
    records = sorted(s.promoted.values(), key=lambda r: r.ref.internal_id)
    kept = f"; {len(copies)} shadow copies stay until it has" if copies else ""
    twice = f"; {len(records)} message(s) its shadows resubmitted are delivered twice" if records else ""
    _alert(run, AlertType.RESTART_QUEUE_DATABASE_SETTLED, Severity.INFO, [s.primary], [], t,
           f"{s.primary} restarted at {_iso(start)} with the same queue database ({evidence}): it delivers its"
           f" queue{kept}{twice}")
    run.predict_duplicates(records, t, "restarted with the same queue database and will deliver its queue")
    for r in records:
        run.forget_promoted(r.ref.internal_id)


def new_database(run: "_Transition", start: int, t: int, evidence: str) -> None:
    """Settled: the primary opened a new, empty database. Its shadows promote what they held for
    it before the restart; what it held alone is lost; nothing it lost arrives twice."""
    s = run.s
    s.deadlines.clear(DeadlineKind.SETTLE_RESTART, KEY)
    for internal_id in list(s.promoted):
        run.forget_promoted(internal_id)
    # What a 2010 primary had not answered 250 for by the restart is its sender's, which "dará por hecho que el mensaje
    # nunca llegó a Exchange y tratará de entregarlo de nuevo" (002): not lost, as at a NodeStarted.
    for m in [m for m in _unprocessed(run, start) if _acknowledgement_delayed(run, m, start)]:
        run.close(m, t, "rejected")
    lost = sorted((m for m in _unprocessed(run, start) if not m.shadow_held), key=lambda m: m.ref.internal_id)
    _alert(run, AlertType.RESTART_QUEUE_DATABASE_SETTLED, Severity.WARNING, [s.primary], [], t,
           f"{s.primary} restarted at {_iso(start)} with a new, empty queue database ({evidence}): its shadows"
           f" promote the copies they held for it, and {len(lost)} message(s) it held without one are lost")
    for pair in sorted(s.pairs.values(), key=lambda p: p.shadow):
        later = {i for i in pair.held if (m := s.messages.get(i)) is not None and m.received_ms >= start}
        if len(later) == len(pair.held):
            continue
        pair.held -= later
        run.promote(pair, t, CommandReason.PRIMARY_QUEUE_DATABASE_CHANGED, include_unrouted=True)
        if later:  # copies of messages it took after the restart are in its new database's care
            pair.held |= later
            pair.primary_failed_ms, pair.last_contact_ms = None, t
            s.pairs[pair.shadow] = pair
            run.schedule_pair(pair)
    run.lost_with_the_database(lost, t, "restarted")


def _alert(run: "_Transition", kind: AlertType, severity: Severity, servers: list[str],
           messages: list[AlertMessage], t: int, reason: str) -> None:
    from state.model import stable_id

    run.out.alerts.append(Alert(
        alert_id=stable_id("alert", kind.value, run.s.primary, t, *(m.message.internal_id for m in messages)),
        type=kind, severity=severity, servers=tuple(dict.fromkeys(x for x in servers if x)),
        messages=tuple(messages), reason=reason, decided_at_ms=t))


def _names(servers: list[str]) -> str:
    return ", ".join(servers) if servers else "no server"


def _iso(ms_: int) -> str:
    from state.model import _iso

    return _iso(ms_)
