"""Channel core features of issue 4: permissions, direct reply-to, CC/BCC, user-id, expiration,
consumer_timeout. Exact effects, real Registry."""
from __future__ import annotations

import pytest

from actors.channel.publish_checks import expiration_error
from actors.channel.reply_to import parse_reply_name
from actors.messages.channel_queue import ChannelDown, Publish
from actors.messages.direct_reply import DirectReply
from effects import Send, Write
from wire import methods as m
from wire.properties import HEADER_PROPS_OFFSET, BasicProperties

from tests.channel.helpers import (
    ME, PermRegistry, close_frame, cmd, content, declare, frame, header, make, publish,
)
from tests.channel.test_core import Q, consuming, delivered

REFUSED = "ACCESS_REFUSED - access to {} '{}' in vhost '/' refused for user 'lim'"


def limited_registry() -> PermRegistry:
    reg = PermRegistry()
    reg.permissions[("lim", "/")] = {"configure": "^cfg", "write": "^wr", "read": "^rd"}
    for q in ("other", "rdq", "wrq"):
        declare(reg, q)
    for x in ("otherx", "rdx", "wrx"):
        reg.declare_exchange("/", x, "direct")
    return reg


# method, expected (kind, resource) refused, or None when allowed past the permission checks
PERMISSION_CASES = [
    (m.QueueDeclare(queue="other"), ("queue", "other")),
    (m.QueueDeclare(queue="other", passive=True), None),
    (m.QueueDeclare(queue="cfgnew", arguments={"x-dead-letter-exchange": "otherx"}), ("queue", "cfgnew")),
    (m.ExchangeDeclare(exchange="otherx", type="direct"), ("exchange", "otherx")),
    (m.ExchangeDeclare(exchange="otherx", type="direct", passive=True), None),
    (m.ExchangeDeclare(exchange="cfgnewx", type="direct", arguments={"alternate-exchange": "otherx"}),
     ("exchange", "cfgnewx")),
    (m.QueueDelete(queue="other"), ("queue", "other")),
    (m.QueueDelete(queue="nonexist"), ("queue", "nonexist")),
    (m.ExchangeDelete(exchange="otherx"), ("exchange", "otherx")),
    (m.QueuePurge(queue="other"), ("queue", "other")),
    (m.BasicGet(queue="other"), ("queue", "other")),
    (m.BasicGet(queue="rdq"), None),
    (m.BasicConsume(queue="other"), ("queue", "other")),
    (m.QueueBind(queue="other", exchange="rdx"), ("queue", "other")),
    (m.QueueBind(queue="wrq", exchange="otherx"), ("exchange", "otherx")),
    (m.QueueBind(queue="wrq", exchange="rdx"), None),
    (m.QueueUnbind(queue="other", exchange="rdx"), ("queue", "other")),
    (m.ExchangeBind(destination="otherx", source="rdx"), ("exchange", "otherx")),
    (m.ExchangeBind(destination="wrx", source="otherx"), ("exchange", "otherx")),
]


@pytest.mark.parametrize("method,refused", PERMISSION_CASES, ids=lambda v: getattr(v, "NAME", str(v)))
def test_permission_checks(method, refused):
    core = make(limited_registry(), user="lim")
    core.command(cmd(method))
    out = core.flush()
    if refused is None:
        assert not any(isinstance(e, Write) and b"ACCESS_REFUSED" in b"".join(e.chunks) for e in out)
    else:
        text = REFUSED.format(*refused)
        assert out == [Write([close_frame(403, text, method.CLASS_ID, method.METHOD_ID)])]


def test_publish_needs_write_on_the_exchange_named_amq_default_for_the_default_one():
    core = make(limited_registry(), user="lim")
    core.command(publish("", "wrq"))
    assert core.flush() == [Write([close_frame(403, REFUSED.format("exchange", "amq.default"), 60, 40)])]


# ---------------------------------------------------------------- direct reply-to
def reply_consumer(core, tag="rc"):
    core.command(cmd(m.BasicConsume(queue="amq.rabbitmq.reply-to", consumer_tag=tag, no_ack=True)))
    assert core.flush() == [Write([frame(m.BasicConsumeOk(consumer_tag=tag))])]


