"""A scenario per fault kind: simulate, replay through the model, hold its alerts against the ground truth."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from producers.simulator.engine import Simulation
from schemas import events as ev
from schemas.events import AlertType
from state.scoring import score
from tests.producers.simulator.scenarios import Run, simulate, topology

PROMOTED = (AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, AlertType.QUEUE_DATABASE_CHANGED_SHADOWS_PROMOTED)


def crash(server, at="01:00:00", duration="01:00:00", restart="same_database", backlog="00:05:00"):
    return {"kind": "crash", "server": server, "at": at, "duration": duration, "restart": restart, "backlog": backlog}


def duplicated_in_truth(run: Run) -> set[str]:
    return {t.message_id for t in run.with_result("duplicate", "duplicate_hidden")}


def duplicates_predicted(run: Run) -> set[str]:
    return {m.message.message_id for a in run.alerts(AlertType.DUPLICATE_DELIVERY_EXPECTED) for m in a.messages}


def seen_twice_outside(run: Run) -> set[tuple[str, str]]:
    """(message, recipient) pairs that a recipient outside the organisation really received twice."""
    return {(t.message_id, r) for t in run.truth.values() for r in t.recipients
            if not r.endswith("@contoso.com") and t.result_of(r) == "duplicate"}


def predicted_outside(run: Run) -> set[tuple[str, str]]:
    return {(m.message.message_id, r) for a in run.alerts(AlertType.DUPLICATE_DELIVERY_EXPECTED)
            for m in a.messages for r in m.recipients}


def first_delivery_ms(truth) -> int:
    return min(ms for deliveries in truth.deliveries.values() for ms, _, _ in deliveries)


def assert_nothing_left(run: Run) -> None:
    for primary in run.result.states:
        assert run.result.settles(primary), f"the twin keeps state for {primary} after everything was delivered"


def test_crash_past_the_resubmit_span_promotes_as_the_nodes_do_and_predicts_every_duplicate():
    run = simulate(topology([crash("mbx01", duration="03:30:00")], duration="05:00:00"))
    promoted = run.promoted_in_truth("mbx01")
    assert promoted and run.alerted_ids(AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED) == promoted
    assert {(c.holder, c.message.internal_id) for c in run.commands()} == {
        (p["holder"], p["internal_id"]) for t in run.truth.values() for p in t.promotions}
    assert duplicated_in_truth(run) and duplicates_predicted(run) == duplicated_in_truth(run)
    assert seen_twice_outside(run) and seen_twice_outside(run) <= predicted_outside(run)
    assert run.results()["lost"] == 0 and not run.alerts(AlertType.MESSAGE_LOST)
    assert_nothing_left(run)


def test_crash_shorter_than_the_span_with_the_same_database_promotes_nothing():
    run = simulate(topology([crash("mbx01", duration="01:00:00")]))
    assert run.promoted_in_truth() == set() and run.commands() == [] and not run.alerts(*PROMOTED)
    assert run.results()["delivered"] == len(run.truth)
    late = [t for t in run.truth.values() if any(c["server"] == "mbx01" for c in t.copies)
            and first_delivery_ms(t) - t.submitted_ms > 50 * 60_000]
    assert late, "the mail queued on mbx01 when it died arrived when it came back"
    assert_nothing_left(run)


def test_restart_with_a_new_queue_database_promotes_at_once():
    run = simulate(topology([crash("mbx01", duration="00:20:00", restart="new_database")]))
    promoted = run.promoted_in_truth("mbx01")
    assert promoted and run.alerted_ids(AlertType.QUEUE_DATABASE_CHANGED_SHADOWS_PROMOTED) == promoted
    restart_ms = run.simulation.start_ms + 80 * 60_000
    decided = [a.decided_at_ms for a in run.alerts(AlertType.QUEUE_DATABASE_CHANGED_SHADOWS_PROMOTED)]
    assert all(restart_ms <= t <= restart_ms + 120_000 for t in decided), "within a heartbeat of the new ID"
    assert duplicates_predicted(run) == duplicated_in_truth(run)
    assert run.results()["lost"] == 0 and not run.alerts(AlertType.MESSAGE_LOST)
    assert_nothing_left(run)


def test_double_failure_loses_mail_and_the_twin_had_said_its_copies_were_unprotected():
    run = simulate(topology([crash("mbx01", duration="00:20:00", restart="new_database"),
                             crash("mbx03", duration="00:20:00", restart="new_database", backlog="00:00:00")]))
    lost = run.with_result("lost")
    assert lost, "both copies gone: the messages are lost"
    lost_ids = {c["internal_id"] for t in lost for c in t.copies}
    warned = run.alerted_ids(AlertType.SHADOW_SERVER_UNREACHABLE, AlertType.MESSAGE_AT_RISK, AlertType.MESSAGE_LOST)
    assert lost_ids <= warned


def test_partition_past_the_span_the_shadow_resubmits_what_the_primary_delivered():
    run = simulate(topology([{"kind": "partition", "servers": ["mbx01", "mbx03"], "at": "01:00:00",
                              "duration": "03:30:00"}], duration="05:00:00"))
    assert run.promoted_in_truth("mbx01"), "mbx03 promoted on its own, cut off from mbx01"
    assert run.commands() == [], "the twin saw mbx01 deliver everything: nothing to resubmit"
    assert duplicated_in_truth(run) and duplicates_predicted(run) == duplicated_in_truth(run)
    assert seen_twice_outside(run) <= predicted_outside(run)
    assert_nothing_left(run)


def test_discard_notifications_deleted_after_the_auto_discard_interval_come_back_as_duplicates():
    """mbx03 is cut off from mbx01 for an hour; ShadowMessageAutoDiscardInterval is 30 minutes, so mbx01 deletes the
    discard notifications it kept for mbx03 (003), whose copies of what mbx01 delivered stay. When mbx01 dies later
    for longer than the span, mbx03 resubmits them too, as the twin says (DISCARD_EVENTS_DROPPED, then
    DUPLICATE_DELIVERY_EXPECTED naming them). Before, the simulator's primaries kept the notifications until the
    shadow's next answered query, and its truth had none of these duplicates."""
    run = simulate(topology([{"kind": "partition", "servers": ["mbx01", "mbx03"], "at": "01:00:00",
                              "duration": "01:00:00"}, crash("mbx01", at="03:00:00", duration="03:30:00")],
                            duration="07:00:00", shadow_redundancy={"shadow_message_auto_discard_interval": "00:30:00"}))
    crash_at = run.simulation.start_ms + 3 * 3_600_000
    dropped = {m.message.message_id for a in run.alerts(AlertType.DISCARD_EVENTS_DROPPED)
               if a.servers == ("mbx01", "mbx03") and a.decided_at_ms < crash_at for m in a.messages}
    assert dropped and dropped <= duplicated_in_truth(run)
    assert duplicates_predicted(run) == duplicated_in_truth(run)
    assert run.results()["lost"] == 0 and not run.alerts(AlertType.MESSAGE_LOST)
    # mbx03's own notifications for mbx01 went the same way: their copies stay on mbx01 until they expire (days)
    held = {(primary, shadow, i) for primary, state in run.result.states.items()
            for shadow, pair in state.pairs.items() for i in pair.held}
    assert held and held == {(primary, node.name, i) for node in run.simulation.nodes.values()
                             for primary, copies in node.shadows.items() for i in copies}
    assert run.result.settles("mbx01") and run.result.settles("mbx02")


