"""The metrics collector over a live view (unit: no broker, no Spark), and the Grafana dashboard
that shows its metrics."""

from __future__ import annotations

import json
import re

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from infra.settings import PROJECT_ROOT, TopicSettings
from schemas.codec import encode
from schemas.events import Alert, AlertType, CommandReason, DeadLetter, MessageRef, RedeliveryCommand, Severity
from schemas.events import AlertMessage
from state.model import ShadowRedundancyModel
from state.summary import summary_records, to_json
from streaming.metrics import TwinCollector
from streaming.views import LiveView
from tests.state.scenario import Org

TOPICS = TopicSettings()
PROGRESS = {"batchId": 7, "numInputRows": 10, "inputRowsPerSecond": 5.0, "processedRowsPerSecond": 50.0,
            "durationMs": {"triggerExecution": 1500}, "eventTime": {"watermark": "2026-01-01T00:10:00.000Z"},
            "stateOperators": [{"numRowsTotal": 3, "memoryUsedBytes": 4096}],
            "sources": [{"endOffset": {"t": {"0": 5}}, "latestOffset": {"t": {"0": 9}}}]}


def live_view() -> LiveView:
    org = Org()
    model = ShadowRedundancyModel()
    state = model.new_state("mbx01")
    events = [*org.started("mbx01", "dbP1", 0), *org.received("mbx01", "m1", 1),
              *org.shadowed("mbx01", "mbx02", "m1", 1), *org.query_ok("mbx02", "mbx01", 2)]
    model.on_events(state, events)
    view = LiveView(recent_alerts=2)
    for key, record in summary_records(state, ["m1"]):
        view.apply(TOPICS.state, key.encode(), to_json(record), TOPICS)
    ref = MessageRef("<m1@contoso.com>", "m1")
    for n, kind in enumerate((AlertType.NOT_REDUNDANT, AlertType.NOT_REDUNDANT, AlertType.MESSAGE_AT_RISK)):
        alert = Alert(alert_id=f"a{n}", type=kind, severity=Severity.WARNING, servers=("mbx01",),
                      messages=(AlertMessage(ref),), reason="why", decided_at_ms=1000 * n)
        view.apply(TOPICS.alerts, b"mbx01", encode(alert), TOPICS)
    command = RedeliveryCommand(command_id="c1", holder="mbx02", primary_server="mbx01", message=ref,
                                reason=CommandReason.PRIMARY_HEARTBEAT_TIMEOUT, decided_at_ms=5)
    view.apply(TOPICS.commands, b"mbx02", encode(command), TOPICS)
    letter = DeadLetter(original=b"x", topic="events", partition=0, offset=3, reason="corrupt body: trailing bytes",
                        at_ms=9)
    view.apply(TOPICS.dead_letters, None, encode(letter), TOPICS)
    view.apply(TOPICS.alerts, None, b"garbage", TOPICS)
    return view


def samples(view: LiveView, progress=(PROGRESS, 4, 40, 2)) -> dict:
    registry = CollectorRegistry()
    registry.register(TwinCollector(view, lambda: progress))
    text = generate_latest(registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_per_server_figures_totals_by_type_and_the_query():
    got = samples(live_view())
    server = (("server", "mbx01"),)
    assert got[("shadowtwin_messages_in_flight", server)] == 1 and got[("shadowtwin_queue_messages", server)] == 1
    assert got[("shadowtwin_shadow_copies", (("holder", "mbx02"), ("server", "mbx01")))] == 1
    assert got[("shadowtwin_server_info", (("dag", "dag1"), ("mode", "EXCHANGE_2013"), ("server", "mbx01"),
                                           ("site", "site1")))] == 1
    assert got[("shadowtwin_heartbeat_last_contact_timestamp_seconds", (("server", "mbx01"), ("shadow", "mbx02")))] \
        == 1767225720.0  # minute 2: its discard query
    assert got[("shadowtwin_alerts_total", (("type", "NOT_REDUNDANT"),))] == 2
    assert got[("shadowtwin_alerts_total", (("type", "MESSAGE_AT_RISK"),))] == 1
    assert got[("shadowtwin_commands_total", (("reason", "PRIMARY_HEARTBEAT_TIMEOUT"),))] == 1
    assert got[("shadowtwin_dead_letters_total", (("reason", "corrupt body"),))] == 1
    assert (got[("shadowtwin_batches_total", ())], got[("shadowtwin_input_rows_total", ())],
            got[("shadowtwin_late_events_total", ())]) == (4, 40, 2)
    assert got[("shadowtwin_batch_duration_seconds", ())] == 1.5 and got[("shadowtwin_source_lag_records", ())] == 4
    assert got[("shadowtwin_watermark_timestamp_seconds", ())] == 1767226200.0
    assert got[("shadowtwin_state_rows", ())] == 3 and got[("shadowtwin_state_memory_bytes", ())] == 4096


def test_before_the_first_batch_only_the_totals():
    got = samples(LiveView(), progress=(None, 0, 0, 0))
    assert {name for name, _ in got} == {"shadowtwin_batches_total", "shadowtwin_input_rows_total",
                                         "shadowtwin_late_events_total"}


def test_the_recent_alerts_are_the_latest_newest_first():
    view = live_view()
    assert [a.alert_id for a in view.snapshot()["recent_alerts"]] == ["a2", "a1"]
    assert set(view.topology.servers) == {"mbx01"} and view.topology.messages == {}, "no record per message kept"
    assert view.undecodable == 1


def test_the_grafana_dashboard_shows_only_metrics_the_twin_exposes():
    dashboard = json.loads((PROJECT_ROOT / "docs" / "grafana" / "shadowtwin.json").read_text())
    exposed = {name for name, _ in samples(live_view())}
    used = {m for panel in dashboard["panels"] for target in panel["targets"]
            for m in re.findall(r"shadowtwin_[a-z_]+", target["expr"])}
    assert used and used <= exposed, used - exposed
    assert {"shadowtwin_alerts_total", "shadowtwin_watermark_lag_seconds", "shadowtwin_messages_at_risk"} <= used