def test_direct_reply_to_round_trip():
    reg = PermRegistry()
    declare(reg, "q")
    client = make(reg)
    reply_consumer(client)
    client.command(publish(routing_key="q", reply_to="amq.rabbitmq.reply-to", correlation_id="7"))
    [send] = client.flush()
    stored = send.msg.messages[0][3]
    props = BasicProperties.decode(stored, HEADER_PROPS_OFFSET)
    assert props.correlation_id == "7" and props.reply_to.startswith("amq.rabbitmq.reply-to.")
    address, key = parse_reply_name(props.reply_to)
    assert address == ME

    server = make(reg, address="conn0/ch:2", number=2)
    answer = publish(routing_key=props.reply_to, body=b"42", number=2)
    server.command(answer)
    assert server.flush() == [Send(ME, DirectReply(key, "", props.reply_to, answer.header, b"42"))]

    client.receive("conn0/ch:2", DirectReply(key, "", props.reply_to, answer.header, b"42"))
    deliver = m.BasicDeliver(consumer_tag="rc", delivery_tag=1, redelivered=False, exchange="",
                             routing_key=props.reply_to)
    assert client.flush() == [Write(content(deliver, answer.header, b"42"))]


def test_direct_reply_mandatory_is_returned_as_rabbitmq_3_10_does():
    server = make()
    name = "amq.rabbitmq.reply-to.Y29ubjAvY2g6MQ==.k"
    p = publish(routing_key=name, mandatory=True)
    server.command(p)
    ret = m.BasicReturn(reply_code=312, reply_text="NO_ROUTE", exchange="", routing_key=name)
    assert server.flush() == [Send(ME, DirectReply("k", "", name, p.header, p.body)),
                              Write(content(ret, p.header, p.body))]


def test_stale_reply_key_is_dropped():
    client = make()
    reply_consumer(client)
    client.command(cmd(m.BasicCancel(consumer_tag="rc")))
    assert client.flush() == [Write([frame(m.BasicCancelOk(consumer_tag="rc"))])]
    client.receive("x", DirectReply("old", "", "amq.rabbitmq.reply-to.x.old", header(), b"hi"))
    assert client.flush() == []


@pytest.mark.parametrize("setup,consume,text", [
    (False, m.BasicConsume(queue="amq.rabbitmq.reply-to", no_ack=False),
     "PRECONDITION_FAILED - reply consumer cannot acknowledge"),
    (True, m.BasicConsume(queue="amq.rabbitmq.reply-to", no_ack=True),
     "PRECONDITION_FAILED - reply consumer already set"),
])
def test_reply_consumer_errors(setup, consume, text):
    core = make()
    if setup:
        reply_consumer(core)
    core.command(cmd(consume))
    assert core.flush() == [Write([close_frame(406, text, 60, 20)])]


def test_reply_to_without_reply_consumer_is_refused():
    core = make()
    core.command(publish(reply_to="amq.rabbitmq.reply-to"))
    assert core.flush() == [Write([close_frame(406, "PRECONDITION_FAILED - fast reply consumer does not exist",
                                               60, 40)])]


def test_reply_to_pseudo_queue_declare():
    core = make()
    core.command(cmd(m.QueueDeclare(queue="amq.rabbitmq.reply-to", passive=True)))
    assert core.flush() == [Write([frame(m.QueueDeclareOk(queue="amq.rabbitmq.reply-to", message_count=0,
                                                          consumer_count=1))])]
    core.command(cmd(m.QueueDeclare(queue="amq.rabbitmq.reply-to.garbage", passive=True)))
    assert core.flush() == [Write([close_frame(
        404, "NOT_FOUND - no queue 'amq.rabbitmq.reply-to.garbage' in vhost '/'", 50, 10)])]


# ---------------------------------------------------------------- CC / BCC, user-id, expiration
def test_cc_and_bcc_route_to_the_union_and_bcc_is_stripped():
    reg = PermRegistry()
    declare(reg, "a", "b", "c")
    core = make(reg)
    p = publish(routing_key="a", headers={"CC": ["b", "a"], "BCC": ["c"], "x": "y"})
    core.command(p)
    out = core.flush()
    stripped = p.header[:HEADER_PROPS_OFFSET] + BasicProperties(headers={"CC": ["b", "a"], "x": "y"}).encode()
    record = (0, "", "a", stripped, p.body)
    assert out == [Send(("q", "/", q), Publish([record]), 1) for q in ("a", "b", "c")]


