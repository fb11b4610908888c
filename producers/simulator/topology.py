"""The simulator's input, typed and frozen: servers, boundaries, mailboxes, workload, faults.

`load_topology(path)` reads a TOML file such as `conf/topology.toml` and checks it as a
whole (unknown keys, servers that do not exist, a DAG with one member, ...), naming the
offending key in every error. Times in the fault schedule are offsets from the start.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Mapping

from schemas.events import NodeMode
from state.parameters import ModelConfig, ms, parse_duration, model_config_from


class TopologyError(ValueError):
    """A topology file that cannot be simulated as it stands."""


@dataclass(frozen=True)
class Server:
    name: str
    site: str
    dag: str | None = None
    mode: NodeMode = NodeMode.EXCHANGE_2013

    @property
    def boundary(self) -> str:
        """The transport high-availability boundary: the DAG, else the AD site."""
        return self.dag or self.site


@dataclass(frozen=True)
class MailboxDatabase:
    name: str
    dag: str


@dataclass(frozen=True)
class Internet:
    inbound_boundary: str
    outbound_boundary: str
    senders: tuple[str, ...] = ("mx1.fabrikam.com",)
    receivers: tuple[str, ...] = ("fabrikam.com",)


@dataclass(frozen=True)
class Workload:
    messages_per_second: float = 2.0
    daily_curve: tuple[float, ...] = (1.0,) * 24
    internal_submission_share: float = 0.6
    recipients_weights: tuple[float, ...] = (70, 20, 7, 3)
    external_recipient_share: float = 0.25
    size_bytes_median: int = 40_000
    queue_time_ms: int = 2_000


@dataclass(frozen=True)
class Fault:
    """One entry of the fault schedule; which fields matter depends on `kind`."""

    kind: str
    at_ms: int  # offset from the start
    duration_ms: int
    server: str | None = None
    servers: tuple[str, ...] = ()
    next_hop: str | None = None
    restart: str = "same_database"
    backlog_ms: int = 0
    delay_ms: int = 0
    offset_ms: int = 0

    KINDS = ("crash", "partition", "slow_next_hop", "refusing_next_hop", "clock_skew", "shadow_failure")
    RESTARTS = ("same_database", "new_database", "never")


@dataclass(frozen=True)
class Topology:
    domain: str
    start_ms: int
    duration_ms: int
    servers: tuple[Server, ...]
    mailbox_databases: tuple[MailboxDatabase, ...]
    internet: Internet
    workload: Workload = field(default_factory=Workload)
    model: ModelConfig = field(default_factory=ModelConfig)
    faults: tuple[Fault, ...] = ()
    users_per_database: int = 500

    def server(self, name: str) -> Server:
        for s in self.servers:
            if s.name == name:
                return s
        raise KeyError(name)

    def boundaries(self) -> dict[str, tuple[Server, ...]]:
        out: dict[str, list[Server]] = {}
        for s in self.servers:
            out.setdefault(s.boundary, []).append(s)
        return {b: tuple(members) for b, members in out.items()}

    def model_config(self) -> ModelConfig:
        """The parameters the nodes run with, each node's mode included: what the twin should be given."""
        nodes = dict(self.model.nodes)
        for s in self.servers:
            params = self.model.for_node(s.name)
            if params.mode is not s.mode:
                nodes[s.name] = replace(params, mode=s.mode)
        return replace(self.model, nodes=nodes)


# ---- loading ----------------------------------------------------------------------------

