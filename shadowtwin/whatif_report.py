"""`whatif --report DIR`: report.html (plots as inline SVG, `shadowtwin.svg_plots`) and summary.json.

The plots, one series per parameter set:
- end-to-end delay: per message, the time its hops held it (each from receiving it to first
  handing it on: delivered, or promoted and resubmitted by its shadow), summed, as the model
  decided; a histogram on a log axis;
- promoted and at-risk messages per hour of event time, from the whole hour the recording
  starts in (`per_hour_from_ms`; from the promotion and MESSAGE_AT_RISK alerts, by their
  decision time);
- per-server outages, from the recording itself: a server's own events stop for longer than
  three heartbeat intervals (ShadowHeartbeatFrequency of the baseline), or it stops cleanly
  (NodeStopping) until it starts again.
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime, timezone
from html import escape
from pathlib import Path
from typing import Iterable, Sequence

from schemas.events import AlertType, ClockTick, Event, NodeStarted, NodeStopping
from shadowtwin.json_output import plain
from shadowtwin.svg_plots import grouped_bars, lines_over_time, timeline
from state.replay import ReplayResult
from state.scoring import PROMOTIONS, Score
from state.whatif import Summary, percentiles, render

HOUR_MS = 3_600_000
# upper edges (seconds) of the delay histogram's buckets, with their labels
DELAY_EDGES = ((1, "<1s"), (10, "1-10s"), (60, "10s-1m"), (300, "1-5m"), (900, "5-15m"), (3600, "15m-1h"),
               (3 * 3600, "1-3h"), (6 * 3600, "3-6h"), (float("inf"), ">6h"))


def end_to_end_delays_ms(result: ReplayResult) -> list[int]:
    """Per message: the sum over its hops of the time each held it, from receiving it to first
    handing it on, as the model decided. A hop is one internal id (a promoted shadow copy keeps
    it): the earlier of the primary and its promoted shadow counts. Summing the hops (rather
    than last hop out minus first hop in) is what makes the parameter sets differ: in a
    recording, what the next hops did and when is fixed, only the model's decisions change."""
    received: dict[tuple[str, str], int] = {}
    handed: dict[tuple[str, str], int] = {}
    for o in result.outcomes:
        if o.result in ("delivered", "promoted"):
            hop = (o.ref.message_id, o.ref.internal_id)
            received[hop] = min(received.get(hop, o.received_ms), o.received_ms)
            handed[hop] = min(handed.get(hop, o.processed_ms), o.processed_ms)
    total: dict[str, int] = {}
    for hop, at_ms in handed.items():
        total[hop[0]] = total.get(hop[0], 0) + at_ms - received[hop]
    return sorted(total.values())


def histogram(delays_ms: list[int]) -> list[int]:
    counts = [0] * len(DELAY_EDGES)
    for d in delays_ms:
        counts[next(i for i, (edge, _) in enumerate(DELAY_EDGES) if d / 1000 < edge)] += 1
    return counts


