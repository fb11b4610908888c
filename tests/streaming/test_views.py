"""What an operator sees of a real twin run (real Kafka, real Spark, `TwinApplication`): the state
topic read by `shadowtwin where` and `shadowtwin server`, the Prometheus endpoint scraped while the
twin runs, and the live page loaded in headless Chromium (a screenshot saved). All are checked
against the reference engine's state for the same events."""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
import uuid
from html.parser import HTMLParser
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from infra.settings import PROJECT_ROOT, TopicSettings
from infra.topics import create_topics
from schemas.events import ShadowFailureReason
from state.replay import replay
from streaming.app import TwinApplication
from streaming.views import read_state
from tests.state.scenario import Org, at
from tests.streaming.harness import check_state_view
from tests.streaming.test_twin import publish, twin_settings

pytestmark = pytest.mark.integration
SERVERS = ("mbx01", "mbx02", "mbx03")
DELAY_S = 60
SCREENSHOT = PROJECT_ROOT / ".run" / "screenshots" / "live-page.png"


def topology_events() -> list:
    """dag1 (site1): mbx01 takes m1, m2 (copies on mbx02) and m3 (no peer: not redundant), then
    dies; mbx02's queries fail until its shadows are promoted. dag2 (site2): mbx03 takes m4, its
    copy on mbx02, which queries it every 2 minutes."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbP2", 0),
              *org.started("mbx03", "dbP3", 0, site="site2", dag="dag2"),
              *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
              *org.received("mbx01", "m2", 2), *org.shadowed("mbx01", "mbx02", "m2", 2),
              *org.received("mbx01", "m3", 3, recipients=("bob@contoso.com", "carol@contoso.com")),
              *org.sent("mbx01", "m3", "mbx-db7", 3, fork="f1", recipients=("bob@contoso.com",)),
              *org.shadow_failed("mbx01", "m3", 3, reason=ShadowFailureReason.NO_PEER, candidate=""),
              *org.received("mbx03", "m4", 3), *org.shadowed("mbx03", "mbx02", "m4", 3, db="dbP3"),
              *org.query_ok("mbx02", "mbx01", 4),
              *org.heartbeats_failing("mbx02", "mbx01", 6, 200)]
    for minute in range(4, 200, 2):
        events += org.query_ok("mbx02", "mbx03", minute, db="dbP3")
    return sorted(events, key=lambda e: e.event_time_ms)


@pytest.fixture(scope="module")
def run(settings, spark, kafka_bootstrap, tmp_path_factory):
    """The twin over the topology's events, running while the module's tests look at it."""
    suffix = "views-" + uuid.uuid4().hex[:8]
    topics = TopicSettings(events=f"test.events.{suffix}", alerts=f"test.alerts.{suffix}",
                           commands=f"test.commands.{suffix}", dead_letters=f"test.dead-letters.{suffix}",
                           state=f"test.state.{suffix}", events_partitions=2, commands_partitions=2)
    create_topics(kafka_bootstrap, topics)
    events = topology_events()
    publish(kafka_bootstrap, topics.events, events)
    watermark_ms = max(e.event_time_ms for e in events) - DELAY_S * 1000
    reference = replay(events, until_ms=watermark_ms)
    twin = TwinApplication(twin_settings(settings, kafka_bootstrap, topics, delay_s=DELAY_S, servers=SERVERS),
                           spark=spark, ticks=False, checkpoint_dir=tmp_path_factory.mktemp("views") / "checkpoint",
                           say=lambda line: None)
    with twin:
        assert twin.views is not None, "the twin serves its views"
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not (twin.watermark_ms == watermark_ms and (twin.progress.last_progress or {}).get("numInputRows") == 0):
            time.sleep(0.5)
        assert twin.watermark_ms == watermark_ms, "the twin read every event"
        yield dataclasses.make_dataclass("Run", ["twin", "topics", "events", "reference", "watermark_ms", "bootstrap"])(
            twin, topics, events, reference, watermark_ms, kafka_bootstrap)


def settled_view(run, timeout_s: float = 60.0):
    """The state topic, once it tells what the reference's states tell (the last batch's rows are written)."""
    deadline = time.monotonic() + timeout_s
    while True:
        view = read_state(run.bootstrap, run.topics.state)
        try:
            check_state_view(view, run.reference.states)
            return view
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def shadowtwin(run, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, SHADOWTWIN_TOPICS_STATE=run.topics.state)
    return subprocess.run([sys.executable, "-m", "shadowtwin", *args, "--bootstrap", run.bootstrap],
                          capture_output=True, text=True, env=env, timeout=120)


def test_where_and_server_answer_from_the_running_twins_state(run):
    view = settled_view(run)
    assert set(view.servers) == set(SERVERS), "a summary per server that has spoken"
    promoted = shadowtwin(run, "where", "<m1@contoso.com>")
    assert promoted.returncode == 0, promoted.stderr
    assert "<m1@contoso.com> (internal id m1) on primary mbx01: promoted" in promoted.stdout
    assert "promoted: its shadow on mbx02 took it over" in promoted.stdout
    unprotected = shadowtwin(run, "where", "m3", "--json")
    [record] = [json.loads(line) for line in unprotected.stdout.splitlines()]
    assert (record["status"], record["redundancy"], record["shadow"]) == ("in_queue", "not_redundant", None)
    assert record["forks"] == [{"fork": "f1", "next_hop": "mbx-db7", "recipients": ["bob@contoso.com"],
                                "status": "pending"}]
    assert [d["kind"] for d in record["deadlines"]] == ["expire"]
    copied = shadowtwin(run, "where", "<m4@contoso.com>")
    assert "on primary mbx03: in_queue" in copied.stdout and "shadow copy: on mbx02 (held" in copied.stdout
    assert "deadline promote at" in copied.stdout
    missing = shadowtwin(run, "where", "<nobody@contoso.com>")
    assert (missing.returncode, missing.stdout) == (1, "")
    assert missing.stderr.strip() == "<nobody@contoso.com>: the twin holds nothing of it (delivered and released," \
                                     " or never seen)"
    holder = shadowtwin(run, "server", "mbx02")
    assert holder.returncode == 0, holder.stderr
    assert "it holds shadow copies for: mbx03 1" in holder.stdout
    assert re.search(r"pair mbx02 -> mbx03: 1 copies, last query 2026-\S+, last contact", holder.stdout)
    primary = json.loads(shadowtwin(run, "server", "mbx01", "--json").stdout)
    expected = run.reference.states["mbx01"]
    assert primary["summary"]["promoted"] == len(expected.promoted) == 2
    assert primary["summary"]["not_redundant"] == 1 and primary["summary"]["expected_duplicates"] == 2
    unknown = shadowtwin(run, "server", "mbx99")
    assert unknown.returncode == 1 and unknown.stderr.count("\n") == 1 and "mbx99" in unknown.stderr


def scrape(run) -> dict[tuple[str, tuple], float]:
    with urllib.request.urlopen(run.twin.views.url + "metrics", timeout=10) as response:
        text = response.read().decode()
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def test_the_prometheus_endpoint_tells_what_the_twin_decided(run):
    settled_view(run)
    alerts = collections.Counter(a.type.value for a in run.reference.alerts)
    commands = collections.Counter(c.reason.value for c in run.reference.commands)
    deadline = time.monotonic() + 60
    while True:  # the views read the output topics as the twin writes them
        metrics = scrape(run)
        got = {labels[0][1]: v for (name, labels), v in metrics.items() if name == "shadowtwin_alerts_total"}
        if got == alerts and metrics.get(("shadowtwin_messages_promoted", (("server", "mbx01"),))) == 2 \
                or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert got == alerts
    assert {labels[0][1]: v for (name, labels), v in metrics.items() if name == "shadowtwin_commands_total"} == commands
    state = run.reference.states
    for server in ("mbx01", "mbx03"):
        labels = (("server", server),)
        assert metrics[("shadowtwin_messages_in_flight", labels)] == len(state[server].messages)
        assert metrics[("shadowtwin_messages_promoted", labels)] == len(state[server].promoted)
    assert metrics[("shadowtwin_messages_not_redundant", (("server", "mbx01"),))] == 1
    assert metrics[("shadowtwin_expected_duplicates", (("server", "mbx01"),))] == 2
    assert metrics[("shadowtwin_shadow_copies", (("holder", "mbx02"), ("server", "mbx03")))] == 1
    pair = state["mbx03"].pairs["mbx02"]
    assert metrics[("shadowtwin_heartbeat_last_contact_timestamp_seconds", (("server", "mbx03"), ("shadow", "mbx02")))] \
        == pair.last_contact_ms / 1000
    assert metrics[("shadowtwin_input_rows_total", ())] == len(run.events)
    assert metrics[("shadowtwin_batches_total", ())] >= 1 and metrics[("shadowtwin_late_events_total", ())] == 0
    assert metrics[("shadowtwin_watermark_timestamp_seconds", ())] == run.watermark_ms / 1000
    assert metrics[("shadowtwin_watermark_lag_seconds", ())] >= (time.time() * 1000 - run.watermark_ms) / 1000 - 60
    assert metrics[("shadowtwin_state_rows", ())] >= 3, "at least a version row per primary"
    assert ("shadowtwin_dead_letters_total", ()) not in metrics, "no dead letter, so no sample"


class _Page(HTMLParser):
    """The page's data attributes: per server card its figures, per group its servers, the alert rows."""

    def __init__(self) -> None:
        super().__init__()
        self.groups: dict[tuple[str, str], list[str]] = {}
        self.figures: dict[str, dict[str, str]] = {}
        self.alerts: list[str] = []
        self._group: tuple[str, str] | None = None
        self._server: str | None = None

    def handle_starttag(self, tag, attrs) -> None:
        a = dict(attrs)
        if "data-dag" in a:
            self._group = (a["data-dag"], a["data-site"])
            self.groups[self._group] = []
        elif "data-server" in a:
            self._server = a["data-server"]
            self.groups[self._group].append(self._server)
            self.figures[self._server] = {}
        elif "data-alert" in a:
            self.alerts.append(a["data-alert"])
        for name, value in a.items():
            if self._server and name.startswith("data-") and name not in ("data-server",):
                self.figures[self._server].setdefault(name[5:], value)


