"""Every feature of the quorum queue guide through pika, on one node and on three (issue 12, item 4).

Where RabbitMQ 3.10 (the oracle, scripts/rabbitmq_oracle) and 4.0's guide agree, the expectations
were run against the oracle first (overflow reject-publish, global QoS). Where 4.0 differs, 4.0
wins and the test says so: the default delivery-limit of 20, where a requeued message goes, and
two priority levels served 2:1 (3.10 quorum queues have neither limit default nor priorities)."""
from __future__ import annotations

import pika
import pika.exceptions
import pytest

from tests.integration.admin_support import ok
from tests.quorum_features.conftest import CONSUMER_TIMEOUT_MS, declare
from tests.quorum_features.test_declare import members_of
from tests.waiting import until

pytestmark = pytest.mark.integration


def confirmed_channel(conn: pika.BlockingConnection) -> pika.adapters.blocking_connection.BlockingChannel:
    ch = conn.channel()
    ch.confirm_delivery()
    return ch


def publish(ch, name: str, *bodies: bytes, **props) -> list[str]:
    """'ack' or 'nack' per message (the channel is in confirm mode)."""
    out = []
    for body in bodies:
        try:
            ch.basic_publish("", name, body, pika.BasicProperties(**props))
            out.append("ack")
        except pika.exceptions.NackError:
            out.append("nack")
    return out


def get_all(ch, name: str) -> list[tuple[bytes, dict]]:
    out = []
    while True:
        method, props, body = ch.basic_get(name, auto_ack=True)
        if method is None:
            return out
        out.append((body, props.headers or {}))


def bodies(got: list[tuple[bytes, dict]]) -> list[bytes]:
    return [b for b, _h in got]


def count(ch, name: str) -> int:
    return ch.queue_declare(name, passive=True).method.message_count


def consume_into(conn, ch, name: str, out: list, ack: bool = True, **kw) -> str:
    def on(channel, method, props, body):
        out.append((body, props.headers or {}, method))
        if ack:
            channel.basic_ack(method.delivery_tag)
    return ch.basic_consume(name, on, **kw)


def drain_until(conns, condition, timeout_s: float = 20.0) -> None:
    def step():
        for c in conns:
            c.process_data_events(0.02)
        return condition()
    until(step, "deliveries", timeout_s)


# -- publisher confirms and mandatory -------------------------------------------------------------

def test_publisher_confirms_and_mandatory(broker, conns, name):
    decl, pub, _con = conns
    declare(decl.channel(), name)
    ch = confirmed_channel(pub)
    assert publish(ch, name, *[b"m%d" % i for i in range(50)]) == ["ack"] * 50
    # the count is the leader's as the node last saw it: a deposed leader that has not heard of
    # its successor yet answers from its state (RabbitMQ's local query too), hence a poll
    counts: list[int] = []
    until(lambda: counts.append(count(ch, name)) or counts[-1] == 50,
          lambda: f"the confirmed messages counted (counts {counts}, members {members_of(broker, name)})")
    with pytest.raises(pika.exceptions.UnroutableError):
        ch.basic_publish("", name + "-nowhere", b"x", mandatory=True)
    assert bodies(get_all(ch, name)) == [b"m%d" % i for i in range(50)]


# -- length limits ------------------------------------------------------------------------------

@pytest.mark.parametrize("limit,sizes", [({"x-max-length": 2}, None), ({"x-max-length-bytes": 10}, 5)])
def test_drop_head_is_the_default_overflow(conns, name, limit, sizes):
    decl, pub, con = conns
    declare(decl.channel(), name, **limit)
    assert publish(confirmed_channel(pub), name, b"abcd0", b"abcd1", b"abcd2", b"abcd3") == ["ack"] * 4
    assert bodies(get_all(con.channel(), name)) == [b"abcd2", b"abcd3"]


