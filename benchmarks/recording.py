"""How fast a recorded day is written and read as an Avro container file, on one core.

    .venv/bin/python -m benchmarks.recording [--hours 2] [--repeat 3]

Generates the synthetic workload in memory (not timed), writes it with `write_events`
(deflate), then reads it back with `read_events`, draining the events (as a stream
consumer does) and keeping them in a list (as `shadowtwin whatif` does, where Python's
garbage collector adds its share); then with fastavro alone, for comparison.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterable

import fastavro

from producers.recording import read_events, write_events
from producers.synthetic import Workload, generate
from schemas import catalogue
from schemas.datum import from_datum


def best_rate(count: int, operation: Callable[[], object], repeat: int) -> float:
    """Items per second of the fastest of `repeat` runs of `operation`, which handles `count` items."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        operation()
        best = min(best, time.perf_counter() - started)
    return count / best


def drain(events: Iterable[object]) -> None:
    for _ in events:
        pass


def read_with_fastavro(path: Path) -> Iterable[object]:
    """The events of `path` read by fastavro's record reader and converted from its dicts."""
    schema = catalogue.default().current("Event").schema
    with open(path, "rb") as data:
        for datum in fastavro.reader(data, schema, return_record_name=True, return_record_name_override=True):
            yield from_datum("Event", datum)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hours", type=float, default=2.0, help="length of the synthetic day (default %(default)s)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement, the best counts")
    args = parser.parse_args(argv)
    events = list(generate(Workload(duration_ms=int(args.hours * 3600_000))))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "day.avro"
        write = best_rate(len(events), lambda: write_events(path, events), args.repeat)
        print(f"{len(events):,} events, {path.stat().st_size / len(events):.1f} bytes per event (deflate)")
        for label, rate in (
            ("write_events", write),
            ("read_events, drained", best_rate(len(events), lambda: drain(read_events(path)), args.repeat)),
            ("read_events, list", best_rate(len(events), lambda: list(read_events(path)), args.repeat)),
            ("fastavro, drained", best_rate(len(events), lambda: drain(read_with_fastavro(path)), args.repeat)),
        ):
            print(f"{label:22} {rate:>10,.0f} events/s")


if __name__ == "__main__":
    main()
