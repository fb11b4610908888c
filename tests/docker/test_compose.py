"""docker/compose.yaml for real (Debian's docker-compose 1.29): broker, twin, relay nodes, sink and
simulator come up; mail sent over SMTP, a node killed, the twin's alert read back; `down` leaves
no container and no volume behind."""

from __future__ import annotations

import os
import re
import subprocess
import time
import uuid

import pytest

from infra.kafka import consumer
from infra.settings import PROJECT_ROOT, TopicSettings
from producers.relay.lab import Lab
from producers.relay.topology import load_topology
from producers.simulator.topology import load_topology as simulator_topology
from schemas.codec import default_codec
from schemas.events import AlertType
from shadowtwin.testing.containers import TwinTopics, free_port
from shadowtwin.testing.images import KAFKA_IMAGE, TWIN_IMAGE

COMPOSE = PROJECT_ROOT / "docker" / "compose.yaml"
LAB = PROJECT_ROOT / "docker" / "compose" / "lab.toml"


def test_compose_runs_our_images_and_every_lab_node_as_a_service():
    text = COMPOSE.read_text()
    assert set(re.findall(r"^\s+image: (\S+)$", text, re.M)) == {KAFKA_IMAGE, TWIN_IMAGE}
    services = set(re.findall(r"^  ([a-z0-9]+):$", text.split("\nservices:\n")[1].split("\nvolumes:")[0], re.M))
    nodes = {n.name for n in load_topology(LAB).nodes}
    assert nodes < services and {"kafka", "topics", "twin", "sink", "simulator"} < services


@pytest.fixture
def compose(docker_engine, tmp_path):
    """The compose project on free ports, under a name of its own; brought down, and checked empty, after."""
    ports = iter(str(free_port()) for _ in range(6))
    topology = tmp_path / "lab.toml"
    lab = re.sub(r"^port = \d+$", lambda _: f"port = {next(ports)}", LAB.read_text(), flags=re.M)
    # mail waits a minute before its next hop, so a node killed seconds after it accepted mail still
    # holds it, however slowly `docker-compose kill` starts (with 3 s, a loaded machine's CI once
    # killed ex02 after it had passed everything on, and no shadow was left to promote)
    lab, found = re.subn(r"^next_hop_delay_seconds = .*$", "next_hop_delay_seconds = 60.0", lab, flags=re.M)
    assert found == 1, f"{LAB} sets next_hop_delay_seconds once"
    topology.write_text(lab)
    topology.chmod(0o644)
    tmp_path.chmod(0o755)
    project = f"shadowtwin-test-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "KAFKA_PORT": next(ports), "KAFKA_CONTROLLER_PORT": next(ports), "LAB_TOPOLOGY": str(topology)}

    def run(*args: str, timeout: float = 300) -> str:
        result = subprocess.run(["docker-compose", "-p", project, "-f", str(COMPOSE), "--profile", "simulator", *args],
                                capture_output=True, text=True, env=env, timeout=timeout)
        assert result.returncode == 0, f"docker-compose {' '.join(args)}:\n{result.stdout}{result.stderr}"
        return result.stdout

    run.bootstrap = f"127.0.0.1:{env['KAFKA_PORT']}"
    run.topology = topology
    try:
        yield run
    finally:
        run("down", "--volumes", "--remove-orphans", "--timeout", "20")
        label = f"label=com.docker.compose.project={project}"
        left = subprocess.run(["docker", "ps", "-aq", "--filter", label], capture_output=True, text=True).stdout
        volumes = subprocess.run(["docker", "volume", "ls", "-q", "--filter", label], capture_output=True, text=True)
        assert left.strip() == "" and volumes.stdout.strip() == "", "compose down left containers or volumes behind"


def test_up_mail_crash_alert_down(compose):
    compose("up", "-d")
    deadline = time.monotonic() + 240
    while "twin running:" not in compose("logs", "twin") and time.monotonic() < deadline:
        time.sleep(1)
    assert "twin running:" in compose("logs", "twin"), compose("logs", "--tail", "30", "twin")
    twin = TwinTopics(compose.bootstrap, TopicSettings())
    try:
        lab = Lab(load_topology(compose.topology), compose.topology, compose.bootstrap, TopicSettings())
        sent = lab.send(9, interval_s=0.05)
        assert len(sent.accepted) == 9, sent.describe()
        stranded = {m for m, node in sent.accepted if node == "ex02"}
        compose("kill", "ex02")  # SIGKILL, with mail still in its queue
        try:
            promoted = twin.wait_for_alerts(lambda alerts: any(
                a.type is AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED and a.servers[0] == "ex02" for a in alerts), 300)
        except TimeoutError as exc:
            pytest.fail(f"{exc}; ex02 had accepted {sorted(stranded)}; the twin's log ends:\n"
                        f"{compose('logs', '--tail', '40', 'twin')}", pytrace=False)
    finally:
        twin.close()
    ex02 = [a for a in promoted if a.type is AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED and a.servers[0] == "ex02"]
    assert {m.message.message_id for a in ex02 for m in a.messages} <= stranded and stranded
    simulated = simulated_servers(compose.bootstrap)
    organisation = {s.name for s in simulator_topology(PROJECT_ROOT / "conf" / "topology.toml").servers}
    assert simulated and simulated <= organisation, f"the simulator publishes its own servers' events: {simulated}"


def simulated_servers(bootstrap: str, seconds: float = 60) -> set[str]:
    """The nodes of events on the events topic that are not the lab's (the simulator's servers)."""
    reader = consumer(bootstrap, uuid.uuid4().hex, ["shadowtwin.events"])
    codec, nodes = default_codec(), set()
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline and not nodes - {"ex01", "ex02", "ex03", "shadowtwin"}:
            message = reader.poll(0.5)
            if message is not None and not message.error():
                nodes.add(codec.decode(message.value()).node)
    finally:
        reader.close()
    return nodes - {"ex01", "ex02", "ex03", "shadowtwin"}
