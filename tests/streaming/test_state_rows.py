"""The operator's state rows (streaming/state_rows.py) when a deadline changes a message without
any decision: its record is written again all the same."""

from state import snapshot
from state.parameters import model_config_from
from state.summary import message_where
from tests.state.scenario import MINUTE, Org, at
from tests.streaming.harness import OperatorHarness, check_state_view


def test_an_expiry_moved_on_to_safety_nets_hold_rewrites_the_messages_record():
    config = model_config_from({"message_expiration_timeout": "30m", "shadow_silence_heartbeats": 0})
    org = Org()
    harness = OperatorHarness(config, servers=())
    harness.events([*org.started("mbx01", "dbP1", 0), *org.received("mbx01", "m1", 1),
                    *org.shadowed("mbx01", "mbx02", "m1", 1), *org.sent("mbx01", "m1", "hop1", 2),
                    *org.acked("mbx01", "m1", "hop1", 3)])
    before = harness.view.messages["mbx01/m1"]["deadlines"]
    assert before == [{"kind": "expire", "at_ms": at(31)}], "processed, its copy awaits the discard notification"
    harness.advance(at(40))  # the expiry fires: no alert, the copy waits for Safety Net's hold now
    assert not harness.alerts
    state = snapshot.load(harness.states["mbx01"][0])
    assert message_where(state, "m1")["deadlines"] == [{"kind": "expire", "at_ms": at(1) + (2 * 24 * 60 + 30) * MINUTE}]
    check_state_view(harness.view, {"mbx01": state})


def test_a_message_that_comes_and_goes_within_one_call_gets_no_record_and_one_held_before_a_tombstone():
    """m1 is received, shadowed, delivered and discarded within one batch: its key never had a value, and
    it gets no tombstone either (they were 99.8 % of the state topic's keys). m2, held across batches,
    gets its record and then its tombstone."""
    org = Org()
    harness = OperatorHarness(model_config_from({}), servers=())
    harness.events([*org.started("mbx01", "dbP1", 0), *org.received("mbx01", "m2", 0.5),
                    *org.shadowed("mbx01", "mbx02", "m2", 0.5)])
    harness.events([*org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
                    *org.sent("mbx01", "m1", "hop1", 1), *org.acked("mbx01", "m1", "hop1", 1),
                    *org.sent("mbx01", "m2", "hop1", 1), *org.acked("mbx01", "m2", "hop1", 1),
                    *org.query_ok("mbx02", "mbx01", 1.5, discarded=("m1", "m2"))])
    written = [(key, value is None) for key, value in harness.state_rows if key.startswith("message/")]
    assert written == [("message/mbx01/m2", False), ("message/mbx01/m2", True)]
    assert harness.view.messages == {}