@pytest.mark.parametrize("limit", [{"x-max-length": 2}, {"x-max-length-bytes": 10}])
def test_reject_publish_nacks_once_the_queue_is_over_its_limit(conns, name, limit):
    # as the 3.10 oracle: the publish that goes over the limit is still taken (rabbit_fifo checks
    # the limit after the enqueue), the next ones are nacked until the queue is below it again
    decl, pub, con = conns
    declare(decl.channel(), name, **{"x-overflow": "reject-publish"}, **limit)
    ch = confirmed_channel(pub)
    assert publish(ch, name, *[b"abcd%d" % i for i in range(5)]) == ["ack", "ack", "ack", "nack", "nack"]
    assert bodies(get_all(con.channel(), name)) == [b"abcd0", b"abcd1", b"abcd2"]
    assert publish(ch, name, b"after") == ["ack"]


# -- TTL and expiry -------------------------------------------------------------------------------

def test_message_ttl_and_per_message_expiration(conns, name):
    decl, pub, con = conns
    declare(decl.channel(), name + "-ttl", **{"x-message-ttl": 200})
    declare(decl.channel(), name)
    ch = confirmed_channel(pub)
    publish(ch, name + "-ttl", b"a", b"b")
    publish(ch, name, b"short", expiration="200")
    publish(ch, name, b"kept")
    until(lambda: count(ch, name + "-ttl") == 0, "the queue's TTL expired its messages")
    until(lambda: count(ch, name) == 1, "the message's own expiration")
    assert bodies(get_all(con.channel(), name)) == [b"kept"]


def test_x_expires_deletes_a_queue_nobody_uses(conns, name):
    decl, _pub, _con = conns
    # used through the declaring node alone: not `declare`, whose wait for the other nodes to see
    # it could outlast its 500 ms
    decl.channel().queue_declare(name, durable=True, arguments={"x-queue-type": "quorum", "x-expires": 500})

    def gone() -> bool:
        ch = decl.channel()
        try:
            ch.queue_declare(name, passive=True)
        except pika.exceptions.ChannelClosedByBroker as e:
            return e.reply_code == 404
        ch.close()
        return False
    until(gone, "the unused queue expired")


# -- delivery limit, x-delivery-count, requeue position ---------------------------------------------

def nack_until_gone(ch, name: str, times: int) -> list[tuple[bool, dict]]:
    """basic.get + nack(requeue) up to `times`: (redelivered, headers) of each delivery seen."""
    seen = []
    for _ in range(times):
        method, props, _body = ch.basic_get(name)
        if method is None:
            break
        seen.append((method.redelivered, props.headers or {}))
        ch.basic_nack(method.delivery_tag, requeue=True)
    return seen


def test_delivery_limit_counts_redeliveries_and_drops_the_poison_message(conns, name):
    decl, pub, con = conns
    declare(decl.channel(), name, **{"x-delivery-limit": 2})
    publish(confirmed_channel(pub), name, b"poison")
    seen = nack_until_gone(con.channel(), name, 5)
    assert seen == [(False, {}), (True, {"x-delivery-count": 1}), (True, {"x-delivery-count": 2})]


def test_the_default_delivery_limit_is_20_and_minus_one_lifts_it(conns, name):
    # 4.0: every quorum queue has delivery-limit 20 unless told otherwise (3.10 had none)
    decl, pub, con = conns
    declare(decl.channel(), name)
    declare(decl.channel(), name + "-unlimited", **{"x-delivery-limit": -1})
    ch = confirmed_channel(pub)
    publish(ch, name, b"p")
    publish(ch, name + "-unlimited", b"p")
    get = con.channel()
    seen = nack_until_gone(get, name, 30)
    assert len(seen) == 21 and seen[-1][1] == {"x-delivery-count": 20}
    assert len(nack_until_gone(get, name + "-unlimited", 25)) == 25
    until(lambda: count(get, name + "-unlimited") == 1, "the last nack settled")  # the count asks the node


def test_a_requeued_message_goes_near_the_head_with_a_limit_and_to_the_back_without(conns, name):
    # 4.0's guide: with a delivery-limit (the default) the original behaviour, back near the head;
    # with -1 the message goes to the back of the queue
    decl, pub, con = conns
    declare(decl.channel(), name)
    declare(decl.channel(), name + "-unlimited", **{"x-delivery-limit": -1})
    ch = confirmed_channel(pub)
    get = con.channel()
    for queue in (name, name + "-unlimited"):
        publish(ch, queue, b"0", b"1", b"2")
        method, _props, _body = get.basic_get(queue)
        get.basic_nack(method.delivery_tag, requeue=True)
    assert bodies(get_all(get, name)) == [b"0", b"1", b"2"]
    assert bodies(get_all(get, name + "-unlimited")) == [b"1", b"2", b"0"]


