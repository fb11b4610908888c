"""Benchmark: what the state rows cost the operator per call (streaming/state_rows.py).

    .venv/bin/python -m benchmarks.summary [--messages 1000 10000 100000] [--touched 500]

For one group holding N messages in flight (each with a shadow copy), times the server summary
alone, and a whole call's state rows (summary, `--touched` message records, JSON, the pandas
frame); prints milliseconds per call and the bytes written.
"""

from __future__ import annotations

import argparse
import time

from schemas.events import Alert, AlertMessage, AlertType, MessageRef, Severity
from state.model import Output
from state.records import DeadlineKind, Message, Pair, PrimaryState, Redundancy
from state.summary import server_summary
from streaming.state_rows import StateWatch


def group(n: int) -> PrimaryState:
    state = PrimaryState(primary="mbx01", clock_ms=1_000_000, queue_db_id="db1")
    pair = state.pairs["mbx02"] = Pair("mbx02", last_contact_ms=1, last_query_ms=1)
    for i in range(n):
        internal = f"m{i}"
        state.messages[internal] = Message(ref=MessageRef(f"<{internal}@contoso.com>", internal), received_ms=i,
                                           redundancy=Redundancy.REDUNDANT, shadow_server="mbx02")
        pair.held.add(internal)
        state.deadlines.set(DeadlineKind.EXPIRE, internal, 10_000_000 + i)
    return state


def timed(call, repeat: int) -> float:
    start = time.perf_counter()
    for _ in range(repeat):
        call()
    return (time.perf_counter() - start) / repeat * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--touched", type=int, default=500, help="message records per call")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    for n in args.messages:
        state = group(n)
        watch = StateWatch(state, None, 0)
        watch.fires = True
        output = Output()
        touched_ids = [f"m{i}" for i in range(min(n, args.touched))]
        output.alerts.append(Alert(alert_id="a", type=AlertType.NOT_REDUNDANT, severity=Severity.INFO, servers=(),
                                   messages=tuple(AlertMessage(state.messages[i].ref) for i in touched_ids),
                                   reason="", decided_at_ms=0))
        summary_ms = timed(lambda: server_summary(state), args.repeat)
        rows_ms = timed(lambda: watch.rows(state, [], output, "shadowtwin.state"), args.repeat)
        rows = watch.rows(state, [], output, "shadowtwin.state")
        size = sum(len(v) for v in rows["value"] if v is not None)
        print(f"{n:>7,} messages in flight: summary {summary_ms:7.1f} ms; a call's state rows ({len(rows)} records,"
              f" {size:,} bytes) {rows_ms:7.1f} ms")


if __name__ == "__main__":
    main()
