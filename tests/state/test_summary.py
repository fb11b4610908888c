"""The state summary (state/summary.py): what a group's state says about its server and each message."""

import pytest

from schemas.events import AlertType
from state.model import ShadowRedundancyModel
from state.summary import TopologyView, message_key, message_where, server_key, server_summary, summary_records, \
    touched_messages
from state.replay import replay
from tests.state import timelines
from tests.state.scenario import DAY, HOUR, Org, at


def run(events, until_ms=None):
    model = ShadowRedundancyModel()
    state = model.new_state("mbx01")
    output = model.on_events(state, events)
    if until_ms is not None:
        output.extend(model.on_time(state, until_ms))
    return state, output


def primary_dies(org):
    return [
        *org.started("mbx01", "dbP1", 0),
        *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
        *org.received("mbx01", "m2", 2), *org.shadowed("mbx01", "mbx02", "m2", 2),
        *org.received("mbx01", "m3", 3), *org.sent("mbx01", "m3", "hop1", 3, fork="f1"),
        *org.query_ok("mbx02", "mbx01", 4),
        *org.heartbeats_failing("mbx02", "mbx01", 6, 4 * 60),
    ]


def test_a_primary_with_copies_on_its_shadow():
    state, _ = run([e for e in primary_dies(Org()) if e.event_time_ms <= at(4)])
    summary = server_summary(state)
    assert summary["server"] == "mbx01" and summary["dag"] == "dag1" and summary["ad_site"] == "site1"
    assert summary["queue_db_id"] == "dbP1" and summary["event_time_ms"] == at(4)
    assert (summary["messages_in_flight"], summary["queue"]) == (3, 3)
    assert summary["shadow_copies_by_holder"] == {"mbx02": 2}
    assert (summary["not_redundant"], summary["at_risk"], summary["promoted"]) == (0, 0, 0)
    [pair] = summary["pairs"]
    assert (pair["shadow"], pair["held"], pair["last_contact_ms"], pair["silent"]) == ("mbx02", 2, at(4), False)
    assert summary["pending_deadlines"]["promote"] == {"count": 1, "next_ms": at(4) + 3 * HOUR}
    assert summary["pending_deadlines"]["expire"]["count"] == 3


def test_where_a_message_is_before_and_after_its_shadow_takes_over():
    events = primary_dies(Org())
    state, _ = run([e for e in events if e.event_time_ms <= at(4)])
    m1 = message_where(state, "m1")
    assert (m1["status"], m1["message_id"], m1["primary"]) == ("in_queue", "<m1@contoso.com>", "mbx01")
    assert m1["shadow"] == {"server": "mbx02", "held": True, "locality": "UNKNOWN"}
    assert [d["kind"] for d in m1["deadlines"]] == ["expire"], "the pair's deadlines are in the summary"
    view = TopologyView()
    for key, record in summary_records(state, ["m1"]):
        view.apply(key, record)
    [joined] = view.where("m1")
    assert {"kind": "promote", "at_ms": at(4) + 3 * HOUR, "shadow": "mbx02"} in joined["deadlines"]
    m3 = message_where(state, "m3")
    assert m3["forks"] == [{"fork": "f1", "next_hop": "hop1", "recipients": ["alice@contoso.com"], "status": "pending"}]
    assert m3["shadow"] is None
    state, output = run(events, until_ms=at(4) + 3 * HOUR + 1)
    assert any(a.type is AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED for a in output.alerts)
    m1 = message_where(state, "m1")
    assert m1["status"] == "promoted" and m1["promoted"]["holder"] == "mbx02"
    summary = server_summary(state)
    assert summary["promoted"] == 2 and summary["promoted_by_holder"] == {"mbx02": 2}
    assert summary["expected_duplicates"] == 2, "the primary's database still holds them"


def test_a_processed_message_whose_discard_events_were_dropped_waits_for_its_copy_to_expire():
    org = Org()
    events = [*org.received("mbx01", "m1", 0), *org.shadowed("mbx01", "mbx02", "m1", 0),
              *org.query_ok("mbx02", "mbx01", 1), *org.delivered("mbx01", "m1", "mbx03", 2)]
    state, _ = run(events)
    assert message_where(state, "m1")["status"] == "processed, shadow copy awaiting discard"
    state, _ = run(events, until_ms=at(1) + 2 * DAY + 1)
    assert message_where(state, "m1")["status"] == "processed, shadow copy unacknowledged until it expires"
    [pair] = server_summary(state)["pairs"]
    assert (pair["held"], pair["pending_discards"]) == (1, 0)


def test_a_processed_message_whose_silent_shadow_will_see_its_primarys_new_database_is_to_be_resubmitted():
    """Timeline a_primary_back_with_a_new_database_keeps_no_discard_notification_for_its_silent_shadow: m1's
    notification went with dbP1, and mbx02 resubmits its copy when it sees dbP2. Before, `where` said the copy
    stayed unacknowledged until it expired."""
    timeline = timelines.a_primary_back_with_a_new_database_keeps_no_discard_notification_for_its_silent_shadow()
    state = replay([e for e in timeline.events if e.event_time_ms <= at(600)], timeline.config).states["mbx01"]
    assert message_where(state, "m1")["status"] == \
        "processed, shadow copy resubmitted when its shadow sees the new queue database"


