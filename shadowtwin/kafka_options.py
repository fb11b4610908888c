"""The Kafka options every command that talks to Kafka takes, from one argparse parent.

    commands.add_parser("tail", parents=[kafka_options.PARENT], ...)

`--bootstrap` and the security options override `[kafka]` and `[kafka.security]` of the
configuration (`with_kafka_options`, applied once in `cli.main` for every command). A password
is never an argument (other users' `ps` would show it): `--sasl-password-file` names a file
holding it, or the configuration or `SHADOWTWIN_KAFKA_SECURITY_SASL_PASSWORD` gives it.
"""

from __future__ import annotations

import argparse
import dataclasses

from infra.config import ConfigError, build
from infra.settings import KafkaSecuritySettings, KafkaSettings, Settings
from shadowtwin.errors import UsageError

# option destination -> [kafka.security] key
_SECURITY = {
    "security_protocol": "protocol",
    "sasl_mechanism": "sasl_mechanism",
    "sasl_username": "sasl_username",
    "ssl_ca_file": "ssl_ca_file",
    "ssl_certificate_file": "ssl_certificate_file",
    "ssl_key_file": "ssl_key_file",
}


def _parent() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("Kafka (override [kafka] and [kafka.security] of the configuration)")
    group.add_argument("--bootstrap", metavar="HOST:PORT,...", help="Kafka bootstrap servers")
    group.add_argument("--security-protocol", choices=["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"])
    group.add_argument("--sasl-mechanism", choices=["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
    group.add_argument("--sasl-username", metavar="NAME")
    group.add_argument("--sasl-password-file", metavar="FILE", help="a file whose first line is the SASL password")
    group.add_argument("--ssl-ca-file", metavar="PEM", help="the certificate authorities to trust")
    group.add_argument("--ssl-certificate-file", metavar="PEM", help="the client's certificate (mutual TLS)")
    group.add_argument("--ssl-key-file", metavar="PEM", help="the client's private key (mutual TLS)")
    group.add_argument("--no-ssl-verify-hostname", dest="ssl_verify_hostname", action="store_false", default=None,
                       help="do not check that the broker's certificate names the host connected to")
    return parent


PARENT = _parent()
# what the options are written as (`--bootstrap`, ...), none of which a Kafka tool takes
NAMES = frozenset(name for action in PARENT._actions for name in action.option_strings)


def with_kafka_options(settings: Settings, args: argparse.Namespace) -> Settings:
    """`settings` with the Kafka options given on the command line, if the command takes them."""
    if not hasattr(args, "bootstrap"):
        return settings
    given = {key: getattr(args, dest) for dest, key in _SECURITY.items() if getattr(args, dest) is not None}
    if args.ssl_verify_hostname is not None:
        given["ssl_verify_hostname"] = args.ssl_verify_hostname
    if args.sasl_password_file:
        given["sasl_password"] = _first_line(args.sasl_password_file)
    kafka = settings.kafka
    if given:
        try:
            security = build(KafkaSecuritySettings, given, "the command line", base=kafka.security)
        except ConfigError as exc:
            raise UsageError(str(exc)) from None
        kafka = dataclasses.replace(kafka, security=security)
    if args.bootstrap:
        try:
            kafka = build(KafkaSettings, {"bootstrap_servers": args.bootstrap}, "--bootstrap", base=kafka)
        except ConfigError as exc:
            raise UsageError(str(exc)) from None
    return dataclasses.replace(settings, kafka=kafka)


def _first_line(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as file:
            return file.readline().rstrip("\r\n")
    except UnicodeDecodeError as exc:
        raise UsageError(f"--sasl-password-file {path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
