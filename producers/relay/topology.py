"""The lab's topology file (`conf/lab.toml`) as typed, frozen settings, and the nodes' secrets.

    topology = load_topology("conf/lab.toml")
    topology.node("n1").port; topology.peers("n1"); topology.parameters("n1").shadow_heartbeat_frequency

Every relay node of the lab and the mailbox sink listen on `host` (loopback). The nodes'
shadow-redundancy parameters come from the file's `[shadow_redundancy]` table, in the same
notation as `conf/shadowtwin.toml` (a twin watching the lab must use the same values).
How a node retries its next hop and how many sessions it opens to it are Exchange's
Set-TransportService parameters, in the file's `[transport_service]` table (`TransportService`);
how long it waits for a client's next command is its Receive connector's, in `[receive_connector]`.
Unknown keys and wrong types are refused with the key's name.

Credentials are never in the topology file: each node has a password in a secrets file
(JSON, mode 0600) that the lab generates under its run folder; nodes read it, nobody prints it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import tomllib
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from infra.config import ConfigError, at_least, build, port as port_number, positive_duration, timespan
from infra.settings import CONF_DIR, PROJECT_ROOT
from state.parameters import ModelConfig, ShadowRedundancyParameters, model_config_from

DEFAULT_TOPOLOGY = CONF_DIR / "lab.toml"
_SPAN = timespan(positive_duration())  # an Exchange parameter's duration, read as in conf/shadowtwin.toml


@dataclass(frozen=True)
class NodeSpec:
    name: str
    port: int = field(metadata=port_number())
    ad_site: str = "site1"
    dag: str | None = "dag1"

    @property
    def boundary(self) -> str:
        """The transport high-availability boundary: the DAG, else the AD site."""
        return self.dag or self.ad_site


@dataclass(frozen=True)
class SinkSpec:
    name: str = "mailbox01"
    port: int = field(default=12525, metadata=port_number())


@dataclass(frozen=True)
class TransportService:
    """A node's sessions to its next hop, with Exchange's defaults (Set-TransportService). After a
    failed attempt (a 4xx, or no session) the message is tried again TransientFailureRetryCount
    times every TransientFailureRetryInterval, then every OutboundConnectionFailureRetryInterval,
    until it has been queued for MessageExpirationTimeout (`[shadow_redundancy]`, the twin's own
    parameter): then it expires."""

    transient_failure_retry_count: int = field(default=6, metadata=at_least(0))
    transient_failure_retry_interval: timedelta = field(default=timedelta(minutes=5), metadata=_SPAN)
    outbound_connection_failure_retry_interval: timedelta = field(default=timedelta(minutes=10), metadata=_SPAN)
    # Sessions a node holds open to its next hop at once: a next hop that never answers one message
    # holds that session only (Exchange's MaxPerDomainOutboundConnections, default 20).
    max_per_domain_outbound_connections: int = field(default=20, metadata=at_least(1))

    def retry_delay_ms(self, failures: int) -> int:
        """How long after its `failures`-th failed attempt a message is tried again."""
        quick = failures <= self.transient_failure_retry_count
        span = self.transient_failure_retry_interval if quick else self.outbound_connection_failure_retry_interval
        return int(span.total_seconds() * 1000)


@dataclass(frozen=True)
class ReceiveConnector:
    """A node's SMTP server: how long it waits for a client's next command, or the rest of a message,
    before it closes the session (Exchange's ConnectionInactivityTimeout). RFC 5321 4.5.3.2.7: a
    server SHOULD wait at least 5 minutes for the next command. The largest message it takes, in bytes,
    offered in EHLO as SIZE (RFC 1870): Exchange's MaxMessageSize ("The default value is 36 MB",
    Set-ReceiveConnector; from 65536 bytes). How many Received lines a message may already have: one
    with more is refused as a mail loop (Exchange's MaxHopCount, "determined by the number of Received
    header fields that exist in a submitted message. A valid value is from 1 to 500. The default value
    is 30.", Set-ReceiveConnector). How many recipients one transaction may have: each one more is answered
    452 4.5.3 (Exchange's MaxRecipientsPerMessage, "A valid value is from 1 to 512000. The default value is
    200.", Set-ReceiveConnector)."""

    connection_inactivity_timeout: timedelta = field(default=timedelta(minutes=5), metadata=_SPAN)
    max_message_size: int = field(default=36 * 1024 * 1024, metadata=at_least(65536))
    max_hop_count: int = field(default=30, metadata=at_least(1))
    max_recipients_per_message: int = field(default=200, metadata=at_least(1))


@dataclass(frozen=True)
class LabTopology:
    host: str = "127.0.0.1"
    run_dir: Path = PROJECT_ROOT / ".run/lab"
    # How long a primary keeps a message before relaying it (a slow next hop), so that a node
    # killed in the middle of a stream has mail in its queue.
    next_hop_delay_seconds: float = 2.0
    # Timeout of every outgoing SMTP session (shadow copy, relay, discard query).
    smtp_timeout_seconds: float = 3.0
    # Exchange promotes its shadows on its own after ShadowResubmitTimeSpan without an answer;
    # false leaves that to the twin's redelivery commands (a queue-db change still promotes at once).
    promote_on_own_timeout: bool = True
    internal_domains: tuple[str, ...] = ("contoso.com",)
    transport_service: TransportService = field(default_factory=TransportService)
    receive_connector: ReceiveConnector = field(default_factory=ReceiveConnector)
    sink: SinkSpec = field(default_factory=SinkSpec)
    nodes: tuple[NodeSpec, ...] = ()
    shadow_redundancy: ModelConfig = field(default_factory=ModelConfig)

    def node(self, name: str) -> NodeSpec:
        for spec in self.nodes:
            if spec.name == name:
                return spec
        raise KeyError(f"no node {name!r} in the topology (nodes: {', '.join(n.name for n in self.nodes)})")

    def fqdn(self, name: str) -> str:
        """A node's fully qualified domain name, as its reports name it (RFC 3464's `Reporting-MTA: dns; ...`):
        its name in the first internal domain (`ex01` -> `ex01.contoso.com`); a name with a dot is one already."""
        return name if "." in name or not self.internal_domains else f"{name}.{self.internal_domains[0]}"

    def peers(self, name: str) -> list[NodeSpec]:
        """The other nodes of `name`'s boundary: where its shadow copies may go."""
        me = self.node(name)
        return [n for n in self.nodes if n.name != name and n.boundary == me.boundary]

    def parameters(self, name: str) -> ShadowRedundancyParameters:
        return self.shadow_redundancy.for_node(name)

    def secrets_path(self) -> Path:
        return self.run_dir / "secrets.json"

    def tls_dir(self) -> Path:
        """The lab CA and the nodes' certificates and keys (`producers.relay.tls`)."""
        return self.run_dir / "tls"


def load_topology(path: Path | str | None = None) -> LabTopology:
    path = Path(path or DEFAULT_TOPOLOGY)
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError as exc:
        raise ConfigError(f"topology file not found: {path}") from exc
    except (OSError, UnicodeDecodeError) as exc:  # a folder, a file that is not UTF-8
        raise ConfigError(f"{path}: cannot be read ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    return topology_from(raw, where=str(path))


def topology_from(raw: dict, where: str = "topology") -> LabTopology:
    raw = dict(raw)
    nodes_raw = raw.pop("nodes", [])
    sink_raw = raw.pop("sink", {})
    sr_raw = raw.pop("shadow_redundancy", {})
    domains = raw.pop("internal_domains", list(LabTopology.internal_domains))
    if not isinstance(nodes_raw, list) or not nodes_raw:
        raise ConfigError(f"{where}: [[nodes]] must list at least one node")
    if not isinstance(domains, list) or not all(isinstance(d, str) for d in domains):
        raise ConfigError(f"{where}:internal_domains: expected a list of domain names")
    nodes = tuple(build(NodeSpec, n, f"{where}: nodes[{i}]") for i, n in enumerate(nodes_raw))
    names = [n.name for n in nodes]
    if len(set(names)) != len(names):
        raise ConfigError(f"{where}: node names must be unique, got {names}")
    model = model_config_from(sr_raw, f"{where}: shadow_redundancy", known_servers=names)
    topology = dataclasses.replace(build(LabTopology, raw, where, root=PROJECT_ROOT), nodes=nodes,
                                   sink=build(SinkSpec, sink_raw, f"{where}: sink"), shadow_redundancy=model,
                                   internal_domains=tuple(d.lower() for d in domains))
    ports = [n.port for n in nodes] + [topology.sink.port]
    if len(set(ports)) != len(ports):
        raise ConfigError(f"{where}: ports must be distinct, got {ports}")
    return topology


def ensure_secrets(path: Path, names: list[str]) -> dict[str, str]:
    """The nodes' passwords, generated (mode 0600) for names that have none yet."""
    current = read_secrets(path) if path.exists() else {}
    missing = [n for n in names if n not in current]
    if missing:
        current.update({n: secrets.token_urlsafe(18) for n in missing})
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            json.dump(current, out)
    return current


def read_secrets(path: Path) -> dict[str, str]:
    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise ConfigError(f"{path}: expected a JSON object of node name -> password")
    return data
