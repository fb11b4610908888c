"""Shadow-redundancy parameters: Exchange's documented defaults, per deployment and per node.

Names follow the Exchange parameters in snake case (`ShadowResubmitTimeSpan` is
`shadow_resubmit_time_span`). Durations accept Exchange's own notation, as Set-TransportConfig reads
it ("03:00:00", "1:00", "2.00:00:00", "2" for two days), short forms ("3h", "90s", "2d") or a
number of seconds (a TOML number, not a string).
"""

from __future__ import annotations

import dataclasses
import enum
import re
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Iterable, Mapping

from infra.config import (
    ConfigError, allowed, at_least, build, non_negative_duration, parse_duration, positive_duration, timespan,
    unknown_key,
)
from schemas.events import NodeMode
from state.names import ServerNames, server_key

__all__ = ["ModelConfig", "ShadowRedundancyParameters", "ShadowMessagePreference", "Timing", "ms",
           "model_config_from", "parameters_from", "parse_duration", "snake_case", "table_keys"]


class ShadowMessagePreference(str, enum.Enum):
    PREFER_REMOTE = "PreferRemote"
    REMOTE_ONLY = "RemoteOnly"
    LOCAL_ONLY = "LocalOnly"


_SPAN, _SPAN_OR_NONE = timespan(positive_duration()), timespan(non_negative_duration())  # as Set-TransportConfig reads


@dataclass(frozen=True, slots=True)
class ShadowRedundancyParameters:
    """One server's shadow-redundancy settings (Set-TransportConfig and friends)."""

    mode: NodeMode = NodeMode.EXCHANGE_2013
    shadow_redundancy_enabled: bool = True
    reject_message_on_shadow_failure: bool = False
    shadow_message_preference_setting: ShadowMessagePreference = ShadowMessagePreference.PREFER_REMOTE
    max_retries_for_remote_site_shadow: int = field(default=4, metadata=at_least(0))
    max_retries_for_local_site_shadow: int = field(default=2, metadata=at_least(0))
    shadow_heartbeat_frequency: timedelta = field(default=timedelta(minutes=2), metadata=_SPAN)
    shadow_resubmit_time_span: timedelta = field(default=timedelta(hours=3), metadata=_SPAN)
    shadow_message_auto_discard_interval: timedelta = field(default=timedelta(days=2), metadata=_SPAN)
    safety_net_hold_time: timedelta = field(default=timedelta(days=2), metadata=_SPAN_OR_NONE)
    message_expiration_timeout: timedelta = field(default=timedelta(days=2), metadata=_SPAN)
    # Exchange 2010 mode
    shadow_heartbeat_timeout_interval: timedelta = field(default=timedelta(seconds=300), metadata=_SPAN)
    shadow_heartbeat_retry_count: int = field(default=3, metadata=at_least(1))
    max_acknowledgement_delay: timedelta = field(default=timedelta(seconds=30), metadata=_SPAN_OR_NONE)


@dataclass(frozen=True, slots=True)
class Timing:
    """A node's durations in milliseconds, computed once: what the model's hot path reads."""

    heartbeat_ms: int
    resubmit_ms: int
    auto_discard_ms: int
    hold_ms: int
    expiration_ms: int
    retention_ms: int
    heartbeat_timeout_ms: int
    max_ack_delay_ms: int

    @classmethod
    def of(cls, p: ShadowRedundancyParameters) -> "Timing":
        return cls(
            heartbeat_ms=ms(p.shadow_heartbeat_frequency),
            resubmit_ms=ms(p.shadow_resubmit_time_span),
            auto_discard_ms=ms(p.shadow_message_auto_discard_interval),
            hold_ms=ms(p.safety_net_hold_time),
            expiration_ms=ms(p.message_expiration_timeout),
            retention_ms=ms(p.safety_net_hold_time) + ms(p.message_expiration_timeout),
            heartbeat_timeout_ms=ms(p.shadow_heartbeat_timeout_interval),
            max_ack_delay_ms=ms(p.max_acknowledgement_delay),
        )


