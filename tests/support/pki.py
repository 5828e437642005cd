"""A throw-away certificate authority issuing server and client certificates, for the TLS tests
(the web config, the listener, the Kubernetes-API client, the chart)."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write(directory: Path, stem: str, key, cert: x509.Certificate) -> tuple[Path, Path]:
    cert_path, key_path = directory / f"{stem}.crt", directory / f"{stem}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


class CA:
    """A throw-away certificate authority issuing server and client certificates."""

    def __init__(self, directory: Path, name: str):
        self.directory = directory
        self.key: Any = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (x509.CertificateBuilder().subject_name(_name(name)).issuer_name(_name(name))
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(now - datetime.timedelta(minutes=5))
                     .not_valid_after(now + datetime.timedelta(days=1))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                     .add_extension(x509.KeyUsage(False, False, False, False, False, True, True,
                                                  False, False), critical=True)
                     .sign(self.key, hashes.SHA256()))
        self.path, _ = _write(directory, name, self.key, self.cert)

    @classmethod
    def load(cls, directory: Path, cert: Path, key: Path) -> CA:
        """A CA whose certificate and key are already written (the control plane's own)."""
        ca = cls.__new__(cls)
        ca.directory, ca.path = directory, cert
        ca.cert = x509.load_pem_x509_certificate(cert.read_bytes())
        ca.key = serialization.load_pem_private_key(key.read_bytes(), password=None)
        return ca

    def issue(self, stem: str, client: bool = False) -> tuple[Path, Path]:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
        builder = (x509.CertificateBuilder().subject_name(_name(stem))
                   .issuer_name(self.cert.subject).public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
        if not client:
            builder = builder.add_extension(x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
        return _write(self.directory, stem, key, builder.sign(self.key, hashes.SHA256()))


def server_pki(directory: Path, ca_name: str = "ca",
               stem: str = "server") -> tuple[CA, Path, Path]:
    """A CA and a server certificate for localhost and 127.0.0.1: (ca, cert, key)."""
    ca = CA(directory, ca_name)
    cert, key = ca.issue(stem)
    return ca, cert, key


def client_pki(directory: Path) -> tuple[CA, Path, Path]:
    """A CA and a client certificate it issued: (ca, cert, key)."""
    ca = CA(directory, "ca")
    cert, key = ca.issue("exporter", client=True)
    return ca, cert, key
