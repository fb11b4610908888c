"""The tool's settings, typed and frozen, loaded from `conf/shadowtwin.toml` and the environment.

Every field has the default the project documents; the TOML file only overrides, and an
environment variable named after a key overrides the file (`SHADOWTWIN_TWIN_WATERMARK_DELAY`
for `[twin] watermark_delay`; `KAFKA_BOOTSTRAP_SERVERS` too, for the broker). Names, types and
values are checked by `infra.config`: a refused value gets one line naming the file, the key,
the value and what is allowed; a `SHADOWTWIN_` variable that names no setting (nor is
`SHADOWTWIN_CONF` or `SHADOWTWIN_HOME`) is refused naming it and the closest setting.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import tomllib
import typing
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from infra.config import (
    ConfigError, Secret, SparkInterval, allowed, at_least, bootstrap_servers, build, certificate_authorities, env_names,
    env_overlay, matching, merge, more_than, one_of, port as port_number, positive_duration, readable_file, timespan,
    timespans,
)
from state.parameters import ModelConfig, ShadowRedundancyParameters, model_config_from, parameter_name, table_keys

__all__ = ["ConfigError", "PROJECT_ROOT", "CONF_DIR", "DEFAULT_CONF", "Settings", "load_settings", "settings_from"]

_SOURCE = Path(__file__).resolve().parent.parent


def _data_root(env: typing.Mapping[str, str]) -> Path:
    """Where relative paths point and runtime files (.run/, .cache/) go: the checkout when run from
    one; else `$SHADOWTWIN_HOME`, else the user's data folder (XDG), never site-packages."""
    if env.get("SHADOWTWIN_HOME"):
        return Path(env["SHADOWTWIN_HOME"]).expanduser().resolve()
    if (_SOURCE / "pyproject.toml").is_file():
        return _SOURCE
    return Path(env.get("XDG_DATA_HOME") or Path.home() / ".local" / "share").expanduser() / "shadowtwin"


PROJECT_ROOT = _data_root(os.environ)
# The documented defaults: conf/ of the checkout, packaged in the wheel as shadowtwin/defaults/.
CONF_DIR = _SOURCE / "conf" if (_SOURCE / "conf").is_dir() else _SOURCE / "shadowtwin" / "defaults"
DEFAULT_CONF = CONF_DIR / "shadowtwin.toml"
ENV_PREFIX = "SHADOWTWIN"
OWN_VARIABLES = ("SHADOWTWIN_CONF", "SHADOWTWIN_HOME")  # the prefix's variables that are not settings
_OWN_TABLES = {"shadow_redundancy": table_keys}  # tables read by their own function: their keys
_MEMORY = matching(r"\d+[kKmMgG]?", 'a JVM memory size such as "512m" or "2g"')
# The names Kafka takes: at most 249 of these characters, and neither '.' nor '..'.
TOPIC_NAME, TOPIC_NAME_EXPECTED = r"(?!\.\.?$)[A-Za-z0-9._-]{1,249}", "a Kafka topic name (letters, digits, '.', '_', '-')"
_TOPIC = matching(TOPIC_NAME, TOPIC_NAME_EXPECTED)
_LOG_LEVELS = one_of("ALL", "TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF")
# The master URLs Spark 4 takes (SparkContext: local forms, standalone; yarn and k8s:// by their
# cluster managers): another fails Spark's start with a Java gateway stack trace.
_N = r"[1-9]\d*"
SPARK_MASTER = matching(rf"local(\[(\*|{_N})(\s*,\s*{_N})?\])?|local-cluster\[{_N}\s*,\s*{_N}\s*,\s*{_N}\]"
                        r"|spark://\S+|yarn|k8s://\S+",
                        "a Spark master URL: local, local[N], local[*], local[N,F], local-cluster[N,C,M],"
                        " spark://HOST:PORT, yarn or k8s://HOST:PORT")


def spark_master(text: str, option: str = "--master") -> str:
    """`text` when it is a master URL Spark takes (`--master` of `twin run`); else ConfigError naming it."""
    if not SPARK_MASTER["test"](text):
        raise ConfigError(f"{option} {text!r}: expected {SPARK_MASTER['allowed']}")
    return text


@dataclass(frozen=True)
class EmbeddedKafkaSettings:
    version: str = "4.3.1"
    port: int = field(default=19092, metadata=port_number())
    controller_port: int = field(default=19093, metadata=port_number())
    data_dir: Path = PROJECT_ROOT / ".run/kafka"
    heap: str = field(default="512m", metadata=_MEMORY)
    start_timeout_seconds: int = field(default=60, metadata=at_least(1))
    # 3: a KRaft cluster of three nodes, node i on port + 100 * i and controller_port + 100 * i,
    # its data in data_dir/node-<i+1> (then set [topics] replication_factor = 3, min_insync_replicas = 2).
    brokers: int = field(default=1, metadata=at_least(1))


