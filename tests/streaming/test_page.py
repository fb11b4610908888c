"""The live page's HTML from a live view (unit); the page in a real browser is in test_views.py."""

from __future__ import annotations

from streaming.page import render
from tests.streaming.test_metrics import live_view


def test_servers_by_dag_and_site_with_their_figures_pairs_and_the_recent_alerts():
    snapshot = live_view().snapshot()
    snapshot["servers"]["ex<01>"] = {**snapshot["servers"]["mbx01"], "server": "ex<01>", "dag": None,
                                     "ad_site": "site9", "pairs": [], "shadow_copies_by_holder": {}}
    html = render(snapshot, refresh_seconds=3, watermark_ms=1767226200000, batches=4)
    assert '<meta http-equiv="refresh" content="3">' in html and "<script" not in html
    assert html.index('data-dag="" data-site="site9"') < html.index('data-dag="dag1" data-site="site1"')
    assert 'data-server="ex&lt;01&gt;"' in html and "ex<01>" not in html, "names are escaped"
    card = html[html.index('data-server="mbx01"'):]
    assert 'data-queue="1"' in card and 'data-holder="mbx02"' in card and 'data-pair="mbx02"' in card
    assert html.count("data-alert=") == 2 and html.index('data-alert="a2"') < html.index('data-alert="a1"')
    assert "2026-01-01 00:10:00Z" in html