def test_a_shadow_copy_no_discard_notification_released_expires_and_is_never_promoted():
    """"Unacknowledged shadow messages eventually expire from Safety Net after the sum of the SafetyNetHoldTime
    and MessageExpirationTimeout" (000, 003). mbx03 is cut off from mbx01 for an hour, past a 30-minute
    ShadowMessageAutoDiscardInterval: mbx01 deletes the discard notifications of what it delivered meanwhile, whose
    copies stay on mbx03 and expire an hour and a half (hold 1 hour, expiration 30 minutes) after their receipt,
    before mbx01 dies at 3:00 and mbx03 promotes what it still holds, 65 minutes later. The twin says they expired
    (SHADOW_EXPIRED) and predicts every duplicate. Before, the simulator's shadows kept every copy until it was
    discarded or promoted: mbx03 resubmitted the 21 expired ones too, delivered twice, none of them predicted."""
    run = simulate(topology([{"kind": "partition", "servers": ["mbx01", "mbx03"], "at": "01:00:00",
                              "duration": "01:00:00"}, crash("mbx01", at="03:00:00", duration="02:00:00")],
                            duration="06:00:00",
                            shadow_redundancy={"shadow_message_auto_discard_interval": "00:30:00",
                                               "safety_net_hold_time": "01:00:00",
                                               "message_expiration_timeout": "00:30:00",
                                               "shadow_resubmit_time_span": "01:05:00"}))
    expired = {m.message.message_id for a in run.alerts(AlertType.SHADOW_EXPIRED) if a.servers == ("mbx01", "mbx03")
               for m in a.messages}
    promoted = {t.message_id for t in run.truth.values() if any(p["holder"] == "mbx03" for p in t.promotions)}
    assert expired and promoted and not expired & promoted
    gone = {t.message_id for t in run.truth.values() for d in t.destroyed
            if (d["server"], d["what"]) == ("mbx03", "shadow copy expired") and d["internal_id"].startswith("mbx01.")}
    assert gone == expired
    assert duplicates_predicted(run) == duplicated_in_truth(run)
    assert not any(copies for node in run.simulation.nodes.values() for copies in node.shadows.values())
    assert run.results()["lost"] == 0
    assert_nothing_left(run)