# -- dead-lettering ---------------------------------------------------------------------------------

def death(headers: dict) -> tuple:
    (first, *_rest) = headers["x-death"]
    return first["reason"], first["queue"], first["count"], headers["x-first-death-reason"]


def test_at_most_once_dead_letters_poison_rejected_and_expired_messages(conns, name):
    decl, pub, con = conns
    d = decl.channel()
    d.queue_declare(name + "-dead", durable=True)
    declare(d, name, **{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": name + "-dead",
                        "x-delivery-limit": 1})
    declare(d, name + "-ttl", **{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": name + "-dead",
                                 "x-message-ttl": 100})
    ch = confirmed_channel(pub)
    publish(ch, name, b"poison", b"rejected")
    get = con.channel()
    nack_until_gone(get, name, 2)  # the first message: delivered twice, over its limit
    method, _p, body = get.basic_get(name)
    assert body == b"rejected"
    get.basic_reject(method.delivery_tag, requeue=False)
    publish(ch, name + "-ttl", b"expired")
    until(lambda: count(get, name + "-dead") == 3, "three messages dead-lettered")
    got = get_all(get, name + "-dead")
    assert [(b, death(h)) for b, h in got] == [
        (b"poison", ("delivery_limit", name, 1, "delivery_limit")),
        (b"rejected", ("rejected", name, 1, "rejected")),
        (b"expired", ("expired", name + "-ttl", 1, "expired")),
    ]
    assert all("x-delivery-count" not in h for _b, h in got)  # a new life in the target queue


def test_at_least_once_holds_messages_until_a_target_confirms_them(conns, name):
    # x-dead-letter-strategy at-least-once needs overflow reject-publish; the target here is a
    # classic queue (test_clients.py has a quorum one) declared only after the message was
    # dead-lettered: until then it routes nowhere and the source queue keeps it (the worker
    # publishes it again)
    decl, pub, con = conns
    d = decl.channel()
    declare(d, name, **{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": name + "-dead",
                        "x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish",
                        "x-delivery-limit": 0})
    ch = confirmed_channel(pub)
    publish(ch, name, b"keep-me")
    get = con.channel()
    method, _p, _b = get.basic_get(name)
    get.basic_nack(method.delivery_tag, requeue=True)  # over a delivery limit of 0
    assert get.basic_get(name)[0] is None
    assert count(get, name) == 0  # not ready: held for the dead-letter worker
    # through the node that counts it next: a declare-ok says the declaring node's copy of the
    # metadata has the queue (Khepri's rule, and warren's), not yet every node's (Mnesia's, 3.10)
    get.queue_declare(name + "-dead", durable=True)
    until(lambda: count(get, name + "-dead") == 1, "the held message reached its target", 30)
    (body, headers), = get_all(get, name + "-dead")
    assert body == b"keep-me" and death(headers) == ("delivery_limit", name, 1, "delivery_limit")


def test_at_least_once_falls_back_to_at_most_once_without_reject_publish(conns, name):
    decl, pub, con = conns
    d = decl.channel()
    d.queue_declare(name + "-dead", durable=True)
    declare(d, name, **{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": name + "-dead",
                        "x-dead-letter-strategy": "at-least-once"})
    publish(confirmed_channel(pub), name, b"m")
    get = con.channel()
    method, _p, _b = get.basic_get(name)
    get.basic_reject(method.delivery_tag, requeue=False)
    until(lambda: count(get, name + "-dead") == 1, "dead-lettered at-most-once")


# -- priorities and consumers -------------------------------------------------------------------

def test_two_priority_levels_are_served_two_to_one(conns, name):
    # 4.0: priority above 4 is high, and high is served 2:1 against normal (3.10: no priorities)
    decl, pub, con = conns
    declare(decl.channel(), name)
    ch = confirmed_channel(pub)
    for i in range(4):
        publish(ch, name, b"n%d" % i)
    for i in range(6):
        publish(ch, name, b"h%d" % i, priority=5 + i % 5)
    assert bodies(get_all(con.channel(), name)) == [b"h0", b"h1", b"n0", b"h2", b"h3", b"n1", b"h4", b"h5",
                                                    b"n2", b"n3"]


