"""One translation of `[kafka]` and `[kafka.security]` into librdkafka's and the Java client's properties."""

import dataclasses
from pathlib import Path

import pytest

from infra.config import Secret
from infra.kafka import client_config, spark_options
from infra.settings import KafkaSecuritySettings, KafkaSettings, load_settings


def secured(**changes) -> KafkaSettings:
    security = KafkaSecuritySettings(protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-256", sasl_username="twin",
                                     sasl_password=Secret('p"w\\d'), ssl_ca_file=Path("/etc/ca.pem"))
    return KafkaSettings(bootstrap_servers="k1:9093,k2:9093", security=dataclasses.replace(security, **changes))


def test_a_bare_address_is_plaintext_with_nothing_else():
    assert client_config("h:1") == {"bootstrap.servers": "h:1"}
    assert spark_options("h:1") == {"kafka.bootstrap.servers": "h:1"}


def test_sasl_ssl_for_librdkafka():
    assert client_config(secured()) == {
        "bootstrap.servers": "k1:9093,k2:9093", "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "twin", "sasl.password": 'p"w\\d', "ssl.ca.location": "/etc/ca.pem",
        "ssl.endpoint.identification.algorithm": "https",
    }


def test_sasl_ssl_for_spark_quotes_the_jaas_line():
    options = spark_options(secured(ssl_verify_hostname=False))
    assert options["kafka.sasl.jaas.config"] == (
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="twin" password="p\\"w\\\\d";')
    assert options["kafka.ssl.truststore.type"] == "PEM" and options["kafka.ssl.truststore.location"] == "/etc/ca.pem"
    assert options["kafka.ssl.endpoint.identification.algorithm"] == ""
    assert options["kafka.security.protocol"] == "SASL_SSL" and options["kafka.sasl.mechanism"] == "SCRAM-SHA-256"
    plain = spark_options(secured(sasl_mechanism="PLAIN"))["kafka.sasl.jaas.config"]
    assert plain.startswith("org.apache.kafka.common.security.plain.PlainLoginModule required")


def test_mutual_tls_and_extra_properties_win():
    kafka = dataclasses.replace(
        secured(protocol="SSL", ssl_certificate_file=Path("/c.pem"), ssl_key_file=Path("/k.pem"),
                ssl_key_password=Secret("kp")),
        client_properties={"socket.keepalive.enable": "true", "ssl.ca.location": "/other.pem"},
        spark_properties={"request.timeout.ms": "60000"})
    config = client_config(kafka)
    assert "sasl.username" not in config and config["ssl.key.password"] == "kp"
    assert config["ssl.certificate.location"] == "/c.pem" and config["ssl.key.location"] == "/k.pem"
    assert config["socket.keepalive.enable"] == "true" and config["ssl.ca.location"] == "/other.pem"
    options = spark_options(kafka)
    assert "kafka.sasl.jaas.config" not in options and options["kafka.request.timeout.ms"] == "60000"
    assert options["kafka.ssl.keystore.type"] == "PEM" and options["kafka.ssl.keystore.location"] == "/k.pem"


def test_the_password_is_never_shown_but_reaches_the_client():
    settings = load_settings(env={"SHADOWTWIN_KAFKA_SECURITY_SASL_PASSWORD": "hunter2",
                                  "SHADOWTWIN_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT"})
    password = settings.kafka.security.sasl_password
    assert "hunter2" not in repr(settings) and "hunter2" not in str(settings) and "hunter2" not in f"{password}"
    assert client_config(settings.kafka)["sasl.password"] == "hunter2"


@pytest.mark.parametrize("table, key", [("kafka.security", "sasl_password"), ("alert_routing", "bearer_token")])
def test_a_refused_password_value_is_not_repeated(tmp_path, table, key):
    """A token is a password too: before, `bearer_token = 12345678` (unquoted) was refused showing it."""
    from infra.config import ConfigError

    path = tmp_path / "c.toml"
    path.write_text(f'[{table}]\n{key} = 12345678\n')
    with pytest.raises(ConfigError) as refused:
        load_settings(path, env={})
    assert "12345678" not in str(refused.value) and key in str(refused.value)