def test_slow_next_hop_delays_mail_without_a_promotion():
    run = simulate(topology([{"kind": "slow_next_hop", "next_hop": "DB01", "at": "01:00:00", "duration": "00:30:00",
                              "delay": "00:10:00"}]))
    delays = [ms - t.submitted_ms for t in run.truth.values() for rs in t.deliveries.values() for ms, where, _ in rs
              if where == "DB01"]
    assert max(delays) >= 9 * 60_000
    assert run.result.alerts == [] and run.commands() == []
    assert run.results()["delivered"] == len(run.truth)
    assert_nothing_left(run)


def test_refusing_next_hop_past_the_expiration_timeout_expires_the_mail():
    run = simulate(topology([{"kind": "refusing_next_hop", "next_hop": "fabrikam.com", "at": "01:00:00",
                              "duration": "02:00:00"}], shadow_redundancy={"message_expiration_timeout": "01:00:00"}))
    expired = {t.message_id for t in run.with_result("expired")}
    assert expired
    assert {e.message.message_id for e in run.events if isinstance(e, ev.MessageExpired)} == expired
    # The twin names each expired message, once, and promotes none of them.
    named = [m.message.message_id for a in run.alerts(AlertType.MESSAGE_EXPIRED) for m in a.messages]
    assert sorted(named) == sorted(expired)
    assert {a.type for a in run.result.alerts} == {AlertType.MESSAGE_EXPIRED} and run.commands() == []
    deferred = {e.message.message_id for e in run.events if isinstance(e, ev.DeliveryDeferred)}
    assert expired <= deferred, "every refused attempt is a DEFER in the stream"
    assert_nothing_left(run)