@dataclass(frozen=True)
class KafkaSecuritySettings:
    """How every client (producers, consumers, admin, Spark's source and sink) reaches the brokers:
    translated once, in infra/kafka.py, into librdkafka's and the Java client's properties."""

    protocol: str = field(default="PLAINTEXT", metadata=one_of("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"))
    sasl_mechanism: str = field(default="SCRAM-SHA-512", metadata=one_of("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"))
    sasl_username: str = ""
    sasl_password: Secret = Secret("")
    # PEM bundle of the authorities to trust (else the system's)
    ssl_ca_file: Path | None = field(default=None, metadata=readable_file())
    # A client certificate (mutual TLS): for Spark's Java client the key file must hold the
    # certificate chain too (a PEM key store); the same file may be given for both.
    ssl_certificate_file: Path | None = field(default=None, metadata=readable_file())
    ssl_key_file: Path | None = field(default=None, metadata=readable_file())
    ssl_key_password: Secret = Secret("")
    ssl_verify_hostname: bool = True


@dataclass(frozen=True)
class KafkaSettings:
    bootstrap_servers: str = field(default="127.0.0.1:19092", metadata=bootstrap_servers())
    embedded: EmbeddedKafkaSettings = field(default_factory=EmbeddedKafkaSettings)
    # A record a producer cannot get acknowledged in this long has failed (librdkafka's message.timeout.ms).
    delivery_timeout_seconds: float = field(
        default=30.0, metadata=allowed("a number > 0 and <= 2147483 (librdkafka's longest timeout)",
                                       lambda v: 0 < v <= 2_147_483))
    security: KafkaSecuritySettings = field(default_factory=KafkaSecuritySettings)
    # Any other client property, as each client spells it: librdkafka's for the Python clients,
    # the Java client's (without Spark's "kafka." prefix) for Spark's source and sink.
    client_properties: dict[str, str] = field(default_factory=dict)
    spark_properties: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TopicSettings:
    events: str = field(default="shadowtwin.events", metadata=_TOPIC)
    alerts: str = field(default="shadowtwin.alerts", metadata=_TOPIC)
    commands: str = field(default="shadowtwin.commands", metadata=_TOPIC)
    dead_letters: str = field(default="shadowtwin.dead-letters", metadata=_TOPIC)
    events_partitions: int = field(default=4, metadata=at_least(1))
    alerts_partitions: int = field(default=1, metadata=at_least(1))
    commands_partitions: int = field(default=4, metadata=at_least(1))
    dead_letters_partitions: int = field(default=1, metadata=at_least(1))
    replication_factor: int = field(default=1, metadata=at_least(1))
    # Replicas that must have a record before it counts as written (with acks=all, which the
    # idempotent producers and Spark's sink use): 2 of 3 loses nothing when one broker dies.
    min_insync_replicas: int = field(default=1, metadata=at_least(1))
    # compacted: the latest summary per server and record per message in flight (state/summary.py)
    state: str = field(default="shadowtwin.state", metadata=_TOPIC)
    state_partitions: int = field(default=1, metadata=at_least(1))

    def partitions(self) -> dict[str, int]:
        """Topic name -> partition count, for every topic the twin uses."""
        return {
            self.events: self.events_partitions,
            self.alerts: self.alerts_partitions,
            self.commands: self.commands_partitions,
            self.dead_letters: self.dead_letters_partitions,
            self.state: self.state_partitions,
        }


@dataclass(frozen=True)
class SparkSettings:
    master: str = field(default="local[2]", metadata=SPARK_MASTER)
    app_name: str = "shadowtwin"
    shuffle_partitions: int = field(default=1, metadata=at_least(1))
    driver_memory: str = field(default="1g", metadata=_MEMORY)
    checkpoint_dir: Path = PROJECT_ROOT / ".run/checkpoints"
    trigger_interval: SparkInterval = SparkInterval("2 seconds")
    ui_enabled: bool = False
    log_level: str = field(default="WARN", metadata=_LOG_LEVELS)
    # The Python the executors run ("": the driver's own interpreter, right for local mode and for
    # workers on the driver's host; on a cluster, the path of an interpreter with shadowtwin
    # installed on every worker host).
    executor_python: str = ""
    # What RocksDB may hold in memory for all the state stores of an executor together (write
    # buffers, block cache), in MB; 0: no bound, each store (one per shuffle partition) with
    # RocksDB's defaults (docs/performance.md).
    state_store_memory_mb: int = field(default=128, metadata=at_least(0))


