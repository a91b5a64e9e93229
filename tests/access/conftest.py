"""One RabbitMQ 3.10 oracle and one warren node with the same access and TLS configuration, shared
by the comparison tests of this package (tests/access/brokers.py), and the certificates they use."""
from __future__ import annotations

import os

import pytest
from cryptography.x509.oid import NameOID

from tests.access.brokers import RABBITMQ_SERVER, Table, start_pair, stop_pair
from tests.tls_certs import Pki

# what both brokers run with, beside the AMQPS listener's certificate, verify_peer and EXTERNAL
TLS_CONF = ["ssl_options.fail_if_no_peer_cert = true", "ssl_options.depth = 1", "ssl_options.versions.1 = tlsv1.2",
            "ssl_options.ciphers.1 = ECDHE-ECDSA-AES256-GCM-SHA384"]
CLIENT_SUBJECT = [(NameOID.COUNTRY_NAME, "US"), (NameOID.ORGANIZATION_NAME, "Acme, Inc."),
                  (NameOID.COMMON_NAME, "alice")]


@pytest.fixture(scope="session")
def pki(tmp_path_factory):
    """ca.pem, server.pem/.key; client (signed by the CA), stranger (another CA), chain-leaf1 (one
    intermediate), chain-leaf2 (two)."""
    pki = Pki(tmp_path_factory.mktemp("access-pki"))
    ca = pki.ca_issued = pki.ca("ca", "warren test CA")
    pki.server("server", ca)
    pki.client("client", ca, CLIENT_SUBJECT)
    pki.client("stranger", pki.ca("other_ca", "another CA"), "alice")
    i1 = pki.ca("i1", "intermediate one", ca)
    i2 = pki.ca("i2", "intermediate two", i1)
    pki.bundle("chain-leaf1", pki.client("leaf1", i1, "one"), i1)
    pki.bundle("chain-leaf2", pki.client("leaf2", i2, "two"), i2, i1)
    return pki


@pytest.fixture(scope="session")
def table():
    t = Table()
    yield t
    if os.environ.get("ACCESS_CASES_TABLE"):
        t.write(os.environ["ACCESS_CASES_TABLE"])


@pytest.fixture(scope="session")
def pair(tmp_path_factory, pki):
    if not RABBITMQ_SERVER.exists():
        pytest.skip("rabbitmq-server (the 3.10 oracle) is not installed")
    root = tmp_path_factory.mktemp("access-pair")
    https = [f"management.ssl.{k} = {v}" for k, v in (
        ("cacertfile", pki.dir / "ca.pem"), ("certfile", pki.dir / "server.pem"), ("keyfile", pki.dir / "server.key"),
        ("verify", "verify_peer"), ("fail_if_no_peer_cert", "true"))]
    brokers = start_pair(root, TLS_CONF, pki.dir, [*https, "management.ssl.ip = 127.0.0.1"])
    yield brokers
    stop_pair(root, brokers)


@pytest.fixture
def both(pair, table):
    """compare(case, run): run(broker) on RabbitMQ and on warren; the answers must be equal."""
    rabbit, warren = pair

    def compare(case: str, run, same=lambda answer: answer):
        return table.compare(case, run, rabbit, warren, same)
    return compare
