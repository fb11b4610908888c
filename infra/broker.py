"""The embedded Apache Kafka broker: one KRaft node (broker and controller) on loopback.

It runs Kafka itself from its Maven Central jars as a detached Java process, so that it
outlives the command that started it; its pid, log and storage live in the data folder.
`start` is idempotent, `stop` shuts it down cleanly and waits until the process is gone.

`EmbeddedKafkaCluster` runs three (or more) such nodes as one KRaft cluster on loopback, each
broker and controller, a static quorum of their controllers, internal topics replicated 3
times with 2 in sync: a cluster that loses nothing acknowledged when one node dies.

A `SecureListener` adds a SASL_SSL listener beside the plaintext one (which the broker keeps
for itself and its readiness check): TLS with a PEM key store, SCRAM-SHA-256/512 users
created when the storage is formatted (no password in any file the broker writes).
"""

from __future__ import annotations

import base64
import dataclasses
import os
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from infra import jars
from infra.settings import EmbeddedKafkaSettings

_LOG4J = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = WARN
logger.apache.name = org.apache.kafka
logger.apache.level = WARN
"""


class BrokerError(RuntimeError):
    """The embedded broker could not be started or stopped."""


@dataclass(frozen=True)
class SecureListener:
    """A SASL_SSL listener on `port`: `keystore` is a PEM file with the broker's private key
    (unencrypted PKCS#8) and its certificate chain; `scram_users` name -> password."""

    port: int
    keystore: Path
    scram_users: tuple[tuple[str, str], ...]

    def properties(self) -> list[str]:
        prefix = "listener.name.sasl_ssl"
        scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        return [
            "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512",
            f"{prefix}.scram-sha-256.sasl.jaas.config={scram}",
            f"{prefix}.scram-sha-512.sasl.jaas.config={scram}",
            f"{prefix}.ssl.keystore.type=PEM",
            f"{prefix}.ssl.keystore.location={self.keystore}",
        ]

    def format_arguments(self) -> list[str]:
        return [argument for name, password in self.scram_users for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512")
                for argument in ("--add-scram", f"{mechanism}=[name={name},password={password}]")]


@dataclass(frozen=True)
class BrokerStatus:
    running: bool
    pid: int | None
    bootstrap_servers: str
    data_dir: Path

    def describe(self) -> str:
        if self.running:
            return f"kafka running (pid {self.pid}) at {self.bootstrap_servers}, data in {self.data_dir}"
        return f"kafka not running (would serve {self.bootstrap_servers}, data in {self.data_dir})"


class EmbeddedKafka:
    """Start, stop and inspect the embedded broker described by `settings`."""

    def __init__(self, settings: EmbeddedKafkaSettings, jar_cache: Path, secure: SecureListener | None = None,
                 quorum: "Quorum | None" = None):
        self.settings = settings
        self.secure = secure
        self.quorum = quorum
        self.jar_cache = jar_cache
        self.data_dir = settings.data_dir
        self.bootstrap_servers = f"127.0.0.1:{settings.port}"
        self._pid_file = self.data_dir / "kafka.pid"
        self._log_file = self.data_dir / "kafka.log"
        self._storage = self.data_dir / "storage"

    def status(self) -> BrokerStatus:
        pid = self._live_pid()
        return BrokerStatus(pid is not None, pid, self.bootstrap_servers, self.data_dir)

    def answers(self) -> bool:
        """Whether a broker (this one, or another on the same port) listens at this address."""
        return _port_in_use(self.settings.port)

    def start(self) -> BrokerStatus:
        """Start the broker unless it runs already; return once it answers."""
        self._wait_until_ready(self.launch())
        return self.status()

    def launch(self) -> subprocess.Popen | None:
        """Start the broker's process unless it runs already, without waiting for it (a node of a
        cluster answers only once a majority of the quorum runs). None if it ran already."""
        if self._live_pid() is not None:
            return None
        for port in (self.settings.port, self.settings.controller_port, *([self.secure.port] if self.secure else [])):
            if _port_in_use(port):
                raise BrokerError(f"port {port} is taken by another process; choose another in conf/ ([kafka.embedded])")
        classpath = os.pathsep.join(str(p) for p in jars.ensure(jars.kafka_broker_jars(self.settings.version), self.jar_cache))
        self.data_dir.mkdir(parents=True, exist_ok=True)
        properties = self._write_config()
        if not (self._storage / "meta.properties").exists():
            self._format(classpath, properties)
        with open(self._log_file, "ab") as log:
            process = subprocess.Popen(
                ["java", f"-Xmx{self.settings.heap}", f"-Xms{self.settings.heap}",
                 f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.properties'}",
                 "-cp", classpath, "kafka.Kafka", str(properties)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self._pid_file.write_text(str(process.pid))
        return process

    def stop(self, timeout: float = 30.0) -> bool:
        """Shut the broker down cleanly (SIGTERM, then SIGKILL after `timeout`). True if it ran."""
        pid = self._live_pid()
        if pid is None:
            self._pid_file.unlink(missing_ok=True)
            return False
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
            while _alive(pid):
                time.sleep(0.1)
        self._pid_file.unlink(missing_ok=True)
        return True

    def _write_config(self) -> Path:
        s = self.settings
        properties = self.data_dir / "server.properties"
        listeners = f"PLAINTEXT://127.0.0.1:{s.port},CONTROLLER://127.0.0.1:{s.controller_port}"
        if self.secure:
            listeners += f",SASL_SSL://127.0.0.1:{self.secure.port}"
        replicas = min(3, self.quorum.size) if self.quorum else 1
        in_sync = min(2, replicas)
        properties.write_text(
            "\n".join([
                "process.roles=broker,controller",
                *(self.quorum.properties() if self.quorum else
                  ["node.id=1", f"controller.quorum.bootstrap.servers=127.0.0.1:{s.controller_port}"]),
                f"listeners={listeners}",
                f"advertised.listeners={listeners}",
                "controller.listener.names=CONTROLLER",
                "inter.broker.listener.name=PLAINTEXT",
                "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
                *(self.secure.properties() if self.secure else []),
                f"log.dirs={self._storage}",
                f"offsets.topic.replication.factor={replicas}",
                "offsets.topic.num.partitions=4",
                f"transaction.state.log.replication.factor={replicas}",
                f"transaction.state.log.min.isr={in_sync}",
                f"share.coordinator.state.topic.replication.factor={replicas}",
                f"share.coordinator.state.topic.min.isr={in_sync}",
                "group.initial.rebalance.delay.ms=0",
                "num.partitions=1",
                "auto.create.topics.enable=false",
                "",
            ])
        )
        (self.data_dir / "log4j2.properties").write_text(_LOG4J.format(log=self._log_file))
        return properties

    def _format(self, classpath: str, properties: Path) -> None:
        result = subprocess.run(
            ["java", "-cp", classpath, "kafka.tools.StorageTool", "format",
             *(["-t", self.quorum.cluster_id] if self.quorum else ["--standalone", "-t", _cluster_id()]),
             "-c", str(properties), *(self.secure.format_arguments() if self.secure else [])],
            capture_output=True, text=True,
        )
        if result.returncode != 0:
            raise BrokerError(f"formatting Kafka storage in {self._storage} failed:\n{result.stdout}{result.stderr}")

    def _wait_until_ready(self, process: subprocess.Popen | None = None) -> None:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})
        deadline = time.monotonic() + self.settings.start_timeout_seconds
        while time.monotonic() < deadline:
            if process is not None and process.poll() is not None:
                self._pid_file.unlink(missing_ok=True)
                raise BrokerError(f"Kafka exited with code {process.returncode}; last lines of {self._log_file}:\n{self._log_tail()}")
            try:
                if admin.list_topics(timeout=2).brokers:
                    return
            except Exception:  # noqa: BLE001 - not answering yet
                time.sleep(0.5)
        raise BrokerError(
            f"Kafka did not answer at {self.bootstrap_servers} within {self.settings.start_timeout_seconds}s;"
            f" last lines of {self._log_file}:\n{self._log_tail()}"
        )

    def _live_pid(self) -> int | None:
        try:
            pid = int(self._pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        return pid if _alive(pid) and _is_kafka(pid) else None

    def _log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self._log_file.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"


@dataclass(frozen=True)
class Quorum:
    """One node's place in a static KRaft quorum: its id, every controller, the shared cluster id."""

    node_id: int
    voters: str  # "1@127.0.0.1:port,2@..."
    cluster_id: str

    @property
    def size(self) -> int:
        return self.voters.count("@")

    def properties(self) -> list[str]:
        return [f"node.id={self.node_id}", f"controller.quorum.voters={self.voters}"]


class EmbeddedKafkaCluster:
    """Several embedded nodes (`nodes`: one settings each, own ports and data folder) as one cluster."""

    def __init__(self, nodes: list[EmbeddedKafkaSettings], jar_cache: Path):
        voters = ",".join(f"{n}@127.0.0.1:{s.controller_port}" for n, s in enumerate(nodes, start=1))
        cluster_id = _cluster_id()
        self.nodes = [EmbeddedKafka(s, jar_cache, quorum=Quorum(n, voters, cluster_id))
                      for n, s in enumerate(nodes, start=1)]
        self.bootstrap_servers = ",".join(node.bootstrap_servers for node in self.nodes)

    @classmethod
    def on_ports_after(cls, settings: EmbeddedKafkaSettings, jar_cache: Path, size: int) -> "EmbeddedKafkaCluster":
        """Nodes on `settings.port` (and controller_port) + 100 * i, data in `data_dir`/node-i."""
        return cls([dataclasses.replace(settings, port=settings.port + 100 * i,
                                        controller_port=settings.controller_port + 100 * i,
                                        data_dir=settings.data_dir / f"node-{i + 1}") for i in range(size)], jar_cache)

    def start(self) -> list[BrokerStatus]:
        """Start every node that is not running (all at once: the quorum needs a majority); return once all answer."""
        processes = [node.launch() for node in self.nodes]
        for node, process in zip(self.nodes, processes):
            node._wait_until_ready(process)
        return [node.status() for node in self.nodes]

    def stop(self) -> bool:
        """Stop every node; True if any ran."""
        return any([node.stop() for node in self.nodes])

    def status(self) -> list[BrokerStatus]:
        return [node.status() for node in self.nodes]


def _cluster_id() -> str:
    """A random cluster id; never one starting with "-", which kafka-storage would read as an option
    (Kafka's own Uuid.randomUuid avoids those too)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cluster_id.startswith("-"):
            return cluster_id


def _alive(pid: int) -> bool:
    try:
        waited, _status = os.waitpid(pid, os.WNOHANG)
        if waited == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _is_kafka(pid: int) -> bool:
    try:
        return b"kafka.Kafka" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True  # no /proc: trust the pid file


def _port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def start_if_needed(settings, say) -> "EmbeddedKafka | None":
    """Start the embedded broker when the configured bootstrap is its address and nothing listens there.

    Returns the broker it started (the caller stops it), or None when it started nothing.
    """
    broker = EmbeddedKafka(settings.kafka.embedded, settings.jars.cache_dir)
    if settings.kafka.bootstrap_servers != broker.bootstrap_servers or broker.answers():
        return None
    say(f"starting the embedded Kafka broker at {broker.bootstrap_servers} ...")
    broker.start()
    return broker
