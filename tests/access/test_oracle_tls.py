"""TLS with client certificates against RabbitMQ 3.10 and warren, configured with the same
rabbitmq.conf lines (conftest.py: verify_peer, fail_if_no_peer_cert, depth 1, TLS 1.2 only, one
cipher, EXTERNAL): pika and aio-pika connect with a certificate the configured CA signed and log
in by EXTERNAL as the certificate's distinguished name; one signed by another CA, or none, is
refused in the TLS handshake; the HTTPS API checks client certificates the same way."""
from __future__ import annotations

import asyncio
import json
import socket
import ssl
import urllib.error
import urllib.request
from urllib.parse import quote

import aio_pika
import pytest
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import NameOID

from metadata.cert_login import cert_username
from tests.access.amqp import close, connect, refusal
from tests.access.brokers import Broker, tls_client

pytestmark = pytest.mark.integration
ALICE_DN = "CN=alice,O=Acme\\, Inc.,C=US"
# the alerts whose description OpenSSL and Erlang's ssl choose differently for the same refusal:
# a chain past `depth` (Erlang: handshake_failure, OpenSSL: unknown_ca) and no cipher in common
# (Erlang: insufficient_security, OpenSSL: handshake_failure); both refuse in the handshake
LOOSE_ALERTS = {"SSLV3_ALERT_HANDSHAKE_FAILURE", "TLSV1_ALERT_UNKNOWN_CA", "TLSV1_ALERT_INSUFFICIENT_SECURITY"}


def any_alert(answer):
    """A refusal in the handshake with one of LOOSE_ALERTS, whichever."""
    if isinstance(answer, dict):
        return {k: any_alert(v) for k, v in answer.items()}
    return ("tls", "an alert") if isinstance(answer, tuple) and answer[:1] == ("tls",) and answer[1] in LOOSE_ALERTS \
        else answer


def external_user(b: Broker, name: str) -> None:
    """A user to log in as by EXTERNAL: its password is never checked."""
    b.http("PUT", f"/api/users/{quote(name, safe='')}", {"password": "unused", "tags": ""})
    b.http("PUT", f"/api/permissions/%2F/{quote(name, safe='')}", {"configure": ".*", "write": ".*", "read": ".*"})


def logged_in_as(b: Broker, conn) -> str:
    """Who the broker says the connection is (its connections listing)."""
    from tests.waiting import until
    rows = until(lambda: [c for c in b.http("GET", "/api/connections")[1] if c.get("ssl")],
                 f"{b.name}'s TLS connection in its listing", 30)
    return rows[0]["user"]


def test_pika_logs_in_by_external_with_a_certificate_the_ca_signed(both, pki):
    def run(b: Broker):
        external_user(b, ALICE_DN)
        conn = connect(b, tls=tls_client(pki.dir, "client"), external=True)
        if isinstance(conn, tuple):
            return conn
        user = logged_in_as(b, conn)
        close(conn)
        return user
    both("TLS: pika, CA-signed certificate, EXTERNAL", run)


def test_aio_pika_logs_in_by_external_too(both, pki):
    def run(b: Broker):
        external_user(b, ALICE_DN)

        async def go() -> str:
            conn = await aio_pika.connect(host="localhost", port=b.ssl_port, login="", password="",
                                          ssl=True, ssl_context=tls_client(pki.dir, "client"), auth="external")
            try:
                ch = await conn.channel()
                q = await ch.declare_queue(exclusive=True)
                await ch.default_exchange.publish(aio_pika.Message(b"over tls"), routing_key=q.name)
                got = await q.get(timeout=10)
                return got.body.decode()
            finally:
                await conn.close()
        return asyncio.run(go())
    both("TLS: aio-pika, EXTERNAL, publish and get", run)


@pytest.mark.parametrize("cert,case", [("stranger", "a certificate another CA signed"),
                                       (None, "no certificate (fail_if_no_peer_cert = true)"),
                                       ("chain-leaf2", "two intermediates (depth 1)")])
def test_refused_in_the_tls_handshake(both, pki, cert, case):
    def run(b: Broker):
        conn = connect(b, tls=tls_client(pki.dir, cert), external=True)
        close(conn)
        return conn if isinstance(conn, tuple) else "opened"
    both(f"TLS refused: {case}", run, any_alert if cert == "chain-leaf2" else (lambda answer: answer))


def test_one_intermediate_is_within_depth_1(both, pki):
    def run(b: Broker):
        external_user(b, "CN=one")
        conn = connect(b, tls=tls_client(pki.dir, "chain-leaf1"), external=True)
        close(conn)
        return conn if isinstance(conn, tuple) else "opened"
    both("TLS: one intermediate, depth 1", run)