def test_an_expired_message_is_in_safety_net_only_when_a_next_hop_took_some_of_its_recipients():
    """Safety Net holds what was "successfully processed or delivered to a mailbox recipient" (000, 003): a message
    that expires with a fork delivered is moved there, one that expires with no recipient delivered (its sender
    gets a non-delivery report) is not, as the relay node does. Before, the simulator moved every expired message
    into Safety Net."""
    run = simulate(topology([{"kind": "refusing_next_hop", "next_hop": "fabrikam.com", "at": "01:00:00",
                              "duration": "02:00:00"}], shadow_redundancy={"message_expiration_timeout": "01:00:00"}))
    expired = {e.message.internal_id: e.message.message_id for e in run.events if isinstance(e, ev.MessageExpired)}
    in_safety_net = {e.message.internal_id for e in run.events if isinstance(e, ev.MovedToSafetyNet)}
    partly = {i for i, message_id in expired.items() if run.truth[message_id].deliveries}
    assert partly and set(expired) - partly, "both kinds expire"
    assert in_safety_net & set(expired) == partly
    processed = {e.message.internal_id for e in run.events if isinstance(e, ev.DiscardStatusSet)}
    assert set(expired) <= processed, "each is processed all the same: its shadow is told to discard its copy"


def test_clocks_ahead_and_behind_change_nothing_the_twin_decides():
    run = simulate(topology([{"kind": "clock_skew", "server": "mbx02", "at": "00:00:00", "duration": "04:00:00",
                              "offset": "-30s"},
                             {"kind": "clock_skew", "server": "mbx03", "at": "00:00:00", "duration": "04:00:00",
                              "offset": "+25s"}]))
    times = [e.event_time_ms for e in run.events]
    assert any(b < a - 20_000 for a, b in zip(times, times[1:])), "the skew shows in the stream"
    assert run.result.alerts == [] and run.commands() == []
    assert_nothing_left(run)


def test_shadow_creation_failures_leave_exactly_those_messages_not_redundant():
    refusing = [{"kind": "shadow_failure", "server": s, "at": "01:00:00", "duration": "00:30:00"}
                for s in ("mbx02", "mbx03")]
    run = simulate(topology(refusing))
    unprotected = {c["internal_id"] for t in run.truth.values() for c in t.copies if c["shadow"] is None}
    assert unprotected and run.alerted_ids(AlertType.NOT_REDUNDANT) == unprotected
    assert run.results()["delivered"] == len(run.truth)
    rejecting = simulate(topology(refusing, shadow_redundancy={"reject_message_on_shadow_failure": True}))
    rejections = sum(t.rejections for t in rejecting.truth.values())
    assert rejections and len(rejecting.alerted_ids(AlertType.REJECTED_NO_SHADOW)) == rejections
    assert rejecting.results()["delivered"] == len(rejecting.truth), "the senders retried until accepted"
    assert_nothing_left(run)
    assert_nothing_left(rejecting)


def test_a_message_its_sender_still_retries_at_the_end_is_pending_not_lost():
    """Its 451 is transient: the sender keeps the message and retries, no server ever took it, so when
    the run ends it is not finished (pending), as a message still queued is, not lost."""
    crashes = [{"kind": "crash", "server": s, "at": "00:05:00", "duration": "01:00:00", "restart": "never"}
               for s in ("mbx02", "mbx03")]
    run = simulate(topology(crashes, duration="00:15:00", rate=0.05,
                            shadow_redundancy={"reject_message_on_shadow_failure": True}))
    refused = [t for t in run.truth.values() if t.rejections and not t.copies]
    assert refused, "mbx01, alone, makes no shadow copy and answers 451 to every later message"
    assert {t.result() for t in refused} == {"pending"}


def test_exchange_2010_hub_crash_the_previous_hop_resubmits():
    run = simulate(topology([crash("hub01", duration="04:00:00")], hubs=True, duration="06:00:00"))
    promoted = run.promoted_in_truth("hub01")
    holders = {p["holder"] for t in run.truth.values() for p in t.promotions}
    assert promoted and holders <= {"mbx01", "mbx02", "mbx03"}, "the mailbox servers kept the hubs' shadows"
    assert run.alerted_ids(AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED) == promoted
    assert duplicates_predicted(run) == duplicated_in_truth(run)
    assert_nothing_left(run)


