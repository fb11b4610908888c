"""A restart seen in the logs (LOAD, state/restart.py) after the primary's outage, as the outage table of
docs/domain.md has it, on log input (no heartbeat, no queue-database id): both outcomes are reported until a
later event settles which.

| Mailbox01 (its shadows on mbx02, mbx03) | what the logs show after its LOAD | the twin decides |
|---|---|---|
| back with the SAME database after ShadowResubmitTimeSpan | LOAD of the messages its shadows promoted | same database at once: duplicates of those |
| back with a NEW database before ShadowResubmitTimeSpan | LOAD of nothing it held, then nothing about them | both outcomes; a heartbeat later: new, shadows promote, the unshadowed message is lost |
| back, LOAD of nothing it held | it sends on a message it held | both outcomes; then same, nothing promoted |
| back, LOAD of nothing it held | a shadow's RESUBMIT of a message it held | both outcomes; then new, the other shadows promote |
"""

from schemas.events import AlertType, CommandReason
from state.replay import replay
from tests.state.scenario import HOUR, MINUTE, Org, at

HEARTBEAT = 2 * MINUTE
SETTLED, UNKNOWN = AlertType.RESTART_QUEUE_DATABASE_SETTLED, AlertType.RESTARTED_QUEUE_DATABASE_UNKNOWN


def mailbox01_goes_silent(org, end, down_at=10):
    """Log input: Mailbox01 takes m0..m2 with shadows on mbx02 and mbx03, and m3 with none; it logs until
    down_at; its peers log on until `end`."""
    events = []
    for i, shadow in enumerate(["mbx02", "mbx03", "mbx02"]):
        events += [*org.received("mailbox01", f"m{i}", 1 + i, external=["bob@fabrikam.com"]),
                   *org.shadowed("mailbox01", shadow, f"m{i}", 1 + i, db="")]
    events += org.received("mailbox01", "m3", 4)
    events += [*org.busy("mailbox01", 5, down_at), *org.busy("mbx02", 5, end), *org.busy("mbx03", 5, end)]
    return events


def back_after_an_hour(org, *after):
    """Mailbox01 restarts at minute 60 and logs LOAD of a message the twin never saw (x9); then `after`."""
    return replay([*mailbox01_goes_silent(org, 80), *org.loaded("mailbox01", "mailbox01", "x9", 60), *after,
                   *org.busy("mailbox01", 61, 80)])


def of(result, kind):
    return [a for a in result.alerts if a.type is kind]


def test_same_database_after_the_resubmit_span_its_loads_settle_it_at_once_and_the_promoted_arrive_twice():
    org = Org()
    back = 4 * 60
    events = [*mailbox01_goes_silent(org, back + 10), *org.loaded("mailbox01", "mailbox01", "m0", back),
              *org.loaded("mailbox01", "mailbox01", "m3", back), *org.busy("mailbox01", back + 1, back + 10)]
    result = replay(events)
    assert {c.message.internal_id for c in result.commands} == {"m0", "m1", "m2"}  # promoted at last sign + span
    assert max(c.decided_at_ms for c in result.commands) < at(back)
    assert not of(result, UNKNOWN)
    settled = of(result, SETTLED)
    assert len(settled) == 1 and settled[0].decided_at_ms == at(back) and "the same queue database" in settled[0].reason
    assert settled[0].reason.endswith(": it delivers its queue; 3 message(s) its shadows resubmitted are delivered"
                                      " twice"), "no copy stays: no '0 shadow copies stay'"
    duplicates = of(result, AlertType.DUPLICATE_DELIVERY_EXPECTED)
    assert [(d.decided_at_ms, {m.message.internal_id for m in d.messages}) for d in duplicates] == [
        (at(back), {"m0", "m1", "m2"})]


def test_new_database_before_the_resubmit_span_both_outcomes_then_the_shadows_promote_a_heartbeat_later():
    org, back = Org(), 60
    result = back_after_an_hour(org)
    unknown = of(result, UNKNOWN)
    assert len(unknown) == 1 and unknown[0].decided_at_ms == at(back)
    assert {m.message.internal_id for m in unknown[0].messages} == {"m0", "m1", "m2", "m3"}
    assert set(unknown[0].servers) == {"mailbox01", "mbx02", "mbx03"}
    assert "If the same" in unknown[0].reason and "If a new, empty one" in unknown[0].reason
    assert {(c.holder, c.message.internal_id, c.reason, c.decided_at_ms) for c in result.commands} == {
        (holder, mid, CommandReason.PRIMARY_QUEUE_DATABASE_CHANGED, at(back) + HEARTBEAT)
        for holder, mid in (("mbx02", "m0"), ("mbx03", "m1"), ("mbx02", "m2"))}
    settled = of(result, SETTLED)
    assert len(settled) == 1 and "a new, empty queue database" in settled[0].reason
    lost = of(result, AlertType.MESSAGE_LOST)
    assert [{m.message.internal_id for m in a.messages} for a in lost] == [{"m3"}]
    assert not of(result, AlertType.DUPLICATE_DELIVERY_EXPECTED)
    assert result.settles("mailbox01")


def test_a_message_it_held_sent_on_after_the_restart_settles_the_same_database_and_nothing_is_promoted():
    org, back = Org(), 60
    result = back_after_an_hour(org, *org.delivered("mailbox01", "m1", "smtp.fabrikam.com", back + 1))
    assert [a.decided_at_ms for a in of(result, UNKNOWN)] == [at(back)]
    settled = of(result, SETTLED)
    assert [a.decided_at_ms for a in settled] == [at(back + 1)] and "the same queue database" in settled[0].reason
    assert settled[0].reason.endswith(": it delivers its queue; 3 shadow copies stay until it has"), \
        "nothing was resubmitted: no '0 message(s) ... delivered twice'"
    assert result.commands == [] and not of(result, AlertType.MESSAGE_LOST)


def test_a_shadows_own_promotion_after_the_restart_settles_a_new_database_and_the_other_shadows_promote():
    org, back = Org(), 60
    result = back_after_an_hour(org, *org.promoted("mbx02", "mailbox01", "m0", back + 1))
    settled = of(result, SETTLED)
    assert [a.decided_at_ms for a in settled] == [at(back + 1)] and "mbx02 promoted" in settled[0].reason
    assert {(c.holder, c.message.internal_id) for c in result.commands} == {("mbx03", "m1"), ("mbx02", "m2")}
    assert {c.decided_at_ms for c in result.commands} == {at(back + 1)}


def test_a_load_with_nothing_at_stake_or_a_shadows_load_reports_nothing():
    org = Org()
    events = [*org.received("mailbox01", "m0", 1), *org.delivered("mailbox01", "m0", "smtp.fabrikam.com", 2),
              *org.loaded("mailbox01", "mailbox01", "x9", 30), *org.busy("mbx02", 1, 40)]
    assert not of(replay(events), UNKNOWN) and not of(replay(events), SETTLED)
    org = Org()
    events = [*mailbox01_goes_silent(org, 60, down_at=60), *org.loaded("mbx02", "mailbox01", "m0", 30)]
    result = replay(events)
    assert not of(result, UNKNOWN) and not of(result, SETTLED) and result.commands == []


def test_with_its_queue_database_known_from_node_started_a_load_opens_no_question():
    org = Org()
    events = [*org.started("mailbox01", "db-A", 0), *mailbox01_goes_silent(org, 80, down_at=80),
              *org.loaded("mailbox01", "mailbox01", "x9", 60)]
    result = replay(events)
    assert not of(result, UNKNOWN) and not of(result, SETTLED) and result.commands == []
