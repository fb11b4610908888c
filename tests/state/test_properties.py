"""Properties over random worlds: three servers, random messages, random crashes and restarts.

A tiny world simulator turns a drawn world into the events its servers would emit (2013+
behaviour: shadows query every 2 minutes, primaries deliver unless down, restarts with the
same or a new queue database). Over every such world:
- no message is lost unless two servers involved in it failed (or it never had a shadow);
- every message the twin saw ends exactly once, and nothing (state or deadline) is left;
- the same input always gives the same output.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from schemas.events import AlertType
from state.replay import replay
from tests.state.world import HORIZON, simulate, worlds


def crashed(crash, server, lifetime_end=HORIZON):
    return crash[server] is not None and crash[server].down_at < lifetime_end


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds)
def test_no_loss_without_a_double_failure_and_nothing_left(world):
    mail_list, crash_list = world
    events, crash, involved = simulate(mail_list, crash_list)
    result = replay(events)
    lost = {m.message.internal_id for a in result.alerts if a.type is AlertType.MESSAGE_LOST for m in a.messages}
    for mid in lost:
        primary, shadow = involved[mid]
        assert crashed(crash, primary), f"{mid} lost although its primary never failed"
        assert shadow is None or crashed(crash, shadow), f"{mid} lost with only one server failed"
    outcomes = [o.ref.internal_id for o in result.outcomes]
    assert sorted(outcomes) == sorted(set(outcomes)), "a message ended twice"
    assert set(outcomes) == set(involved), "every message the twin saw ends exactly once"
    for state in result.states.values():
        assert state.holds_nothing(), f"{state.primary} keeps state or deadlines after every copy is gone"


@settings(max_examples=40, deadline=None)
@given(worlds)
def test_same_input_same_output(world):
    events, _, _ = simulate(*world)
    first, second = replay(events), replay(list(events))
    assert [a.alert_id for a in first.alerts] == [a.alert_id for a in second.alerts]
    assert [c.command_id for c in first.commands] == [c.command_id for c in second.commands]