def test_same_seed_same_run_other_seed_other_run():
    topo = topology([crash("mbx01", duration="00:20:00", restart="new_database")], duration="02:00:00")
    first, again, other = (simulate(topo, seed).events for seed in (3, 3, 4))
    assert first == again
    assert first != other


# A message to a mailbox and to fabrikam.com, refused there, is half delivered when mbx01 dies; past the span its
# shadow resubmits it. "For messages with multiple recipients, each next hop for the primary message requires
# separate shadow queues" (seed 000): the discard notification of the delivered fork's next hop released that part.
# mbx01's next hops stall five minutes before it dies (backlog): its shadows have had every fork's notification.
_SPLIT_FAULTS = [{"kind": "refusing_next_hop", "next_hop": "fabrikam.com", "at": "00:00:00", "duration": "02:00:00"},
                 crash("mbx01", duration="03:30:00", restart="new_database")]


@pytest.fixture(scope="module")
def split_run() -> Run:
    return simulate(topology(_SPLIT_FAULTS, duration="01:30:00", external_share=0.5))


def crash_ms(run: Run) -> int:
    return run.simulation.start_ms + 60 * 60_000


def half_delivered(run: Run) -> list:
    """Messages of mbx01 promoted by their shadow after a fork of theirs had been delivered before the crash."""
    return [t for t in run.truth.values() if any(p["primary"] == "mbx01" for p in t.promotions)
            and any(ms < crash_ms(run) for rs in t.deliveries.values() for ms, _, _ in rs)]


def test_a_fork_delivered_before_the_primary_died_is_not_resubmitted_with_the_pending_one(split_run):
    run = split_run
    split = half_delivered(run)
    assert split, "some messages of mbx01 were delivered to a mailbox (or adatum.com) and not to fabrikam.com"
    received = {}  # (message id, server) -> the recipients of each copy it received
    for e in run.events:
        if isinstance(e, ev.MessageReceived):
            received.setdefault((e.message.message_id, e.node), []).append(tuple(r.address for r in e.recipients))
    for t in split:
        (promotion,) = t.promotions
        assert all(t.result_of(r) == "delivered" for r in t.recipients), "every recipient got it once"
        pending = tuple(r for r in t.recipients if r.endswith("@fabrikam.com"))
        assert pending and tuple(promotion["recipients"]) == pending, "the shadow resubmitted only the pending fork"
        for r in t.recipients:
            ((ms, _, _),) = t.deliveries[r]
            assert ms > promotion["at_ms"] if r in pending else ms < crash_ms(run)
        assert received[t.message_id, promotion["holder"]] == [pending]
    assert run.results()["duplicate"] == run.results()["duplicate_hidden"] == 0
    assert run.results()["lost"] == 0
    again = simulate(topology(_SPLIT_FAULTS, duration="01:30:00", external_share=0.5))
    assert again.events == run.events, "one seed, one run"


def test_the_twin_scores_the_half_delivered_messages_as_they_went(split_run):
    """The twin commands the pending forks only and predicts no duplicate: the truth agrees."""
    run = split_run
    s = score(run.result.alerts, [t.to_json() for t in run.truth.values()])
    assert s.promotions.real and (s.promotions.found, s.promotions.missed, s.promotions.false) == (
        s.promotions.real, 0, 0)
    assert (s.duplicates.real, s.duplicates.predicted, s.duplicates_visible_real) == (0, 0, 0)
    assert (s.losses.real, s.losses.predicted) == (0, 0) and s.false_alerts == {}
    split = {t.message_id: t for t in half_delivered(run)}
    commanded = {}
    for c in run.commands():
        if c.message.message_id in split:
            commanded.setdefault(c.message.message_id, set()).update(c.recipients)
    assert commanded == {m: set(t.promotions[0]["recipients"]) for m, t in split.items()}


