"""Hunt bugs on the log path: a small random world per seed, checked against its ground truth.

    .venv/bin/python -m benchmarks.hunt --seeds 1700-1720 [--keep DIR]   # one line per seed
    .venv/bin/python -m benchmarks.hunt --show 1700                      # that seed's world as TOML
    .venv/bin/python -m benchmarks.hunt --seeds 3101-3160 --digest       # what both twins decided, digested

Each seed makes one world (random.Random(seed)): two to four Exchange servers (ex01, ...) in
one DAG over one or two sites, random ShadowResubmitTimeSpan / ShadowHeartbeatFrequency, a few
faults of the simulator's kinds (producers/simulator/topology.py KINDS), with or without
Managed Availability's health probe in the logs, for one to six hours. The world is checked
as a topology file is (`topology_from`), then `check_logs` runs it (mtl_check.py) and a line
says: promotions found from the logs / expected (native events' count), false alerts, the
longest delay after a true promotion (logs / native), and flags:

    missed      the log-fed twin did not find a true promotion      native-missed  the native twin
    false       it raised alerts the native twin did not             late           found > 10 min late
    dead        log lines the ingester could not take                 dup?           native DUPLICATE_DELIVERY_EXPECTED
    expired?    native MESSAGE_EXPIRED of a message delivered         promoted?      native promotion alert the truth lacks
    error       the run raised (its exception follows)

A seed whose simulation makes more than `--max-events` events (MAX_EVENTS by default, 0: no bound) is
stopped there and said `huge`: a typical world makes 10,000 to 80,000; one whose servers all die
but one that answers 451 to every message (RejectMessageOnShadowFailure) makes millions, its senders
retrying each message every minute (seed 8640: 13.4 million events of 4,246 messages, 10 h).

`--keep DIR` keeps each seed's logs in DIR/SEED.

`--digest` prints instead, per seed, how many alerts each twin raised (native, logs) and a digest of
every alert and command both decided: run in two trees, equal lines show that a change (a speed-up)
changed no decision.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import sys
import tempfile
import time
import traceback
from pathlib import Path

from producers.simulator.mtl_check import PROMOTION_ALERTS, LogCheck, WorldTooLarge, check_logs
from producers.simulator.topology import Topology, topology_from
from schemas.events import AlertType

LATE_MS = 10 * 60_000
MAX_EVENTS = 1_000_000


def _span(seconds: int) -> str:
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def world(seed: int) -> dict:
    """The seed's world as a topology file's tables (plus `probe`: whether health probes are logged)."""
    rnd = random.Random(seed)
    hours = rnd.randint(1, 6)
    count = rnd.randint(2, 4)
    sites = ["s1", "s2"][:rnd.randint(1, 2)]
    servers = [{"name": f"ex{i + 1:02d}", "site": sites[i % len(sites)], "dag": "dag1"} for i in range(count)]
    heartbeat = rnd.choice([30, 60, 120, 300])
    sr: dict = {"shadow_heartbeat_frequency": _span(heartbeat),
                "shadow_resubmit_time_span": _span(rnd.choice([300, 900, 3600, 10800])),
                "reject_message_on_shadow_failure": rnd.random() < 0.3}
    if rnd.random() < 0.3:
        sr["message_expiration_timeout"] = _span(rnd.choice([1800, 3600, 7200]))
    probe = rnd.random() < 0.5
    # The documented remedy for a heartbeat under 100 s (EXCHANGE_LOGS.md): silence span over 5 minutes.
    if heartbeat * 3 <= 300:
        sr["shadow_silence_heartbeats"] = 330 // heartbeat + 1
    faults = []
    for _ in range(rnd.randint(1, 3)):
        kind = rnd.choice(["crash", "crash", "partition", "slow_next_hop", "refusing_next_hop", "clock_skew",
                           "shadow_failure"])
        at, duration = rnd.randint(5, hours * 60 - 10) * 60, rnd.choice([2, 5, 8, 15, 30, 60, 120]) * 60
        fault: dict = {"kind": kind, "at": _span(at), "duration": _span(duration)}
        server = rnd.choice(servers)["name"]
        if kind == "crash":
            fault |= {"server": server, "restart": rnd.choice(["same_database", "new_database", "never"]),
                      "backlog": _span(rnd.choice([0, 0, 60, 300]))}
        elif kind == "partition":
            fault["servers"] = rnd.sample([s["name"] for s in servers], 2)
        elif kind in ("slow_next_hop", "refusing_next_hop"):
            fault["next_hop"] = rnd.choice(["DB01", "fabrikam.com"] + [s["name"] for s in servers])
            if kind == "slow_next_hop":
                fault["delay"] = _span(rnd.choice([60, 300, 600]))
        elif kind == "clock_skew":
            fault |= {"server": server, "offset": f"{rnd.choice([-1, 1]) * rnd.choice([5, 20, 60, 240])}s"}
        else:
            fault["server"] = server
        if kind != "crash" or all(f.get("server") != server for f in faults if f["kind"] == "crash"):
            faults.append(fault)  # a server's crashes must not overlap: one crash per server
    return {
        "organisation": {"domain": "contoso.com", "start": "2026-01-05T00:00:00Z", "duration": _span(hours * 3600),
                         "users_per_database": 50},
        "servers": servers,
        "mailbox_databases": [{"name": "DB01", "dag": "dag1"}],
        "internet": {"inbound_boundary": "dag1", "outbound_boundary": "dag1", "senders": ["mx.fabrikam.com"],
                     "receivers": ["fabrikam.com"]},
        "workload": {"messages_per_second": rnd.choice([0.02, 0.05, 0.1, 0.2]), "daily_curve": [1.0] * 24},
        "shadow_redundancy": sr,
        "faults": faults,
        "probe": probe,
    }


def topology(tables: dict, seed: int) -> Topology:
    return topology_from({k: v for k, v in tables.items() if k != "probe"}, where=f"hunt seed {seed}")


def toml(tables: dict) -> str:
    """The world as a topology file (its tables hold strings, numbers, booleans and lists of them)."""
    def value(v) -> str:
        if isinstance(v, bool):
            return str(v).lower()
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return f'"{v}"' if isinstance(v, str) else str(v)

    out = [f"# probe = {str(tables['probe']).lower()} (health probes in the logs)"]
    for name, body in tables.items():
        if isinstance(body, dict):
            out += [f"\n[{name}]"] + [f"{k} = {value(v)}" for k, v in body.items()]
        elif isinstance(body, list):
            for row in body:
                out += [f"\n[[{name}]]"] + [f"{k} = {value(v)}" for k, v in row.items()]
    return "\n".join(out) + "\n"


def flags(check: LogCheck) -> list[str]:
    """What looks wrong in a check (see the module's docstring)."""
    truth = check.truth
    native = check.native.alerts

    def named(*types: AlertType) -> set[str]:
        return {m.message.message_id for a in native if a.type in types for m in a.messages}

    out = []
    if check.missed:
        out.append(f"missed {len(check.missed)}")
    if set(check.expected) - set(check.native_found):
        out.append(f"native-missed {len(set(check.expected) - set(check.native_found))}")
    if check.false_alerts:
        out.append(f"false {len(check.false_alerts)}")
    if max(check.delay_ms(check.found) or 0, check.delay_ms(check.native_found) or 0) > LATE_MS:
        out.append("late")
    if check.dead_letters:
        out.append(f"dead {check.dead_letters}")
    # (a forecast duplicate that expired instead, its resubmission refused past MessageExpirationTimeout, is
    # no contradiction: the twin says MESSAGE_EXPIRED then)
    dup = {m for m in named(AlertType.DUPLICATE_DELIVERY_EXPECTED)
           if m in truth and truth[m].result() not in ("duplicate", "duplicate_hidden") and not truth[m].expired}
    expired = {m for m in named(AlertType.MESSAGE_EXPIRED) if m in truth and truth[m].deliveries
               and not truth[m].expired}
    promoted = {m for m in named(*PROMOTION_ALERTS) if m in truth and not truth[m].promotions}
    for name, ids in (("dup?", dup), ("expired?", expired), ("promoted?", promoted)):
        if ids:
            out.append(f"{name} {len(ids)} ({min(ids)})")
    return out


def hunt(seed: int, keep: Path | None, digest: bool = False, max_events: int = MAX_EVENTS) -> str:
    tables = world(seed)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as temporary:
        folder = keep / str(seed) if keep else Path(temporary)
        folder.mkdir(parents=True, exist_ok=True)
        try:
            check = check_logs(topology(tables, seed), seed, folder, probes=tables["probe"],
                               max_events=max_events or None)
        except WorldTooLarge as exc:
            return f"seed {seed}: huge, {exc}"
        except Exception as exc:  # a hunt reports a crash as a finding and goes on
            return f"seed {seed}: error {type(exc).__name__}: {exc}\n{traceback.format_exc()}"
    if digest:
        decided = repr([repr(x) for run in (check.native, check.logs) for x in (*run.alerts, *run.commands)])
        return (f"seed {seed}: alerts {len(check.native.alerts)}/{len(check.logs.alerts)},"
                f" digest {hashlib.sha1(decided.encode()).hexdigest()[:16]}")

    def minutes(ms: int | None) -> str:
        return "-" if ms is None else f"{ms / 60_000:.1f}"

    return (f"seed {seed}: found {len(check.found)}/{len(check.expected)} (native {len(check.native_found)}),"
            f" false {len(check.false_alerts)}, delay {minutes(check.delay_ms(check.found))}"
            f"/{minutes(check.delay_ms(check.native_found))} min, {time.perf_counter() - started:.0f} s"
            + ("  ! " + ", ".join(found) if (found := flags(check)) else ""))


def _seeds(text: str) -> range:
    first, _, last = text.partition("-")
    return range(int(first), int(last or first) + 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=_seeds, help="FIRST-LAST (or one seed)")
    parser.add_argument("--show", type=int, metavar="SEED", help="print the seed's world as TOML")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="keep each seed's logs in DIR/SEED")
    parser.add_argument("--digest", action="store_true", help="per seed, a digest of every decision instead")
    parser.add_argument("--max-events", type=int, default=MAX_EVENTS, metavar="N",
                        help=f"stop a seed past N simulated events (default {MAX_EVENTS:,}; 0: no bound)")
    args = parser.parse_args(argv)
    if args.show is not None:
        print(toml(world(args.show)), end="")
        return 0
    if args.seeds is None:
        parser.error("give --seeds FIRST-LAST or --show SEED")
    for seed in args.seeds:
        print(hunt(seed, args.keep, args.digest, args.max_events), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