def test_single_active_consumer_hands_over_on_cancel(conns, name, broker):
    decl, pub, con = conns
    declare(decl.channel(), name, **{"x-single-active-consumer": True})
    other = broker.connect("declare")
    try:
        first, second = [], []
        c1 = con.channel()
        tag1 = consume_into(con, c1, name, first)
        drain_until([con], lambda: True)
        c2 = other.channel()
        consume_into(other, c2, name, second)
        ch = confirmed_channel(pub)
        publish(ch, name, b"a", b"b")
        drain_until([con, other], lambda: len(first) == 2)
        assert second == []
        c1.basic_cancel(tag1)
        publish(ch, name, b"c")
        drain_until([con, other], lambda: len(second) == 1)
        assert [b for b, _h, _m in first] == [b"a", b"b"] and second[0][0] == b"c"
    finally:
        other.close()


def test_consumer_priorities_serve_the_highest_with_credit(conns, name):
    decl, pub, con = conns
    declare(decl.channel(), name)
    high, low = [], []
    ch_high, ch_low = con.channel(), con.channel()
    ch_low.basic_qos(prefetch_count=10)
    consume_into(con, ch_low, name, low)
    ch_high.basic_qos(prefetch_count=3)
    consume_into(con, ch_high, name, high, ack=False, arguments={"x-priority": 10})
    drain_until([con], lambda: True)
    publish(confirmed_channel(pub), name, *[b"m%d" % i for i in range(8)])
    drain_until([con], lambda: len(high) + len(low) == 8)
    assert [b for b, _h, _m in high] == [b"m0", b"m1", b"m2"]  # until its prefetch is full
    assert len(low) == 5


def test_basic_get_counts_and_redelivery(conns, name):
    decl, pub, con = conns
    declare(decl.channel(), name)
    publish(confirmed_channel(pub), name, b"a", b"b")
    get = con.channel()
    method, _props, body = get.basic_get(name)
    assert (body, method.message_count, method.redelivered) == (b"a", 1, False)
    get.basic_reject(method.delivery_tag, requeue=True)
    method, props, body = get.basic_get(name, auto_ack=True)
    assert (body, method.redelivered, props.headers) == (b"a", True, {"x-delivery-count": 1})
    assert get.basic_get(name, auto_ack=True)[2] == b"b"
    assert get.basic_get(name)[0] is None


def test_global_qos_is_refused_as_rabbitmq_refuses_it(broker, name):
    # the oracle (3.10): a connection error on basic.consume; basic.get is not affected
    conn = broker.connect("declare")
    ch = conn.channel()
    declare(ch, name)
    ch.basic_qos(prefetch_count=5, global_qos=True)
    assert ch.basic_get(name)[0] is None
    with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as closed:
        ch.basic_consume(name, lambda *a: None)
    assert (closed.value.reply_code, closed.value.reply_text) == (
        540, f"NOT_IMPLEMENTED - queue '{name}' in vhost '/' does not support global qos")
    conn = broker.connect("declare")
    try:  # global QoS with prefetch 0 is no limit: consuming is fine
        ch = conn.channel()
        ch.basic_qos(prefetch_count=0, global_qos=True)
        ch.basic_consume(name, lambda *a: None)
    finally:
        conn.close()


def test_consumer_timeout_closes_the_channel_and_the_message_comes_back(conns, name):
    decl, pub, con = conns
    declare(decl.channel(), name)
    publish(confirmed_channel(pub), name, b"slow")
    consumer = con.channel()
    errors, got = [], []
    consumer._impl.add_on_close_callback(lambda _ch, reason: errors.append(reason))
    consume_into(con, consumer, name, got, ack=False)
    drain_until([con], lambda: errors, CONSUMER_TIMEOUT_MS / 1000 + 20)
    assert (errors[0].reply_code, errors[0].reply_text) == (
        406, f"PRECONDITION_FAILED - delivery acknowledgement on channel {consumer.channel_number} timed out. "
             f"Timeout value used: {CONSUMER_TIMEOUT_MS} ms. "
             "This timeout value can be configured, see consumers doc guide to learn more")
    get = decl.channel()  # on three nodes the closed channel's node tells the leader on its own path
    method, props, body = until(lambda: (found := get.basic_get(name, auto_ack=True))[0] and found,
                                "the unacked message back in the queue")
    assert (body, method.redelivered, props.headers) == (b"slow", True, {"x-delivery-count": 1})


