"""The log path against the ground truth for a whole simulated day: prints the figures.

    .venv/bin/python -m benchmarks.mtl_ground_truth [--seed 7] [--topology conf/topology.toml] [--out DIR]

Simulates the topology, writes its Exchange message-tracking logs, ingests them, replays both
the native events and the ingested ones through the model (the reference twin), and prints
promotions found / expected, false alerts and the longest delay after each true promotion
(`producers/simulator/mtl_check.py`), with the time each step took.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from producers.simulator.mtl_check import check_logs
from producers.simulator.topology import DEFAULT_TOPOLOGY, load_topology


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--topology", default=str(DEFAULT_TOPOLOGY))
    parser.add_argument("--out", help="where to write the logs (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(args.out or temporary)
        folder.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        check = check_logs(load_topology(args.topology), args.seed, folder)
        print(f"seed {args.seed}, {args.topology}: {time.perf_counter() - started:.0f} s")
        print(check.describe())
        for alert in check.false_alerts[:10]:
            print(f"  false: {alert.type.value} {','.join(alert.servers)}: {alert.reason[:160]}")


if __name__ == "__main__":
    main()
