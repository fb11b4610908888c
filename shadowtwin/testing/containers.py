"""Testcontainers for shadowtwin: our Kafka image and the twin image, on host networking.

    with KafkaContainer() as kafka, TwinContainer(kafka.bootstrap_servers, topics) as twin:
        twin.publish(events)
        alerts = twin.wait_for_alerts(lambda a: a.type is AlertType.MESSAGE_LOST)

Both containers use the host's network (traffic stays on loopback): Kafka listens on a free
port of 127.0.0.1 chosen here. The twin is configured the way it is in production, by a
mounted settings file (`$SHADOWTWIN_CONF`) and `$KAFKA_BOOTSTRAP_SERVERS`. Images are never
pulled: a missing one is an error naming `docker/build`. Testcontainers' reaper (Ryuk) is
turned off when its image is not on the machine, since it cannot be pulled either; the
containers are removed when the `with` block or the pytest fixture ends, and every one
carries the label `shadowtwin.testing` (`docker ps -a --filter label=shadowtwin.testing`
lists any survivor of a killed test run).
"""

from __future__ import annotations

import dataclasses
import json
import socket
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Callable, Iterable, Mapping

from testcontainers.core.config import testcontainers_config
from testcontainers.core.container import DockerContainer

from infra.kafka import consumer, producer
from infra.settings import TopicSettings
from infra.topics import create_topics
from schemas.codec import default_codec, encode, kafka_key
from shadowtwin.testing.images import KAFKA_IMAGE, TWIN_IMAGE

LABEL = "shadowtwin.testing"
CONF_IN_CONTAINER = "/etc/shadowtwin/shadowtwin.toml"


class ContainerError(RuntimeError):
    """A container is missing its image or did not become ready; the message carries its log's end."""


def docker_engine_answers() -> bool:
    """Whether a Docker engine answers on this machine (socket or $DOCKER_HOST)."""
    try:
        import docker

        return bool(docker.from_env(timeout=3).ping())
    except Exception:  # noqa: BLE001 - no engine, no socket, no permission: all mean "no Docker"
        return False


_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A loopback port free now and not handed out before in this process.

    The kernel may hand back a just-closed port at once, so two calls in a row could name the
    same port for two listeners that have not started yet."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


class _ProjectContainer(DockerContainer):
    """A container of one of our images, on host networking, labelled, never pulled."""

    def __init__(self, image: str, ready: str):
        super().__init__(image)
        self.ready_text = ready
        self.with_kwargs(network_mode="host", labels={LABEL: "1"})

    def start(self):
        import docker

        try:
            docker.from_env().images.get(self.image)
        except docker.errors.ImageNotFound:
            raise ContainerError(f"image {self.image} is not on this machine: build it with docker/build") from None
        if not testcontainers_config.ryuk_disabled:
            try:
                docker.from_env().images.get(testcontainers_config.ryuk_image)
            except docker.errors.ImageNotFound:
                testcontainers_config._ryuk_disabled = True
        super().start()
        try:
            self.wait_until_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, force: bool = True, delete_volume: bool = True) -> None:
        """Remove the container (a second call does nothing)."""
        if self._container is not None:
            super().stop(force, delete_volume)
            self._container = None

    def wait_until_ready(self, timeout_s: float = 180.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.ready_text in self.logs():
                return
            self.get_wrapped_container().reload()
            if self.get_wrapped_container().status == "exited":
                raise ContainerError(f"{self.image} exited before it was ready; its log ends:\n{self.logs()[-3000:]}")
            time.sleep(0.3)
        raise ContainerError(f"{self.image} not ready within {timeout_s:.0f}s; its log ends:\n{self.logs()[-3000:]}")

    def logs(self) -> str:
        out, err = self.get_logs()
        return (out + err).decode(errors="replace")


class KafkaContainer(_ProjectContainer):
    """A single-node Apache Kafka (KRaft) from `shadowtwin/kafka`, the embedded broker's jars."""

    def __init__(self, image: str = KAFKA_IMAGE, port: int | None = None):
        super().__init__(image, ready="Kafka Server started")
        self.port = port or free_port()
        self.with_env("KAFKA_PORT", str(self.port)).with_env("KAFKA_CONTROLLER_PORT", str(free_port()))

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def create_topics(self, topics: TopicSettings = TopicSettings()) -> TopicSettings:
        create_topics(self.bootstrap_servers, topics)
        return topics


class TwinTopics:
    """Publishes events to the twin's topic and reads what it writes, decoded as contract records.

    A background consumer reads the alerts, commands and dead-letter topics from their start
    as soon as this object exists, so nothing the twin writes is missed.
    """

    def __init__(self, bootstrap: str, topics: TopicSettings):
        self.bootstrap = bootstrap
        self.topics = topics
        self.records: dict[str, list] = {t: [] for t in (topics.alerts, topics.commands, topics.dead_letters)}
        self._lock = threading.Condition()
        self._stop = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True, name="twin-topics-reader")
        self._reader.start()

    def publish(self, events: Iterable) -> int:
        """Publish events (contract records) keyed by primary server; return how many. Raises if any is not delivered."""
        out = producer(self.bootstrap)
        count = 0
        for event in events:
            out.produce(self.topics.events, key=kafka_key(event) or None, value=encode(event))
            count += 1
        left = out.flush(30)
        if left:
            raise ContainerError(f"{left} of {count} events were not delivered to {self.topics.events}")
        return count

    def wait_for_alerts(self, until: Callable[[list], bool] | None = None, timeout_s: float = 120.0) -> list:
        """The alerts so far, once `until(alerts)` holds (default: at least one); raises TimeoutError."""
        return self._wait(self.topics.alerts, until, timeout_s)

    def wait_for_commands(self, until: Callable[[list], bool] | None = None, timeout_s: float = 120.0) -> list:
        """The redelivery commands so far, once `until(commands)` holds (default: at least one)."""
        return self._wait(self.topics.commands, until, timeout_s)

    def dead_letters(self) -> list:
        with self._lock:
            return list(self.records[self.topics.dead_letters])

    def close(self) -> None:
        self._stop.set()
        self._reader.join(10)

    def _wait(self, topic: str, until: Callable[[list], bool] | None, timeout_s: float) -> list:
        until = until or bool
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while not until(list(self.records[topic])):
                left = deadline - time.monotonic()
                if left <= 0:
                    kinds = Counter(str(getattr(r, "type", type(r).__name__)) for r in self.records[topic])
                    raise TimeoutError(f"{topic}: condition not met within {timeout_s:.0f}s;"
                                       f" {len(self.records[topic])} records arrived: {dict(kinds)}")
                self._lock.wait(min(left, 0.5))
            return list(self.records[topic])

    def _read(self) -> None:
        reader = consumer(self.bootstrap, f"shadowtwin-testing-{uuid.uuid4().hex}", list(self.records))
        codec = default_codec()
        try:
            while not self._stop.is_set():
                message = reader.poll(0.2)
                if message is None or message.error():
                    continue
                record = codec.decode(message.value())
                with self._lock:
                    self.records[message.topic()].append(record)
                    self._lock.notify_all()
        finally:
            reader.close()


