"""Every command that talks to Kafka takes the same Kafka options, from one parent; they override the configuration."""

import pytest

from infra.settings import Settings
from shadowtwin.cli import main, parser
from shadowtwin.kafka_options import with_kafka_options

KAFKA_COMMANDS = [["topics", "create"], ["twin", "run"], ["record", "t", "f.avro"], ["replay", "f.avro"],
                  ["ingest", "exchange-mtl", "x.LOG"], ["simulate"], ["demo"]]


@pytest.mark.parametrize("command", KAFKA_COMMANDS, ids=lambda c: c[0])
def test_every_kafka_command_takes_the_options(command, tmp_path):
    (tmp_path / "pw").write_text("s3cret\nignored\n")
    (tmp_path / "ca.pem").write_text("")
    args = parser().parse_args([*command, "--bootstrap", "b:1", "--security-protocol", "SASL_SSL",
                                "--sasl-username", "u", "--sasl-password-file", str(tmp_path / "pw"),
                                "--ssl-ca-file", str(tmp_path / "ca.pem"), "--no-ssl-verify-hostname"])
    kafka = with_kafka_options(Settings(), args).kafka
    assert kafka.bootstrap_servers == "b:1" and kafka.security.protocol == "SASL_SSL"
    assert kafka.security.sasl_username == "u" and kafka.security.sasl_password.reveal() == "s3cret"
    assert kafka.security.ssl_ca_file.name == "ca.pem" and kafka.security.ssl_verify_hostname is False
    assert kafka.security.sasl_mechanism == Settings().kafka.security.sasl_mechanism, "what is not given stays"


def test_without_options_the_configuration_stands():
    args = parser().parse_args(["replay", "f.avro"])
    assert with_kafka_options(Settings(), args) == Settings()
    assert with_kafka_options(Settings(), parser().parse_args(["whatif", "f.avro"])) == Settings()


def test_a_missing_password_file_is_one_line(tmp_path, capsys):
    assert main(["topics", "create", "--sasl-password-file", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nope" in err


def test_a_password_file_that_is_not_utf8_is_one_line_naming_it(tmp_path, capsys):
    """It ended in a UnicodeDecodeError traceback, exit 1."""
    (tmp_path / "pw").write_bytes(b"\xffs3cret\n")
    assert main(["topics", "create", "--sasl-password-file", str(tmp_path / "pw")]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == f"shadowtwin topics: --sasl-password-file {tmp_path / 'pw'}: not UTF-8 text (invalid start byte at byte 0)"


def test_a_tls_file_that_does_not_exist_is_one_line_naming_it(tmp_path, capsys):
    assert main(["topics", "create", "--security-protocol", "SSL", "--ssl-key-file", str(tmp_path / "key.pem")]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (f"shadowtwin topics: the command line: ssl_key_file = '{tmp_path / 'key.pem'}': expected a file"
                    " that exists and can be read")


@pytest.mark.parametrize("servers", ["127.0.0.1:abc", "kafka1:99999", "kafka1:0", "kafka 1:9092", ","])
def test_a_bootstrap_address_with_no_port_number_is_refused_before_the_broker_is_asked(servers, tmp_path, capsys):
    """`--bootstrap 127.0.0.1:abc` (or KAFKA_BOOTSTRAP_SERVERS, or [kafka] bootstrap_servers) was handed to the client,
    which answered 'Kafka at 127.0.0.1:abc: Failed to get metadata: Local: Broker transport failure', exit 1: the
    broker's fault, it seemed. Host names, IPv6 literals, a listener's name and no port at all are taken as before."""
    assert main(["topics", "create", "--bootstrap", servers]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"shadowtwin topics: --bootstrap: bootstrap_servers = {servers!r}: expected HOST:PORT,... (a port from 1 to"
        " 65535)"]
    conf = tmp_path / "conf.toml"
    conf.write_text(f'[kafka]\nbootstrap_servers = "{servers}"\n')
    assert main(["--conf", str(conf), "topics", "create"]) == 2
    assert f"kafka.bootstrap_servers = {servers!r}: expected HOST:PORT" in capsys.readouterr().err
    for taken in ("kafka1:9092,kafka2:9092,", "[::1]:9092", "PLAINTEXT://k1:9092", "k1"):
        args = parser().parse_args(["topics", "create", "--bootstrap", taken])
        assert with_kafka_options(Settings(), args).kafka.bootstrap_servers == taken