@dataclass(frozen=True)
class TwinSettings:
    """The streaming twin's event-time settings (see streaming/twin.py)."""

    watermark_delay: SparkInterval = SparkInterval("30 seconds")
    max_clock_skew_seconds: int = field(default=300, metadata=at_least(1))
    tick_interval_seconds: float = field(default=1.0, metadata=more_than(0))
    ticks: bool = True
    late_alert_threshold: int = field(default=1, metadata=at_least(1))
    max_offsets_per_trigger: int = field(default=0, metadata=at_least(0))
    starting_offsets: str = field(default="earliest", metadata=matching(
        r"earliest|latest|\{.*\}", 'earliest, latest, or Spark\'s JSON of offsets per partition'))
    # A query that fails (a broker gone for longer than Kafka's own retries, say) is started again
    # from its checkpoint, nothing lost, after a pause that doubles from restart_backoff_seconds up
    # to a minute; after restart_attempts failures in a row the twin stops with exit status 1.
    restart_attempts: int = field(default=10, metadata=at_least(0))
    restart_backoff_seconds: float = field(default=2.0, metadata=more_than(0))
    # Also publish every alert and command as JSON (schemas/jsonl.py) on `<topic>.json`, for
    # consumers without the contract's Avro framing (schemas/README.md).
    json_topics: bool = False
    # After each batch, what it read is committed to this consumer group, for Kafka's own tools
    # (streaming/consumer_group.py); the twin reads from its checkpoint, not from it. Empty: none.
    consumer_group: str = field(default="shadowtwin-twin", metadata=matching(
        r"|\S+", "a Kafka consumer group id, or empty to commit nothing"))


@dataclass(frozen=True)
class JarSettings:
    cache_dir: Path = PROJECT_ROOT / ".cache/jars"


@dataclass(frozen=True)
class DemoSettings:
    """`shadowtwin demo`: a live DAG of simulated servers, one of which crashes and comes back."""

    servers: int = field(default=4, metadata=at_least(2))
    messages_per_second: float = field(default=5.0, metadata=more_than(0))
    crash_server: str = "mbx02"
    crash_after_seconds: int = field(default=15, metadata=at_least(1))
    crash_for_seconds: int = field(default=40, metadata=at_least(1))
    backlog_seconds: int = field(default=10, metadata=at_least(0))
    new_database: bool = False
    shadow_heartbeat_frequency: timedelta = field(default=timedelta(seconds=2), metadata=timespan(positive_duration()))
    shadow_resubmit_time_span: timedelta = field(default=timedelta(seconds=15), metadata=timespan(positive_duration()))
    watermark_delay: SparkInterval = SparkInterval("2 seconds")
    run_seconds: int = field(default=150, metadata=at_least(1))


@dataclass(frozen=True)
class ViewSettings:
    """The twin's HTTP server: Prometheus metrics at /metrics, the live topology page at / (streaming/views.py)."""

    http_enabled: bool = True
    http_host: str = "127.0.0.1"
    http_port: int = field(default=9464, metadata=allowed("a port number from 0 (any free port) to 65535",
                                                          lambda v: 0 <= v <= 65535))
    page_refresh_seconds: int = field(default=2, metadata=at_least(1))
    recent_alerts: int = field(default=20, metadata=at_least(0))


@dataclass(frozen=True)
class AlertRoutingSettings:
    """`shadowtwin alerts route`: the twin's alerts to an Alertmanager and/or a generic webhook
    (producers/alert_router.py)."""

    group_id: str = field(default="shadowtwin-alert-router", metadata=matching(r"\S+", "a Kafka consumer group id"))
    retry_initial_seconds: float = field(default=1.0, metadata=more_than(0))
    retry_max_seconds: float = field(default=60.0, metadata=more_than(0))
    request_timeout_seconds: float = field(default=10.0, metadata=more_than(0))
    resend_seconds: float = field(default=60.0, metadata=more_than(0))
    # PEM bundle of the authorities to trust for an https:// receiver (else the system's)
    ca_file: Path | None = field(default=None, metadata=certificate_authorities())
    # sent as `Authorization: Bearer <token>` to every receiver whose address gives no user (a token proxy's)
    bearer_token: Secret = Secret("")
    event_alert_hold: timedelta = field(default=timedelta(hours=1), metadata=positive_duration())
    condition_hold: timedelta = field(default=timedelta(hours=24), metadata=positive_duration())