class TwinContainer(_ProjectContainer):
    """The streaming twin from `shadowtwin/twin` (`shadowtwin twin run`), watching `topics` on `bootstrap`.

    `settings` are tables of conf/shadowtwin.toml to change, e.g.
    `{"twin": {"watermark_delay": "2 seconds"}, "shadow_redundancy": {"shadow_resubmit_time_span": "10s"}}`;
    they go into a settings file mounted read-only, the topics' names with them. Once started,
    `publish`, `wait_for_alerts`, `wait_for_commands` and `dead_letters` are those of its `TwinTopics`; a wait
    that times out says how the twin's log ends.
    """

    def __init__(self, bootstrap: str, topics: TopicSettings = TopicSettings(),
                 settings: Mapping[str, Mapping[str, object]] | None = None, image: str = TWIN_IMAGE):
        super().__init__(image, ready="twin running:")
        self.bootstrap = bootstrap
        self.topics = topics
        self.io: TwinTopics | None = None
        tables = {name: dict(values) for name, values in (settings or {}).items()}
        tables["topics"] = {**tables.get("topics", {}), **dataclasses.asdict(topics)}
        self._conf_dir = tempfile.TemporaryDirectory(prefix="shadowtwin-twin-conf-")
        conf = Path(self._conf_dir.name) / "shadowtwin.toml"
        conf.write_text(toml_text(tables))
        conf.chmod(0o644)
        Path(self._conf_dir.name).chmod(0o755)  # the twin runs as a user of its own
        self.with_volume_mapping(str(conf), CONF_IN_CONTAINER, "ro")
        self.with_env("SHADOWTWIN_CONF", CONF_IN_CONTAINER).with_env("KAFKA_BOOTSTRAP_SERVERS", bootstrap)
        self.with_command(["twin", "run"])

    def start(self):
        create_topics(self.bootstrap, self.topics)
        self.io = TwinTopics(self.bootstrap, self.topics)
        return super().start()

    def stop(self, force: bool = True, delete_volume: bool = True) -> None:
        try:
            super().stop(force, delete_volume)
        finally:
            if self.io is not None:
                self.io.close()
            self._conf_dir.cleanup()

    def publish(self, events: Iterable) -> int:
        return self._io().publish(events)

    def wait_for_alerts(self, until: Callable[[list], bool] | None = None, timeout_s: float = 120.0) -> list:
        return self._with_log_on_timeout(self._io().wait_for_alerts, until, timeout_s)

    def wait_for_commands(self, until: Callable[[list], bool] | None = None, timeout_s: float = 120.0) -> list:
        return self._with_log_on_timeout(self._io().wait_for_commands, until, timeout_s)

    def _with_log_on_timeout(self, wait: Callable[..., list], until, timeout_s: float) -> list:
        """`wait`; a TimeoutError also says how the twin's log ends (a stalled query, a batch that failed)."""
        try:
            return wait(until, timeout_s)
        except TimeoutError as timeout:
            raise TimeoutError(f"{timeout}; the twin container's log ends:\n{self.logs()[-3000:]}") from None

    def dead_letters(self) -> list:
        return self._io().dead_letters()

    def _io(self) -> TwinTopics:
        if self.io is None:
            raise ContainerError("the twin container is not started")
        return self.io


def toml_text(tables: Mapping[str, Mapping[str, object]]) -> str:
    """TOML for settings tables (nested tables as dotted names); strings, numbers and booleans."""
    lines: list[str] = []
    for name, values in tables.items():
        lines.append(f"[{name}]")
        nested = {}
        for key, value in values.items():
            if isinstance(value, Mapping):
                nested[f"{name}.{key}"] = value
            else:
                lines.append(f"{key} = {str(value).lower() if isinstance(value, bool) else json.dumps(value)}")
        if nested:
            lines.append(toml_text(nested))
    return "\n".join(lines) + "\n"
