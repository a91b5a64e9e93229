"""Access control against RabbitMQ 3.10 and warren with the same client code (pika, rabbitmqctl /
warrenctl, the HTTP API): topic permissions, revocation, limits, logins. Each case runs on both
brokers and their answers (codes, texts, which connections close) must be equal; the Table keeps
both (ACCESS_CASES_TABLE=path writes it). Each test is a case: `@compared(what)` runs it on each
broker and compares what it returns."""
from __future__ import annotations

import time
from urllib.parse import quote

import pika
import pytest

from tests.access.amqp import attempt, close, closed_by_broker, connect, masked, publisher
from tests.access.brokers import Broker, compared
from tests.waiting import until

pytestmark = pytest.mark.integration


def user(b: Broker, name: str, password: str = "pw", vhost: str = "/", perms=(".*", ".*", ".*"), tags=()) -> None:
    """Set up over the HTTP API (a ctl run takes a good part of a second; these are not the case)."""
    b.http("DELETE", f"/api/users/{name}")
    assert b.http("PUT", f"/api/users/{name}", {"password": password, "tags": ",".join(tags)})[0] == 201
    if perms is not None:
        configure, write, read = perms
        status, _ = b.http("PUT", f"/api/permissions/{quote(vhost, safe='')}/{name}",
                           {"configure": configure, "write": write, "read": read})
        assert status in (201, 204)


def vhost(b: Broker, name: str) -> None:
    b.http("DELETE", f"/api/vhosts/{name}")
    assert b.http("PUT", f"/api/vhosts/{name}")[0] == 201


# ---------------------------------------------------------------- topic permissions
@compared("topic permissions: write on publish, read on bind/unbind ({username}, {vhost})")
def test_topic_permissions_on_publish_bind_and_unbind(b: Broker):
    user(b, "tp_bob")
    assert b.ctl("set_topic_permissions", "tp_bob", "amq.topic", "^{username}\\.", "^{vhost}")[0] == 0
    conn = connect(b, "tp_bob", "pw")
    ch = conn.channel()
    q = ch.queue_declare("", exclusive=True).method.queue
    ch.exchange_declare("tp_t2", "topic")
    out = {}
    for key in ("tp_bob.x", "alice.x"):
        ch = publisher(conn)
        out[f"publish {key}"] = attempt(lambda: ch.basic_publish("amq.topic", key, b"m"))
    for key in ("/.x", "x"):
        ch = conn.channel()
        out[f"bind {key}"] = attempt(lambda: ch.queue_bind(q, "amq.topic", key))
    ch = conn.channel()
    out["unbind x"] = attempt(lambda: ch.queue_unbind(q, "amq.topic", "x"))
    ch = conn.channel()
    out["exchange.bind from amq.topic"] = attempt(lambda: ch.exchange_bind("tp_t2", "amq.topic", "zz"))
    ch = conn.channel()
    out["exchange.bind into amq.topic"] = attempt(lambda: ch.exchange_bind("amq.topic", "tp_t2", "zz"))
    ch = publisher(conn)
    out["publish to a topic exchange without topic permissions"] = attempt(
        lambda: ch.basic_publish("tp_t2", "anything", b"m"))
    close(conn)
    return out


@compared("topic permissions: {client_id} stays literal on AMQP 0-9-1")
def test_client_id_is_not_expanded_for_amqp_0_9_1(b: Broker):
    user(b, "tp_cid")
    b.http("PUT", "/api/topic-permissions/%2F/tp_cid", {"exchange": "amq.topic", "write": "^{client_id}$",
                                                         "read": ".*"})
    conn = pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", b.port, "/", pika.PlainCredentials("tp_cid", "pw"), client_properties={"client_id": "c1"}))
    out = {}
    for key in ("{client_id}", "c1"):
        ch = publisher(conn)
        out[key] = attempt(lambda: ch.basic_publish("amq.topic", key, b"m"))
    close(conn)
    return out