def chromium(*args: str) -> subprocess.CompletedProcess:
    binary = shutil.which("chromium")
    assert binary, "Debian's chromium is not installed: `make test` installs it (scripts/chromium)"
    return subprocess.run([binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                           "--hide-scrollbars", *args], capture_output=True, text=True, timeout=120)


def test_the_live_page_in_headless_chromium(run):
    settled_view(run)
    deadline = time.monotonic() + 60
    while True:  # the views have read what the twin wrote
        dom = chromium("--dump-dom", run.twin.views.url)
        assert dom.returncode == 0, dom.stderr[-2000:]
        page = _Page()
        page.feed(dom.stdout)
        if page.figures.get("mbx01", {}).get("promoted") == "2" or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert page.groups == {("dag1", "site1"): ["mbx01", "mbx02"], ("dag2", "site2"): ["mbx03"]}
    state = run.reference.states
    for server in ("mbx01", "mbx03"):
        figures = page.figures[server]
        assert figures["queue"] == str(sum(1 for m in state[server].messages.values() if m.primary_done_ms is None))
        assert figures["promoted"] == str(len(state[server].promoted))
    assert page.figures["mbx01"]["not-redundant"] == "1" and "pair" not in page.figures["mbx01"], "all promoted"
    assert page.figures["mbx03"]["holder"] == "mbx02" and page.figures["mbx03"]["pair"] == "mbx02"
    assert page.figures["mbx02"]["shadow-queue"] == "mbx03", "mbx02's shadow queue for mbx03"
    assert set(page.alerts) == {a.alert_id for a in run.reference.alerts}
    assert '<meta http-equiv="refresh"' in dom.stdout, "it reloads itself"
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    SCREENSHOT.unlink(missing_ok=True)
    shot = chromium(f"--screenshot={SCREENSHOT}", "--window-size=1280,1150", run.twin.views.url)
    assert shot.returncode == 0 and SCREENSHOT.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", shot.stderr[-2000:]
    print(f"screenshot: {SCREENSHOT}")
