"""Benchmark: the shadow-redundancy model alone, on one core, over a realistic event mix.

    .venv/bin/python -m benchmarks.model [--servers 16] [--rate 20] [--hours 2] [--in-flight 50000] [--breakdown]

Generates the synthetic workload in memory first (not timed), then times the reference
replay (every group, every deadline) and prints events per second and the peak number of
messages held at once. Then the memory the model holds per message in flight: a workload
with about `--in-flight` messages in flight (2,000 a second) replayed to a moment while they
are held, the states' allocations counted by tracemalloc (everything a group keeps: messages,
heartbeat pairs, deadlines, applied event ids, facts), divided by the messages held. Printed
twice: what the model allocates itself (the events made before counting), and with what it
keeps of the events it was given (their MessageRefs, recipients and id strings, which a
decoder makes anew for every event), as in a twin fed from Kafka.

`--breakdown` splits the replay's CPU time per recorded event: the reference engine's own work
(sorting, grouping, the shared facts, merging), the model's per-event loop alone (deduplication,
deadline check, dispatch: a model without handlers) and the handlers (the rest); and gives the
model alone (its loop and handlers, the groups' events made ready beforehand) in events/s.
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc
from collections import Counter, defaultdict

from producers.synthetic import Workload, generate
from schemas.events import ClockTick, NodeStarted
from state import collector
from state.facts import shared_facts
from state.model import ShadowRedundancyModel
from state.replay import replay


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=16)
    parser.add_argument("--rate", type=float, default=20.0, help="messages per second, organisation-wide")
    parser.add_argument("--hours", type=float, default=2.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--in-flight", type=int, default=50_000, help="messages in flight for the memory figure")
    parser.add_argument("--breakdown", action="store_true", help="where the CPU time per event goes")
    args = parser.parse_args()
    workload = Workload(servers=args.servers, messages_per_second=args.rate, duration_ms=int(args.hours * 3600_000))
    events = list(generate(workload))
    mix = Counter(type(e).__name__ for e in events)
    print(f"workload: {args.servers} servers, {args.rate:g} messages/s for {args.hours:g} h -> {len(events):,} events")
    print("mix: " + ", ".join(f"{name} {count / len(events):.0%}" for name, count in mix.most_common(6)))
    rates, cpu_rates = [], []
    for _ in range(args.repeat):
        started, cpu_started = time.perf_counter(), time.process_time()
        result = replay(events)
        rates.append(len(events) / (time.perf_counter() - started))
        cpu_rates.append(len(events) / (time.process_time() - cpu_started))
    left = sum(len(s.messages) for s in result.states.values())
    print(f"model replay: {max(rates):,.0f} events/s (best of {args.repeat}; all: "
          + ", ".join(f"{r:,.0f}" for r in rates) + f"), one core; {len(result.alerts)} alerts,"
          f" {len(result.commands)} commands, {left} messages left in state")
    # On a shared machine the process's own CPU time swings far less than the wall clock.
    print(f"model replay by CPU time: {max(cpu_rates):,.0f} events/s (best of {args.repeat}; all: "
          + ", ".join(f"{r:,.0f}" for r in cpu_rates) + ")")

    if args.breakdown:
        breakdown(events, args.repeat)
    for with_events in (False, True):
        held, size = memory_per_message(args.servers, args.in_flight, with_events)
        print(f"memory: {size / held:,.0f} bytes per message in flight ({held:,} messages held, {size / 1e6:,.0f} MB"
              " of model state, tracemalloc" + (", with what it keeps of the events)" if with_events else ")"))


def breakdown(events: list, repeat: int) -> None:
    """CPU time per recorded event: the whole replay, the model alone, the model's loop without handlers."""
    events = sorted(events, key=lambda e: e.event_time_ms)
    model, bare = ShadowRedundancyModel(), ShadowRedundancyModel()
    bare._handlers = {}
    facts = list(shared_facts(events, model.liveness_bucket_ms))
    groups: dict[str, list] = defaultdict(list)
    for event in events:
        if not isinstance(event, ClockTick):
            groups[event.primary_server].append(event)
    fed = {primary: sorted(own + [f for f in facts if not (isinstance(f, NodeStarted) and f.node == primary)],
                           key=lambda e: e.event_time_ms) for primary, own in groups.items()}
    end_ms = events[-1].event_time_ms

    def run(with_model: ShadowRedundancyModel) -> None:
        with collector.paused():  # as in the replay and the operator's call
            for primary, group_events in fed.items():
                state = with_model.new_state(primary)
                with_model.on_events(state, group_events)
                with_model.on_time(state, end_ms)

    best: dict[str, float] = {}
    for _ in range(repeat):
        for name, step in (("replay", lambda: replay(events)), ("model", lambda: run(model)),
                           ("loop", lambda: run(bare))):
            started = time.process_time()
            step()
            best[name] = min(best.get(name, float("inf")), time.process_time() - started)
    us = {name: seconds / len(events) * 1e6 for name, seconds in best.items()}
    print(f"CPU per recorded event (best of {repeat}): replay {us['replay']:.2f} us = reference engine"
          f" {us['replay'] - us['model']:.2f} + model loop {us['loop']:.2f} + handlers {us['model'] - us['loop']:.2f};"
          f" the model alone (loop and handlers) {1e6 / us['model']:,.0f} events/s")


def memory_per_message(servers: int, in_flight: int, with_events: bool = False) -> tuple[int, int]:
    """(messages held, bytes the groups' states hold) midway through a workload with `in_flight` messages in flight;
    `with_events`: the events are made while counting, so what the states keep of them counts too."""
    rate = 2_000.0
    delivery_ms = int(in_flight / rate * 1000)
    workload = Workload(servers=servers, messages_per_second=rate, duration_ms=delivery_ms * 2, delivery_ms=delivery_ms)
    cut = workload.start_ms + workload.duration_ms
    if not with_events:
        events = [e for e in generate(workload) if e.event_time_ms < cut]
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    if with_events:
        events = [e for e in generate(workload) if e.event_time_ms < cut]
    result = replay(events)
    del events
    gc.collect()
    states = result.states
    result.states = {}
    del result
    gc.collect()
    size = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return sum(len(s.messages) for s in states.values()), size


if __name__ == "__main__":
    main()
