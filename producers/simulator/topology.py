"""The simulator's input, typed and frozen: servers, boundaries, mailboxes, workload, faults.

`load_topology(path)` reads a TOML file such as `conf/topology.toml` with the project's one
configuration mechanism (`infra.config`: names, types and values checked, each refusal naming
the file, the key, the value and what is allowed), then checks it as a whole (servers that do
not exist, a boundary nobody is in, ...). Times in the fault schedule are offsets from the start.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Mapping

from infra.config import ConfigError, Milliseconds, allowed, at_least, build, closest, more_than, one_of, written_as
from infra.settings import CONF_DIR
from schemas.events import NodeMode
from state.names import server_key
from state.parameters import ModelConfig, model_config_from


DEFAULT_TOPOLOGY = CONF_DIR / "topology.toml"


class TopologyError(ConfigError):
    """A topology file that cannot be simulated as it stands."""


_SHARE = allowed("a share from 0 to 1", lambda v: 0 <= v <= 1)
_NON_NEGATIVE_SPAN = allowed("a duration of zero or more", lambda v: v >= 0)


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
    messages_per_second: float = field(default=2.0, metadata=more_than(0))
    daily_curve: tuple[float, ...] = field(default=(1.0,) * 24, metadata=allowed(
        "24 multipliers >= 0, one per hour", lambda v: len(v) == 24 and min(v) >= 0))
    internal_submission_share: float = field(default=0.6, metadata=_SHARE)
    recipients_weights: tuple[float, ...] = field(default=(70, 20, 7, 3), metadata=allowed(
        "weights >= 0 for 1, 2, 3, ... recipients, at least one above 0", lambda v: bool(v) and min(v) >= 0 and sum(v) > 0))
    external_recipient_share: float = field(default=0.25, metadata=_SHARE)
    size_bytes_median: int = field(default=40_000, metadata=at_least(1))
    queue_time_ms: Milliseconds = field(default=Milliseconds("2s"), metadata=written_as("queue_time", **allowed(
        "a duration longer than zero", lambda v: v > 0)))


KINDS = ("crash", "partition", "slow_next_hop", "refusing_next_hop", "clock_skew", "shadow_failure")
RESTARTS = ("same_database", "new_database", "never")


@dataclass(frozen=True)
class Fault:
    """One entry of the fault schedule; which fields matter depends on `kind`."""

    kind: str = field(metadata=one_of(*KINDS))
    at_ms: Milliseconds = field(default=Milliseconds(0), metadata=written_as("at", **_NON_NEGATIVE_SPAN))
    duration_ms: Milliseconds = field(default=Milliseconds(0), metadata=written_as("duration", **_NON_NEGATIVE_SPAN))
    server: str | None = None
    servers: tuple[str, ...] = ()
    next_hop: str | None = None
    restart: str = field(default="same_database", metadata=one_of(*RESTARTS))
    backlog_ms: Milliseconds = field(default=Milliseconds(0), metadata=written_as("backlog", **_NON_NEGATIVE_SPAN))
    delay_ms: Milliseconds = field(default=Milliseconds(0), metadata=written_as("delay", **_NON_NEGATIVE_SPAN))
    offset_ms: Milliseconds = field(default=Milliseconds(0), metadata=written_as("offset"))  # + ahead, - behind


@dataclass(frozen=True)
class Organisation:
    """The `[organisation]` table."""

    domain: str = "contoso.com"
    start: object = field(default="2026-01-05T00:00:00Z", metadata=allowed(
        "an ISO date and time such as 2026-01-05T00:00:00Z", lambda v: _instant(v) is not None))
    duration_ms: Milliseconds = field(default=Milliseconds("1.00:00:00"), metadata=written_as("duration", **allowed(
        "a duration longer than zero", lambda v: v > 0)))
    users_per_database: int = field(default=500, metadata=at_least(1))


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

@dataclass(frozen=True)
class _TopologyFile:
    """The file's tables as written; `topology_from` checks them as a whole."""

    organisation: Organisation = field(default_factory=Organisation)
    servers: tuple[Server, ...] = ()
    mailbox_databases: tuple[MailboxDatabase, ...] = ()
    internet: Mapping[str, object] = field(default_factory=dict)
    workload: Workload = field(default_factory=Workload)
    shadow_redundancy: Mapping[str, object] = field(default_factory=dict)
    faults: tuple[Fault, ...] = ()