@dataclass(frozen=True)
class ModelConfig:
    """Parameters for every node: deployment defaults, per-node overrides, and the twin's own."""

    defaults: ShadowRedundancyParameters = field(default_factory=ShadowRedundancyParameters)
    nodes: Mapping[str, ShadowRedundancyParameters] = field(default_factory=dict)
    # A shadow that has not queried its primary for this many heartbeat intervals is taken
    # to be down: its copies no longer protect anything. (The twin's own parameter; 0 turns
    # it off, for sources that carry no heartbeats, such as message-tracking logs.)
    shadow_silence_heartbeats: int = 3
    # How far apart node clocks may be (the twin's own): a closed message is remembered this
    # long, so that events about it stamped by a slower clock do not open it again.
    clock_skew_allowance_ms: int = 300_000
    # How long the mailboxes' duplicate detection keeps a delivery (the store's Track Duplicates, 1 hour by default,
    # 004): a message delivered to a mailbox again later is seen twice by its user.
    duplicate_tracking_ms: int = 3_600_000
    # Servers declared in the configuration (per-node overrides may name them).
    servers: tuple[str, ...] = ()
    # How far behind the latest event time an event can still reach the model, when the engine
    # that feeds it guarantees it: 0 for the replay (it applies each group's events in time
    # order), the watermark delay for the streaming twin (its operator applies no row at or
    # behind its call's watermark: streaming/operator.py). None: no such bound. Set by the
    # engine, not configured.
    lateness_bound_ms: int | None = None

    @property
    def applied_ids_kept_ms(self) -> int | None:
        """How long after its bucket of event time an applied event id is remembered, so that a
        repeat changes nothing: the clock-skew allowance, or the engine's lateness bound when that
        is shorter (a repeat cannot come later). A NodeSeen's id stands for its whole liveness
        bucket: its time is that bucket's end (state/model.py). None: not at all."""
        if self.clock_skew_allowance_ms <= 0:
            return None
        if self.lateness_bound_ms is None:
            return self.clock_skew_allowance_ms
        return min(self.clock_skew_allowance_ms, self.lateness_bound_ms)

    @property
    def applied_ids_bucket_ms(self) -> int:
        """The grain of event time in which applied ids are remembered, one deadline per bucket:
        as long as they are kept, within [10 s, 1 min] (`state.model.SEEN_BUCKET_MS`; a finer
        grain made the replay measurably slower, for little memory: docs/performance.md)."""
        return min(60_000, max(10_000, self.applied_ids_kept_ms or 0))

    @property
    def names(self) -> ServerNames:
        """How the model spells each server (state/names.py): as `servers` declares it, else in lower case."""
        try:
            return self.__dict__["_names"]
        except KeyError:
            return self.__dict__.setdefault("_names", ServerNames(self.servers))

    def for_node(self, node: str) -> ShadowRedundancyParameters:
        """The node's parameters; its name in any case, as Exchange reads server names (an override for
        MBX01 is mbx01's, as message-tracking logs name it)."""
        found = self.nodes.get(node)
        if found is None and self.nodes:
            folded = self.__dict__.get("_folded_nodes")
            if folded is None:
                folded = self.__dict__.setdefault("_folded_nodes", {server_key(n): p for n, p in self.nodes.items()})
            found = folded.get(server_key(node))
        return self.defaults if found is None else found

    def timing(self, node: str) -> Timing:
        try:  # the model's hot path: one dictionary look-up when cached
            return self.__dict__["_timing_cache"][node]
        except KeyError:
            cache = self.__dict__.setdefault("_timing_cache", {})
            timing = cache[node] = Timing.of(self.for_node(node))
            return timing

    def with_overrides(self, overrides: Mapping[str, object], node: str | None = None) -> "ModelConfig":
        """A copy with some parameters changed, for the deployment or for one node (what-if). The twin's own
        (`TWIN_OWN`: track_duplicates, ...) hold for every server, so they are refused for one node."""
        own = {k: v for k, v in overrides.items() if parameter_name(k) in TWIN_OWN}
        exchange = {k: v for k, v in overrides.items() if k not in own}
        for written in exchange:
            if parameter_name(written) not in _EXCHANGE_NAMES:
                raise unknown_key("parameters", "", written, parameter_name(written), _EXCHANGE_NAMES + TWIN_OWN)
        config = self
        if own:
            if node is not None:
                raise ConfigError(f"parameters: {node}:{next(iter(own))}: the twin's own parameter, one value for"
                                  f" every server; expected it without a node")
            config = config.with_twin(build(TwinParameters, own, "parameters", key=parameter_name, base=config.twin))
        if not exchange:
            return config
        if node is None:
            defaults = parameters_from(exchange, base=config.defaults)
            nodes = {name: parameters_from(exchange, base=p) for name, p in config.nodes.items()}
            return dataclasses.replace(config, defaults=defaults, nodes=nodes)
        nodes = dict(config.nodes)
        nodes[node] = parameters_from(exchange, base=config.for_node(node))
        return dataclasses.replace(config, nodes=nodes)

    @property
    def twin(self) -> "TwinParameters":
        """The twin's own parameters, as `[shadow_redundancy]` gives them."""
        return TwinParameters(shadow_silence_heartbeats=self.shadow_silence_heartbeats,
                              clock_skew_allowance=timedelta(milliseconds=self.clock_skew_allowance_ms),
                              track_duplicates=timedelta(milliseconds=self.duplicate_tracking_ms), servers=self.servers)

    def with_twin(self, twin: "TwinParameters") -> "ModelConfig":
        return dataclasses.replace(self, shadow_silence_heartbeats=twin.shadow_silence_heartbeats,
                                   clock_skew_allowance_ms=ms(twin.clock_skew_allowance),
                                   duplicate_tracking_ms=ms(twin.track_duplicates), servers=twin.servers)


def ms(duration: timedelta) -> int:
    return int(duration.total_seconds() * 1000)


