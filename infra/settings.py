"""Typed, frozen settings for the whole tool, loaded from `conf/shadowtwin.toml`.

Every field has the default the project documents; the TOML file only overrides. Unknown
keys and values of the wrong type are refused with the dotted name of the offending key,
so a typo never silently falls back to a default.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path

from state.parameters import ModelConfig, model_config_from

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONF = PROJECT_ROOT / "conf" / "shadowtwin.toml"


class ConfigError(ValueError):
    """A configuration file or override that cannot be used as it stands."""


@dataclass(frozen=True)
class EmbeddedKafkaSettings:
    version: str = "4.3.1"
    port: int = 19092
    controller_port: int = 19093
    data_dir: Path = PROJECT_ROOT / ".run/kafka"
    heap: str = "512m"
    start_timeout_seconds: int = 60


@dataclass(frozen=True)
class KafkaSettings:
    bootstrap_servers: str = "127.0.0.1:19092"
    embedded: EmbeddedKafkaSettings = field(default_factory=EmbeddedKafkaSettings)
    delivery_timeout_seconds: float = 30.0  # a record a producer cannot get acknowledged in this long has failed


@dataclass(frozen=True)
class TopicSettings:
    events: str = "shadowtwin.events"
    alerts: str = "shadowtwin.alerts"
    commands: str = "shadowtwin.commands"
    dead_letters: str = "shadowtwin.dead-letters"
    events_partitions: int = 4
    alerts_partitions: int = 1
    commands_partitions: int = 4
    dead_letters_partitions: int = 1
    replication_factor: int = 1

    def partitions(self) -> dict[str, int]:
        """Topic name -> partition count, for every topic the twin uses."""
        return {
            self.events: self.events_partitions,
            self.alerts: self.alerts_partitions,
            self.commands: self.commands_partitions,
            self.dead_letters: self.dead_letters_partitions,
        }


@dataclass(frozen=True)
class SparkSettings:
    master: str = "local[2]"
    app_name: str = "shadowtwin"
    shuffle_partitions: int = 4
    driver_memory: str = "2g"
    checkpoint_dir: Path = PROJECT_ROOT / ".run/checkpoints"
    trigger_interval: str = "2 seconds"
    ui_enabled: bool = False
    log_level: str = "WARN"


@dataclass(frozen=True)
class TwinSettings:
    """The streaming twin's event-time settings (see streaming/twin.py)."""

    watermark_delay: str = "30 seconds"
    max_clock_skew_seconds: int = 300
    tick_interval_seconds: float = 1.0
    ticks: bool = True
    late_alert_threshold: int = 1
    max_offsets_per_trigger: int = 0
    starting_offsets: str = "earliest"


@dataclass(frozen=True)
class JarSettings:
    cache_dir: Path = PROJECT_ROOT / ".cache/jars"


@dataclass(frozen=True)
class DemoSettings:
    """`shadowtwin demo`: a live DAG of simulated servers, one of which crashes and comes back."""

    servers: int = 4
    messages_per_second: float = 5.0
    crash_server: str = "mbx02"
    crash_after_seconds: int = 15
    crash_for_seconds: int = 40
    backlog_seconds: int = 10
    new_database: bool = False
    shadow_heartbeat_frequency: str = "00:00:02"
    shadow_resubmit_time_span: str = "00:00:15"
    watermark_delay: str = "2 seconds"
    run_seconds: int = 150


@dataclass(frozen=True)
class Settings:
    kafka: KafkaSettings = field(default_factory=KafkaSettings)
    topics: TopicSettings = field(default_factory=TopicSettings)
    spark: SparkSettings = field(default_factory=SparkSettings)
    jars: JarSettings = field(default_factory=JarSettings)
    twin: TwinSettings = field(default_factory=TwinSettings)
    demo: DemoSettings = field(default_factory=DemoSettings)
    shadow_redundancy: ModelConfig = field(default_factory=ModelConfig)


def load_settings(path: Path | str | None = None, *, env: typing.Mapping[str, str] | None = None) -> Settings:
    """Read settings from `path`, else `$SHADOWTWIN_CONF`, else `conf/shadowtwin.toml`.

    `$KAFKA_BOOTSTRAP_SERVERS`, when set, replaces `kafka.bootstrap_servers`.
    Relative paths in the file are made absolute against the project's top-level folder.
    """
    env = os.environ if env is None else env
    conf_path = Path(path or env.get("SHADOWTWIN_CONF") or DEFAULT_CONF)
    try:
        raw = tomllib.loads(conf_path.read_text())
    except FileNotFoundError as exc:
        raise ConfigError(f"configuration file not found: {conf_path}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{conf_path}: {exc}") from exc
    settings = build(Settings, raw, where=str(conf_path))
    if env.get("KAFKA_BOOTSTRAP_SERVERS"):
        settings = dataclasses.replace(
            settings, kafka=dataclasses.replace(settings.kafka, bootstrap_servers=env["KAFKA_BOOTSTRAP_SERVERS"])
        )
    return settings


def build(cls: type, raw: typing.Mapping[str, object], *, where: str = "settings"):
    """Build the frozen dataclass `cls` from a mapping, checking names and types."""
    if not isinstance(raw, typing.Mapping):
        raise ConfigError(f"{where}: expected a table, got {type(raw).__name__}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(raw) - names)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(names))}")
    values = {name: _coerce(hints[name], value, f"{where}:{name}") for name, value in raw.items()}
    return cls(**values)


def _coerce(hint: object, value: object, where: str) -> object:
    if hint is ModelConfig:
        try:
            return model_config_from(value)  # type: ignore[arg-type]
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    if dataclasses.is_dataclass(hint):
        return build(hint, value, where=where)  # type: ignore[arg-type]
    if hint is Path:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a path string, got {value!r}")
        path = Path(value)
        return path if path.is_absolute() else PROJECT_ROOT / path
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return None
        hint = next(o for o in options if o is not type(None))
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if hint is int and isinstance(value, bool):
        raise ConfigError(f"{where}: expected int, got {value!r}")
    if isinstance(hint, type) and not isinstance(value, hint):
        raise ConfigError(f"{where}: expected {hint.__name__}, got {value!r}")
    return value

