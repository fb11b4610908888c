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