@compared("rabbitmqctl/warrenctl topic permission commands")
def test_topic_permission_commands(b: Broker):
    user(b, "tp_ctl")
    vhost(b, "tp_v")
    out = {
        "set": b.ctl("set_topic_permissions", "-p", "tp_v", "tp_ctl", "amq.topic", "^a", "^b")[0],
        "set for a missing user": b.ctl("set_topic_permissions", "nobody", "amq.topic", "a", "b"),
        "set in a missing vhost": b.ctl("set_topic_permissions", "-p", "nov", "tp_ctl", "amq.topic", "a", "b"),
        "set an invalid regex (code)": b.ctl("set_topic_permissions", "tp_ctl", "amq.topic", "(", "b")[0],
        "list": b.ctl("list_topic_permissions", "-p", "tp_v", "--formatter", "json"),
        "list a missing vhost": b.ctl("list_topic_permissions", "-p", "nov"),
        "list the user's": b.ctl("list_user_topic_permissions", "tp_ctl", "--formatter", "json"),
        "list a missing user's": b.ctl("list_user_topic_permissions", "nobody"),
        "clear one exchange": b.ctl("clear_topic_permissions", "-p", "tp_v", "tp_ctl", "amq.topic")[0],
        "after clearing": b.ctl("list_topic_permissions", "-p", "tp_v", "--formatter", "json"),
        "clear for a missing user": b.ctl("clear_topic_permissions", "nobody"),
    }
    b.http("DELETE", "/api/vhosts/tp_v")
    return out


@compared("HTTP API /api/topic-permissions and definitions")
def test_topic_permissions_over_http_and_in_definitions(b: Broker):
    user(b, "tp_http")
    out = {"put": b.http("PUT", "/api/topic-permissions/%2F/tp_http",
                         {"exchange": "amq.topic", "write": "^w", "read": "^r"}),
           "put again": b.http("PUT", "/api/topic-permissions/%2F/tp_http",
                               {"exchange": "amq.topic", "write": "^w2", "read": "^r"})[0],
           "put without exchange": b.http("PUT", "/api/topic-permissions/%2F/tp_http", {"write": "a", "read": "b"}),
           "put for a missing user": b.http("PUT", "/api/topic-permissions/%2F/nobody",
                                            {"exchange": "x", "write": "a", "read": "b"}),
           "get": b.http("GET", "/api/topic-permissions/%2F/tp_http"),
           "get the user's": b.http("GET", "/api/users/tp_http/topic-permissions"),
           "get a missing user's": b.http("GET", "/api/topic-permissions/%2F/nobody")}
    exported = b.http("GET", "/api/definitions")[1]
    out["exported"] = [t for t in exported["topic_permissions"] if t["user"] == "tp_http"]
    out["delete"] = b.http("DELETE", "/api/topic-permissions/%2F/tp_http")
    out["delete again"] = b.http("DELETE", "/api/topic-permissions/%2F/tp_http")
    out["import"] = b.http("POST", "/api/definitions", {"topic_permissions": [
        {"user": "tp_http", "vhost": "/", "exchange": "imported", "write": ".*", "read": ""}]})[0]
    out["after import"] = b.http("GET", "/api/topic-permissions/%2F/tp_http")
    return out


# ---------------------------------------------------------------- revocation
@compared("delete_user closes that user's connections")
def test_deleting_a_user_closes_its_connections_only(b: Broker):
    user(b, "rv_gone")
    user(b, "rv_stays")
    gone, stays = connect(b, "rv_gone", "pw"), connect(b, "rv_stays", "pw")
    gone.channel()
    assert b.ctl("delete_user", "rv_gone")[0] == 0
    out = {"the deleted user's connection": closed_by_broker(gone),
           "another user's connection": closed_by_broker(stays, 1.0)}
    close(stays)
    return out


