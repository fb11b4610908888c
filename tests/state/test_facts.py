"""The facts every group shares: every NodeStarted, and one NodeSeen per server and bucket."""

from schemas import events as ev
from state.facts import NodeSeen, shared_facts
from tests.state.scenario import MINUTE, Org, at


def test_one_node_seen_per_server_and_bucket_stamped_with_its_first_event():
    org = Org()
    events = [*org.started("mbx01", "db1", 0), *org.received("mbx01", "m1", 0.5), *org.received("mbx01", "m2", 1.2),
              *org.query_ok("mbx02", "mbx01", 0.7), *org.tick(0.9)]
    facts = list(shared_facts(sorted(events, key=lambda e: e.event_time_ms), MINUTE))
    assert [type(f) for f in facts][:1] == [ev.NodeStarted]
    seen = [(f.node, f.event_time_ms) for f in facts if isinstance(f, NodeSeen)]
    assert seen == [("mbx01", at(0)), ("mbx02", at(0.7)), ("mbx01", at(1.2))]
    assert len({f.event_id for f in facts}) == len(facts), "ids name the bucket: a repeat is recognised"
