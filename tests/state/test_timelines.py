"""Every timeline of tests/state/timelines.py through the reference replay: exactly the alerts and
commands the documents call for, nothing more, and nothing held once the messages are settled."""

import pytest

from state.replay import replay
from tests.state import timelines


@pytest.mark.parametrize("make", timelines.ALL, ids=lambda f: f.__name__)
def test_the_twin_decides_exactly_what_the_timeline_expects(make):
    timeline = make()
    result = replay(timeline.events, timeline.config)
    assert [(a.type, a.at_ms, a.messages) for a in timelines.observed_alerts(result.alerts)] == [
        (a.type, a.at_ms, a.messages) for a in timeline.alerts]
    assert timelines.observed_commands(result.commands) == list(timeline.commands)
    with_recipients = timelines.observed_alerts(result.alerts, with_recipients=True)
    for expected, observed in zip(timeline.alerts, with_recipients):
        if expected.recipients is not None:
            assert observed.recipients == expected.recipients, expected.type
    if timeline.outcomes is not None:
        assert [(o.ref.internal_id, o.result, o.closed_ms) for o in result.outcomes] == list(timeline.outcomes)


@pytest.mark.parametrize("make", timelines.SETTLED, ids=lambda f: f.__name__)
def test_nothing_is_held_once_every_copy_is_released(make):
    timeline = make()
    result = replay(timeline.events, timeline.config)
    assert all(result.settles(primary) for primary in result.states)