def parameters_from(values: Mapping[str, object], base: ShadowRedundancyParameters | None = None,
                    where: str = "parameters") -> ShadowRedundancyParameters:
    """Parameters from a mapping of snake-case or Exchange (CamelCase) names; errors name the key and value."""
    return build(ShadowRedundancyParameters, values, where, key=parameter_name, base=base or ShadowRedundancyParameters())


def parameter_name(name: str) -> str:
    """The field a parameter's name means, as PowerShell reads Exchange's names: in any case, with or
    without the leading `-` (`-ShadowResubmitTimespan`, `shadowresubmittimespan`); else its snake case."""
    fields = {field_name.replace("_", ""): field_name for field_name in _EXCHANGE_NAMES + TWIN_OWN}
    return fields.get(name.lstrip("-").replace("_", "").lower(), snake_case(name))


def snake_case(name: str) -> str:
    """ShadowResubmitTimeSpan -> shadow_resubmit_time_span (snake case passes unchanged)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower() if not name.islower() else name


@dataclass(frozen=True)
class TwinParameters:
    """The twin's own parameters, in the same table as Exchange's (`[shadow_redundancy]`)."""

    shadow_silence_heartbeats: int = field(default=3, metadata=at_least(0))
    clock_skew_allowance: timedelta = field(default=timedelta(minutes=5), metadata=non_negative_duration())
    # The mailbox store's "Track Duplicates (in hours)": 1 hour by default, 49 days at most (004: the store resets a
    # larger value to 24 hours; the twin refuses it, as a value the store would not keep).
    track_duplicates: timedelta = field(default=timedelta(hours=1), metadata=allowed(
        "a duration longer than zero and at most 49 days", lambda v: timedelta(0) < v <= timedelta(days=49)))
    # Every server the per-node overrides may name (besides those of a topology file).
    servers: tuple[str, ...] = ()


_EXCHANGE_NAMES = tuple(f.name for f in dataclasses.fields(ShadowRedundancyParameters))
# The twin's parameters a what-if may change (`servers` only names the servers the overrides may name).
TWIN_OWN = tuple(f.name for f in dataclasses.fields(TwinParameters) if f.name != "servers")


def table_keys() -> list[str]:
    """Every key `[shadow_redundancy]` accepts besides `nodes`."""
    return [f.name for f in dataclasses.fields(ShadowRedundancyParameters)] + \
        [f.name for f in dataclasses.fields(TwinParameters)]


def _check_servers(servers: tuple[str, ...], where: str) -> None:
    """Refuse an empty server name, or one listed twice (in any case, as Exchange reads server names),
    naming the entry (either is a slip of the pen: no server has it, or the list says less than it seems to)."""
    first: dict[str, int] = {}
    for i, name in enumerate(servers):
        if not name.strip():
            raise ConfigError(f"{where}: servers[{i}] = {name!r}: expected a server name")
        if server_key(name) in first:
            before = first[server_key(name)]
            spelled = f" = {servers[before]!r}" if servers[before] != name else ""
            raise ConfigError(f"{where}: servers[{i}] = {name!r}: listed twice (servers[{before}]{spelled} too);"
                              f" expected each server once")
        first[server_key(name)] = i


def model_config_from(raw: Mapping[str, object], where: str = "shadow_redundancy",
                      known_servers: Iterable[str] = ()) -> ModelConfig:
    """ModelConfig from a `[shadow_redundancy]` table: parameters, `nodes.<name>` overrides, the twin's own.

    A per-node override must name a server of `known_servers` (a topology's) or one the table
    declares in `servers`: a misspelt node name would otherwise change nothing, silently.
    """
    values = dict(raw)
    nodes_raw = values.pop("nodes", {})
    twin_raw = {k: values.pop(k) for k in [f.name for f in dataclasses.fields(TwinParameters)] if k in values}
    twin = build(TwinParameters, twin_raw, where)
    _check_servers(twin.servers, where)
    for written in values:
        if parameter_name(written) not in _EXCHANGE_NAMES:
            raise unknown_key(where, "", written, parameter_name(written), table_keys() + ["nodes"])
    defaults = parameters_from(values, where=where)
    if not isinstance(nodes_raw, Mapping):
        raise ConfigError(f"{where}: nodes = {nodes_raw!r}: expected a table of node name -> parameters")
    known = set(known_servers) | set(twin.servers)
    nodes = {}
    for name, overrides in nodes_raw.items():
        if server_key(name) not in {server_key(server) for server in known}:
            raise ConfigError(f"{where}: nodes.{name}: no such server; known: {', '.join(sorted(known)) or 'none'}"
                              f" (declare it in [shadow_redundancy] servers)")
        if not isinstance(overrides, Mapping):
            raise ConfigError(f"{where}: nodes.{name} = {overrides!r}: expected a table of parameters")
        nodes[name] = parameters_from(overrides, base=defaults, where=f"{where}: nodes.{name}")
    return ModelConfig(defaults=defaults, nodes=nodes).with_twin(twin)
