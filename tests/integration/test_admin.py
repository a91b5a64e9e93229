"""Users, permissions, vhosts, policies and TLS on a real node, with pika (texts from RabbitMQ 3.10)."""
from __future__ import annotations

import json
import ssl

import pika
import pytest

from tests.integration.admin_support import connect, ok, start_tls_node

pytestmark = pytest.mark.integration  # starts real node processes

@pytest.fixture(scope="module")
def node(tmp_path_factory):
    n = start_tls_node(tmp_path_factory.mktemp("admin"))
    ok(n, "add_user", "bob", "secret")
    ok(n, "set_permissions", "bob", "^bob.*", "^bob.*", "^bob.*")
    ok(n, "add_vhost", "v1")
    yield n
    n.stop()


def refused(kind, name, vhost="/"):
    return f"ACCESS_REFUSED - access to {kind} '{name}' in vhost '{vhost}' refused for user 'bob'"


OPERATIONS = [
    ("declare", lambda ch: ch.queue_declare("q"), refused("queue", "q")),
    ("exchange", lambda ch: ch.exchange_declare("x", "direct"), refused("exchange", "x")),
    ("bind", lambda ch: (ch.queue_declare("bobq"), ch.queue_bind("bobq", "amq.direct", "k")),
     refused("exchange", "amq.direct")),
    ("publish", lambda ch: (ch.confirm_delivery(), ch.basic_publish("", "k", b"x")), refused("exchange", "amq.default")),
    ("consume", lambda ch: ch.basic_consume("guestq", lambda *a: None), refused("queue", "guestq")),
]


@pytest.mark.parametrize("name,op,text", OPERATIONS, ids=[o[0] for o in OPERATIONS])
def test_restricted_user_gets_403(node, name, op, text):
    with connect(node) as guest:
        guest.channel().queue_declare("guestq")
    conn = connect(node, "bob", "secret")
    ch = conn.channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
        op(ch)
    assert (e.value.reply_code, e.value.reply_text) == (403, text)
    assert conn.is_open  # a channel error, the connection stays
    conn.close()


def test_permitted_operations_work(node):
    with connect(node, "bob", "secret") as conn:
        ch = conn.channel()
        ch.queue_declare("bob.ok")
        ch.queue_purge("bob.ok")


def test_wrong_password_and_unknown_user_are_refused(node):
    for user, password in (("bob", "wrong"), ("nobody", "x")):
        with pytest.raises(pika.exceptions.ProbableAuthenticationError) as e:
            connect(node, user, password)
        assert "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN" in str(e.value)


def test_vhost_without_permissions_is_refused_with_530(node):
    with pytest.raises(pika.exceptions.ProbableAccessDeniedError) as e:
        connect(node, "bob", "secret", "v1")
    assert "NOT_ALLOWED - access to vhost 'v1' refused for user 'bob'" in str(e.value)


def test_vhosts_are_isolated(node):
    ok(node, "set_permissions", "-p", "v1", "guest", ".*", ".*", ".*")
    with connect(node, vhost="v1") as conn:
        conn.channel().queue_declare("only-in-v1")
    with connect(node) as conn:
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
            conn.channel().queue_declare("only-in-v1", passive=True)
        assert e.value.reply_code == 404


def test_deleting_a_vhost_closes_its_connections_with_320(node):
    ok(node, "add_vhost", "doomed")
    ok(node, "set_permissions", "-p", "doomed", "guest", ".*", ".*", ".*")
    conn = connect(node, vhost="doomed")
    conn.channel().queue_declare("dq")
    ok(node, "delete_vhost", "doomed")
    with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as e:
        conn.process_data_events(time_limit=10)
        conn.channel()
    assert (e.value.reply_code, e.value.reply_text) == (320, "CONNECTION_FORCED - vhost 'doomed' is deleted")
    assert "doomed" not in ok(node, "list_vhosts")
    assert "dq" not in ok(node, "list_queues", "-p", "doomed")


def policy_of(node, queue):
    rows = json.loads(ok(node, "list_queues", "name", "policy", "effective_policy_definition", "--formatter", "json"))
    return next((r["policy"], r["effective_policy_definition"]) for r in rows if r["name"] == queue)


def test_policies_apply_to_existing_and_future_queues(node):
    with connect(node) as conn:
        ch = conn.channel()
        ch.queue_declare("pol.before", arguments={"x-max-length": 10})
        ok(node, "set_policy", "limit", "^pol\\.", '{"max-length": 2, "overflow": "reject-publish"}',
           "--apply-to", "queues")
        ch.queue_declare("pol.after")
    assert policy_of(node, "pol.before") == ("limit", {"max-length": 2, "overflow": "reject-publish"})
    assert policy_of(node, "pol.after") == ("limit", {"max-length": 2, "overflow": "reject-publish"})
    ok(node, "set_operator_policy", "cap", "^pol\\.after", '{"max-length": 1}')
    assert policy_of(node, "pol.after") == ("limit", {"max-length": 1, "overflow": "reject-publish"})
    ok(node, "clear_policy", "limit")
    ok(node, "clear_operator_policy", "cap")
    assert policy_of(node, "pol.before") == ("", {"max-length": 10})


def test_tls_listener_speaks_amqp(node):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    params = pika.ConnectionParameters("127.0.0.1", node.tls_port, "/", pika.PlainCredentials("guest", "guest"),
                                       ssl_options=pika.SSLOptions(ctx))
    with pika.BlockingConnection(params) as conn:
        ch = conn.channel()
        ch.queue_declare("over-tls")
        ch.basic_publish("", "over-tls", b"secret")
        method, _, body = ch.basic_get("over-tls", auto_ack=True)
        assert body == b"secret"
        big = bytes(range(256)) * 1200  # 300 KiB: more than one read, and than one TLS record
        ch.basic_publish("", "over-tls", big)
        assert ch.basic_get("over-tls", auto_ack=True)[2] == big
    rows = json.loads(ok(node, "list_connections", "user", "ssl", "--formatter", "json"))
    assert all(isinstance(r["ssl"], bool) for r in rows)


def test_users_and_policies_survive_a_restart(tmp_path):
    from tests.integration.nodes import start_node
    n = start_node(tmp_path / "data")
    try:
        ok(n, "add_user", "carol", "pw1")
        ok(n, "set_permissions", "carol", ".*", ".*", ".*")
        ok(n, "set_policy", "keep", "^k", '{"max-length": 3}')
    finally:
        n.stop()
    n = start_node(tmp_path / "data", port=n.port)
    try:
        with connect(n, "carol", "pw1") as conn:
            conn.channel().queue_declare("kq")
        assert policy_of(n, "kq") == ("keep", {"max-length": 3})
        # kept as salted hashes: no file of the node holds the password itself
        assert not [f for f in (tmp_path / "data").rglob("*") if f.is_file() and b"pw1" in f.read_bytes()]
    finally:
        n.stop()