def test_versions_and_ciphers(both, pki):
    def run(b: Broker):
        out = {}
        conn = connect(b, "guest", "guest", tls=tls_client(pki.dir, "client"))
        sock = conn._impl._transport._sock if not isinstance(conn, tuple) else None
        out["negotiated"] = (sock.version(), sock.cipher()[0]) if sock is not None else conn
        close(conn)
        out["TLS 1.3 only"] = connect(b, tls=tls_client(pki.dir, "client", minimum=ssl.TLSVersion.TLSv1_3),
                                      external=True)
        only = tls_client(pki.dir, "client", ciphers="ECDHE-ECDSA-AES128-GCM-SHA256")
        only.maximum_version = ssl.TLSVersion.TLSv1_2
        out["another cipher only"] = connect(b, tls=only, external=True)
        return out
    both("TLS: versions = tlsv1.2, ciphers = ECDHE-ECDSA-AES256-GCM-SHA384", run, any_alert)


def test_distinguished_names_are_rabbitmqs(both, pki):
    """Each subject logs in on both brokers as the name warren computes: so RabbitMQ's is the same."""
    subjects = {"escapes": [(NameOID.COUNTRY_NAME, "DE"), (NameOID.ORGANIZATION_NAME, ' Lead#ing+a,b;c<d>e"f\\g~h '),
                            (NameOID.COMMON_NAME, "#x")],
                "unicode": [(NameOID.ORGANIZATIONAL_UNIT_NAME, "Ünïcødé λ"), (NameOID.COMMON_NAME, "café")],
                "attributes": [(NameOID.DOMAIN_COMPONENT, "com"), (NameOID.USER_ID, "u1"),
                               (NameOID.EMAIL_ADDRESS, "a@b.c"), (NameOID.COMMON_NAME, "m")]}
    names = {}
    for stem, subject in subjects.items():
        issued = pki.client(f"dn-{stem}", pki.ca_issued, subject)
        names[stem] = cert_username(issued.certificate.public_bytes(Encoding.DER))

    def run(b: Broker):
        out = {}
        for stem, name in names.items():
            external_user(b, name)
            conn = connect(b, tls=tls_client(pki.dir, f"dn-{stem}"), external=True)
            out[stem] = conn if isinstance(conn, tuple) else "logged in"
            close(conn)
        return out
    both("EXTERNAL: the distinguished name's format (escapes, UTF-8, attribute names)", run)


def test_external_without_a_user_and_mechanisms_over_tls(both, pki):
    def run(b: Broker):
        b.http("DELETE", f"/api/users/{quote('CN=alice,O=Acme' + chr(92) + ', Inc.,C=US', safe='')}")
        out = {"no such user": connect(b, tls=tls_client(pki.dir, "client"), external=True)}
        with tls_client(pki.dir, "client").wrap_socket(socket.create_connection(
                ("localhost", b.ssl_port)), server_hostname="localhost") as s:
            s.sendall(b"AMQP\x00\x00\x09\x01")
            data = b""
            while b"en_US" not in data:
                data += s.recv(4096)
        start = data.index(b"AMQPLAIN")
        out["mechanisms"] = data[start:data.index(b"\x00", start)].decode()
        return out
    both("EXTERNAL refused for an unknown user; mechanisms over TLS", run)


def test_https_api_checks_client_certificates(both, pki):
    def run(b: Broker):
        out = {}
        for cert in ("client", None, "stranger"):
            ctx = tls_client(pki.dir, cert)
            request = urllib.request.Request(f"https://localhost:{b.https_port}/api/whoami")
            request.add_header("Authorization", "Basic Z3Vlc3Q6Z3Vlc3Q=")
            try:
                with urllib.request.urlopen(request, context=ctx, timeout=30) as r:
                    out[str(cert)] = (r.status, json.loads(r.read())["name"])
            except (urllib.error.URLError, ssl.SSLError, ConnectionError) as e:
                out[str(cert)] = refusal(e) if "SSL" in repr(e) else ("dropped",)
        return out
    both("HTTPS API: client certificates", run)


@pytest.fixture(scope="module")
def cn_pair(tmp_path_factory, pki, table):
    """A second pair: ssl_cert_login_from = common_name, and a client may come without a certificate."""
    from tests.access.brokers import RABBITMQ_SERVER, start_pair, stop_pair
    if not RABBITMQ_SERVER.exists():
        pytest.skip("rabbitmq-server (the 3.10 oracle) is not installed")
    root = tmp_path_factory.mktemp("access-cn-pair")
    brokers = start_pair(root, ["ssl_cert_login_from = common_name", "ssl_options.fail_if_no_peer_cert = false"],
                         pki.dir)
    yield lambda case, run: table.compare(case, run, *brokers)
    stop_pair(root, brokers)


def test_common_name_logins_and_peers_without_a_certificate(cn_pair, pki):
    def run(b: Broker):
        external_user(b, "alice")
        out = {}
        conn = connect(b, tls=tls_client(pki.dir, "client"), external=True)
        out["EXTERNAL as the CN"] = conn if isinstance(conn, tuple) else logged_in_as(b, conn)
        close(conn)
        conn = connect(b, "guest", "guest", tls=tls_client(pki.dir, None))
        out["no certificate, PLAIN"] = conn if isinstance(conn, tuple) else "opened"
        close(conn)
        out["no certificate, EXTERNAL"] = connect(b, tls=tls_client(pki.dir, None), external=True)
        return out
    cn_pair("ssl_cert_login_from = common_name, fail_if_no_peer_cert = false", run)