def load_topology(path: Path | str, overrides: Mapping[str, object] | None = None) -> Topology:
    """The topology in `path`; `overrides` replaces top-level tables (for tests and what-ifs)."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TopologyError(f"{path}: no such topology file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TopologyError(f"{path}: cannot be read ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise TopologyError(f"{path}: not valid TOML ({exc})") from None
    raw.update(overrides or {})
    return topology_from(raw, where=str(path))


def topology_from(raw: Mapping[str, object], where: str = "topology") -> Topology:
    try:
        return _topology(build(_TopologyFile, raw, where), where)
    except TopologyError:
        raise
    except ConfigError as exc:
        raise TopologyError(str(exc)) from None


def _topology(file: _TopologyFile, where: str) -> Topology:
    def refuse(text: str) -> TopologyError:
        return TopologyError(f"{where}: {text}")

    servers = file.servers
    names = [s.name for s in servers]
    if not servers:
        raise refuse("servers: at least one server is needed ([[servers]] with name and site)")
    if len({server_key(n) for n in names}) != len(names):  # in any case: Exchange reads MBX01 as mbx01
        raise refuse(f"servers: a name appears twice in {names}")
    dags = {s.dag for s in servers if s.dag}
    for i, d in enumerate(file.mailbox_databases):
        if d.dag not in dags:
            raise refuse(f"mailbox_databases[{i}].dag = {d.dag!r}: expected the DAG of a server ({', '.join(sorted(dags))})")
    boundaries = {s.boundary for s in servers}
    internet = build(Internet, {"inbound_boundary": servers[0].boundary, "outbound_boundary": servers[0].boundary,
                                **file.internet}, f"{where}: internet")
    for key in ("inbound_boundary", "outbound_boundary"):
        if getattr(internet, key) not in boundaries:
            raise refuse(f"internet.{key} = {getattr(internet, key)!r}: expected a boundary"
                         f" ({', '.join(sorted(boundaries))})")
    workload = file.workload
    if not internet.senders and workload.internal_submission_share < 1:
        raise refuse("internet.senders = []: expected an outside server that sends mail in (workload."
                     "internal_submission_share is below 1)")
    if not internet.receivers and workload.internal_submission_share > 0 and workload.external_recipient_share > 0:
        raise refuse("internet.receivers = []: expected an outside domain that mail goes to (workload."
                     "external_recipient_share is above 0)")
    model = model_config_from(file.shadow_redundancy, f"{where}: shadow_redundancy", known_servers=names)
    hops = {d.name for d in file.mailbox_databases} | set(internet.receivers) | set(names)
    faults = tuple(_respelled(fault, {server_key(n): n for n in names}) for fault in file.faults)
    for i, fault in enumerate(faults):
        _check_fault(fault, f"faults[{i}]", set(names), hops, refuse)
    _check_crashes_apart(faults, refuse)
    if not file.mailbox_databases:  # internal recipients' mailboxes, and the mailbox submissions' senders
        raise refuse("mailbox_databases: at least one is needed ([[mailbox_databases]] with name and the dag of a"
                     " server: where the organisation's mailboxes live)")
    org = file.organisation
    return Topology(
        domain=org.domain, start_ms=_instant(org.start), duration_ms=int(org.duration_ms),
        servers=servers, mailbox_databases=file.mailbox_databases, internet=internet,
        workload=file.workload, model=model, faults=faults, users_per_database=org.users_per_database,
    )


def _respelled(fault: Fault, spelled: dict[str, str]) -> Fault:
    """The fault with the servers it names spelled as [[servers]] spells them: a name is read in any case, as Exchange
    reads server names (state/names.py); a next hop that is no server keeps its spelling."""
    def one(name: str | None) -> str | None:
        return spelled.get(server_key(name), name) if name else name
    return replace(fault, server=one(fault.server), servers=tuple(map(one, fault.servers)), next_hop=one(fault.next_hop))


def _check_fault(fault: Fault, at: str, servers: set[str], hops: set[str], refuse) -> None:
    if fault.kind in ("crash", "clock_skew", "shadow_failure") and fault.server not in servers:
        raise refuse(f"{at}.server = {fault.server!r}: expected a server of the topology"
                     + _meant(fault.server, servers))
    if fault.kind == "partition" and (len(fault.servers) != 2 or not set(fault.servers) <= servers):
        unknown = next((name for name in fault.servers if name not in servers), "")
        raise refuse(f"{at}.servers = {list(fault.servers)}: expected two servers of the topology"
                     + _meant(unknown, servers))
    if fault.kind in ("slow_next_hop", "refusing_next_hop") and fault.next_hop not in hops:
        raise refuse(f"{at}.next_hop = {fault.next_hop!r}: expected a server, mailbox database or outside domain"
                     + _meant(fault.next_hop, hops))


def _check_crashes_apart(faults, refuse) -> None:
    """A server's crashes must not overlap: it would come back at the first one's end, inside the other."""
    down: dict[str, tuple[int, int]] = {}  # server -> (end of its latest crash so far, its index)
    for i, fault in sorted(((i, f) for i, f in enumerate(faults) if f.kind == "crash"), key=lambda x: x[1].at_ms):
        end = fault.at_ms + fault.duration_ms if fault.restart != "never" else float("inf")
        previous = down.get(fault.server)
        if previous is not None and fault.at_ms < previous[0]:
            raise refuse(f"faults[{i}]: {fault.server} crashes again while down from faults[{previous[1]}];"
                         " a server's crashes must not overlap")
        down[fault.server] = (end, i)


def _meant(name: str, known: set[str]) -> str:
    meant = closest(name, sorted(known)) if name else None
    return f"; did you mean {meant!r}?" if meant else ""


def _instant(value: object) -> int | None:
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    try:
        return int(datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None
