"""The twin's Prometheus metrics, read at scrape time from the live view and the query's progress.

Per server (label `server`, the primary): messages in flight, in its queue, not redundantly
persisted, at risk, promoted, expected duplicates; shadow copies held for it (label `holder`);
heartbeat pairs' last query and last contact (label `shadow`). Totals of what the twin decided:
alerts and the messages they name by `type`, commands by `reason`, dead letters by `reason` (the
reason's kind, not its particulars). The query: batches, input rows, late rows, rates, batch
duration, state rows and memory, watermark and its lag behind wall time, records not yet read.
Names follow Prometheus conventions: base units (seconds, bytes), `_total` for counters.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from streaming.progress import offsets_total
from streaming.views import LiveView

PER_SERVER = (
    ("messages_in_flight", "messages_in_flight", "Messages of this primary server the twin tracks"),
    ("queue_messages", "queue", "Messages in the primary server's queue, not yet processed by it"),
    ("messages_not_redundant", "not_redundant", "Messages in the primary's queue without a shadow copy"),
    ("messages_at_risk", "at_risk", "Messages no server is able to deliver (primary and shadow silent)"),
    ("messages_promoted", "promoted", "Messages whose shadow took over from this primary, kept to predict duplicates"),
    ("expected_duplicates", "expected_duplicates",
     "Promoted messages still in the primary's queue database: delivered twice if it comes back with it"),
)


def watermark_seconds(progress: dict) -> float | None:
    mark = (progress.get("eventTime") or {}).get("watermark")
    return datetime.fromisoformat(mark.replace("Z", "+00:00")).timestamp() if mark else None


class TwinCollector:
    """A prometheus_client collector: `progress()` gives (last progress dict or None, batches, input rows, late rows)."""

    def __init__(self, view: LiveView, progress: Callable[[], tuple[dict | None, int, int, int]]):
        self._view, self._progress = view, progress

    def collect(self) -> Iterator[Metric]:
        snap = self._view.snapshot()
        servers = snap["servers"]
        for name, key, text in PER_SERVER:
            family = GaugeMetricFamily(f"shadowtwin_{name}", text, labels=["server"])
            for server, summary in sorted(servers.items()):
                family.add_metric([server], summary[key])
            yield family
        copies = GaugeMetricFamily("shadowtwin_shadow_copies", "Shadow copies held for a primary server, per holder",
                                   labels=["server", "holder"])
        info = GaugeMetricFamily("shadowtwin_server_info", "A server's DAG, AD site and mode (value 1)",
                                 labels=["server", "dag", "site", "mode"])
        last_query = GaugeMetricFamily("shadowtwin_heartbeat_last_query_timestamp_seconds",
                                       "Event time of a shadow server's last discard query to its primary",
                                       labels=["server", "shadow"])
        last_contact = GaugeMetricFamily("shadowtwin_heartbeat_last_contact_timestamp_seconds",
                                         "Event time of a shadow server's last successful contact with its primary",
                                         labels=["server", "shadow"])
        for server, summary in sorted(servers.items()):
            info.add_metric([server, summary["dag"] or "", summary["ad_site"] or "", summary["mode"] or ""], 1)
            for holder, n in summary["shadow_copies_by_holder"].items():
                copies.add_metric([server, holder], n)
            for pair in summary["pairs"]:
                last_query.add_metric([server, pair["shadow"]], pair["last_query_ms"] / 1000)
                last_contact.add_metric([server, pair["shadow"]], pair["last_contact_ms"] / 1000)
        yield from (copies, info, last_query, last_contact)
        for name, key, label, text in (
                ("alerts", "alerts_by_type", "type", "Alerts the twin published"),
                ("alert_messages", "alert_messages_by_type", "type", "Messages named by the alerts the twin published"),
                ("commands", "commands_by_reason", "reason", "Redelivery commands the twin published"),
                ("dead_letters", "dead_letters_by_reason", "reason", "Records set aside as dead letters")):
            family = CounterMetricFamily(f"shadowtwin_{name}", text, labels=[label])
            for value, n in sorted(snap[key].items()):
                family.add_metric([value], n)
            yield family
        yield from self._query_metrics()

    def _query_metrics(self) -> Iterator[Metric]:
        progress, batches, rows, late = self._progress()
        yield CounterMetricFamily("shadowtwin_batches", "Micro-batches the twin's query completed", value=batches)
        yield CounterMetricFamily("shadowtwin_input_rows", "Records the twin's query read", value=rows)
        yield CounterMetricFamily("shadowtwin_late_events", "Events behind the watermark, not applied: dropped by Spark or set aside by the operator (dead letters: late event)", value=late)
        if not progress:
            return
        operators = progress.get("stateOperators") or [{}]
        source = (progress.get("sources") or [{}])[0]
        gauges = {
            "input_rows_per_second": ("Input rate of the latest batch", progress.get("inputRowsPerSecond") or 0.0),
            "processed_rows_per_second": ("Processing rate of the latest batch",
                                          progress.get("processedRowsPerSecond") or 0.0),
            "batch_duration_seconds": ("Duration of the latest micro-batch",
                                       (progress.get("durationMs") or {}).get("triggerExecution", 0) / 1000),
            "state_rows": ("Rows in the query's state store (per primary server: its version, base pieces, log entries)",
                           sum(op.get("numRowsTotal", 0) for op in operators)),
            "state_memory_bytes": ("Memory used by the query's state store",
                                   sum(op.get("memoryUsedBytes", 0) for op in operators)),
            "source_lag_records": ("Records in the events topic not yet read",
                                   max(0, offsets_total(source.get("latestOffset"))
                                       - offsets_total(source.get("endOffset")))),
        }
        mark = watermark_seconds(progress)
        if mark:
            gauges["watermark_timestamp_seconds"] = ("The query's event-time watermark", mark)
            gauges["watermark_lag_seconds"] = ("How far the watermark trails wall time", time.time() - mark)
        for name, (text, value) in gauges.items():
            yield GaugeMetricFamily(f"shadowtwin_{name}", text, value=value)
