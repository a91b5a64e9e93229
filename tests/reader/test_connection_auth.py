"""The connection core's logins, mechanisms, vhost access and limits, backed by a registry (what a
connection host's replica holds). Texts from the oracle (RabbitMQ 3.10, tests/access/)."""
import pytest
from cryptography.hazmat.primitives.serialization import Encoding

from actors.reader.core import ConnectionCore, Gatekeeper, Peer, Settings
from actors.reader.login import EXTERNAL
from effects import CloseSocket, LoginAttempt, Opened, OpenChannel, Write
from metadata import passwords
from metadata.commands import SetUserLimits, SetUserTags, SetVhostLimits
from metadata.registry import Registry
from tests.tls_certs import Pki
from wire import methods as m
from wire.frames import method_frame
from wire.inbound import Command, ProtocolHeaderOk

CAPS = {"authentication_failure_close": True}


@pytest.fixture
def registry():
    r = Registry()
    r.add_vhost("v1")
    for user in ("guest", "bob"):
        r.add_user(user, passwords.hash_password(user + "-pw", b"salt"))
    r.set_permissions("guest", "/", ".*", ".*", ".*")
    r.set_permissions("bob", "/", ".*", ".*", ".*")
    return r


class Counts:
    """The cluster's counts as tracking.py answers them."""

    def __init__(self, vhosts=None, users=None, channels=None):
        self.vhosts, self.users, self.channels = vhosts or {}, users or {}, channels or {}

    def vhost_connections(self, vhost):
        return self.vhosts.get(vhost, 0)

    def user_connections(self, user):
        return self.users.get(user, 0)

    def user_channels(self, user):
        return self.channels.get(user, 0)


def core(registry, *, loopback=True, tracking=None, peer=None, **gate):
    gatekeeper = Gatekeeper(registry, frozenset({"guest"}), tracking=tracking, **gate)
    return ConnectionCore(Settings(), check_login=gatekeeper, peer_is_loopback=loopback,
                          vhost_exists=registry.vhost_exists, peer=peer)


def cmd(method, channel=0):
    return Command(channel, method, None, None)


def login(c, user, password, caps=CAPS, mechanism="PLAIN"):
    c.receive(ProtocolHeaderOk())
    response = b"" if mechanism == EXTERNAL else f"\x00{user}\x00{password}".encode()
    return c.receive(cmd(m.ConnectionStartOk(client_properties={"capabilities": caps}, mechanism=mechanism,
                                             response=response, locale="en_US")))


def open_vhost(c, vhost):
    c.receive(cmd(m.ConnectionTuneOk(channel_max=2047, frame_max=131072, heartbeat=0)))
    return c.receive(cmd(m.ConnectionOpen(virtual_host=vhost)))


def close(code, text, class_id=0, method_id=0):
    return Write([method_frame(0, m.ConnectionClose(reply_code=code, reply_text=text, class_id=class_id,
                                                    method_id=method_id))])


REFUSED = "ACCESS_REFUSED - Login was refused using authentication mechanism {}. For details see the broker logfile."


def test_good_login_opens_and_is_counted(registry):
    c = core(registry)
    effects = login(c, "bob", "bob-pw")
    assert effects[0] == LoginAttempt("bob", True) and isinstance(effects[1], Write)
    assert open_vhost(c, "/")[0] == Opened("/", "bob", 131072, CAPS, ())


@pytest.mark.parametrize("user,password", [("bob", "wrong"), ("nobody", "x")])
def test_refused_login_is_403_with_the_capability_and_logged_the_same_for_a_missing_user(registry, user, password):
    effects = login(core(registry), user, password)
    reason = f"PLAIN login refused: user '{user}' - invalid credentials"
    assert effects == [LoginAttempt(user, False, reason), close(403, REFUSED.format("PLAIN")), CloseSocket(reason)]


def test_refused_login_without_the_capability_just_closes(registry):
    effects = login(core(registry), "bob", "wrong", caps={})
    assert [type(e) for e in effects] == [LoginAttempt, CloseSocket]


def test_loopback_user_from_elsewhere_is_refused_like_a_bad_password(registry):
    effects = login(core(registry, loopback=False), "guest", "guest-pw")
    assert effects[1] == close(403, REFUSED.format("PLAIN"))
    assert effects[0] == LoginAttempt("guest", False, "PLAIN login refused: user 'guest' can only connect via localhost")
    assert isinstance(login(core(registry, loopback=False), "bob", "bob-pw")[1], Write)  # others may


def test_vhost_without_permissions_is_530(registry):
    c = core(registry)
    login(c, "bob", "bob-pw")
    effects = open_vhost(c, "v1")
    assert close(530, "NOT_ALLOWED - access to vhost 'v1' refused for user 'bob'", 10, 40) in effects
    assert not any(isinstance(e, Opened) for e in effects)


