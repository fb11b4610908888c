"""Benchmark: the stateful operator's cost per call against the state it holds, without Spark.

    .venv/bin/python -m benchmarks.operator [--in-flight 100000] [--servers 8] [--batch 500000]

One group (the first server) of the synthetic workload is brought to steady state (about
`--in-flight` / `--servers` of its messages held), then fed micro-batches of its share of
`--batch` events through `streaming.operator.step_function`, as Spark's applyInPandasWithState
calls it, alternating two ways in the same run: "cold" (the garbage collector running and the
snapshot loaded from its bytes every call, as before the worker held its states) and "held"
(the operator as it is). Prints, per way, seconds per call, events per second, and the part
spent storing the snapshot; run it at two `--in-flight` values to see the cost follow the state.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import statistics
import time

import pandas as pd

from producers.synthetic import Workload, generate
from schemas.codec import default_codec
from state import snapshot
from state.model import ShadowRedundancyModel
from state.parameters import ModelConfig
from streaming import operator
from streaming.operator import OutputTopics, step_function


class Group:
    """PySpark's GroupState, the little the operator uses of it."""

    def __init__(self, blob: bytes, watermark_ms: int):
        self.value, self.watermark_ms = (blob,), watermark_ms

    exists, hasTimedOut = True, False  # noqa: N815

    @property
    def get(self) -> tuple:
        return self.value

    def getCurrentWatermarkMs(self) -> int:  # noqa: N802
        return self.watermark_ms

    def update(self, value: tuple) -> None:
        self.value = value

    def setTimeoutTimestamp(self, timestamp_ms: int) -> None:  # noqa: N802
        pass


def frame(events, codec) -> pd.DataFrame:
    return pd.DataFrame({
        "primary_server": [e.primary_server for e in events],
        "event_time": pd.to_datetime([e.event_time_ms for e in events], unit="ms", utc=True),
        "value": [codec.encode(e) for e in events], "key": [e.primary_server.encode() for e in events],
        "topic": "events", "partition": 0, "offset": range(len(events)), "reason": None, "fact": None,
        "node": [e.node for e in events]})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--in-flight", type=int, default=100_000)
    parser.add_argument("--servers", type=int, default=8)
    parser.add_argument("--batch", type=int, default=500_000, help="events per micro-batch, all groups")
    parser.add_argument("--batches", type=int, default=6, help="timed calls per way")
    args = parser.parse_args()
    rate = 2_000.0
    per_group = args.batch // args.servers
    delivery_ms = int(args.in_flight / rate * 1000)
    workload = Workload(servers=args.servers, messages_per_second=rate, delivery_ms=delivery_ms,
                        duration_ms=delivery_ms * 3 // 2 + int(2 * args.batches * args.batch / 11 / rate * 1000) + 5_000)
    primary = workload.server_names()[0]
    started = time.perf_counter()
    events = [e for e in generate(workload) if e.primary_server == primary]
    warm_end = workload.start_ms + delivery_ms * 3 // 2
    warm = [e for e in events if e.event_time_ms < warm_end]
    rest = [e for e in events if e.event_time_ms >= warm_end]
    model, codec = ShadowRedundancyModel(), default_codec()
    state = model.new_state(primary)
    model.on_events(state, warm)
    blob = snapshot.dump(state)
    print(f"{primary}: {len(state.messages):,} messages held (of ~{args.in_flight:,} in flight on {args.servers}"
          f" servers), snapshot {len(blob) / 1e6:.1f} MB; {per_group:,} events per call; set up in"
          f" {time.perf_counter() - started:.0f}s")
    step = step_function(ModelConfig(), OutputTopics("alerts", "commands", "dead"))
    group = Group(blob, warm[-1].event_time_ms - 1)
    figures: dict[str, list[float]] = {"cold": [], "held": []}
    dumps: list[float] = []
    chunks = [rest[i:i + per_group] for i in range(0, len(rest), per_group)][:2 * args.batches]
    for way, chunk in zip(itertools.cycle(["cold", "held"]), chunks):
        rows = frame(chunk, codec)
        if way == "cold":
            operator._held.clear()
            gc.enable()
        started = time.perf_counter()
        if way == "cold":
            list(cold_step(step, primary, rows, group))
        else:
            list(step((primary,), iter([rows]), group))
        figures[way].append(time.perf_counter() - started)
        gc.enable()
        t = time.perf_counter()
        snapshot.dump(operator._held[primary][1])
        dumps.append(time.perf_counter() - t)
        group.watermark_ms = chunk[-1].event_time_ms - 1
    held_now = len(operator._held[primary][1].messages)
    print(f"messages held at the end: {held_now:,}; snapshot dump alone (GC on): {statistics.median(dumps):.3f}s")
    for way, seconds in figures.items():
        median = statistics.median(seconds)
        print(f"  {way}: {median:.3f}s per call (median of {len(seconds)}), {per_group / median:,.0f} events/s")
    ratio = statistics.median(figures["cold"]) / statistics.median(figures["held"])
    print(f"held is {ratio:.2f}x faster than cold at {held_now:,} messages held")


def cold_step(step, primary, rows, group):
    """The step with the collector running throughout, as the operator ran before."""
    real_disable = gc.disable
    gc.disable = lambda: None
    try:
        yield from step((primary,), iter([rows]), group)
    finally:
        gc.disable = real_disable


if __name__ == "__main__":
    main()