@dataclass(frozen=True)
class Settings:
    kafka: KafkaSettings = field(default_factory=KafkaSettings)
    topics: TopicSettings = field(default_factory=TopicSettings)
    spark: SparkSettings = field(default_factory=SparkSettings)
    jars: JarSettings = field(default_factory=JarSettings)
    twin: TwinSettings = field(default_factory=TwinSettings)
    demo: DemoSettings = field(default_factory=DemoSettings)
    shadow_redundancy: ModelConfig = field(default_factory=ModelConfig)
    views: ViewSettings = field(default_factory=ViewSettings)
    alert_routing: AlertRoutingSettings = field(default_factory=AlertRoutingSettings)


def setting_variables() -> dict[str, tuple[str, ...]]:
    """Every environment variable that sets a key (`SHADOWTWIN_SPARK_TRIGGER_INTERVAL`) -> the key's path."""
    return env_names(Settings, ENV_PREFIX, _OWN_TABLES)


def load_settings(path: Path | str | None = None, *, env: typing.Mapping[str, str] | None = None) -> Settings:
    """Read settings from `path`, else `$SHADOWTWIN_CONF`, else `conf/shadowtwin.toml`; then the environment.

    Relative paths in the file are taken from PROJECT_ROOT (the checkout, or an installed
    shadowtwin's data folder).
    """
    env = os.environ if env is None else env
    conf_path = Path(path or env.get("SHADOWTWIN_CONF") or DEFAULT_CONF)
    try:
        raw = tomllib.loads(conf_path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"configuration file not found: {conf_path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{conf_path}: cannot be read ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{conf_path}: not valid TOML ({exc})") from None
    settings = settings_from(raw, where=str(conf_path))
    from_env = env_overlay(Settings, env, ENV_PREFIX, extra_keys=_OWN_TABLES, other_names=OWN_VARIABLES)
    if env.get("KAFKA_BOOTSTRAP_SERVERS"):
        from_env = merge(from_env, {"kafka": {"bootstrap_servers": env["KAFKA_BOOTSTRAP_SERVERS"]}})
    if from_env:
        settings = settings_from(merge(raw, from_env), where=f"{conf_path} with the environment")
    for line in [*_read_as_days(raw, f"{conf_path}: "), *_read_as_days(from_env, None)]:
        print(f"shadowtwin: {line}", file=sys.stderr)
    return settings


def _read_as_days(raw: typing.Mapping[str, object], file: str | None) -> list[str]:
    """A line for each Exchange duration written as a whole number alone ("60"), which Exchange's TimeSpan, and so
    the twin, reads as days: a value meant as seconds or minutes would otherwise pass without a word. `file` names
    the file the table was read from; without it the keys came from environment variables, named as such."""
    model = raw.get("shadow_redundancy", {})
    model = model if isinstance(model, typing.Mapping) else {}
    nodes = model.get("nodes", {})
    exchange = timespans(ShadowRedundancyParameters)
    tables = [(("shadow_redundancy",), model, exchange, parameter_name),
              (("demo",), raw.get("demo", {}), timespans(DemoSettings), str),
              *((("shadow_redundancy", "nodes", name), table, exchange, parameter_name)
                for name, table in (nodes.items() if isinstance(nodes, typing.Mapping) else ()))]
    lines = []
    for path, table, spans, field_of in tables:
        for key, value in (table.items() if isinstance(table, typing.Mapping) else ()):
            if field_of(key) in spans and isinstance(value, str) and value.strip().isdigit():
                where = f"{file}{'.'.join((*path, key))}" if file else "_".join((ENV_PREFIX, *path, key)).upper()
                number = value.strip()
                lines.append(f"{where} = \"{value}\" is {number} days, as Exchange reads a TimeSpan"
                             f" (write \"{number}s\", \"{number}m\" or \"{number}h\" for seconds, minutes or hours)")
    return lines


def settings_from(raw: typing.Mapping[str, object], where: str = "settings") -> Settings:
    """Settings from a raw table as in the file (the `[shadow_redundancy]` table by the model's own rules)."""
    raw = dict(raw)
    model_raw = raw.pop("shadow_redundancy", {})
    settings = build(Settings, raw, where, root=PROJECT_ROOT)
    if not isinstance(model_raw, typing.Mapping):
        raise ConfigError(f"{where}: shadow_redundancy = {model_raw!r}: expected a table")
    return dataclasses.replace(settings, shadow_redundancy=model_config_from(model_raw, f"{where}: shadow_redundancy"))
