"""Benchmark: the twin's decoding in Spark alone (`streaming.decode.classify_events`), rows per second.

    .venv/bin/python -m benchmarks.decode [--minutes 120] [--copies 6] [--rounds 4]

The synthetic workload (8 servers, `--minutes` of it) encoded as the events topic holds it, cached,
repeated `--copies` times, classified (magic, fingerprint, `from_avro`, reason) into Spark's
`noop` sink `--rounds` times in one Spark session; the first rounds include the JIT's warm-up.
This is the map stage's decoding, without Kafka and without the stateful operator.
"""

from __future__ import annotations

import argparse
import datetime
import time

from infra.settings import load_settings
from producers.synthetic import Workload, generate
from schemas.codec import encode, kafka_key
from streaming.decode import classify_events
from streaming.session import build_spark


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=int, default=120, help="minutes of the synthetic workload")
    parser.add_argument("--copies", type=int, default=6, help="how many times the workload is repeated")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args(argv)
    spark = build_spark(load_settings())
    stored = datetime.datetime(2026, 1, 1)
    rows = [(kafka_key(e), encode(e), "events", 0, offset, stored)
            for offset, e in enumerate(generate(Workload(servers=8, duration_ms=args.minutes * 60_000)))]
    frame = spark.createDataFrame(
        rows, "key binary, value binary, topic string, partition int, offset long, timestamp timestamp").cache()
    frame.count()
    repeated = frame
    for _ in range(args.copies - 1):
        repeated = repeated.unionByName(frame)
    count = repeated.count()
    for round_ in range(1, args.rounds + 1):
        started = time.perf_counter()
        classify_events(repeated).write.format("noop").mode("overwrite").save()
        seconds = time.perf_counter() - started
        print(f"round {round_}: classified {count:,} rows in {seconds:.2f} s = {count / seconds:,.0f} rows/s",
              flush=True)


if __name__ == "__main__":
    main()
