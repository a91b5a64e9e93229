"""Exchanges, bindings, routing and queue declaration against a real node (pika BlockingConnection).

Expected codes and texts are RabbitMQ 3.10's, as the oracle answers them."""
from __future__ import annotations

import uuid

import pika
import pika.exceptions as px
import pytest

pytestmark = pytest.mark.integration


def name(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def drain(ch, q: str) -> list[bytes]:
    out = []
    while True:
        _, _, body = ch.basic_get(q, auto_ack=True)
        if body is None:
            return out
        out.append(body)


def bound_queue(ch, exchange: str, key: str = "", arguments=None) -> str:
    q = name()
    ch.queue_declare(q)
    ch.queue_bind(q, exchange, routing_key=key, arguments=arguments)
    return q


def test_direct_and_fanout(ch):
    x, f = name("x"), name("f")
    ch.exchange_declare(x, "direct")
    ch.exchange_declare(f, "fanout")
    a, b = bound_queue(ch, x, "a"), bound_queue(ch, x, "b")
    f1, f2 = bound_queue(ch, f), bound_queue(ch, f)
    ch.basic_publish(x, "a", b"to-a")
    ch.basic_publish(f, "ignored", b"to-all")
    assert drain(ch, a) == [b"to-a"] and drain(ch, b) == []
    assert drain(ch, f1) == [b"to-all"] == drain(ch, f2)


@pytest.mark.parametrize("pattern,key,matches", [
    ("a.*", "a.b", True), ("a.*", "a.b.c", False), ("a.#", "a", True), ("#", "", True),
    ("*.b.#", "x.b.y.z", True), ("a.#.z", "a.z", True), ("a.#.z", "a.b.c.z", True), ("*", "", False),
])
def test_topic_patterns(ch, pattern, key, matches):
    x = name("topic")
    ch.exchange_declare(x, "topic")
    q = bound_queue(ch, x, pattern)
    ch.basic_publish(x, key, b"m")
    assert drain(ch, q) == ([b"m"] if matches else [])


def test_headers_all_and_any(ch):
    x = name("h")
    ch.exchange_declare(x, "headers")
    q_all = bound_queue(ch, x, arguments={"x-match": "all", "a": 1, "b": "two"})
    q_any = bound_queue(ch, x, arguments={"x-match": "any", "a": 1, "c": 3})
    ch.basic_publish(x, "", b"both", pika.BasicProperties(headers={"a": 1, "b": "two"}))
    ch.basic_publish(x, "", b"only-a", pika.BasicProperties(headers={"a": 1}))
    assert drain(ch, q_all) == [b"both"]
    assert drain(ch, q_any) == [b"both", b"only-a"]


def test_exchange_to_exchange_binding(ch):
    src, dst = name("src"), name("dst")
    ch.exchange_declare(src, "topic")
    ch.exchange_declare(dst, "fanout")
    ch.exchange_bind(dst, src, routing_key="k.#")
    q = bound_queue(ch, dst)
    ch.basic_publish(src, "k.1", b"through")
    ch.basic_publish(src, "other", b"not")
    assert drain(ch, q) == [b"through"]
    ch.exchange_unbind(dst, src, routing_key="k.#")
    ch.basic_publish(src, "k.2", b"after-unbind")
    assert drain(ch, q) == []


def test_alternate_exchange_takes_unroutable(ch):
    ae, x = name("ae"), name("x")
    ch.exchange_declare(ae, "fanout")
    ch.exchange_declare(x, "direct", arguments={"alternate-exchange": ae})
    caught = bound_queue(ch, ae)
    ch.basic_publish(x, "nobody", b"unroutable")
    assert drain(ch, caught) == [b"unroutable"]


def test_internal_exchange_refuses_direct_publish(conn, ch):
    x = name("int")
    ch.exchange_declare(x, "fanout", internal=True)
    ch.basic_publish(x, "", b"x")
    with pytest.raises(px.ChannelClosedByBroker) as e:
        ch.queue_declare(name())
    assert e.value.reply_code == 403
    assert e.value.reply_text == f"ACCESS_REFUSED - cannot publish to internal exchange '{x}' in vhost '/'"


def test_passive_declare_of_missing_exchange_is_404(ch):
    x = name("missing")
    with pytest.raises(px.ChannelClosedByBroker) as e:
        ch.exchange_declare(x, passive=True)
    assert (e.value.reply_code, e.value.reply_text) == (404, f"NOT_FOUND - no exchange '{x}' in vhost '/'")


def test_inequivalent_redeclare_is_406(ch):
    x = name("x")
    ch.exchange_declare(x, "direct")
    with pytest.raises(px.ChannelClosedByBroker) as e:
        ch.exchange_declare(x, "direct", durable=True)
    assert e.value.reply_code == 406
    assert e.value.reply_text == (f"PRECONDITION_FAILED - inequivalent arg 'durable' for exchange '{x}' "
                                  "in vhost '/': received 'true' but current is 'false'")


def test_reserved_amq_prefix_is_403(ch):
    with pytest.raises(px.ChannelClosedByBroker) as e:
        ch.exchange_declare("amq.mine", "direct")
    assert e.value.reply_code == 403


def test_delete_if_unused(conn, ch):
    x = name("x")
    ch.exchange_declare(x, "direct")
    bound_queue(ch, x, "k")
    with pytest.raises(px.ChannelClosedByBroker) as e:
        ch.exchange_delete(x, if_unused=True)
    assert (e.value.reply_code, e.value.reply_text) == (406, f"PRECONDITION_FAILED - exchange '{x}' in vhost '/' in use")


def test_predeclared_exchanges_route(ch):
    q = bound_queue(ch, "amq.direct", "k")
    ch.basic_publish("amq.direct", "k", b"m")
    assert drain(ch, q) == [b"m"]


def test_server_named_queue(ch):
    q = ch.queue_declare("", exclusive=True).method.queue
    assert q.startswith("amq.gen-") and len(q) == len("amq.gen-") + 22


def test_queue_passive_missing_is_404(ch):
    q = name()
    with pytest.raises(px.ChannelClosedByBroker) as e:
        ch.queue_declare(q, passive=True)
    assert (e.value.reply_code, e.value.reply_text) == (404, f"NOT_FOUND - no queue '{q}' in vhost '/'")


def test_queue_inequivalent_durable_is_406(ch):
    q = name()
    ch.queue_declare(q)
    with pytest.raises(px.ChannelClosedByBroker) as e:
        ch.queue_declare(q, durable=True)
    assert e.value.reply_text == (f"PRECONDITION_FAILED - inequivalent arg 'durable' for queue '{q}' in vhost '/': "
                                  "received 'true' but current is 'false'")


def test_exclusive_queue_is_locked_to_its_connection(node, ch):
    q = name()
    ch.queue_declare(q, exclusive=True)
    other = pika.BlockingConnection(pika.URLParameters(node.url))
    try:
        with pytest.raises(px.ChannelClosedByBroker) as e:
            other.channel().basic_consume(q, lambda *a: None)
        assert e.value.reply_code == 405
    finally:
        if other.is_open:
            other.close()


def test_exclusive_queue_goes_with_its_connection(node, conn):
    c = pika.BlockingConnection(pika.URLParameters(node.url))
    q = c.channel().queue_declare("", exclusive=True).method.queue
    c.close()
    # as in RabbitMQ, the deletion follows the close asynchronously: until it lands the queue is
    # still locked to its (closing) owner (405); poll with a deadline until it is gone (404)
    codes = []
    for _ in range(100):
        with pytest.raises(px.ChannelClosedByBroker) as e:
            conn.channel().queue_declare(q, passive=True)
        codes.append(e.value.reply_code)
        if codes[-1] == 404:
            break
        conn.process_data_events(0.05)
    assert codes[-1] == 404 and set(codes) <= {405, 404}


def test_purge_and_delete_if_empty(conn, ch):
    q = name()
    ch.queue_declare(q)
    for i in range(4):
        ch.basic_publish("", q, b"%d" % i)
    with pytest.raises(px.ChannelClosedByBroker) as e:
        ch.queue_delete(q, if_empty=True)
    assert (e.value.reply_code, e.value.reply_text) == (406, f"PRECONDITION_FAILED - queue '{q}' in vhost '/' not empty")
    ch = conn.channel()
    assert ch.queue_purge(q).method.message_count == 4
    assert ch.queue_delete(q, if_empty=True).method.message_count == 0


def test_delete_if_unused_with_a_consumer(conn, ch):
    q = name()
    ch.queue_declare(q)
    ch.basic_consume(q, lambda *a: None)
    other = conn.channel()
    with pytest.raises(px.ChannelClosedByBroker) as e:
        other.queue_delete(q, if_unused=True)
    assert (e.value.reply_code, e.value.reply_text) == (406, f"PRECONDITION_FAILED - queue '{q}' in vhost '/' in use")


def test_auto_delete_queue_goes_after_its_last_consumer(conn, ch):
    q = name()
    ch.queue_declare(q, auto_delete=True)
    tag = ch.basic_consume(q, lambda *a: None)
    ch.basic_cancel(tag)
    probe = conn.channel()
    # deletion is asynchronous (queue -> node); poll until it is gone, with a deadline
    for _ in range(100):
        try:
            probe.queue_declare(q, passive=True)
        except px.ChannelClosedByBroker as e:
            assert e.reply_code == 404
            return
        conn.process_data_events(0.05)
    pytest.fail("auto-delete queue still exists")


def test_unbind_stops_routing(ch):
    x = name("x")
    ch.exchange_declare(x, "direct")
    q = bound_queue(ch, x, "k")
    ch.queue_unbind(q, x, routing_key="k")
    ch.basic_publish(x, "k", b"m")
    assert drain(ch, q) == []