@compared("delete_vhost closes its connections")
def test_deleting_a_vhost_closes_its_connections(b: Broker):
    vhost(b, "rv_vh")
    user(b, "rv_vhuser", vhost="rv_vh")
    conn = connect(b, "rv_vhuser", "pw", "rv_vh")
    b.ctl("delete_vhost", "rv_vh")
    # RabbitMQ's two tracking handlers race: "vhost 'v' is deleted" or, about one time in four
    # here, "vhost 'v' is down" (vhost_down from its supervisor); warren always says the first
    how, code, text = closed_by_broker(conn)
    return how, code, text.replace("is down", "is deleted")


@compared("clear_permissions: what open channels may still do")
def test_cleared_permissions_reach_open_channels_as_rabbitmqs_cache_lets_them(b: Broker):
    user(b, "rv_carol")
    conn = connect(b, "rv_carol", "pw")
    ch = publisher(conn)
    ch.exchange_declare("rv_x1", "fanout")
    ch.exchange_declare("rv_x2", "fanout")
    ch.basic_publish("rv_x1", "", b"m")
    # the HTTP API's clear takes a few ms, a ctl run 0.3-0.4 s (more under load), and the
    # channel must not be idle for 1 s before the next publish
    b.http("DELETE", "/api/permissions/%2F/rv_carol")
    out = {"same channel, same exchange, at once": attempt(lambda: ch.basic_publish("rv_x1", "", b"m"))}
    fresh = publisher(conn)
    out["a new channel"] = attempt(lambda: fresh.basic_publish("rv_x1", "", b"m"))
    out["same channel, another exchange"] = attempt(lambda: ch.basic_publish("rv_x2", "", b"m"))
    for idle in (0.5, 3):  # RabbitMQ's channel hibernates after 1 s idle, and forgets its cache
        b.http("PUT", "/api/permissions/%2F/rv_carol", {"configure": ".*", "write": ".*", "read": ".*"})
        ch = publisher(conn)
        ch.basic_publish("rv_x1", "", b"m")
        time.sleep(idle)  # the case itself: how long the channel stays idle
        b.http("DELETE", "/api/permissions/%2F/rv_carol")
        out[f"after {idle} s idle"] = attempt(lambda: ch.basic_publish("rv_x1", "", b"m"))
    close(conn)
    return out


@compared("change_password: open connections and channels go on")
def test_a_changed_password_leaves_open_connections_alone(b: Broker):
    user(b, "rv_dave")
    conn = connect(b, "rv_dave", "pw")
    ch = publisher(conn)
    ch.exchange_declare("rv_x3", "fanout")
    b.ctl("change_password", "rv_dave", "new")
    out = {"publish on the open channel": attempt(lambda: ch.basic_publish("rv_x3", "", b"m")),
           "a new channel": attempt(lambda: conn.channel()),
           "the connection": closed_by_broker(conn, 1.0)}
    old = connect(b, "rv_dave", "pw")
    out["a new connection with the old password"] = old if isinstance(old, tuple) else "opened"
    close(conn)
    return out


@compared("server-named queue: configure checked against amq.gen-...")
def test_a_server_named_queue_is_checked_under_the_name_it_gets(b: Broker):
    user(b, "rv_gen", perms=("^amq\\.gen-", ".*", ".*"))
    conn = connect(b, "rv_gen", "pw")
    ch = conn.channel()
    out = {"configure ^amq.gen-": attempt(lambda: ch.queue_declare("", exclusive=True))}
    b.http("PUT", "/api/permissions/%2F/rv_gen", {"configure": "^mine", "write": ".*", "read": ".*"})
    ch = conn.channel()
    out["configure ^mine"] = attempt(lambda: ch.queue_declare("", exclusive=True))
    close(conn)
    return out


