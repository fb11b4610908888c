"""The twin end to end against a broker that speaks only SASL_SSL to its clients (SCRAM users, a
certificate authority made here): the same decisions as the reference, the password nowhere in
the checkpoint, the plans, the progress or the output; a wrong password or an untrusted broker
certificate refused in one line naming the settings to check."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from infra.broker import EmbeddedKafka, SecureListener
from infra.config import Secret
from infra.settings import KafkaSecuritySettings, TopicSettings
from infra.topics import create_topics
from shadowtwin.testing.containers import free_port
from streaming.app import TwinApplication
from tests.infra.certificates import make_certificates
from tests.streaming.test_twin import collect, expected_ids, final_tick, publish, twin_settings, world_events, world_servers

pytestmark = pytest.mark.integration

PASSWORD = "pw-7f3a9c-never-shown"


@pytest.fixture(scope="module")
def secure_broker(settings, tmp_path_factory):
    folder = tmp_path_factory.mktemp("secure-kafka")
    certificates = make_certificates(folder / "tls")
    embedded = dataclasses.replace(settings.kafka.embedded, port=free_port(), controller_port=free_port(),
                                   data_dir=folder / "kafka")
    listener = SecureListener(free_port(), certificates.server_pem, (("twin", PASSWORD),))
    broker = EmbeddedKafka(embedded, settings.jars.cache_dir, listener)
    broker.start()
    try:
        yield broker, certificates
    finally:
        broker.stop()


def secure_kafka(settings, broker, certificates, **changes):
    security = KafkaSecuritySettings(protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-256", sasl_username="twin",
                                     sasl_password=Secret(PASSWORD), ssl_ca_file=certificates.ca_file)
    return dataclasses.replace(settings.kafka, bootstrap_servers=f"127.0.0.1:{broker.secure.port}",
                               security=dataclasses.replace(security, **changes))


def test_the_twin_runs_over_sasl_ssl_and_the_password_stays_secret(settings, spark, secure_broker, tmp_path, capfd):
    broker, certificates = secure_broker
    kafka = secure_kafka(settings, broker, certificates)
    topics = TopicSettings(events="s.events", alerts="s.alerts", commands="s.commands", dead_letters="s.dead",
                           events_partitions=2, commands_partitions=2)
    events = world_events()
    alerts, commands = expected_ids(events)
    lines: list[str] = []
    twin_conf = dataclasses.replace(twin_settings(settings, "unused", topics, servers=world_servers()), kafka=kafka)
    twin = TwinApplication(twin_conf, spark=spark, ticks=False, checkpoint_dir=tmp_path / "checkpoint",
                           say=lines.append)
    # every event published before the twin starts (as the other twin tests do): a first batch that
    # saw only some partitions would move the watermark past events still to come, and drop them late
    create_topics(kafka, topics)
    publish(kafka, topics.events, [*events, final_tick(events)])
    with twin:  # checks the topics over SASL_SSL
        got = collect(kafka, [topics.alerts, topics.commands],
                      lambda g: len(g[topics.alerts]) >= len(alerts) and len(g[topics.commands]) >= len(commands))
        twin.query.explain(extended=True)
        shown = [str(twin.query.lastProgress), str(twin.query.status), repr(twin_conf), str(twin_conf)]
    assert {a.alert_id for a in got[topics.alerts]} == alerts, "\n".join(lines[-20:])
    assert {c.command_id for c in got[topics.commands]} == commands

    output = capfd.readouterr()
    assert "KafkaV2" in output.out or "kafka" in output.out.lower(), "the plan was printed"
    places = {"stdout": output.out, "stderr": output.err, "the twin's lines": "\n".join(lines),
              "progress, status and settings": "\n".join(shown)}
    for path in (tmp_path / "checkpoint").rglob("*"):
        if path.is_file():
            places[str(path)] = path.read_bytes().decode("latin-1")
    assert len(places) > 10, "the checkpoint was written"
    leaks = [where for where, text in places.items() if PASSWORD in text]
    assert leaks == [], f"the password appears in {leaks}"


def run_cli(*args: str, cwd, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "shadowtwin", *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd, env=env)


def cli_kafka_options(broker, ca_file, password_file) -> list[str]:
    return ["--bootstrap", f"127.0.0.1:{broker.secure.port}", "--security-protocol", "SASL_SSL",
            "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", "twin", "--sasl-password-file", str(password_file),
            "--ssl-ca-file", str(ca_file)]


def test_topics_create_over_sasl_ssl_from_the_command_line(secure_broker, tmp_path):
    broker, certificates = secure_broker
    (tmp_path / "password").write_text(PASSWORD + "\n")
    result = run_cli("topics", "create", *cli_kafka_options(broker, certificates.ca_file, tmp_path / "password"),
                     cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "shadowtwin.events" in result.stdout and PASSWORD not in result.stdout + result.stderr


def test_a_wrong_password_is_refused_in_one_line(secure_broker, tmp_path):
    broker, certificates = secure_broker
    (tmp_path / "password").write_text("not-the-password\n")
    result = run_cli("topics", "create", *cli_kafka_options(broker, certificates.ca_file, tmp_path / "password"),
                     cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "refused" in result.stderr and "invalid credentials" in result.stderr
    assert "sasl_username ('twin'), sasl_password" in result.stderr
    assert "not-the-password" not in result.stderr + result.stdout


def test_a_broker_certificate_from_an_untrusted_authority_is_refused(settings, secure_broker):
    broker, certificates = secure_broker
    from infra.kafka import KafkaAccessRefused, cluster_metadata

    with pytest.raises(KafkaAccessRefused, match="ssl_ca_file") as refused:
        cluster_metadata(secure_kafka(settings, broker, certificates, ssl_ca_file=certificates.other_ca_file), 20)
    assert "certificate verify failed" in str(refused.value)


def test_a_kafka_tool_reaches_the_broker_with_the_configured_security(secure_broker, tmp_path):
    """`shadowtwin kafka tool` hands the tool the twin's SASL_SSL settings: the password from the
    environment, as the twin reads it, never on the tool's command line."""
    broker, certificates = secure_broker
    env = dict(__import__("os").environ, SHADOWTWIN_KAFKA_BOOTSTRAP_SERVERS=f"127.0.0.1:{broker.secure.port}",
               SHADOWTWIN_KAFKA_SECURITY_PROTOCOL="SASL_SSL", SHADOWTWIN_KAFKA_SECURITY_SASL_MECHANISM="SCRAM-SHA-512",
               SHADOWTWIN_KAFKA_SECURITY_SASL_USERNAME="twin", SHADOWTWIN_KAFKA_SECURITY_SASL_PASSWORD=PASSWORD,
               SHADOWTWIN_KAFKA_SECURITY_SSL_CA_FILE=str(certificates.ca_file))
    assert run_cli("topics", "create", cwd=tmp_path, env=env).returncode == 0
    result = run_cli("kafka", "tool", "kafka-topics", "--list", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert "shadowtwin.events" in result.stdout.split() and PASSWORD not in result.stdout + result.stderr
