"""The lab's certificate authority: a CA and one certificate per node, generated like the passwords.

    ensure_certificates(topology.tls_dir(), {"ex01": "ex01.contoso.com"}, "127.0.0.1")   # by `lab up`
    server_context(folder, "ex01")        # STARTTLS on the node's SMTP server; asks peers for their certificate
    sender_context(folder, "ex01")        # STARTTLS for anyone else: the node's certificate, none asked for
    client_context(folder, "ex02")        # a node's sessions to its peers; verifies them against the lab CA
    certified_name(peercert)              # the node a verified certificate names, or None

Files (under the lab's run folder, keys mode 0600, never printed): `ca.pem` and `ca.key`, and
per node `<name>.pem` (its certificate, signed by the lab CA) and `<name>.key`. EC P-256 keys.
A node's certificate is Exchange's self-signed one (New-ExchangeCertificate): its subject names
the server (`CN=ex01`), its subject alternative names are the server's name and its FQDN (`ex01`,
`ex01.contoso.com`, the name its greeting and EHLO give) and the lab's host, where the nodes are
reached (an IP address, or a DNS name). So a client that checks the certificate against the host
it was told (RFC 6125: the DNS names, never the CN) accepts it by FQDN as by name. A certificate
that does not name those (made before the nodes had an FQDN, or for another internal domain) is
made again.

Peers verify each other: a node's client checks the server's certificate against the lab CA
and that it names the peer it meant to reach; the server asks a peer (a client whose EHLO
named a node of the boundary) for its client certificate, and accepts AUTH only over TLS and
only as the node the client's certificate names. The node a certificate names is its subject's
common name, the server name, as Exchange's direct trust reads it. Anyone else is asked for no
certificate: a mail server presents its own when asked (postfix's smtp_tls_cert_file, Exchange's
self-signed one), the lab CA cannot verify it, and the handshake would fail.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

CA = "ca"
VALID_FOR = datetime.timedelta(days=825)


def ensure_certificates(folder: Path, nodes: dict[str, str], host: str) -> None:
    """The lab CA (made once) and a certificate for every node of `nodes` (node name -> FQDN) that has none
    naming it, its FQDN and `host` yet."""
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / f"{CA}.pem").exists():
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "shadowtwin lab CA")])
        cert = (_builder(subject, subject, key.public_key())
                .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                             content_commitment=False, key_encipherment=False,
                                             data_encipherment=False, key_agreement=False, encipher_only=False,
                                             decipher_only=False), critical=True)
                .sign(key, hashes.SHA256()))
        _write(folder, CA, key, cert)
    ca_key = serialization.load_pem_private_key((folder / f"{CA}.key").read_bytes(), password=None)
    ca_cert = x509.load_pem_x509_certificate((folder / f"{CA}.pem").read_bytes())
    for name, fqdn in nodes.items():
        names = x509.SubjectAlternativeName(dict.fromkeys([x509.DNSName(name), x509.DNSName(fqdn),
                                                           _general_name(host)]))
        if (folder / f"{name}.pem").exists() and _names(folder / f"{name}.pem") == names:
            continue
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        cert = (_builder(subject, ca_cert.subject, key.public_key())
                .add_extension(names, critical=False)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.ExtendedKeyUsage([x509.ExtendedKeyUsageOID.SERVER_AUTH,
                                                      x509.ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
                .sign(ca_key, hashes.SHA256()))
        _write(folder, name, key, cert)


def _general_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:  # a host name (`localhost`)
        return x509.DNSName(host)


def _names(path: Path) -> x509.SubjectAlternativeName | None:
    cert = x509.load_pem_x509_certificate(path.read_bytes())
    try:
        return cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return None


def _builder(subject: x509.Name, issuer: x509.Name, public_key) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.timezone.utc)
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + VALID_FOR))


def _write(folder: Path, name: str, key, cert: x509.Certificate) -> None:
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    fd = os.open(folder / f"{name}.key", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(pem)
    (folder / f"{name}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def server_context(folder: Path, name: str) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(folder / f"{CA}.pem"))
    context.load_cert_chain(folder / f"{name}.pem", folder / f"{name}.key")
    context.verify_mode = ssl.CERT_OPTIONAL  # a certificate, when given, must be the lab CA's
    return context


def sender_context(folder: Path, name: str) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(folder / f"{name}.pem", folder / f"{name}.key")
    context.verify_mode = ssl.CERT_NONE  # a sender's own certificate is not asked for
    return context


def client_context(folder: Path, name: str) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(folder / f"{CA}.pem"))
    context.load_cert_chain(folder / f"{name}.pem", folder / f"{name}.key")
    context.check_hostname = False  # the peer is reached by IP; `certified_name` checks the node it names
    return context


def certified_name(peercert: dict | None) -> str | None:
    """The node a certificate the TLS layer verified names (its subject's common name); None without one."""
    names = [value for rdn in (peercert or {}).get("subject", ()) for kind, value in rdn if kind == "commonName"]
    return names[0] if len(names) == 1 else None