@pytest.mark.parametrize("given", ["<m1@contoso.com>", "m1@contoso.com", " <m1@contoso.com> ", "m1"])
def test_a_message_is_found_by_its_message_id_with_or_without_its_angle_brackets(given):
    """`where m1@contoso.com` (the Message-ID as pasted without its brackets) said the twin held nothing of it."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.received("mbx01", "m1", 1)]
    state, output = run(events)
    view = TopologyView()
    for key, record in summary_records(state, touched_messages(events, output.alerts, output.commands)):
        view.apply(key, record)
    assert [r["internal_id"] for r in view.where(given)] == ["m1"]


def test_a_delivered_message_leaves_a_tombstone_and_the_view_forgets_it():
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.received("mbx01", "m1", 1),
              *org.shadowed("mbx01", "mbx02", "m1", 1)]
    state, output = run(events)
    view = TopologyView()
    for key, record in summary_records(state, touched_messages(events, output.alerts, output.commands)):
        view.apply(key, record)
    assert [r["internal_id"] for r in view.where("<m1@contoso.com>")] == ["m1"]
    assert view.server("mbx02")["holds_shadow_copies_for"] == {"mbx01": 1}
    done = [*org.sent("mbx01", "m1", "hop1", 2), *org.acked("mbx01", "m1", "hop1", 3),
            *org.query_ok("mbx02", "mbx01", 4, discarded=("m1",))]
    model = ShadowRedundancyModel()
    output = model.on_events(state, done)
    closed = [o.ref.internal_id for o in output.outcomes]
    records = dict(summary_records(state, touched_messages(done, output.alerts, output.commands, closed)))
    assert records[message_key("mbx01", "m1")] is None, "released: a tombstone"
    for key, record in records.items():
        view.apply(key, record)
    assert view.where("m1") == [] and view.servers["mbx01"]["messages_in_flight"] == 0
    assert view.server("mbx02") is None, "it holds nothing for anybody now"
    assert server_key("mbx01") in records
    assert view.server("nobody") is None


def test_a_server_name_with_a_slash_keeps_its_messages_apart_from_another_servers():
    # Primary `a/b` holding `c` and primary `a` holding `b/c` were one key, `message/a/b/c`: compaction kept one of the
    # two records, and the tombstone of either erased the other's.
    org, model, view, keys = Org(), ShadowRedundancyModel(), TopologyView(), {}
    for primary, internal_id in (("a/b", "c"), ("a", "b/c")):
        state = model.new_state(primary)
        events = [*org.started(primary, "db", 0), *org.received(primary, internal_id, 1)]
        output = model.on_events(state, events)
        records = dict(summary_records(state, touched_messages(events, output.alerts, output.commands)))
        [keys[primary]] = [key for key in records if key != server_key(primary)]
        for key, record in records.items():
            view.apply(key, record)
    assert keys == {"a/b": "message/a%2Fb/c", "a": "message/a/b/c"}
    assert message_key("100%/x", "y") == "message/100%25%2Fx/y", "the escape character is escaped too"
    assert [r["primary"] for r in view.where("c")] == ["a/b"] and [r["primary"] for r in view.where("b/c")] == ["a"]
    view.apply(keys["a"], None)
    assert [r["primary"] for r in view.where("c")] == ["a/b"], "the other server's message is still held"


def test_records_are_sorted_compact_json_as_the_standard_library_writes_it():
    import json

    from state.summary import to_json

    state, _ = run([e for e in primary_dies(Org()) if e.event_time_ms <= at(4)])
    for _, record in summary_records(state, ["m1", "m3"]):
        assert to_json(record) == json.dumps(record, sort_keys=True, separators=(",", ":")).encode()
    accented = {"recipients": ["jürgen@contoso.com", "名前@contoso.com"], "kind": "message"}
    assert json.loads(to_json(accented)) == accented
    assert to_json(None) is None, "a tombstone stays one"


def test_a_fork_that_failed_for_good_is_said_to_have_failed_not_to_be_acknowledged():
    """m1's fork f1 to gw-fabrikam was acknowledged at 1.5; gw-tailspin refused f2 for good at 2.5 (mbx01 expired
    that fork: bob has a non-delivery report, not the message). Before, `where` said of f2 'acknowledged', as if
    bob had m1; now 'failed'. m1 is processed, its copy on mbx02 awaiting the discard status."""
    refused = timelines.a_fork_that_failed_for_good_is_resubmitted_by_a_shadow_that_had_no_discard_notification_for_it
    state, _ = run([e for e in refused().events if e.event_time_ms <= at(3)])
    m1 = message_where(state, "m1")
    assert [(f["fork"], f["recipients"], f["status"]) for f in m1["forks"]] == [
        ("f1", ["a@fabrikam.com"], "acknowledged"), ("f2", ["bob@tailspin.com"], "failed")]
    assert m1["status"] == "processed, shadow copy awaiting discard"


def test_where_names_a_failed_fork_without_a_next_hop_and_an_unnamed_one_as_such():
    """`where` printed the failed fork f2 as 'fork f2 ->  (bob@tailspin.com): failed' (no next hop has it) and a fork
    known from its discard notification alone as 'fork f3 -> None (): acknowledged'."""
    from shadowtwin.where_cmd import describe_message

    refused = timelines.a_fork_that_failed_for_good_is_resubmitted_by_a_shadow_that_had_no_discard_notification_for_it
    state, _ = run([e for e in refused().events if e.event_time_ms <= at(3)])
    m1 = message_where(state, "m1")
    unnamed = {"fork": "f3", "next_hop": None, "recipients": [], "status": "acknowledged"}
    text = describe_message({**m1, "forks": [*m1["forks"], unnamed]})
    assert "  fork f1 -> gw-fabrikam (a@fabrikam.com): acknowledged\n" in text
    assert "  fork f2 (bob@tailspin.com): failed\n" in text
    assert "  fork f3, next hop not named yet: acknowledged" in text
