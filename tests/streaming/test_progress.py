"""The twin's console progress and its late-events alert (pure functions, no Spark session)."""

import json
from types import SimpleNamespace

from schemas.events import AlertType
from streaming.operator import LATE_LETTERS
from streaming.progress import AFTER_A_CRASH, ProgressReporter, describe, first_line, offsets_total

PROGRESS = {
    "id": "q1", "batchId": 7, "numInputRows": 1200, "inputRowsPerSecond": 600.0, "processedRowsPerSecond": 900.0,
    "eventTime": {"watermark": "2026-11-22T03:00:00.000Z"},
    "stateOperators": [{"numRowsTotal": 8, "numRowsDroppedByWatermark": 5}],
    "sources": [{"endOffset": json.dumps({"events": {"0": 100, "1": 50}}),
                 "latestOffset": json.dumps({"events": {"0": 130, "1": 60}})}],
}


def batch(progress):
    return SimpleNamespace(progress=SimpleNamespace(json=json.dumps(progress)))


def test_the_line_gives_rates_state_watermark_lag_and_late_rows():
    line, late = describe(PROGRESS)
    assert late == 5
    assert "batch 7" in line and "state 8 rows" in line and "lag 40 records" in line and "late 5" in line
    assert "2026-11-22T03:00:00.000Z" in line
    assert offsets_total(None) == 0


def test_the_late_events_the_operator_set_aside_are_counted_with_those_spark_dropped():
    """Spark drops the rows behind the previous batch's watermark; the operator sets aside, as dead letters
    `late event`, those between it and its own (observed as streaming.operator.LATE_LETTERS): one count."""
    alerts, lines = [], []
    reporter = ProgressReporter(lines.append, alerts.append, late_alert_threshold=1)
    reporter.onQueryProgress(batch({**PROGRESS, "observedMetrics": {LATE_LETTERS: {"late_letters": 31}}}))
    assert lines[0].endswith(", late 36") and reporter.late_total == 36
    assert [a.type for a in alerts] == [AlertType.LATE_EVENTS] and "36 event(s)" in alerts[0].reason


def test_late_rows_past_the_threshold_raise_one_alert_at_the_watermark():
    alerts, lines = [], []
    reporter = ProgressReporter(lines.append, alerts.append, late_alert_threshold=5)
    reporter.onQueryProgress(batch(PROGRESS))
    assert [a.type for a in alerts] == [AlertType.LATE_EVENTS]
    assert alerts[0].decided_at_ms == 1795316400000 and "5 event(s)" in alerts[0].reason
    reporter.onQueryProgress(batch({**PROGRESS, "batchId": 8, "stateOperators": [{"numRowsDroppedByWatermark": 4}]}))
    assert len(alerts) == 1, "below the threshold: counted, not alerted"
    assert reporter.late_total == 9 and len(lines) == 2


def test_a_query_that_stops_on_a_failure_is_said_in_one_line():
    """The events topic deleted under the twin: Spark's failure text goes on with 185 lines of the JVM's
    stack traces ("Driver stacktrace: at org.apache.spark..."), which the twin used to print whole."""
    failure = ("org.apache.spark.SparkException: Job aborted due to stage failure: ... TimeoutException: Timeout of"
               " 60000ms expired before the position for partition shadowtwin.events-0 could be determined\n"
               "Driver stacktrace:\n\tat org.apache.spark.scheduler.DAGScheduler.abortStage(DAGScheduler.scala:3122)\n")
    lines = []
    ProgressReporter(lines.append).onQueryTerminated(SimpleNamespace(exception=failure))
    assert lines == [f"twin query stopped: {failure.splitlines()[0]}"]


def test_the_failure_spark_has_after_the_twin_was_killed_mid_batch_says_nothing_is_lost():
    """`kill -9` of a running twin, then `twin run` again: Spark 4.1.1 failed the batch it ran again with a
    NullPointerException (SPARK-55271) and the twin said 'the twin's query failed (java.lang.NullPointerException:
    Cannot invoke ...); starting it again', which reads as something broken. Now the line says what it is."""
    failure = ('java.lang.NullPointerException: Cannot invoke "scala.collection.IterableOps.map(scala.Function1)"'
               ' because the return value of "scala.Option.get()" is null\n'
               "\tat org.apache.spark.sql.kafka010.KafkaMicroBatchStream$.metrics(KafkaMicroBatchStream.scala:520)\n")
    assert first_line(failure) == failure.splitlines()[0] + AFTER_A_CRASH
    assert AFTER_A_CRASH == ("; Spark 4.1.1's Kafka source fails so once when a query runs again a batch that did"
                             " not end (the twin killed, or the batch failed, mid-batch: SPARK-55271), the batch's"
                             " output already written: nothing is lost or decided twice")
    assert first_line("java.lang.NullPointerException: something else\n\tat x") == \
        "java.lang.NullPointerException: something else"
