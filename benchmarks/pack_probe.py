"""Probe: would packing a batch's rows per group before the shuffle cut the JVM's work per event?

    .venv/bin/python -m benchmarks.pack_probe [--files 6] [--rows 500000] [--rounds 2]

Rows shaped like the operator's input (streaming/twin.py's `routed`: 8 primaries, a 140-byte
value), from Parquet, one file per micro-batch, through groupBy + transformWithStateInPandas with
a processor that only counts them: one row per event (as the twin does) against one row per group
and Arrow batch (`mapInArrow` packs a group's rows as Arrow IPC; the processor reads them back).
Prints, per round and variant, the rows seen, the wall time and the CPU per row of the Spark JVM
and of its Python workers (benchmarks/memory.py). Rounds alternate the variants; compare warm rounds.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from benchmarks.memory import jvm_pid, spark_cpu_seconds
from infra.settings import load_settings
from streaming.session import build_spark

OUT = "primary_server STRING, n LONG"
PACKED = "primary_server STRING, event_time TIMESTAMP, packed BINARY"


def processors():
    from pyspark.sql.streaming import StatefulProcessor

    class Count(StatefulProcessor):
        def init(self, handle):
            self.n = handle.getValueState("n", "n LONG")
        def handleInputRows(self, key, rows, timerValues):
            n = sum(len(f) for f in rows)
            yield pd.DataFrame({"primary_server": [key[0]], "n": [n]})
        def close(self): pass

    class Unpack(StatefulProcessor):
        def init(self, handle):
            self.n = handle.getValueState("n", "n LONG")
        def handleInputRows(self, key, rows, timerValues):
            n = 0
            for f in rows:
                for b in f["packed"]:
                    n += pa.ipc.open_stream(b).read_all().num_rows
            yield pd.DataFrame({"primary_server": [key[0]], "n": [n]})
        def close(self): pass
    return Count, Unpack


def pack(batches):
    for batch in batches:
        table = pa.Table.from_batches([batch])
        keys = table.column("primary_server").to_numpy(zero_copy_only=False)
        times = table.column("event_time")
        out_k, out_t, out_p = [], [], []
        for k in pd.unique(keys):
            part = table.filter(pa.array(keys == k))
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, part.schema) as w:
                w.write_table(part)
            out_k.append(k); out_t.append(pc.max(part.column("event_time")).as_py()); out_p.append(sink.getvalue().to_pybytes())
        yield pa.RecordBatch.from_arrays([pa.array(out_k, pa.string()), pa.array(out_t, times.type), pa.array(out_p, pa.binary())],
                                         names=["primary_server", "event_time", "packed"])


def write_input(folder, files, rows):
    rng = np.random.default_rng(1)
    servers = np.array([f"mbx{i:02d}" for i in range(1, 9)])
    start = pd.Timestamp("2026-01-05", tz="UTC")
    for i in range(files):
        t = start + pd.to_timedelta(np.arange(i * rows, (i + 1) * rows) * 2, unit="ms")
        pd.DataFrame({
            "primary_server": servers[rng.integers(0, 8, rows)], "fact": pd.Series([None] * rows, dtype=object),
            "event_time": t, "value": [rng.bytes(140) for _ in range(rows)], "key": [b"<1021.1575@fabrikam.com>"] * rows,
            "topic": "shadowtwin.events", "partition": rng.integers(0, 4, rows).astype("int32"),
            "offset": np.arange(rows, dtype="int64"), "reason": pd.Series([None] * rows, dtype=object),
            "node": servers[rng.integers(0, 8, rows)],
        }).to_parquet(folder / f"part-{i:03d}.parquet", coerce_timestamps="us", allow_truncated_timestamps=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--files", type=int, default=6); p.add_argument("--rows", type=int, default=500_000)
    p.add_argument("--rounds", type=int, default=2)
    a = p.parse_args()
    work = Path(tempfile.mkdtemp())
    (work / "in").mkdir()
    write_input(work / "in", a.files, a.rows)
    spark = build_spark(load_settings())
    pid = jvm_pid(spark)
    schema = spark.read.parquet(str(work / "in")).schema
    Count, Unpack = processors()
    for r in range(a.rounds):
        for variant in ("rows", "packed"):
            src = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(work / "in"))
            if variant == "rows":
                df = src.withWatermark("event_time", "30 seconds").groupBy("primary_server").transformWithStateInPandas(
                    Count(), OUT, "Append", "EventTime")
            else:
                df = src.mapInArrow(pack, PACKED).withWatermark("event_time", "30 seconds").groupBy(
                    "primary_server").transformWithStateInPandas(Unpack(), OUT, "Append", "EventTime")
            total = {"n": 0}
            def sink(batch, _id):
                total["n"] += sum(row.n for row in batch.collect())
            ck = work / f"ck-{variant}-{r}"
            jvm0, py0 = spark_cpu_seconds(pid); t0 = time.perf_counter()
            q = df.writeStream.foreachBatch(sink).option("checkpointLocation", str(ck)).trigger(availableNow=True).start()
            q.awaitTermination()
            wall = time.perf_counter() - t0; jvm1, py1 = spark_cpu_seconds(pid)
            n = a.files * a.rows
            print(f"round {r} {variant:6s}: {total['n']:,} rows seen, {wall:.1f} s wall, {n / wall:,.0f} rows/s; "
                  f"JVM {(jvm1 - jvm0) / n * 1e6:.2f} us/row, workers {(py1 - py0) / n * 1e6:.2f} us/row", flush=True)
    spark.stop()
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
