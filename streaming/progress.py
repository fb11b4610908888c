"""What the running twin shows on the console, and its late-events alert.

One line per micro-batch (or at most one every `every_seconds`, for the demo): batch id,
input and processing rates, rows in state, watermark, how far the query lags behind the events
topic, and late events (those Spark dropped behind the watermark and those the operator set aside as
dead letters `late event`: one count); a batch with late events is always reported. Events behind
the watermark are never dropped silently: past `late_alert_threshold` in one batch, the twin
publishes a LATE_EVENTS alert.
"""

from __future__ import annotations

import json
import time
from typing import Callable

from pyspark.sql.streaming.listener import StreamingQueryListener

from schemas.events import Alert, AlertType, Severity
from state.model import stable_id
from streaming.operator import LATE_LETTERS


def offsets_total(offsets: object) -> int:
    """Sum of the partition offsets in Spark's JSON offsets ({"topic": {"0": 12, ...}})."""
    if not offsets:
        return 0
    data = json.loads(offsets) if isinstance(offsets, str) else offsets
    return sum(int(v) for partitions in data.values() for v in partitions.values())


def set_aside_late(progress: dict) -> int:
    """The late events the operator set aside as dead letters in the batch (streaming.operator.LATE_LETTERS)."""
    return int(((progress.get("observedMetrics") or {}).get(LATE_LETTERS) or {}).get("late_letters") or 0)


def describe(progress: dict) -> tuple[str, int]:
    """The console line for one batch's progress, and its count of late events: the rows Spark dropped
    and the events the operator set aside (dead letters `late event`)."""
    operators = progress.get("stateOperators") or [{}]
    state_rows = sum(op.get("numRowsTotal", 0) for op in operators)
    late = sum(op.get("numRowsDroppedByWatermark", 0) for op in operators) + set_aside_late(progress)
    source = (progress.get("sources") or [{}])[0]
    lag = max(0, offsets_total(source.get("latestOffset")) - offsets_total(source.get("endOffset")))
    watermark = (progress.get("eventTime") or {}).get("watermark", "-")
    line = (f"batch {progress.get('batchId')}: {progress.get('numInputRows', 0)} rows,"
            f" in {progress.get('inputRowsPerSecond', 0.0):,.0f}/s, processed {progress.get('processedRowsPerSecond', 0.0):,.0f}/s,"
            f" state {state_rows} rows, watermark {watermark}, lag {lag} records, late {late}")
    return line, late


class ProgressReporter(StreamingQueryListener):
    def __init__(self, say: Callable[[str], None], publish_alert: Callable[[Alert], None] | None = None,
                 late_alert_threshold: int = 1, every_seconds: float = 0.0):
        self._say = say
        self._publish_alert = publish_alert
        self._threshold = late_alert_threshold
        self._every_s = every_seconds
        self._last_said = float("-inf")
        self.late_total = 0
        self.batches = 0
        self.input_rows_total = 0
        self.idle_triggers = 0  # triggers that found no new data (Spark says so every 10 s at most)
        self.last_progress: dict | None = None  # for the metrics (streaming/metrics.py)

    def onQueryStarted(self, event) -> None:
        self._say(f"twin query started (id {event.id})")

    def onQueryProgress(self, event) -> None:
        progress = json.loads(event.progress.json)
        line, late = describe(progress)
        self.late_total += late
        self.batches += 1
        self.input_rows_total += progress.get("numInputRows", 0)
        self.last_progress = progress
        now = time.monotonic()
        if late or now - self._last_said >= self._every_s:
            self._last_said = now
            self._say(line)
        if late >= self._threshold > 0 and self._publish_alert is not None:
            self._publish_alert(late_events_alert(progress, late))

    def onQueryIdle(self, event) -> None:
        self.idle_triggers += 1

    @property
    def triggers(self) -> int:
        """Triggers the query got through, with or without data: it runs, the broker answers."""
        return self.batches + self.idle_triggers

    def onQueryTerminated(self, event) -> None:
        self._say(f"twin query stopped{': ' + first_line(event.exception) if event.exception else ''}")


# Spark 4.1.1's Kafka source failing the batch a query runs again after a crash or a failure mid-batch (a topic
# deleted under it, say), as it reports the batch's
# metrics, once its output and commit are written (SPARK-55271, docs/engine-facts.md)
KAFKA_SOURCE_AFTER_A_CRASH = ('Cannot invoke "scala.collection.IterableOps.map(scala.Function1)" because the return'
                              ' value of "scala.Option.get()" is null')
AFTER_A_CRASH = ("; Spark 4.1.1's Kafka source fails so once when a query runs again a batch that did not end (the"
                 " twin killed, or the batch failed, mid-batch: SPARK-55271), the batch's output already written:"
                 " nothing is lost or decided twice")


def first_line(failure: object, limit: int = 500) -> str:
    """A query's failure in one line: Spark's text of it goes on with the JVM's stack traces. The failure Spark
    4.1.1 has after a crash, which says nothing of it, is named."""
    line = next((line for line in str(failure).splitlines() if line.strip()), "")
    return line[:limit] + (AFTER_A_CRASH if KAFKA_SOURCE_AFTER_A_CRASH in line else "")


def late_events_alert(progress: dict, late: int) -> Alert:
    from datetime import datetime

    watermark = (progress.get("eventTime") or {}).get("watermark")
    at_ms = int(datetime.fromisoformat(watermark.replace("Z", "+00:00")).timestamp() * 1000) if watermark else 0
    return Alert(
        alert_id=stable_id("alert", AlertType.LATE_EVENTS.value, progress.get("id"), progress.get("batchId")),
        type=AlertType.LATE_EVENTS, severity=Severity.WARNING, servers=(),
        reason=f"{late} event(s) arrived behind the watermark ({watermark}) in batch {progress.get('batchId')} and"
               " were not applied: a node's clock lags, or its events were delayed longer than the watermark delay",
        decided_at_ms=at_ms,
    )
