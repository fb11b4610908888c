"""Small topologies for scenario tests: simulate, replay through the model, compare with the ground truth."""

from __future__ import annotations

from dataclasses import dataclass

from producers.simulator.engine import Simulation
from producers.simulator.topology import Topology, topology_from
from schemas.events import Alert, AlertType, Event, RedeliveryCommand
from state.replay import ReplayResult, replay

HOUR = "01:00:00"


def topology(faults=(), *, duration="04:00:00", rate=0.5, shadow_redundancy=None, hubs=False,
             external_share=0.3) -> Topology:
    """One DAG across two sites (mbx01, mbx02 in nyc; mbx03 in lon) with its mailbox databases;
    mail to and from outside goes through the DAG itself, or through two 2010 hubs."""
    servers = [{"name": "mbx01", "site": "nyc", "dag": "dag1"}, {"name": "mbx02", "site": "nyc", "dag": "dag1"},
               {"name": "mbx03", "site": "lon", "dag": "dag1"}]
    if hubs:
        servers += [{"name": "hub01", "site": "chi", "mode": "EXCHANGE_2010"},
                    {"name": "hub02", "site": "chi", "mode": "EXCHANGE_2010"}]
    edge = "chi" if hubs else "dag1"
    return topology_from({
        "organisation": {"domain": "contoso.com", "start": "2026-01-05T00:00:00Z", "duration": duration,
                         "users_per_database": 100},
        "servers": servers,
        "mailbox_databases": [{"name": "DB01", "dag": "dag1"}, {"name": "DB02", "dag": "dag1"}],
        "internet": {"inbound_boundary": edge, "outbound_boundary": edge, "senders": ["mx.fabrikam.com"],
                     "receivers": ["fabrikam.com", "adatum.com"]},
        "workload": {"messages_per_second": rate, "daily_curve": [1.0] * 24, "external_recipient_share": external_share,
                     "recipients_weights": [60, 25, 15]},
        "shadow_redundancy": shadow_redundancy or {},
        "faults": list(faults),
    })


@dataclass
class Run:
    simulation: Simulation
    events: list[Event]
    result: ReplayResult

    @property
    def truth(self):
        return self.simulation.truth.messages

    def alerts(self, *types: AlertType) -> list[Alert]:
        return [a for a in self.result.alerts if a.type in types]

    def alerted_ids(self, *types: AlertType) -> set[str]:
        return {m.message.internal_id for a in self.alerts(*types) for m in a.messages}

    def commands(self) -> list[RedeliveryCommand]:
        return self.result.commands

    def promoted_in_truth(self, primary: str | None = None) -> set[str]:
        return {p["internal_id"] for t in self.truth.values() for p in t.promotions
                if primary is None or p["primary"] == primary}

    def results(self) -> dict[str, int]:
        return self.simulation.truth.counts()

    def with_result(self, *results: str) -> list:
        return [t for t in self.truth.values() if t.result() in results]


def simulate(topo: Topology, seed: int = 7) -> Run:
    simulation = Simulation(topo, seed)
    events = list(simulation.events())
    return Run(simulation, events, replay(events, topo.model_config()))
