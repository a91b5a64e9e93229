"""The connection core's login and vhost access, backed by a registry (what a connection host's
replica holds): refused logins, loopback-only users, vhosts without permissions."""
import pytest

from metadata import passwords
from metadata.registry import Registry
from actors.reader.core import ConnectionCore, Gatekeeper, Settings
from effects import CloseSocket, Opened, Write
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


def core(registry, *, loopback=True):
    gate = Gatekeeper(registry.check_login, registry.vhost_access_error, frozenset({"guest"}))
    # passed as check_login, exactly as the reader shell passes its host's callable
    return ConnectionCore(Settings(), check_login=gate, peer_is_loopback=loopback,
                          vhost_exists=registry.vhost_exists)


def cmd(method):
    return Command(0, method, None, None)


def login(c, user, password, caps=CAPS):
    c.receive(ProtocolHeaderOk())
    return c.receive(cmd(m.ConnectionStartOk(client_properties={"capabilities": caps}, mechanism="PLAIN",
                                             response=f"\x00{user}\x00{password}".encode(), locale="en_US")))


def open_vhost(c, vhost):
    c.receive(cmd(m.ConnectionTuneOk(channel_max=2047, frame_max=131072, heartbeat=0)))
    return c.receive(cmd(m.ConnectionOpen(virtual_host=vhost)))


REFUSED = "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN. For details see the broker logfile."


def test_good_login_opens(registry):
    c = core(registry)
    assert isinstance(login(c, "bob", "bob-pw")[0], Write)
    effects = open_vhost(c, "/")
    assert effects[0] == Opened("/", "bob", 131072, CAPS)


@pytest.mark.parametrize("user,password", [("bob", "wrong"), ("nobody", "x")])
def test_refused_login_is_403_with_the_capability(registry, user, password):
    effects = login(core(registry), user, password)
    close = method_frame(0, m.ConnectionClose(reply_code=403, reply_text=REFUSED, class_id=0, method_id=0))
    assert effects[0] == Write([close]) and isinstance(effects[1], CloseSocket)


def test_refused_login_without_the_capability_just_closes(registry):
    effects = login(core(registry), "bob", "wrong", caps={})
    assert len(effects) == 1 and isinstance(effects[0], CloseSocket)


def test_loopback_user_from_elsewhere_is_refused_like_a_bad_password(registry):
    effects = login(core(registry, loopback=False), "guest", "guest-pw")
    assert effects[0].chunks == [method_frame(0, m.ConnectionClose(reply_code=403, reply_text=REFUSED,
                                                                class_id=0, method_id=0))]
    assert "can only connect via localhost" in effects[1].reason
    assert isinstance(login(core(registry, loopback=False), "bob", "bob-pw")[0], Write)  # others may


def test_vhost_without_permissions_is_530(registry):
    c = core(registry)
    login(c, "bob", "bob-pw")
    effects = open_vhost(c, "v1")
    text = "NOT_ALLOWED - access to vhost 'v1' refused for user 'bob'"
    assert Write([method_frame(0, m.ConnectionClose(reply_code=530, reply_text=text, class_id=10,
                                                     method_id=40))]) in effects
    assert not any(isinstance(e, Opened) for e in effects)


def test_missing_vhost_keeps_rabbitmqs_not_found_text(registry):
    c = core(registry)
    login(c, "bob", "bob-pw")
    effects = open_vhost(c, "nov")
    assert Write([method_frame(0, m.ConnectionClose(reply_code=530, reply_text="NOT_ALLOWED - vhost nov not found",
                                                     class_id=10, method_id=40))]) in effects
