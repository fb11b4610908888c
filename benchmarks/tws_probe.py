"""Probe of `transformWithStateInPandas` (written for pyspark 4.0.0; RocksDB) for the operator's needs.

    .venv/bin/python -m benchmarks.tws_probe [--groups 8] [--batches 6] [--rows 20000] [--blob-kb 4096]

A Parquet file source (one file per micro-batch), event-time mode with a watermark, one group
per key plus the empty key, and per group a ValueState (a base blob), a ListState (a log entry
per call) and a ValueState token, as streaming/operator.py would hold them. It prints, per
state call, the median cost measured inside the Python worker; when timers fire relative to
the watermark and to the batch's rows; and what the watermark handed to the call is.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import pandas as pd

from infra.settings import load_settings
from streaming.session import build_spark

CHUNK = 1 << 20  # state values travel in pieces: 4.0.0's state server read a proto message with one read()
OUTPUT = "key STRING, what STRING, micros DOUBLE, watermark LONG, detail LONG"


def processor_class(blob_bytes: int):
    from pyspark.sql.streaming import StatefulProcessor

    class Probe(StatefulProcessor):
        def init(self, handle):
            self.handle = handle
            self.base = handle.getListState("base", "chunk BINARY")
            self.log = handle.getListState("log", "rows BINARY, watermark LONG")
            self.token = handle.getValueState("token", "token BINARY, log_entries INT, timer LONG")

        def handleInputRows(self, key, rows, timerValues):
            out = []
            watermark = timerValues.getCurrentWatermarkInMs()

            def timed(what, call, detail=0):
                start = time.perf_counter()
                result = call()
                out.append((key[0], what, (time.perf_counter() - start) * 1e6, watermark, detail))
                return result

            frames = list(rows)
            n = sum(len(f) for f in frames)
            min_ms = min(int(f["event_time"].min().value // 1_000_000) for f in frames)
            out.append((key[0], "rows", 0.0, watermark, n))
            out.append((key[0], "pid", 0.0, watermark, os.getpid()))
            out.append((key[0], "min_event_ms", 0.0, watermark, min_ms))
            token = timed("token.get", self.token.get)
            entries = 0 if token is None else token[1]
            if entries and entries % 3 == 0:
                log = timed("log.read", lambda: list(self.log.get()), entries)
                out.append((key[0], "log.read.entries", 0.0, watermark, len(log)))
            payload = b"x" * (n * 40)
            timed("log.appendList", lambda: self.log.appendList([(payload, watermark)]), len(payload))
            if entries == 0 or entries % 4 == 0:
                blob = os.urandom(16) * (blob_bytes // 16)
                chunks = [(blob[i:i + CHUNK],) for i in range(0, len(blob), CHUNK)]
                timed("base.put", lambda: self.base.put(chunks), len(blob))
                got = timed("base.get", lambda: b"".join(c[0] for c in self.base.get()), len(blob))
                assert got == blob
            max_ms = max(int(f["event_time"].max().value // 1_000_000) for f in frames)
            timer = max_ms + 1
            if token is not None and token[2] is not None:
                timed("timer.delete", lambda: self.handle.deleteTimer(token[2]))
            timed("timer.register", lambda: self.handle.registerTimer(timer))
            timed("token.update", lambda: self.token.update((os.urandom(16), entries + 1, timer)))
            yield pd.DataFrame(out, columns=["key", "what", "micros", "watermark", "detail"])

        def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
            yield pd.DataFrame([(key[0], "fired", 0.0, timerValues.getCurrentWatermarkInMs(),
                                 expiredTimerInfo.getExpiryTimeInMs())],
                               columns=["key", "what", "micros", "watermark", "detail"])

        def close(self):
            pass

    return Probe


def write_batches(folder: Path, groups: int, batches: int, rows: int) -> None:
    """One Parquet file per micro-batch; each batch 60 s later in event time; the empty key too."""
    for b in range(batches):
        keys = [f"g{i % groups}" for i in range(rows)] + [""]
        times = [(b * 60_000 + (i * 50_000) // rows) for i in range(rows)] + [b * 60_000]
        frame = pd.DataFrame({"key": keys, "event_time": pd.to_datetime(times, unit="ms", utc=True).astype("datetime64[us, UTC]"),
                              "value": [b"v" * 40] * len(keys)})
        frame.to_parquet(folder / f"part-{b:04d}.parquet")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=8)
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--blob-kb", type=int, default=4096)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tws-probe-"))
    try:
        source = work / "source"
        source.mkdir()
        write_batches(source, args.groups, args.batches, args.rows)
        spark = build_spark(load_settings())
        schema = "key STRING, event_time TIMESTAMP, value BINARY"
        rows = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(source))
                .withWatermark("event_time", "10 seconds"))
        out = rows.groupBy("key").transformWithStateInPandas(
            processor_class(args.blob_kb * 1024)(), OUTPUT, "Append", "EventTime")
        query = (out.writeStream.format("memory").queryName("probe").outputMode("append")
                 .option("checkpointLocation", str(work / "checkpoint")).start())
        started = time.perf_counter()
        query.processAllAvailable()
        elapsed = time.perf_counter() - started
        durations = [p["durationMs"].get("addBatch", 0) for p in query.recentProgress]
        query.stop()
        result = spark.sql("SELECT * FROM probe").toPandas()
        report(result, args, elapsed, durations)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def report(result: pd.DataFrame, args, elapsed: float, durations: list[int]) -> None:
    print(f"{args.batches} batches x {args.rows} rows, {args.groups} groups + the empty key: {elapsed:.1f} s;"
          f" addBatch ms per batch: {durations}")
    costs = defaultdict(list)
    for row in result.itertuples(index=False):
        if row.micros > 0:
            costs[row.what].append((row.micros, row.detail))
    for what, values in sorted(costs.items()):
        micros = [m for m, _ in values]
        print(f"  {what:15s} calls {len(micros):4d}  median {statistics.median(micros):10.0f} us"
              f"  max {max(micros):10.0f} us  (detail: {values[0][1]})")
    calls = result[result["what"] == "rows"]
    print(f"  calls with rows: {len(calls)} (keys: {sorted(set(calls['key']))})")
    for row in result[result["what"] == "min_event_ms"].sort_values("watermark").itertuples():
        if row.detail <= row.watermark:
            print(f"  LATE ROW reached the operator: {row.key} {row.detail} <= watermark {row.watermark}")
    fired = result[result["what"] == "fired"]
    for row in fired.sort_values(["watermark", "key"]).itertuples():
        print(f"  timer fired: key {row.key!r} expiry {row.detail} watermark {row.watermark}"
              f" ({'>=' if row.watermark >= row.detail else '<'})")
    print("  watermarks seen by handleInputRows:", sorted(set(calls["watermark"])))
    pids = result[result["what"] == "pid"].sort_values("watermark")
    moves = sum(int(a != b) for _, group in pids.groupby("key") for a, b in zip(group["detail"], group["detail"][1:]))
    print(f"  Python workers: {pids['detail'].nunique()}; a group's next call on another worker:"
          f" {moves} of {len(pids) - pids['key'].nunique()}")


if __name__ == "__main__":
    main()
