"""Channel features of issue 4 with pika against a real node: direct reply-to RPC, CC/BCC, user-id,
expiration and consumer_timeout (a node of its own with a short timeout)."""
from __future__ import annotations

import pika
import pytest

from tests.integration.nodes import start_node

pytestmark = pytest.mark.integration  # starts real node processes

consumer_timeout_ms = 500
wait_s = 10.0  # upper bound for each wait on the broker; tests end as soon as the condition holds


def drain_until(conn, condition) -> None:
    """Process events until `condition()` holds, at most wait_s (a bound, not a synchronisation)."""
    for _ in range(int(wait_s / 0.05)):
        if condition():
            return
        conn.process_data_events(time_limit=0.05)
    assert condition()


def closed_with(method, *args):
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
        method(*args)
    return info.value.reply_code, info.value.reply_text


def publish_refused(conn, props: pika.BasicProperties) -> tuple[int, str]:
    """Publish in confirm mode (so pika waits for the answer) and return the channel.close."""
    ch = conn.channel()
    ch.confirm_delivery()
    return closed_with(ch.basic_publish, "", "x", b"m", props)


def test_direct_reply_to_rpc_round_trip(conn):
    client, server = conn.channel(), conn.channel()
    q = server.queue_declare("", exclusive=True).method.queue
    replies = []
    client.basic_consume("amq.rabbitmq.reply-to", lambda ch, m, p, b: replies.append((m, p, b)), auto_ack=True)
    client.basic_publish("", q, b"ping", pika.BasicProperties(reply_to="amq.rabbitmq.reply-to", correlation_id="c1"))
    got = []
    drain_until(conn, lambda: got.append(server.basic_get(q, auto_ack=True)) or got[-1][0] is not None)
    _, props, body = got[-1]
    assert body == b"ping" and props.reply_to.startswith("amq.rabbitmq.reply-to.")
    assert server.queue_declare(props.reply_to, passive=True).method.consumer_count == 1
    server.basic_publish("", props.reply_to, b"pong", pika.BasicProperties(correlation_id=props.correlation_id))
    drain_until(conn, lambda: replies)
    method, rprops, rbody = replies[0]
    assert (rbody, rprops.correlation_id, method.routing_key, method.exchange) == (
        b"pong", "c1", props.reply_to, "")


def test_direct_reply_to_needs_no_ack_and_a_consumer(conn):
    assert publish_refused(conn, pika.BasicProperties(reply_to="amq.rabbitmq.reply-to")) == (
        406, "PRECONDITION_FAILED - fast reply consumer does not exist")
    ch = conn.channel()
    assert closed_with(ch.basic_consume, "amq.rabbitmq.reply-to", lambda *a: None) == (
        406, "PRECONDITION_FAILED - reply consumer cannot acknowledge")


def test_cc_and_bcc(conn):
    ch = conn.channel()
    names = [ch.queue_declare("", exclusive=True).method.queue for _ in range(3)]
    ch.basic_publish("", names[0], b"m", pika.BasicProperties(headers={"CC": [names[1]], "BCC": [names[2]]}))
    seen = {}
    for name in names:
        drain_until(conn, lambda: seen.setdefault(name, ch.basic_get(name, auto_ack=True))[0] is not None
                    or seen.pop(name) and False)
    for name in names:
        method, props, body = seen[name]
        assert (method.routing_key, body, props.headers) == (names[0], b"m", {"CC": [names[1]]})
    assert publish_refused(conn, pika.BasicProperties(headers={"CC": "a"})) == (
        406, 'PRECONDITION_FAILED - invalid message: {unacceptable_type_in_header,"CC",longstr}')


def test_user_id_and_expiration_are_validated(conn):
    assert publish_refused(conn, pika.BasicProperties(user_id="bob")) == (
        406, "PRECONDITION_FAILED - user_id property set to 'bob' but authenticated user was 'guest'")
    assert publish_refused(conn, pika.BasicProperties(expiration="1.5")) == (
        406, "PRECONDITION_FAILED - invalid expiration '1.5': {leftover_string,\".5\"}")
    ok = conn.channel()
    ok.confirm_delivery()
    ok.basic_publish("", "nowhere", b"m", pika.BasicProperties(user_id="guest", expiration="60000"))


@pytest.fixture(scope="module")
def short_timeout_node(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("warren-ct")
    config = data_dir / "warren.conf"
    config.write_text(f"consumer_timeout = {consumer_timeout_ms}\n")
    n = start_node(data_dir, "--config", str(config))
    yield n
    n.stop()


def test_consumer_timeout_closes_the_channel(short_timeout_node):
    conn = pika.BlockingConnection(pika.URLParameters(short_timeout_node.url))
    try:
        ch = conn.channel()
        q = ch.queue_declare("", exclusive=True).method.queue
        ch.basic_publish("", q, b"m")
        consumer = conn.channel()
        errors = []
        consumer._impl.add_on_close_callback(lambda _ch, reason: errors.append(reason))
        consumer.basic_consume(q, lambda *a: None)
        drain_until(conn, lambda: errors)
        assert (errors[0].reply_code, errors[0].reply_text) == (
            406, f"PRECONDITION_FAILED - delivery acknowledgement on channel {consumer.channel_number} timed out. "
                 f"Timeout value used: {consumer_timeout_ms} ms. "
                 "This timeout value can be configured, see consumers doc guide to learn more")
        assert ch.is_open and conn.is_open
    finally:
        conn.close()
