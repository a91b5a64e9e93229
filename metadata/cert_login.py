"""The user a client certificate logs in as by EXTERNAL, as rabbit_auth_mechanism_ssl 3.10 derives it.

Theory of operation: `cert_username(der, login_from, verify_peer)` takes the peer's certificate
(DER, as the TLS layer handed it over, None without one) and answers the user name or a
`CertRefusal` with RabbitMQ's reason. With `ssl_cert_login_from = distinguished_name` (the
default) the name is the subject as rabbit_cert_info:subject/1 prints it, which is RFC 4514-like
but not what Python or OpenSSL print:
- the RDNs in reverse order of the certificate, joined with "," (no spaces), the attributes of a
  multi-valued RDN joined with "+";
- each attribute as NAME=value with RabbitMQ's names (CN, O, OU, C, L, ST, DC, UID,
  EMAILADDRESS, SERIALNUMBER, STREET, SN, GIVENNAME, INITIALS, GENERATIONQUALIFIER, TITLE,
  PSEUDONYM), an unknown one as its dotted OID;
- the value as UTF-8 bytes, escaped by escape_rdn_value: a leading space or "#", a trailing
  space, and `" + , ; < > \\` get a backslash; every byte below 32 or from 126 up ("~" and every
  byte of a non-ASCII character) becomes a backslash and two upper-case hex digits.
With `common_name` the name is the subject's CN values, unescaped, joined with ",". Either way the
name is taken only when `ssl_options.verify = verify_peer` (auth_config_sane): otherwise "TLS
configuration is unsafe". The certificate is read with the `cryptography` package; nothing here
does IO.
"""
from __future__ import annotations

from dataclasses import dataclass

from cryptography import x509

DISTINGUISHED_NAME, COMMON_NAME = "distinguished_name", "common_name"
_NAMES = {
    "2.5.4.4": "SN", "2.5.4.42": "GIVENNAME", "2.5.4.43": "INITIALS", "2.5.4.44": "GENERATIONQUALIFIER",
    "2.5.4.3": "CN", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O", "2.5.4.11": "OU", "2.5.4.12": "TITLE",
    "2.5.4.6": "C", "2.5.4.5": "SERIALNUMBER", "2.5.4.65": "PSEUDONYM", "0.9.2342.19200300.100.1.25": "DC",
    "1.2.840.113549.1.9.1": "EMAILADDRESS", "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.1": "UID",
}
_COMMON_NAME_OID = "2.5.4.3"
_ESCAPED = frozenset(b'"+,;<>\\')


@dataclass(frozen=True, slots=True)
class CertRefusal:
    reason: str  # rabbit_auth_mechanism_ssl's, after "EXTERNAL login refused: "


def escape_rdn_value(raw: bytes) -> str:
    """rabbit_cert_info:escape_rdn_value over a value's UTF-8 bytes."""
    out = []
    last = len(raw) - 1
    for i, byte in enumerate(raw):
        if (i == 0 and byte in (0x20, 0x23)) or (i == last and byte == 0x20) or byte in _ESCAPED:
            out.append("\\" + chr(byte))
        elif byte < 32 or byte >= 126:
            out.append(f"\\{byte:02X}")
        else:
            out.append(chr(byte))
    return "".join(out)


def _value(attribute: x509.NameAttribute) -> bytes:
    value = attribute.value
    return value if isinstance(value, bytes) else value.encode("utf-8")


def distinguished_name(cert: x509.Certificate) -> str:
    """rabbit_cert_info:subject/1."""
    rdns = []
    for rdn in reversed(list(cert.subject.rdns)):
        rdns.append("+".join(f"{_NAMES.get(a.oid.dotted_string, a.oid.dotted_string)}={escape_rdn_value(_value(a))}"
                             for a in rdn))
    return ",".join(rdns)


def cert_username(der: bytes | None, login_from: str = DISTINGUISHED_NAME, verify_peer: bool = True
                  ) -> str | CertRefusal:
    if der is None:
        return CertRefusal("connection peer presented no TLS (x.509) certificate")
    if not verify_peer:
        return CertRefusal("TLS configuration is unsafe")
    cert = x509.load_der_x509_certificate(der)
    if login_from == COMMON_NAME:
        names = [_value(a) for a in cert.subject if a.oid.dotted_string == _COMMON_NAME_OID]
        return b",".join(names).decode("utf-8", "replace") if names else CertRefusal("no name found")
    return distinguished_name(cert)
