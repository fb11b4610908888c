"""The live topology page: one HTML document rendered from the live view, no script, no framework.

Servers grouped by DAG and AD site, each with its queue, the shadow copies peers hold for it,
its own shadow queues (the copies it holds for each primary), messages not redundant, at risk
and promoted, expected duplicates, and the last heartbeat of each pair; then the recent alerts.
It reloads itself (`<meta http-equiv="refresh">`). Each figure carries a `data-` attribute named
after the state summary's field (state/summary.py), for tests and scrapers.
"""

from __future__ import annotations

from datetime import datetime, timezone
from html import escape

STYLE = """
body{font:14px/1.35 system-ui,sans-serif;margin:1em 2em;color:#1d2330;background:#f5f6f8}
h1{font-size:20px;margin:0 0 .2em}.meta{color:#556;margin-bottom:1em}
section.group{margin:1em 0}section.group>h2{font-size:16px;margin:.4em 0}
.servers{display:flex;flex-wrap:wrap;gap:12px}
.server{background:#fff;border:1px solid #cfd4dc;border-radius:6px;padding:10px 12px;min-width:250px}
.server h3{margin:0 0 6px;font-size:15px}.server .sub{color:#667;font-size:12px}
.figs{display:grid;grid-template-columns:max-content max-content;gap:2px 18px;margin:6px 0}
.bad{color:#b00020;font-weight:600}.ok{color:#2d6a2d}
table{border-collapse:collapse;font-size:12px;margin-top:4px}td,th{padding:2px 6px;border-bottom:1px solid #e3e6ea;text-align:left}
.silent{color:#b00020}.alerts td{vertical-align:top}.sev-CRITICAL{color:#b00020;font-weight:600}.sev-WARNING{color:#a05a00}
"""


def _iso(ms: float | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


def _fig(label: str, field: str, value: int, alarm: bool = False) -> str:
    cls = "bad" if alarm and value else ""
    return f'<span>{escape(label)}</span><span class="{cls}" data-{field.replace("_", "-")}="{value}">{value}</span>'


def _server_card(s: dict, holds_for: dict[str, int]) -> str:
    name = escape(s["server"])
    figs = "".join([
        _fig("queue", "queue", s["queue"]), _fig("in flight", "messages_in_flight", s["messages_in_flight"]),
        _fig("not redundant", "not_redundant", s["not_redundant"], True), _fig("at risk", "at_risk", s["at_risk"], True),
        _fig("promoted", "promoted", s["promoted"], True),
        _fig("expected duplicates", "expected_duplicates", s["expected_duplicates"], True),
    ])
    copies = "".join(f'<tr data-holder="{escape(h)}"><td>{escape(h)}</td><td>{n}</td></tr>'
                     for h, n in s["shadow_copies_by_holder"].items()) or '<tr><td colspan="2">none</td></tr>'
    queues = "".join(f'<tr data-shadow-queue="{escape(p)}"><td>{escape(p)}</td><td>{n}</td></tr>'
                     for p, n in holds_for.items()) or '<tr><td colspan="2">none</td></tr>'
    pairs = "".join(
        f'<tr data-pair="{escape(p["shadow"])}" class="{"silent" if p["silent"] else ""}"><td>{escape(p["shadow"])}</td>'
        f'<td>{_iso(p["last_query_ms"])}</td><td>{_iso(p["last_contact_ms"])}</td>'
        f'<td>{"silent" if p["silent"] else "failed" if p["primary_failed_ms"] else "ok"}</td></tr>'
        for p in s["pairs"]) or '<tr><td colspan="4">none</td></tr>'
    return (f'<div class="server" data-server="{name}"><h3>{name}</h3>'
            f'<div class="sub">{escape(s["mode"] or "-")} · queue database {escape(s["queue_db_id"] or "-")}'
            f' · last event {_iso(s["last_event_ms"])}</div><div class="figs">{figs}</div>'
            f'<table><tr><th>copies held for it by</th><th></th></tr>{copies}</table>'
            f'<table><tr><th>its shadow queue for</th><th></th></tr>{queues}</table>'
            f'<table><tr><th>pair (shadow)</th><th>last query</th><th>last contact</th><th></th></tr>{pairs}</table></div>')


def render(snapshot: dict, *, refresh_seconds: int, watermark_ms: float | None, batches: int) -> str:
    """The page for a `LiveView.snapshot()`."""
    servers = snapshot["servers"]
    holds_for: dict[str, dict[str, int]] = {}
    for primary, s in sorted(servers.items()):
        for holder, n in s["shadow_copies_by_holder"].items():
            holds_for.setdefault(holder, {})[primary] = n
    groups: dict[tuple[str, str], list[dict]] = {}
    for s in servers.values():
        groups.setdefault((s["dag"] or "", s["ad_site"] or ""), []).append(s)
    sections = []
    for (dag, site), members in sorted(groups.items()):
        cards = "".join(_server_card(s, holds_for.get(s["server"], {})) for s in sorted(members, key=lambda s: s["server"]))
        sections.append(f'<section class="group" data-dag="{escape(dag)}" data-site="{escape(site)}">'
                        f'<h2>DAG {escape(dag or "(none)")} · site {escape(site or "(unknown)")}</h2>'
                        f'<div class="servers">{cards}</div></section>')
    alerts = "".join(
        f'<tr data-alert="{escape(a.alert_id)}"><td>{_iso(a.decided_at_ms)}</td>'
        f'<td class="sev-{a.severity.value}">{escape(a.type.value)}</td><td>{escape(", ".join(a.servers))}</td>'
        f'<td>{len(a.messages)}</td><td>{escape(a.reason)}</td></tr>' for a in snapshot["recent_alerts"])
    return (f'<!doctype html><html><head><meta charset="utf-8"><meta http-equiv="refresh" content="{refresh_seconds}">'
            f'<title>shadowtwin: live topology</title><style>{STYLE}</style></head><body>'
            f'<h1>shadowtwin: live topology</h1><div class="meta">event time (watermark) '
            f'<span id="watermark">{_iso(watermark_ms)}</span> · {batches} batches · {len(servers)} servers ·'
            f' refreshes every {refresh_seconds} s</div>'
            + ("".join(sections) or "<p>No server has reported yet.</p>")
            + '<h2>Recent alerts</h2><table class="alerts"><tr><th>decided (event time)</th><th>type</th>'
              f'<th>servers</th><th>messages</th><th>reason</th></tr>{alerts or "<tr><td colspan=5>none</td></tr>"}'
              '</table></body></html>')
