"""Shadow-redundancy parameters: Exchange's documented defaults, per deployment and per node.

Names follow the Exchange parameters in snake case (`ShadowResubmitTimeSpan` is
`shadow_resubmit_time_span`). Durations accept Exchange's own notation ("03:00:00",
"2.00:00:00"), short forms ("3h", "90s", "2d") or a number of seconds.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Mapping

from schemas.events import NodeMode


class ShadowMessagePreference(str, enum.Enum):
    PREFER_REMOTE = "PreferRemote"
    REMOTE_ONLY = "RemoteOnly"
    LOCAL_ONLY = "LocalOnly"


@dataclass(frozen=True, slots=True)
class ShadowRedundancyParameters:
    """One server's shadow-redundancy settings (Set-TransportConfig and friends)."""

    mode: NodeMode = NodeMode.EXCHANGE_2013
    shadow_redundancy_enabled: bool = True
    reject_message_on_shadow_failure: bool = False
    shadow_message_preference_setting: ShadowMessagePreference = ShadowMessagePreference.PREFER_REMOTE
    max_retries_for_remote_site_shadow: int = 4
    max_retries_for_local_site_shadow: int = 2
    shadow_heartbeat_frequency: timedelta = timedelta(minutes=2)
    shadow_resubmit_time_span: timedelta = timedelta(hours=3)
    shadow_message_auto_discard_interval: timedelta = timedelta(days=2)
    safety_net_hold_time: timedelta = timedelta(days=2)
    message_expiration_timeout: timedelta = timedelta(days=2)
    # Exchange 2010 mode
    shadow_heartbeat_timeout_interval: timedelta = timedelta(seconds=300)
    shadow_heartbeat_retry_count: int = 3
    max_acknowledgement_delay: timedelta = timedelta(seconds=30)


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

    def for_node(self, node: str) -> ShadowRedundancyParameters:
        return self.nodes.get(node, self.defaults)

    def timing(self, node: str) -> Timing:
        cache = self.__dict__.setdefault("_timing_cache", {})
        timing = cache.get(node)
        if timing is None:
            timing = cache[node] = Timing.of(self.for_node(node))
        return timing

    def with_overrides(self, overrides: Mapping[str, object], node: str | None = None) -> "ModelConfig":
        """A copy with some parameters changed, for the deployment or for one node (what-if)."""
        if node is None:
            defaults = parameters_from(overrides, base=self.defaults)
            nodes = {name: parameters_from(overrides, base=p) for name, p in self.nodes.items()}
            return dataclasses.replace(self, defaults=defaults, nodes=nodes)
        nodes = dict(self.nodes)
        nodes[node] = parameters_from(overrides, base=self.for_node(node))
        return dataclasses.replace(self, nodes=nodes)


def ms(duration: timedelta) -> int:
    return int(duration.total_seconds() * 1000)


_EXCHANGE_SPAN = re.compile(r"^(?:(?P<days>\d+)\.)?(?P<h>\d{1,2}):(?P<m>\d{2}):(?P<s>\d{2}(?:\.\d+)?)$")
_SHORT_SPAN = re.compile(r"^(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>ms|s|m|min|h|d)$")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


def parse_duration(value: object) -> timedelta:
    """"03:00:00", "2.00:00:00", "3h", "90s", "500ms", 180 (seconds), or a timedelta."""
    if isinstance(value, timedelta):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return timedelta(seconds=value)
    if isinstance(value, str):
        text = value.strip()
        if match := _EXCHANGE_SPAN.match(text):
            return timedelta(days=int(match["days"] or 0), hours=int(match["h"]), minutes=int(match["m"]),
                             seconds=float(match["s"]))
        if match := _SHORT_SPAN.match(text):
            return timedelta(seconds=float(match["n"]) * _UNITS[match["unit"]])
    raise ValueError(f"not a duration: {value!r} (use e.g. \"03:00:00\", \"2.00:00:00\", \"3h\", \"90s\")")


def parameters_from(values: Mapping[str, object], base: ShadowRedundancyParameters | None = None) -> ShadowRedundancyParameters:
    """Parameters from a mapping of snake-case or Exchange (CamelCase) names; errors name the key."""
    base = base or ShadowRedundancyParameters()
    fields = {f.name: f for f in dataclasses.fields(ShadowRedundancyParameters)}
    changes: dict[str, object] = {}
    for raw_name, raw_value in values.items():
        name = snake_case(raw_name)
        if name not in fields:
            raise ValueError(f"unknown shadow-redundancy parameter {raw_name!r}; known: {', '.join(sorted(fields))}")
        default = getattr(ShadowRedundancyParameters(), name)
        try:
            changes[name] = _convert(default, raw_value)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{raw_name}: {exc}") from None
    return dataclasses.replace(base, **changes)


def snake_case(name: str) -> str:
    """ShadowResubmitTimeSpan -> shadow_resubmit_time_span (snake case passes unchanged)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower() if not name.islower() else name


def _convert(default: object, value: object) -> object:
    if isinstance(default, timedelta):
        return parse_duration(value)
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower().lstrip("$") in ("true", "false"):
            return value.strip().lower().lstrip("$") == "true"
        raise ValueError(f"expected true or false (or $true/$false), got {value!r}")
    if isinstance(default, enum.Enum):
        enum_type = type(default)
        for member in enum_type:
            if str(value).lower() in (member.value.lower(), member.name.lower()):
                return member
        raise ValueError(f"expected one of {', '.join(m.value for m in enum_type)}, got {value!r}")
    if isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).lstrip("-").isdigit():
            raise ValueError(f"expected a whole number, got {value!r}")
        return int(value)
    return value


def model_config_from(raw: Mapping[str, object]) -> ModelConfig:
    """ModelConfig from a settings table: parameters, `nodes.<name>` overrides, twin parameters."""
    values = dict(raw)
    nodes_raw = values.pop("nodes", {})
    silence = values.pop("shadow_silence_heartbeats", ModelConfig.shadow_silence_heartbeats)
    if not isinstance(nodes_raw, Mapping):
        raise ValueError("nodes: expected a table of node name -> parameters")
    if isinstance(silence, bool) or not isinstance(silence, int) or silence < 0:
        raise ValueError(f"shadow_silence_heartbeats: expected a whole number >= 0, got {silence!r}")
    allowance = values.pop("clock_skew_allowance", None)
    defaults = parameters_from(values)
    nodes = {}
    for name, overrides in nodes_raw.items():
        try:
            nodes[name] = parameters_from(overrides, base=defaults)
        except ValueError as exc:
            raise ValueError(f"nodes.{name}: {exc}") from None
    config = ModelConfig(defaults=defaults, nodes=nodes, shadow_silence_heartbeats=silence)
    if allowance is not None:
        try:
            config = dataclasses.replace(config, clock_skew_allowance_ms=ms(parse_duration(allowance)))
        except ValueError as exc:
            raise ValueError(f"clock_skew_allowance: {exc}") from None
    return config
