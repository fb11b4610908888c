"""Benchmark: the shadow-redundancy model alone, on one core, over a realistic event mix.

    .venv/bin/python -m benchmarks.model [--servers 16] [--rate 20] [--hours 2]

Generates the synthetic workload in memory first (not timed), then times the reference
replay (every group, every deadline) and prints events per second and the peak number of
messages held at once.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

from producers.synthetic import Workload, generate
from state.replay import replay


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=16)
    parser.add_argument("--rate", type=float, default=20.0, help="messages per second, organisation-wide")
    parser.add_argument("--hours", type=float, default=2.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    workload = Workload(servers=args.servers, messages_per_second=args.rate, duration_ms=int(args.hours * 3600_000))
    events = list(generate(workload))
    mix = Counter(type(e).__name__ for e in events)
    print(f"workload: {args.servers} servers, {args.rate:g} messages/s for {args.hours:g} h -> {len(events):,} events")
    print("mix: " + ", ".join(f"{name} {count / len(events):.0%}" for name, count in mix.most_common(6)))
    rates = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        result = replay(events)
        rates.append(len(events) / (time.perf_counter() - started))
    left = sum(len(s.messages) for s in result.states.values())
    print(f"model replay: {max(rates):,.0f} events/s (best of {args.repeat}; all: "
          + ", ".join(f"{r:,.0f}" for r in rates) + f"), one core; {len(result.alerts)} alerts,"
          f" {len(result.commands)} commands, {left} messages left in state")


if __name__ == "__main__":
    main()
