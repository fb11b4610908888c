"""`whatif --report`, `--truth`, `--json` and its progress, as an operator runs them."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest

from infra.settings import load_settings
from producers.simulator.run import to_file
from shadowtwin.whatif_cmd import StderrProgress, run_whatif
from shadowtwin.whatif_report import outages
from tests.producers.simulator.scenarios import topology
from tests.shadowtwin.test_whatif import outage_recording, whatif
from producers.recording import read_events, write_events
from tests.state.scenario import T0, Org

SVG = "{http://www.w3.org/2000/svg}"


class Figures(HTMLParser):
    """The <svg> elements of a page, as text."""

    def __init__(self, html: str):
        super().__init__()
        self.svgs: list[str] = []
        self.title = ""
        self._in_title = False
        self.feed(html)
        start = 0
        while (begin := html.find("<svg", start)) >= 0:
            end = html.index("</svg>", begin) + len("</svg>")
            self.svgs.append(html[begin:end])
            start = end

    def handle_starttag(self, tag, attrs):
        self._in_title = tag == "title" and not self.title

    def handle_data(self, data):
        if self._in_title:
            self.title += data


def test_report_has_three_plots_and_a_parseable_summary(tmp_path):
    recording = tmp_path / "outage.jsonl"
    outage_recording(recording)
    result = whatif(recording, "--compare", "ShadowResubmitTimeSpan=01:00:00", "--report", tmp_path / "report")
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    delays = summary["end_to_end_delay_ms"]
    assert delays["baseline"]["max"] > 3 * 3_600_000 > delays["ShadowResubmitTimeSpan=01:00:00"]["max"] > 3_600_000
    assert [sum(counts) for counts in summary["delay_histogram"].values()] == [3, 3]
    assert summary["delay_histogram"]["baseline"] != summary["delay_histogram"]["ShadowResubmitTimeSpan=01:00:00"]
    assert summary["promoted_per_hour"]["baseline"] == [0, 0, 0, 3, 0]
    assert summary["promoted_per_hour"]["ShadowResubmitTimeSpan=01:00:00"] == [0, 3, 0, 0, 0]
    [outage] = summary["outages"]["mbx01"]
    assert outage["to_ms"] - outage["from_ms"] > 4 * 3_600_000, "mbx01 was silent from its crash to its restart"
    page = Figures((tmp_path / "report" / "report.html").read_text())
    assert page.title == "shadowtwin what-if report" and len(page.svgs) == 3
    histogram, over_time, outages = (ET.fromstring(svg) for svg in page.svgs)
    bars = [r for r in histogram.iter(f"{SVG}rect") if r.get("class") == "bar"]
    assert len(bars) == 2 * 9 and sum(float(b.get("height")) > 0 for b in bars) == 2, "3 messages, one bucket each"
    assert len([p for p in over_time.iter(f"{SVG}polyline")]) == 4, "promoted and at risk, per parameter set"
    assert len([r for r in outages.iter(f"{SVG}rect") if r.get("class") == "outage"]) == 1


def test_every_legend_entry_is_inside_its_plot_and_above_what_it_explains(tmp_path):
    """Before: the fourth entry of the per-hour plot, `at risk, ShadowResubmitTimeSpan=01:00:00`, began at x = 668 of
    760 and was cut off."""
    recording = tmp_path / "outage.jsonl"
    outage_recording(recording)
    result = whatif(recording, "--compare", "ShadowResubmitTimeSpan=01:00:00", "--report", tmp_path / "report")
    assert result.returncode == 0, result.stderr
    page = Figures((tmp_path / "report" / "report.html").read_text())
    histogram, over_time, _ = (ET.fromstring(svg) for svg in page.svgs)
    for plot, names in ((histogram, ["baseline", "ShadowResubmitTimeSpan=01:00:00"]),
                        (over_time, [f"{what}, {run}" for what in ("promoted", "at risk")
                                     for run in ("baseline", "ShadowResubmitTimeSpan=01:00:00")])):
        width = float(plot.get("width"))
        plot_top = min(float(line.get("y1")) for line in plot.iter(f"{SVG}line") if line.get("stroke") == "black")
        elements = list(plot.iter())
        swatches = [i for i, e in enumerate(elements)
                    if e.tag == f"{SVG}rect" and e.get("width") == e.get("height") == "10"]
        labels = [next(e for e in elements[i:] if e.tag == f"{SVG}text") for i in swatches]
        assert [label.text for label in labels] == names
        for i, label in zip(swatches, labels):
            assert float(label.get("x")) + 6.0 * len(label.text) <= width, (label.text, label.get("x"))
            assert float(elements[i].get("y")) + 10 <= plot_top, (label.text, "over the plot")


def test_progress_says_what_was_read_and_replayed(tmp_path):
    recording = tmp_path / "outage.jsonl"
    outage_recording(recording)
    lines: list[str] = []
    run_whatif(load_settings(), recording, [], ["ShadowResubmitTimeSpan=01:00:00"], None, say=lambda _: None,
               report=tmp_path / "report", progress=lambda line, final=False: lines.append(line))
    assert lines[0] == f"read 315 events from {recording}"
    assert "replaying baseline: 1/1 servers" in lines and "replayed baseline: 2 alerts, 3 commands" in lines
    assert "replayed ShadowResubmitTimeSpan=01:00:00: 2 alerts, 3 commands" in lines
    assert lines[-1] == f"report written to {tmp_path / 'report' / 'report.html'}"


def test_progress_on_stderr_is_quiet_for_a_short_run_and_paced_for_a_long_one(capsys, monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    progress = StderrProgress(every_s=2.0, always=True)
    progress("read 100,000 events")
    progress("done", final=True)
    assert capsys.readouterr().err == "", "nothing in the first two seconds"
    clock[0] += 2.5
    progress("read 200,000 events")
    clock[0] += 0.5
    progress("read 300,000 events")
    progress("read them all", final=True)
    assert capsys.readouterr().err.splitlines() == ["read 200,000 events", "read them all"]
    quiet = StderrProgress(every_s=0.0)  # stderr is no terminal here
    quiet("read 100,000 events")
    assert capsys.readouterr().err == ""


def test_json_is_one_object_with_both_summaries_each_figure_named_with_its_unit_and_documented(tmp_path):
    """Before: `delay_ms` was a bare list of four numbers, named nowhere."""
    recording = tmp_path / "outage.jsonl"
    outage_recording(recording)
    result = whatif(recording, "--compare", "ShadowResubmitTimeSpan=01:00:00", "--json")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert [s["promoted_messages"] for s in out["summaries"]] == [3, 3] and out["skewed_events"] == 0
    baseline, shorter = out["summaries"]
    assert baseline["delay_per_hop_ms"] == {"count": 3, "p50": 10_860_000, "p90": 10_860_000, "p99": 10_860_000,
                                            "max": 10_860_000}
    assert shorter["delay_per_hop_ms"]["max"] == 3_660_000, "the 1 h span + the minute before the heartbeats failed"
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    documented = set(re.findall(r"`([a-z_0-9]+)`", readme.split("## What-if reports")[1].split("\n## ")[0]))
    keys = {*out, *baseline, *baseline["delay_per_hop_ms"]}
    assert keys <= documented, f"not in the README's What-if reports: {sorted(keys - documented)}"


def test_a_simulated_day_is_scored_against_its_truth(tmp_path):
    day = topology([{"kind": "crash", "server": "mbx01", "at": "02:00:00", "duration": "03:30:00",
                     "restart": "same_database", "backlog": "00:05:00"}], duration="1.00:00:00", rate=0.02)
    outcome = to_file(day, seed=3, path=tmp_path / "day.avro")
    lines: list[str] = []
    assert run_whatif(load_settings(), tmp_path / "day.avro", [], [], None, say=lines.append,
                      truth=outcome.truth_path, report=tmp_path / "report", as_json=True,
                      progress=lambda line, final=False: None) == 0
    scored = json.loads(lines[0])["score"]
    promotions, duplicates = scored["promotions"], scored["duplicates"]
    assert promotions["real"] > 0 and promotions["found"] == promotions["real"] == promotions["predicted"]
    assert promotions["missed"] == promotions["false"] == 0
    assert duplicates["real"] > 0 and duplicates["found"] == duplicates["real"] and duplicates["false"] == 0
    assert scored["false_alerts"] == {}
    assert json.loads((tmp_path / "report" / "summary.json").read_text())["score"] == scored


def test_a_file_that_is_no_truth_is_refused_in_one_line(tmp_path):
    recording = tmp_path / "outage.jsonl"
    outage_recording(recording)
    (tmp_path / "truth.jsonl").write_text('{"kind": "summary"}\n{"no": "message id"}\n')
    result = whatif(recording, "--truth", tmp_path / "truth.jsonl")
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "not a simulator truth file" in result.stderr


def test_a_recording_or_other_json_given_as_the_truth_is_refused_in_one_line_saying_what_is_expected(tmp_path):
    """An .avro recording used to get 'FILE:1: not UTF-8: byte 0x.. at column N', and a JSON Lines
    file of other objects was scored as a truth of no message, exit 0."""
    recording = tmp_path / "outage.avro"
    outage_recording(recording)
    (tmp_path / "other.jsonl").write_text('{"a": 1}\n')
    for path in (recording, tmp_path / "other.jsonl"):
        result = whatif(recording, "--truth", path)
        (line,) = result.stderr.splitlines()
        assert result.returncode == 2, line
        assert line.startswith(f"shadowtwin whatif: {path}: not a simulator truth file (its first line is "), line
        assert line.endswith("expected the ground truth simulate writes beside its events: a summary line, then"
                             " a line per message)"), line


def test_the_truth_of_another_simulation_is_refused_in_one_line(tmp_path):
    """Before, `whatif outage.jsonl --truth day.truth.jsonl` (another run's truth) scored it, exit 0: every real
    promotion 'missed', none found, as if the twin had missed them all."""
    day = topology([], duration="01:00:00", rate=0.02)
    outcome = to_file(day, seed=3, path=tmp_path / "day.avro")
    recording = tmp_path / "outage.jsonl"
    outage_recording(recording)
    result = whatif(recording, "--truth", outcome.truth_path)
    (line,) = result.stderr.splitlines()
    assert result.returncode == 2 and result.stdout == ""
    assert line.startswith(f"shadowtwin whatif: {outcome.truth_path}: none of its ") and \
        line.endswith(f" messages is in {recording} (the ground truth of another simulation? simulate writes each"
                      " run's beside its events: NAME.truth.jsonl)"), line
    assert whatif(tmp_path / "day.avro", "--truth", outcome.truth_path).returncode == 0, "its own truth is scored"


def test_ctrl_c_during_the_replay_leaves_no_empty_output_folder(tmp_path):
    """Before, Ctrl-C while the model replayed left the --report and --out folders it had made, empty (Ctrl-C while
    the recording was read removed them already)."""
    recording = tmp_path / "outage.jsonl"
    outage_recording(recording)

    def ctrl_c(line, final=False):
        if line.startswith("replaying"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_whatif(load_settings(), recording, [], [], tmp_path / "out", say=lambda line: None,
                   report=tmp_path / "report", progress=ctrl_c)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outage.jsonl"]


def test_ctrl_c_during_the_second_run_says_how_far_each_run_got(tmp_path):
    """Before, Ctrl-C said 'shadowtwin whatif: interrupted' only: not that the baseline's decisions were written."""
    recording = tmp_path / "outage.jsonl"
    outage_recording(recording)

    def ctrl_c(line, final=False):
        if line.startswith("replaying ShadowResubmitTimeSpan=01:00:00"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as stopped:
        run_whatif(load_settings(), recording, [], ["ShadowResubmitTimeSpan=01:00:00"], tmp_path / "out",
                   say=lambda line: None, progress=ctrl_c)
    assert str(stopped.value) == ("while replaying ShadowResubmitTimeSpan=01:00:00 (1 of 1 servers replayed), run 2"
                                  f" of 2: nothing printed; baseline's decisions are in {tmp_path / 'out'}")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["alerts.jsonl", "commands.jsonl", "state.jsonl"]


def test_a_truth_file_cut_short_is_named_with_its_line_as_a_recording_is(tmp_path):
    recording = tmp_path / "outage.jsonl"
    outage_recording(recording)
    truth = tmp_path / "day.truth.jsonl"
    truth.write_text('{"kind": "summary"}\n{"kind": "message", "message_id": "<1@x>"}\n{"kind": "message", "mess')
    result = whatif(recording, "--truth", truth)
    (line,) = result.stderr.splitlines()
    assert result.returncode == 2
    assert line.startswith(f"shadowtwin whatif: {truth}:3: cut short: the last line ends mid-record (not JSON: "), line
    assert line.endswith("; records read before it: 2"), line


def test_outages_say_whether_a_server_came_back_with_the_same_or_a_new_queue_database():
    org = Org()
    events = [*org.started("mbx01", "db1", 0), *org.started("mbx02", "db2", 0), *org.received("mbx03", "m1", 0),
              *org.started("mbx01", "db1", 60), *org.started("mbx02", "db2-new", 60), *org.started("mbx03", "db3", 60)]
    whys = {server: [why for _, _, why in spans] for server, spans in outages(events, gap_ms=6 * 60_000).items()}
    assert whys == {"mbx01": ["silent 60 min (restarted with the same queue database)"],
                    "mbx02": ["silent 60 min (restarted with a new queue database)"],
                    "mbx03": ["silent 60 min (restarted)"]}


def test_per_hour_figures_start_on_the_hour_when_a_clock_starts_the_recording_early(tmp_path):
    recording = tmp_path / "outage.jsonl"
    outage_recording(recording)
    early = [*Org().received("mbx03", "early", -20 / 60)]  # a server whose clock is 20 s behind: 23:59:40
    write_events(recording, [*early, *read_events(recording)])
    run_whatif(load_settings(), recording, [], [], None, say=lambda _: None, report=tmp_path / "report")
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert summary["per_hour_from_ms"] == T0 - 3_600_000, "from 23:00, not from 23:59:40"
    assert summary["promoted_per_hour"]["baseline"] == [0, 0, 0, 0, 3, 0], "the promotion, 3 h after 00:02, in 03:00-04:00"
    assert ">23:00<" in (tmp_path / "report" / "report.html").read_text()