def per_hour(result: ReplayResult, types: tuple[AlertType, ...], start_ms: int, hours: int) -> list[int]:
    counts = [0] * hours
    for a in result.alerts:
        if a.type in types:
            counts[min(hours - 1, max(0, (a.decided_at_ms - start_ms) // HOUR_MS))] += len(a.messages)
    return counts


def outages(events: Iterable[Event], gap_ms: int) -> dict[str, list[tuple[int, int, str]]]:
    """server -> (from, to, why) intervals in which it published nothing, from the recording's own events."""
    times: dict[str, list[tuple[int, object]]] = defaultdict(list)
    for e in events:
        if e.node and not isinstance(e, ClockTick):
            times[e.node].append((e.event_time_ms, e))
    found: dict[str, list[tuple[int, int, str]]] = {}
    for node, seen in sorted(times.items()):
        seen.sort(key=lambda item: item[0])
        intervals = []
        database = next((e.queue_db_id for _, e in seen[:1] if isinstance(e, NodeStarted)), None)
        for (a, before), (b, after) in zip(seen, seen[1:]):
            if isinstance(before, NodeStopping):
                intervals.append((a, b, "stopped cleanly"))
            elif b - a > gap_ms:
                intervals.append((a, b, f"silent {(b - a) / 60_000:.0f} min{_restart(after, database)}"))
            if isinstance(after, NodeStarted):
                database = after.queue_db_id
        found[node] = intervals
    return found


def _restart(after: Event, database: str | None) -> str:
    """How a silence ended: a restart with the queue database it had (duplicates follow) or a new one
    (its shadows promote at once); a restart of a server whose earlier database the recording never named."""
    if not isinstance(after, NodeStarted):
        return ""
    if database is None:
        return " (restarted)"
    return f" (restarted with {'the same' if after.queue_db_id == database else 'a new'} queue database)"


def _clock(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%H:%M")


def write_report(folder: Path, recording: Path, runs: list[tuple[Summary, ReplayResult]], events: list[Event],
                 gap_ms: int, score: Score | None = None, *, notes: Sequence[str] = (),
                 skewed_events: int = 0) -> tuple[Path, Path]:
    """Write report.html and summary.json into `folder`; returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    first = runs[0][0]
    start = (first.start_ms or 0) // HOUR_MS * HOUR_MS  # whole hours: a clock 20 s behind starts the day at 23:00
    end = max(start + 1, first.end_ms or start)
    hours = max(1, -(-(end - start) // HOUR_MS))
    delays = {s.label: end_to_end_delays_ms(r) for s, r in runs}
    down = outages(events, gap_ms)
    summary = {
        "recording": str(recording),
        "summaries": [plain(s) for s, _ in runs],
        "skewed_events": skewed_events,
        "notes": list(notes),
        "end_to_end_delay_ms": {label: percentiles(d) for label, d in delays.items()},
        "delay_histogram_buckets": [label for _, label in DELAY_EDGES],
        "delay_histogram": {label: histogram(d) for label, d in delays.items()},
        "per_hour_from_ms": start,
        "promoted_per_hour": {s.label: per_hour(r, PROMOTIONS, start, hours) for s, r in runs},
        "at_risk_per_hour": {s.label: per_hour(r, (AlertType.MESSAGE_AT_RISK,), start, hours) for s, r in runs},
        "outages": {server: [{"from_ms": a, "to_ms": b, "why": why} for a, b, why in spans]
                    for server, spans in down.items() if spans},
        "score": plain(score) if score is not None else None,
    }
    summary_path = folder / "summary.json"
    summary_path.write_text(json.dumps(summary, indent=2) + "\n")
    hour_labels = [_clock(start + h * HOUR_MS) for h in range(hours)]
    over_time = {f"promoted, {s.label}": summary["promoted_per_hour"][s.label] for s, _ in runs}
    over_time |= {f"at risk, {s.label}": summary["at_risk_per_hour"][s.label] for s, _ in runs}
    plots = [
        grouped_bars("End-to-end delivery delay (messages per delay bucket)", [label for _, label in DELAY_EDGES],
                     summary["delay_histogram"], "time held by its hops, summed (log scale)",
                     log=True),
        lines_over_time("Promoted and at-risk messages per hour (event time, UTC)", hour_labels, over_time),
        timeline("Per-server outages (no events of its own)", down, start, end,
                 [(start + h * HOUR_MS, hour_labels[h]) for h in range(0, hours, max(1, hours // 8))]),
    ]
    score_html = f"<h2>Scored against the truth</h2><pre>{escape(score.render())}</pre>" if score else ""
    html = ("<!doctype html><html><head><meta charset=\"utf-8\"><title>shadowtwin what-if report</title>"
            "<style>body{font-family:sans-serif;margin:2em}pre{background:#f6f6f6;padding:1em}</style></head><body>"
            f"<h1>What-if report: {escape(recording.name)}</h1><pre>{escape(render([s for s, _ in runs]))}</pre>"
            + "".join(f"<p>{escape(note)}</p>" for note in notes)
            + "".join(f"<figure>{svg}</figure>" for svg in plots) + score_html
            + "<p>Figures as JSON: <a href=\"summary.json\">summary.json</a></p></body></html>\n")
    report_path = folder / "report.html"
    report_path.write_text(html)
    return report_path, summary_path
