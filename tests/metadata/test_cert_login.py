"""The user a client certificate logs in as by EXTERNAL. The expected names are what RabbitMQ 3.10
logged for the same subjects ("EXTERNAL login refused: user '...'", scripts/rabbitmq_oracle with
ORACLE_SSL_PORT); tests/access/test_oracle_tls.py logs in with them on both brokers."""
import pytest
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import NameOID, ObjectIdentifier

from metadata.cert_login import CertRefusal, cert_username
from tests.tls_certs import Pki

SUBJECTS = [
    ([(NameOID.COUNTRY_NAME, "US"), (NameOID.ORGANIZATION_NAME, "Acme, Inc."), (NameOID.COMMON_NAME, "alice")],
     "CN=alice,O=Acme\\, Inc.,C=US", "alice"),
    ([(NameOID.COUNTRY_NAME, "DE"), (NameOID.ORGANIZATION_NAME, ' Lead#ing+a,b;c<d>e"f\\g~h '),
      (NameOID.COMMON_NAME, "#x")],
     'CN=\\#x,O=\\ Lead#ing\\+a\\,b\\;c\\<d\\>e\\"f\\\\g\\7Eh\\ ,C=DE', "#x"),
    ([(NameOID.ORGANIZATIONAL_UNIT_NAME, "Ünïcødé λ"), (NameOID.COMMON_NAME, "café")],
     "CN=caf\\C3\\A9,OU=\\C3\\9Cn\\C3\\AFc\\C3\\B8d\\C3\\A9 \\CE\\BB", "café"),
    ([(NameOID.DOMAIN_COMPONENT, "com"), (NameOID.DOMAIN_COMPONENT, "example"), (NameOID.USER_ID, "u1"),
      (NameOID.EMAIL_ADDRESS, "a@b.c"), (NameOID.SERIAL_NUMBER, "123"), (ObjectIdentifier("1.2.3.4"), "odd"),
      (NameOID.COMMON_NAME, "m")],
     "CN=m,1.2.3.4=odd,SERIALNUMBER=123,EMAILADDRESS=a@b.c,UID=u1,DC=example,DC=com", "m"),
]


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    pki = Pki(tmp_path_factory.mktemp("pki"))
    return pki, pki.ca("ca", "test CA")


@pytest.mark.parametrize("subject,dn,cn", SUBJECTS, ids=["comma", "escapes", "unicode", "attributes"])
def test_names_are_rabbitmqs(pki, subject, dn, cn):
    pki, ca = pki
    der = pki.client("c", ca, subject).certificate.public_bytes(Encoding.DER)
    assert cert_username(der) == dn
    assert cert_username(der, "common_name") == cn


def test_refusals(pki):
    pki, ca = pki
    der = pki.client("c", ca, [(NameOID.ORGANIZATION_NAME, "no cn")]).certificate.public_bytes(Encoding.DER)
    assert cert_username(der, "common_name") == CertRefusal("no name found")
    assert cert_username(der, verify_peer=False) == CertRefusal("TLS configuration is unsafe")
    assert cert_username(None) == CertRefusal("connection peer presented no TLS (x.509) certificate")