def test_a_slow_next_hop_that_then_refuses_is_retried_every_five_minutes_not_every_millisecond():
    # DB01 answers slowly from 01:00 (10 minutes) and refuses from 01:05 to 01:35: mail that waited out the
    # slowness is refused, and retried at RETRY_MS (hunt seed 359: before, every millisecond once the
    # delay had run out, millions of DEFERs in minutes of simulated time, the run never ending).
    faults = [{"kind": "slow_next_hop", "next_hop": "DB01", "at": "01:00:00", "duration": "01:00:00",
               "delay": "00:10:00"},
              {"kind": "refusing_next_hop", "next_hop": "DB01", "at": "01:05:00", "duration": "00:30:00"}]
    events = list(itertools.islice(Simulation(topology(faults, duration="02:00:00", rate=0.1), 7).events(), 200_000))
    assert len(events) < 200_000, "the run ends"
    deferrals = Counter((e.message.internal_id, e.message.fork_id) for e in events if isinstance(e, ev.DeliveryDeferred))
    assert deferrals and max(deferrals.values()) <= 12  # ~10 minutes slow, then 30 refused, a try per 5


def test_a_message_goes_to_its_next_hop_only_once_its_shadow_attempts_are_over():
    # mbx03, alone in lon, is down: mbx01 and mbx02 (nyc, PreferRemote) try it four times, a second each,
    # then their own site. The message is the primary's only once the sender has its answer (domain.md, "How
    # a shadow copy is made"): before, it was sent on after its queue time (2 s on average) while the
    # attempts went on, so a log showed SEND before the HAREDIRECT that made its copy.
    run = simulate(topology([crash("mbx03", at="00:10:00", duration="00:20:00", backlog="00:00:00")],
                            duration="00:40:00", rate=0.2))
    attempts_end: dict[str, int] = {}
    first_sent: dict[str, int] = {}
    for e in run.events:
        if isinstance(e, (ev.ShadowCopyFailed, ev.ShadowCopyAcknowledged)):
            attempts_end[e.message.internal_id] = max(attempts_end.get(e.message.internal_id, 0), e.event_time_ms)
        elif isinstance(e, ev.SentToNextHop):
            first_sent.setdefault(e.message.internal_id, e.event_time_ms)
    failed = {e.message.internal_id for e in run.events if isinstance(e, ev.ShadowCopyFailed)}
    assert len(failed & set(first_sent)) > 5
    assert all(first_sent[i] >= attempts_end[i] for i in failed & set(first_sent))


def test_a_primary_back_after_the_duplicate_detection_window_names_the_mailbox_users_who_see_it_twice():
    """mbx01 back 1.5 hours after its shadows promoted: its mailbox users get the second copy after their store forgot
    the first (1 hour, 004), and DUPLICATE_DELIVERY_EXPECTED names them with the recipients outside."""
    run = simulate(topology([crash("mbx01", duration="04:30:00")], duration="06:00:00"))
    seen = {(t.message_id, r) for t in run.truth.values() for r in t.recipients if t.result_of(r) == "duplicate"}
    assert any(r.endswith("@contoso.com") for _, r in seen)
    assert predicted_outside(run) == seen


def test_mailbox_stores_that_track_duplicates_longer_hide_the_same_return_from_their_users():
    """The same return with the topology's track_duplicates at 3 hours: the simulated stores keep each delivery that
    long, so only the recipients outside see the second copy, as the alert says. Before, the simulator's stores kept
    a delivery 1 hour whatever the topology said, and its truth had mailbox users see what the twin said they would not."""
    run = simulate(topology([crash("mbx01", duration="04:30:00")], duration="06:00:00",
                            shadow_redundancy={"track_duplicates": "03:00:00"}))
    seen = {(t.message_id, r) for t in run.truth.values() for r in t.recipients if t.result_of(r) == "duplicate"}
    assert seen and not any(r.endswith("@contoso.com") for _, r in seen)
    assert predicted_outside(run) == seen