# ---------------------------------------------------------------- limits
@compared("vhost limits: max-connections, max-queues")
def test_vhost_connection_and_queue_limits(b: Broker):
    vhost(b, "lm_v")
    user(b, "lm_bob", vhost="lm_v")
    b.http("PUT", "/api/vhost-limits/lm_v/max-connections", {"value": 1})
    b.http("PUT", "/api/vhost-limits/lm_v/max-queues", {"value": 2})
    first = connect(b, "lm_bob", "pw", "lm_v")
    out = {"second connection": connect(b, "lm_bob", "pw", "lm_v")}
    ch = first.channel()
    ch.queue_declare("q1")
    ch.queue_declare("", exclusive=True)
    out["third queue"] = attempt(lambda: ch.queue_declare("q3"))
    ch = first.channel()
    out["third, server-named"] = attempt(lambda: ch.queue_declare(""))
    ch = first.channel()
    out["redeclare"] = attempt(lambda: ch.queue_declare("q1"))
    close(first)
    b.http("PUT", "/api/vhost-limits/lm_v/max-connections", {"value": 0})
    out["max-connections 0"] = connect(b, "lm_bob", "pw", "lm_v")
    b.http("DELETE", "/api/vhosts/lm_v")
    return out


@compared("user limits: max-connections, max-channels")
def test_user_connection_and_channel_limits(b: Broker):
    user(b, "lm_carl")
    b.http("PUT", "/api/user-limits/lm_carl/max-connections", {"value": 1})
    b.http("PUT", "/api/user-limits/lm_carl/max-channels", {"value": 2})
    conn = connect(b, "lm_carl", "pw")
    out = {"second connection": connect(b, "lm_carl", "pw")}
    conn.channel()
    conn.channel()
    out["third channel"] = attempt(lambda: conn.channel())
    return out


@compared("rabbitmqctl/warrenctl limit commands")
def test_limit_commands(b: Broker):
    user(b, "lm_ctl")
    vhost(b, "lm_cv")
    out = {}
    for i, args in enumerate((["set_vhost_limits", "-p", "lm_cv", '{"max-connections":2}'],
                 ["set_vhost_limits", "-p", "nov", '{"max-connections":2}'],
                 ["set_vhost_limits", "-p", "lm_cv", '{"max-foo":2}'],
                 ["set_vhost_limits", "-p", "lm_cv", '{"max-queues":"x"}'],
                 ["set_vhost_limits", "-p", "lm_cv", "notjson"],
                 ["set_vhost_limits", "-p", "lm_cv", '{"max-queues":-1}'],
                 ["list_vhost_limits", "-p", "lm_cv"],
                 ["list_vhost_limits", "-p", "nov"],
                 ["clear_vhost_limits", "-p", "lm_cv"],
                 ["clear_vhost_limits", "-p", "lm_cv"],
                 ["set_user_limits", "lm_ctl", '{"max-connections":2,"max-channels":3}'],
                 ["set_user_limits", "lm_ctl", '{"max-connections":5}'],
                 ["set_user_limits", "lm_ctl", '{"max-foo":2}'],
                 ["set_user_limits", "lm_ctl", '{"max-channels":1.5}'],
                 ["list_user_limits", "--user", "lm_ctl"],
                 ["list_user_limits", "--user", "nobody"],
                 ["clear_user_limits", "lm_ctl", "max-channels"],
                 ["list_user_limits", "--user", "lm_ctl"],
                 ["clear_user_limits", "nobody", "all"])):
        code, answer = b.ctl(*args)
        # a change's output is a banner; a listing's is its answer
        out[f"{i} {' '.join(args)}"] = (code, answer) if code or args[0].startswith("list") else code
    b.http("DELETE", "/api/vhosts/lm_cv")
    return out