# -- policies ---------------------------------------------------------------------------------------

def test_a_quorum_queues_policy_sets_max_length_and_delivery_limit(conns, name, broker):
    decl, pub, con = conns
    d = decl.channel()
    declare(d, name)
    d.queue_declare(name + "-classic", durable=True)
    ok(broker.nodes[0], "set_policy", "--apply-to", "quorum_queues", name, f"^{name}",
       '{"max-length": 2, "delivery-limit": 1}')
    try:
        ch = confirmed_channel(pub)

        def applied() -> bool:
            publish(ch, name, b"x", b"y", b"z")
            return count(ch, name) == 2
        until(applied, "the policy's max-length")
        get = con.channel()
        get_all(get, name)
        publish(ch, name, b"poison")
        assert len(nack_until_gone(get, name, 5)) == 2  # delivery-limit 1 from the policy
        publish(ch, name + "-classic", b"1", b"2", b"3")  # not a quorum queue: no limit
        assert count(ch, name + "-classic") == 3
    finally:
        ok(broker.nodes[0], "clear_policy", name)


def test_a_policy_s_overflow_wins_over_the_queue_s_argument(conns, name, broker):
    """rabbit_quorum_queue:gather_policy_config: the policy's overflow wins over x-overflow (a
    classic queue's argument would win), and the lower max-length of the two applies; the 3.10
    oracle answers the same (policy reject-publish over x-overflow drop-head, and the reverse)."""
    decl, pub, con = conns
    declare(decl.channel(), name, **{"x-overflow": "drop-head", "x-max-length": 5})
    ok(broker.nodes[0], "set_policy", "--apply-to", "quorum_queues", name, f"^{name}$",
       '{"overflow": "reject-publish", "max-length": 2}')
    try:
        ch, get = confirmed_channel(pub), con.channel()
        until(lambda: "nack" in publish(ch, name, b"probe", b"probe", b"probe"), "the policy's reject-publish")
        get_all(get, name)
        assert publish(ch, name, *[b"m%d" % i for i in range(5)]) == ["ack", "ack", "ack", "nack", "nack"]
        assert bodies(get_all(get, name)) == [b"m0", b"m1", b"m2"]
    finally:
        ok(broker.nodes[0], "clear_policy", name)
    # without the policy the arguments apply again: drop-head at 5
    until(lambda: publish(ch, name, *[b"n%d" % i for i in range(7)]) == ["ack"] * 7 and count(ch, name) == 5,
          "the arguments' drop-head")
    assert bodies(get_all(get, name))[-5:] == [b"n%d" % i for i in range(2, 7)]


def test_a_policy_with_a_key_the_queue_type_does_not_support_passes_it_by(conns, name, broker):
    """rabbit_queue_type:is_policy_applicable/2 (3.10's oracle answers the same): the quorum queue
    skips the policy that sets queue-mode and takes the next one down; the classic queue skips the
    one that sets delivery-limit."""
    decl, pub, _con = conns
    d = decl.channel()
    declare(d, name)
    d.queue_declare(name + "-classic", durable=True)
    policies = [("low", 0, '{"max-length": 3}'), ("quorum-keys", 5, '{"max-length": 1, "delivery-limit": 5}'),
                ("classic-keys", 6, '{"max-length": 2, "queue-mode": "lazy"}')]
    for suffix, priority, definition in policies:
        ok(broker.nodes[0], "set_policy", "--priority", str(priority), f"{name}-{suffix}", f"^{name}", definition)
    try:
        ch = confirmed_channel(pub)

        def limited(queue: str, length: int) -> bool:
            publish(ch, queue, *[b"x"] * 4)
            return count(ch, queue) == length
        until(lambda: limited(name, 1), "the quorum queue at the quorum-keys policy's max-length")
        until(lambda: limited(name + "-classic", 2), "the classic queue at the classic-keys policy's max-length")
    finally:
        for suffix, _priority, _definition in policies:
            ok(broker.nodes[0], "clear_policy", f"{name}-{suffix}")