def test_cc_without_bcc_keeps_the_original_header_bytes():
    reg = PermRegistry()
    declare(reg, "a", "b")
    core = make(reg)
    p = publish(routing_key="a", headers={"CC": ["b"]})
    core.command(p)
    assert [e.msg.messages[0][3] is p.header for e in core.flush()] == [True, True]


@pytest.mark.parametrize("headers,text", [
    ({"CC": "a"}, 'PRECONDITION_FAILED - invalid message: {unacceptable_type_in_header,"CC",longstr}'),
    ({"BCC": "a"}, 'PRECONDITION_FAILED - invalid message: {unacceptable_type_in_header,"BCC",longstr}'),
    ({"CC": 5}, 'PRECONDITION_FAILED - invalid message: {unacceptable_type_in_header,"CC",signedint}'),
])
def test_cc_of_the_wrong_type_is_refused(headers, text):
    core = make()
    core.command(publish(headers=headers))
    assert core.flush() == [Write([close_frame(406, text, 60, 40)])]


def test_user_id_must_be_the_authenticated_user():
    reg = PermRegistry()
    declare(reg, "q")
    core = make(reg)
    core.command(publish(user_id="guest"))
    assert [type(e.msg) for e in core.flush()] == [Publish]
    core.command(publish(user_id="bob"))
    text = "PRECONDITION_FAILED - user_id property set to 'bob' but authenticated user was 'guest'"
    assert core.flush() == [Write([close_frame(406, text, 60, 40)])]


@pytest.mark.parametrize("value,detail", [
    ("abc", "no_integer"), ("", "no_integer"), (" 5", "no_integer"), ("+", "no_integer"),
    ("-1", "{value_negative,-1}"), ("1.5", '{leftover_string,".5"}'), ("5abc", '{leftover_string,"abc"}'),
    ('1"\\x', '{leftover_string,"\\"\\\\x"}'),
    ("315360000001", "{value_too_large,315360000001}"),
    ("1" + "a" * 17, '{leftover_string,"' + "a" * 17 + '"}'),
    ("1" + "a" * 18, '{leftover_string,\n' + " " * 43 + '"' + "a" * 18 + '"}'),
    ("1" * 19, "{value_too_large,\n" + " " * 43 + "1" * 19 + "}"),
    ("-" + "1" * 20, "{value_negative,\n" + " " * 45 + "-" + "1" * 20 + "}"),
])
def test_malformed_expiration_texts_match_rabbitmq(value, detail):
    assert expiration_error(value).text == f"PRECONDITION_FAILED - invalid expiration '{value}': {detail}"


@pytest.mark.parametrize("value", ["0", "+5", "60000", "4294967296", "315360000000"])
def test_valid_expirations(value):
    assert expiration_error(value) is None


def test_malformed_expiration_closes_the_channel():
    core = make()
    core.command(publish(expiration="abc"))
    assert core.flush() == [Write([close_frame(
        406, "PRECONDITION_FAILED - invalid expiration 'abc': no_integer", 60, 40)])]


# ---------------------------------------------------------------- consumer timeout
def test_consumer_timeout_closes_the_channel_after_the_timeout():
    reg = PermRegistry()
    declare(reg, "q")
    core = make(reg, consumer_timeout_ms=1000, ticks_per_second=4, number=3)
    consuming(core)
    delivered(core, 1)
    for _ in range(4):
        core.tick()
    assert core.flush() == []
    core.tick()
    text = ("PRECONDITION_FAILED - delivery acknowledgement on channel 3 timed out. Timeout value used: 1000 ms. "
            "This timeout value can be configured, see consumers doc guide to learn more")
    assert core.flush() == [Write([close_frame(406, text, 0, 0, number=3)]), Send(Q, ChannelDown())]


def test_consumer_timeout_counts_from_the_oldest_unacked_delivery():
    reg = PermRegistry()
    declare(reg, "q")
    core = make(reg, consumer_timeout_ms=1000, ticks_per_second=4)
    consuming(core)
    delivered(core, 1, first_id=1)
    for _ in range(3):
        core.tick()
    delivered(core, 1, first_id=2)
    core.command(cmd(m.BasicAck(delivery_tag=1)))
    core.flush()
    for _ in range(4):
        core.tick()
    assert core.flush() == []   # the second delivery is 4 ticks old: not yet past 1000 ms
    core.tick()
    assert core.state == "closing"