def test_missing_vhost_keeps_rabbitmqs_not_found_text(registry):
    c = core(registry)
    login(c, "bob", "bob-pw")
    assert close(530, "NOT_ALLOWED - vhost nov not found", 10, 40) in open_vhost(c, "nov")


def test_connection_limits_of_the_vhost_then_the_user_count_the_cluster(registry):
    registry.apply_command(SetVhostLimits("/", {"max-connections": 2}))
    registry.apply_command(SetUserLimits("bob", {"max-connections": 1}))
    c = core(registry, tracking=Counts(vhosts={"/": 2}, users={"bob": 1}))
    login(c, "bob", "bob-pw")
    assert close(530, "NOT_ALLOWED - access to vhost '/' refused for user 'bob': connection limit (2) is reached",
                 10, 40) in open_vhost(c, "/")
    c = core(registry, tracking=Counts(vhosts={"/": 1}, users={"bob": 1}))
    login(c, "bob", "bob-pw")
    assert close(530, "NOT_ALLOWED - connection refused for user 'bob': user connection limit (1) is reached",
                 10, 40) in open_vhost(c, "/")


def test_max_channels_closes_the_connection_at_channel_open(registry):
    registry.apply_command(SetUserLimits("bob", {"max-channels": 2}))
    counts = Counts(channels={"bob": 1})
    c = core(registry, tracking=counts)
    login(c, "bob", "bob-pw")
    open_vhost(c, "/")
    assert isinstance(c.receive(cmd(m.ChannelOpen(), 1))[0], OpenChannel)
    counts.channels["bob"] = 2
    text = "NOT_ALLOWED - number of channels opened for user 'bob' has reached the maximum allowed user limit of (2)"
    assert close(530, text) in c.receive(cmd(m.ChannelOpen(), 2))


def test_the_tags_at_login_go_with_the_connection(registry):
    registry.apply_command(SetUserTags("bob", ("impersonator",)))
    c = core(registry)
    login(c, "bob", "bob-pw")
    registry.apply_command(SetUserTags("bob", ()))  # later changes do not reach this connection
    assert open_vhost(c, "/")[0].tags == ("impersonator",)


def mechanisms(c) -> bytes:
    [write] = c.receive(ProtocolHeaderOk())
    start = write.chunks[0]
    return start[start.index(b"PLAIN") - 3:start.index(b"en_US") - 4]


def test_mechanisms_in_rabbitmqs_order_and_external_only_over_tls(registry):
    both = ("PLAIN", "AMQPLAIN", "EXTERNAL")
    assert mechanisms(core(registry)) == b"AMQPLAIN PLAIN"
    assert mechanisms(core(registry, mechanisms=both)) == b"AMQPLAIN PLAIN"
    assert mechanisms(core(registry, mechanisms=both, peer=Peer(tls=True))) == b"AMQPLAIN PLAIN EXTERNAL"


def test_external_not_offered_closes_the_socket(registry):
    effects = login(core(registry), "", "", mechanism=EXTERNAL)
    assert effects == [CloseSocket("invalid authentication mechanism 'EXTERNAL'")]


@pytest.fixture(scope="module")
def client_cert(tmp_path_factory):
    pki = Pki(tmp_path_factory.mktemp("pki"))
    issued = pki.client("c", pki.ca("ca", "test CA"), "bob")
    return issued.certificate.public_bytes(Encoding.DER)


def test_external_logs_in_the_certificates_user_without_a_password(registry, client_cert):
    gate = {"mechanisms": ("EXTERNAL",), "verify_peer": True, "cert_login_from": "common_name"}
    c = core(registry, peer=Peer(tls=True, cert=client_cert), **gate)
    assert login(c, "", "", mechanism=EXTERNAL)[0] == LoginAttempt("bob", True)
    c = core(registry, peer=Peer(tls=True), **gate)
    reason = "EXTERNAL login refused: connection peer presented no TLS (x.509) certificate"
    assert login(c, "", "", mechanism=EXTERNAL)[0] == LoginAttempt("", False, reason)
    c = core(registry, peer=Peer(tls=True, cert=client_cert), **gate)  # distinguished_name: "CN=bob", no such user
    c.gatekeeper = Gatekeeper(registry, mechanisms=("EXTERNAL",), verify_peer=True)
    reason = "EXTERNAL login refused: user 'CN=bob' - invalid credentials"
    assert login(c, "", "", mechanism=EXTERNAL)[0] == LoginAttempt("CN=bob", False, reason)
    c = core(registry, peer=Peer(tls=True, cert=client_cert), mechanisms=("EXTERNAL",))  # verify_none
    reason = "EXTERNAL login refused: TLS configuration is unsafe"
    assert login(c, "", "", mechanism=EXTERNAL)[0] == LoginAttempt("", False, reason)