@compared("HTTP API /api/vhost-limits, /api/user-limits and definitions")
def test_limits_over_http_and_in_definitions(b: Broker):
    user(b, "lm_http")
    vhost(b, "lm_hv")
    out = {"put a vhost limit": b.http("PUT", "/api/vhost-limits/lm_hv/max-queues", {"value": 7}),
           "put a bad value": b.http("PUT", "/api/vhost-limits/lm_hv/max-queues", {"value": "x"}),
           "put an unknown limit": b.http("PUT", "/api/vhost-limits/lm_hv/max-foo", {"value": 1}),
           "put without a value": b.http("PUT", "/api/vhost-limits/lm_hv/max-queues", {}),
           "get the vhost's": b.http("GET", "/api/vhost-limits/lm_hv"),
           "get a missing vhost's": b.http("GET", "/api/vhost-limits/nov"),
           "put a user limit": b.http("PUT", "/api/user-limits/lm_http/max-channels", {"value": 4}),
           "put for a missing user": b.http("PUT", "/api/user-limits/nobody/max-channels", {"value": 1}),
           "get the user's": b.http("GET", "/api/user-limits/lm_http"),
           "get a missing user's": b.http("GET", "/api/user-limits/nobody"),
           "the user's limits field": b.http("GET", "/api/users/lm_http")[1]["limits"]}
    exported = b.http("GET", "/api/definitions")[1]
    out["exported vhost limits"] = [p for p in exported["parameters"] if p["vhost"] == "lm_hv"]
    out["exported user limits"] = [u["limits"] for u in exported["users"] if u["name"] == "lm_http"]
    out["delete the vhost limit"] = b.http("DELETE", "/api/vhost-limits/lm_hv/max-queues")
    out["delete it again"] = b.http("DELETE", "/api/vhost-limits/lm_hv/max-queues")
    out["delete the user limit"] = b.http("DELETE", "/api/user-limits/lm_http/max-channels")
    out["user limits after"] = b.http("GET", "/api/user-limits/lm_http")
    b.http("DELETE", "/api/vhosts/lm_hv")
    return out


# ---------------------------------------------------------------- logins
@compared("failed logins: the same answer whether the user exists, logged, counted")
def test_failed_logins_answer_alike_are_logged_and_counted(b: Broker):
    user(b, "lg_eve")
    before = (b.metric("rabbitmq_auth_attempts_failed_total"), b.metric("rabbitmq_auth_attempts_succeeded_total"))
    out = {"wrong password": connect(b, "lg_eve", "wrong"), "no such user": connect(b, "lg_nobody", "x")}
    close(connect(b, "lg_eve", "pw"))
    for reason in ("PLAIN login refused: user 'lg_eve' - invalid credentials",
                   "PLAIN login refused: user 'lg_nobody' - invalid credentials"):
        until(lambda: reason in b.log(), f"{b.name} logging {reason!r}")
    counted = lambda: (b.metric("rabbitmq_auth_attempts_failed_total") - before[0],  # noqa: E731
                       b.metric("rabbitmq_auth_attempts_succeeded_total") - before[1])
    out["failed and succeeded attempts counted"] = until(lambda: counted() if counted()[0] >= 2 else None,
                                                         f"{b.name}'s counters")
    return out


@compared("impersonator tag and user-id")
def test_impersonator_may_publish_with_another_user_id(b: Broker):
    out = {}
    for name, tags in (("lg_plain", ()), ("lg_imp", ("impersonator",))):
        user(b, name, tags=tags)
        conn = connect(b, name, "pw")
        ch = publisher(conn)
        out[name] = attempt(lambda: ch.basic_publish("amq.fanout", "", b"m", pika.BasicProperties(user_id="alice")))
        close(conn)
    return out


@compared("connection.start mechanisms on the plain listener")
def test_mechanisms_offered(b: Broker):
    import socket
    with socket.create_connection(("127.0.0.1", b.port)) as s:
        s.sendall(b"AMQP\x00\x00\x09\x01")
        data = b""
        while b"en_US" not in data:
            data += s.recv(4096)
    start = data.index(b"AMQPLAIN")
    return masked(data[start:data.index(b"\x00", start)].decode())
