"""Certificates for the TLS tests, made fresh with the `cryptography` package: a CA, certificates
it signs (server and client), and a chain through an intermediate CA.

`Pki(dir)` writes PEM files into `dir` and names them; every key is an EC P-256 key (quick to make,
which matters more here than the key type). Subjects are given as (OID, value) pairs in the order
they appear in the certificate, so a test can build the names RabbitMQ's DN formatting is checked on.
"""
from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

Subject = list[tuple[x509.ObjectIdentifier, str]]
validity_days = 30


@dataclass(frozen=True)
class Issued:
    cert: Path
    key: Path
    certificate: x509.Certificate
    private_key: ec.EllipticCurvePrivateKey


def name(subject: Subject | str) -> x509.Name:
    if isinstance(subject, str):
        subject = [(NameOID.COMMON_NAME, subject)]
    return x509.Name([x509.RelativeDistinguishedName([x509.NameAttribute(oid, value)]) for oid, value in subject])


class Pki:
    def __init__(self, directory: Path) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)

    def _write(self, stem: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> Issued:
        cert_path, key_path = self.dir / f"{stem}.pem", self.dir / f"{stem}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
        return Issued(cert_path, key_path, cert, key)

    def ca(self, stem: str, common_name: str, issuer: Issued | None = None) -> Issued:
        """A CA certificate: self-signed, or an intermediate signed by `issuer`."""
        key = ec.generate_private_key(ec.SECP256R1())
        subject = name(common_name)
        signer_name, signer_key = (subject, key) if issuer is None else (issuer.certificate.subject,
                                                                         issuer.private_key)
        cert = (self._builder(subject, signer_name, key)
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                             content_commitment=False, key_encipherment=False,
                                             data_encipherment=False, key_agreement=False,
                                             encipher_only=False, decipher_only=False), critical=True)
                .sign(signer_key, hashes.SHA256()))
        return self._write(stem, cert, key)

    def server(self, stem: str, ca: Issued, common_name: str = "localhost") -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (self._builder(name(common_name), ca.certificate.subject, key)
                .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                            x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                               critical=False)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
                .sign(ca.private_key, hashes.SHA256()))
        return self._write(stem, cert, key)

    def client(self, stem: str, ca: Issued, subject: Subject | str) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (self._builder(name(subject), ca.certificate.subject, key)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
                .sign(ca.private_key, hashes.SHA256()))
        return self._write(stem, cert, key)

    def bundle(self, stem: str, *parts: Issued) -> Path:
        """Several certificates in one PEM file (a CA file, or a leaf with its chain)."""
        path = self.dir / f"{stem}.pem"
        path.write_bytes(b"".join(p.cert.read_bytes() for p in parts))
        return path

    @staticmethod
    def _builder(subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey) -> x509.CertificateBuilder:
        now = datetime.datetime.now(datetime.timezone.utc)
        return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(days=validity_days)))