def load_topology(path: Path | str, overrides: Mapping[str, object] | None = None) -> Topology:
    """The topology in `path`; `overrides` replaces top-level tables (for tests and what-ifs)."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TopologyError(f"{path}: no such topology file") from None
    except tomllib.TOMLDecodeError as exc:
        raise TopologyError(f"{path}: {exc}") from None
    raw.update(overrides or {})
    try:
        return topology_from(raw)
    except TopologyError as exc:
        raise TopologyError(f"{path}: {exc}") from None


def topology_from(raw: Mapping[str, object]) -> Topology:
    raw = dict(raw)
    _known(raw, "", {"organisation", "servers", "mailbox_databases", "internet", "workload", "shadow_redundancy",
                     "faults"})
    org = _table(raw, "organisation")
    _known(org, "organisation", {"domain", "start", "duration", "users_per_database"})
    servers = tuple(_server(s, i) for i, s in enumerate(_list(raw, "servers")))
    names = [s.name for s in servers]
    if len(set(names)) != len(names):
        raise TopologyError(f"servers: a name appears twice in {names}")
    if not servers:
        raise TopologyError("servers: at least one server is needed")
    dags = {s.dag for s in servers if s.dag}
    databases = []
    for i, d in enumerate(_list(raw, "mailbox_databases")):
        _known(d, f"mailbox_databases[{i}]", {"name", "dag"})
        if d.get("dag") not in dags:
            raise TopologyError(f"mailbox_databases[{i}].dag: {d.get('dag')!r} is not the DAG of any server")
        databases.append(MailboxDatabase(str(d["name"]), str(d["dag"])))
    boundaries = {s.boundary for s in servers}
    net = _table(raw, "internet")
    _known(net, "internet", {"inbound_boundary", "outbound_boundary", "senders", "receivers"})
    internet = Internet(
        inbound_boundary=str(net.get("inbound_boundary", servers[0].boundary)),
        outbound_boundary=str(net.get("outbound_boundary", servers[0].boundary)),
        senders=tuple(net.get("senders", Internet.senders)),
        receivers=tuple(net.get("receivers", Internet.receivers)),
    )
    for key in ("inbound_boundary", "outbound_boundary"):
        if getattr(internet, key) not in boundaries:
            raise TopologyError(f"internet.{key}: {getattr(internet, key)!r} is not a boundary; boundaries:"
                                f" {', '.join(sorted(boundaries))}")
    try:
        model = model_config_from(_table(raw, "shadow_redundancy"))
    except ValueError as exc:
        raise TopologyError(f"shadow_redundancy: {exc}") from None
    unknown_nodes = set(model.nodes) - set(names)
    if unknown_nodes:
        raise TopologyError(f"shadow_redundancy.nodes: no such server {', '.join(sorted(unknown_nodes))}")
    faults = tuple(_fault(f, i, set(names), {d.name for d in databases} | set(internet.receivers) | set(names))
                   for i, f in enumerate(_list(raw, "faults")))
    return Topology(
        domain=str(org.get("domain", "contoso.com")),
        start_ms=_instant(org.get("start", "2026-01-05T00:00:00Z"), "organisation.start"),
        duration_ms=_duration(org.get("duration", "1.00:00:00"), "organisation.duration"),
        servers=servers, mailbox_databases=tuple(databases), internet=internet,
        workload=_workload(_table(raw, "workload")), model=model, faults=faults,
        users_per_database=int(org.get("users_per_database", 500)),
    )


def _server(raw: Mapping[str, object], i: int) -> Server:
    where = f"servers[{i}]"
    _known(raw, where, {"name", "site", "dag", "mode"})
    if "name" not in raw or "site" not in raw:
        raise TopologyError(f"{where}: name and site are required")
    try:
        mode = NodeMode(str(raw.get("mode", "EXCHANGE_2013")))
    except ValueError:
        raise TopologyError(f"{where}.mode: EXCHANGE_2013 or EXCHANGE_2010, not {raw.get('mode')!r}") from None
    return Server(str(raw["name"]), str(raw["site"]), str(raw["dag"]) if raw.get("dag") else None, mode)


def _workload(raw: Mapping[str, object]) -> Workload:
    _known(raw, "workload", {"messages_per_second", "daily_curve", "internal_submission_share",
                             "recipients_weights", "external_recipient_share", "size_bytes_median", "queue_time"})
    curve = tuple(float(x) for x in raw.get("daily_curve", Workload.daily_curve))
    if len(curve) != 24 or min(curve) < 0:
        raise TopologyError("workload.daily_curve: 24 multipliers >= 0, one per hour")
    return Workload(
        messages_per_second=float(raw.get("messages_per_second", Workload.messages_per_second)),
        daily_curve=curve,
        internal_submission_share=float(raw.get("internal_submission_share", Workload.internal_submission_share)),
        recipients_weights=tuple(float(x) for x in raw.get("recipients_weights", Workload.recipients_weights)),
        external_recipient_share=float(raw.get("external_recipient_share", Workload.external_recipient_share)),
        size_bytes_median=int(raw.get("size_bytes_median", Workload.size_bytes_median)),
        queue_time_ms=_duration(raw.get("queue_time", "2s"), "workload.queue_time"),
    )


def _fault(raw: Mapping[str, object], i: int, servers: set[str], hops: set[str]) -> Fault:
    where = f"faults[{i}]"
    _known(raw, where, {"kind", "at", "duration", "server", "servers", "next_hop", "restart", "backlog", "delay",
                        "offset"})
    kind = raw.get("kind")
    if kind not in Fault.KINDS:
        raise TopologyError(f"{where}.kind: one of {', '.join(Fault.KINDS)}, not {kind!r}")
    fault = Fault(
        kind=str(kind), at_ms=_duration(raw.get("at", 0), f"{where}.at"),
        duration_ms=_duration(raw.get("duration", 0), f"{where}.duration"),
        server=raw.get("server"), servers=tuple(raw.get("servers", ())), next_hop=raw.get("next_hop"),
        restart=str(raw.get("restart", "same_database")),
        backlog_ms=_duration(raw.get("backlog", 0), f"{where}.backlog"),
        delay_ms=_duration(raw.get("delay", 0), f"{where}.delay"),
        offset_ms=_signed_duration(raw.get("offset", 0), f"{where}.offset"),
    )
    if kind in ("crash", "clock_skew", "shadow_failure") and fault.server not in servers:
        raise TopologyError(f"{where}.server: {fault.server!r} is not a server")
    if kind == "partition" and (len(fault.servers) != 2 or not set(fault.servers) <= servers):
        raise TopologyError(f"{where}.servers: two servers of the topology, not {list(fault.servers)}")
    if kind in ("slow_next_hop", "refusing_next_hop") and fault.next_hop not in hops:
        raise TopologyError(f"{where}.next_hop: a server, mailbox database or outside domain, not {fault.next_hop!r}")
    if fault.restart not in Fault.RESTARTS:
        raise TopologyError(f"{where}.restart: one of {', '.join(Fault.RESTARTS)}, not {fault.restart!r}")
    return fault


def _known(raw: Mapping[str, object], where: str, keys: set[str]) -> None:
    unknown = set(raw) - keys
    if unknown:
        prefix = f"{where}: " if where else ""
        raise TopologyError(f"{prefix}unknown key(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(keys))}")


def _table(raw: Mapping[str, object], key: str) -> dict:
    value = raw.get(key, {})
    if not isinstance(value, Mapping):
        raise TopologyError(f"{key}: expected a table")
    return dict(value)


def _list(raw: Mapping[str, object], key: str) -> list[dict]:
    value = raw.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
        raise TopologyError(f"{key}: expected an array of tables ([[{key}]])")
    return value


def _duration(value: object, where: str) -> int:
    try:
        return ms(parse_duration(value))
    except ValueError as exc:
        raise TopologyError(f"{where}: {exc}") from None


def _signed_duration(value: object, where: str) -> int:
    if isinstance(value, str) and value.strip().startswith(("-", "+")):
        sign = -1 if value.strip()[0] == "-" else 1
        return sign * _duration(value.strip()[1:], where)
    return _duration(value, where)


def _instant(value: object, where: str) -> int:
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    try:
        return int(datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        raise TopologyError(f"{where}: an ISO date and time such as 2026-01-05T00:00:00Z, not {value!r}") from None
