"""Exchange logs through the real path: log files -> `ingest` -> Kafka -> the Spark twin, which forecasts
the promotion of a primary that stopped logging (inferred liveness) as the reference replay does, with
the documented defaults (no `[shadow_redundancy] servers` declared)."""

from __future__ import annotations

import pytest

from producers.mtl_ingest import KafkaSink, ingest
from producers.simulator.mtl_writer import MtlWriter
from schemas.events import AlertType
from state.liveness import EVIDENCE, INFERRED
from streaming.app import TwinApplication
from tests.producers.test_mtl import ListSink
from tests.state.scenario import Org
from tests.streaming.test_twin import collect, expected_ids, final_tick, publish, twin_settings


def logged_day(folder) -> None:
    """ex01 takes m1 and m2 with shadows on ex02 and logs until minute 31; ex02 and ex03 log on for 4 hours."""
    org = Org()
    events = [*org.received("ex01", "m1", 1), *org.shadowed("ex01", "ex02", "m1", 1),
              *org.received("ex01", "m2", 2), *org.shadowed("ex01", "ex02", "m2", 2),
              *org.busy("ex01", 3, 31, every=5), *org.busy("ex02", 3, 240, every=5), *org.busy("ex03", 3, 240, every=5)]
    writer = MtlWriter(folder)
    try:
        writer.write(sorted(events, key=lambda e: e.event_time_ms))
    finally:
        writer.close()


@pytest.mark.integration
def test_logs_ingested_into_kafka_make_the_spark_twin_forecast_the_inferred_promotion_with_no_server_declared(
        settings, spark, kafka_bootstrap, topics, tmp_path):
    logged_day(tmp_path / "logs")
    folders = sorted(str(p) for p in (tmp_path / "logs").iterdir())
    local = ListSink()
    ingest(folders, local)
    alerts, commands = expected_ids(local.events)
    assert len(commands) == 2, "the reference replay of the same lines promotes m1 and m2"
    sink = KafkaSink(kafka_bootstrap, topics.events, topics.dead_letters)
    counts = ingest(folders, sink)
    assert sink.close() == 0 and counts.dead_letters == 0
    publish(kafka_bootstrap, topics.events, [final_tick(local.events)])
    # The documented defaults: no `[shadow_redundancy] servers`, so no fact reaches the groups; the
    # primary's own lines in its group are its signs of life.
    twin = TwinApplication(twin_settings(settings, kafka_bootstrap, topics), spark=spark, ticks=False,
                           checkpoint_dir=tmp_path / "checkpoint", say=lambda line: None)
    with twin:
        got = collect(kafka_bootstrap, [topics.alerts, topics.commands],
                      lambda g: len(g[topics.alerts]) >= len(alerts) and len(g[topics.commands]) >= len(commands),
                      timeout_s=600)  # two micro-batches (the data, then the watermark): minutes on a loaded machine
    assert {a.alert_id for a in got[topics.alerts]} == alerts, [
        (a.type.value, a.servers, a.decided_at_ms, a.reason) for a in got[topics.alerts]]
    assert {c.command_id for c in got[topics.commands]} == commands
    promoted = [a for a in got[topics.alerts] if a.type is AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED]
    assert promoted and all(f"{INFERRED}the last sign of life of ex01 was {EVIDENCE['']} at" in a.reason
                            for a in promoted)
