"""Benchmark: the stateful operator's cost per call against the state it holds, without Spark.

    .venv/bin/python -m benchmarks.operator [--in-flight 100000] [--servers 8] [--batch 500000]

One group (the first server) of the synthetic workload is brought to steady state (about
`--in-flight` / `--servers` of its messages held), then fed micro-batches of its share of
`--batch` events through `streaming.operator.advance_group` with an in-memory store, alternating
two ways in the same run: "log" (the operator as it is: the worker holds the state and appends
the call's log entry) and "dump" (the same, plus writing the whole snapshot every call, which is
what `applyInPandasWithState` made the operator do before). Prints, per way, seconds per call and
events per second; then what a worker that holds nothing pays to rebuild the state from the
base and the log. Run it at two `--in-flight` values to see what follows the state.

`--reading` measures only how the operator reads one call's rows (`decode_rows`: the contract's
codec, the checks against what Spark read, the order) against the codec alone, per row, on
one group's share of `--batch` in frames of 10,000 rows as pyspark hands them over.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time

import pandas as pd

from producers.synthetic import Workload, generate
from schemas.codec import default_codec
from state import collector, snapshot
from state.model import ShadowRedundancyModel
from state.parameters import ModelConfig
from streaming import held_state
from streaming.operator import advance_group, decode_rows, replay_call


def frame(events, codec) -> pd.DataFrame:
    return pd.DataFrame({
        "primary_server": [e.primary_server for e in events],
        "event_time": pd.to_datetime([e.event_time_ms for e in events], unit="ms", utc=True),
        "value": [codec.encode(e) for e in events], "key": [e.primary_server.encode() for e in events],
        "topic": "events", "partition": 0, "offset": range(len(events)), "reason": None, "fact": None,
        "node": [e.node for e in events]})


def reading(servers: int, rows: int, rounds: int = 7) -> None:
    """Microseconds per row of `decode_rows` over one call's rows, and of the codec alone (best of `rounds`)."""
    workload = Workload(servers=servers, messages_per_second=2_000.0, delivery_ms=50_000,
                        duration_ms=int(rows * servers / 11 / 2_000.0 * 1000 * 1.5) + 60_000)
    primary = workload.server_names()[0]
    events = [e for e in generate(workload) if e.primary_server == primary][:rows]
    codec = default_codec()
    whole = frame(events, codec)
    frames = [whole.iloc[i:i + 10_000].reset_index(drop=True) for i in range(0, len(whole), 10_000)]

    def best(work) -> float:
        seconds = []
        for _ in range(rounds):
            started = time.perf_counter()
            work()
            seconds.append(time.perf_counter() - started)
        return min(seconds) * 1e6 / len(events)

    with collector.paused():  # as in the operator's call
        read = best(lambda: decode_rows(iter(frames), primary, 10_000, 0, set(), ModelConfig().names))
        alone = best(lambda: [codec.decode_events(f["value"].tolist()) for f in frames])
    print(f"{primary}: one call of {len(events):,} rows in {len(frames)} frames, best of {rounds}:"
          f" decode_rows {read:.2f} us per row, the codec alone {alone:.2f} us per row"
          f" ({read - alone:.2f} us per row besides the codec)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--in-flight", type=int, default=100_000)
    parser.add_argument("--servers", type=int, default=8)
    parser.add_argument("--batch", type=int, default=500_000, help="events per micro-batch, all groups")
    parser.add_argument("--batches", type=int, default=6, help="timed calls per way")
    parser.add_argument("--reading", action="store_true", help="only the reading of a call's rows, per row")
    args = parser.parse_args()
    if args.reading:
        reading(args.servers, args.batch // args.servers)
        return
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
    store = held_state.MemoryGroupStore()
    frames = [frame(warm[i:i + per_group], codec) for i in range(0, len(warm), per_group)]
    for rows in frames:
        advance_group(model, primary, iter([rows]), 0, store, "")
    state = held_state._held[primary].state
    print(f"{primary}: {len(state.messages):,} messages held (of ~{args.in_flight:,} in flight on {args.servers}"
          f" servers), snapshot {len(snapshot.dump(state)) / 1e6:.1f} MB; {per_group:,} events per call; set up in"
          f" {time.perf_counter() - started:.0f}s")
    figures: dict[str, list[float]] = {"log": [], "dump": []}
    chunks = [rest[i:i + per_group] for i in range(0, len(rest), per_group)][:2 * args.batches]
    watermark = warm[-1].event_time_ms - 1
    for way, chunk in zip(itertools.cycle(["log", "dump"]), chunks):
        rows = frame(chunk, codec)
        started = time.perf_counter()
        advance_group(model, primary, iter([rows]), watermark, store, "")
        if way == "dump":
            snapshot.dump(held_state._held[primary].state)
        figures[way].append(time.perf_counter() - started)
        watermark = chunk[-1].event_time_ms - 1
    state = held_state._held[primary].state
    print(f"messages held at the end: {len(state.messages):,}; log: {store.version().log_entries} entries,"
          f" {store.version().log_events:,} events since the base")
    for way, seconds in figures.items():
        median = statistics.median(seconds)
        print(f"  {way}: {median:.3f}s per call (median of {len(seconds)}), {per_group / median:,.0f} events/s")
    ratio = statistics.median(figures["dump"]) / statistics.median(figures["log"])
    print(f"log is {ratio:.2f}x faster than dump at {len(state.messages):,} messages held")
    started = time.perf_counter()
    held_state.rebuild(store, lambda: model.new_state(primary), lambda s, call: replay_call(model, s, call),
                       model.loaded)
    print(f"  cold start (base + log replayed): {time.perf_counter() - started:.3f}s")


if __name__ == "__main__":
    main()
