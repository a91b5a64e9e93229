"""Queue features of issue 4 with pika against a real node: TTL, x-expires, length limits,
dead-lettering (x-death), priorities, consumer priorities and single active consumer.

Every expectation was first run against RabbitMQ 3.10 (scripts/rabbitmq_oracle): set
WARREN_AMQP_URL=amqp://guest:guest@127.0.0.1:PORT/%2F to run this file against any broker.
Waiting for a timer-driven outcome polls the broker for the condition (`tests.waiting.until`, with a deadline); nothing
sleeps in place of synchronisation.
"""
from __future__ import annotations

import os
import uuid
from datetime import datetime, timezone

import pika
import pika.exceptions as px
import pytest
from tests.waiting import until

pytestmark = pytest.mark.integration



@pytest.fixture
def fconn(request):
    url = os.environ.get("WARREN_AMQP_URL") or request.getfixturevalue("node").url
    c = pika.BlockingConnection(pika.URLParameters(url))
    yield c
    if c.is_open:
        c.close()


@pytest.fixture
def fch(fconn):
    return fconn.channel()


def qname() -> str:
    return "qf-" + uuid.uuid4().hex[:10]


def dead_letter_setup(ch, **args):
    """A source queue dead-lettering to a fanout exchange bound to a fresh dead-letter queue."""
    src, dlq, dlx = qname(), qname(), qname()
    ch.exchange_declare(dlx, "fanout", auto_delete=True)
    ch.queue_declare(dlq, exclusive=True)
    ch.queue_bind(dlq, dlx)
    ch.queue_declare(src, exclusive=True, arguments={"x-dead-letter-exchange": dlx, **args})
    return src, dlq, dlx


def get_eventually(ch, queue: str):
    return until(lambda: (lambda r: r if r[0] is not None else None)(ch.basic_get(queue, auto_ack=True)),
                      f"a message on {queue}")


def check_time(entry: dict) -> None:
    stamp = entry.pop("time")
    assert abs((datetime.now(timezone.utc) - stamp).total_seconds()) < 60


def test_queue_ttl_dead_letters_expired_messages(fch):
    src, dlq, dlx = dead_letter_setup(fch, **{"x-message-ttl": 30})
    fch.basic_publish("", src, b"m", pika.BasicProperties(headers={"b": 1, "a": 2}))
    method, props, body = get_eventually(fch, dlq)
    assert (method.exchange, method.routing_key, body) == (dlx, src, b"m")
    deaths = props.headers["x-death"]
    check_time(deaths[0])
    assert deaths == [{"count": 1, "reason": "expired", "queue": src, "exchange": "", "routing-keys": [src]}]
    assert list(props.headers) == ["a", "b", "x-death", "x-first-death-exchange", "x-first-death-queue",
                                   "x-first-death-reason"]
    assert fch.queue_declare(src, passive=True).method.message_count == 0


def test_per_message_ttl_is_dropped_and_saved_as_original_expiration(fch):
    src, dlq, _ = dead_letter_setup(fch)
    fch.basic_publish("", src, b"short", pika.BasicProperties(expiration="20"))
    fch.basic_publish("", src, b"long", pika.BasicProperties(expiration="600000"))
    method, props, body = get_eventually(fch, dlq)
    assert body == b"short" and props.expiration is None
    assert props.headers["x-death"][0]["original-expiration"] == "20"
    method, props, body = fch.basic_get(src, auto_ack=True)
    assert body == b"long" and props.expiration == "600000"


def test_expired_message_is_never_delivered_to_a_late_consumer(fch):
    q = qname()
    fch.queue_declare(q, exclusive=True, arguments={"x-message-ttl": 20})
    fch.basic_publish("", q, b"gone")
    fch.basic_publish("", q, b"kept", pika.BasicProperties(expiration="600000"))
    # the second message's own TTL is longer, but the queue's is lower and wins
    until(lambda: fch.queue_declare(q, passive=True).method.message_count == 0, "both expired")


def test_x_expires_deletes_an_unused_queue(fch):
    q = qname()
    fch.queue_declare(q, arguments={"x-expires": 100})
    fch.confirm_delivery()

    def gone():
        try:
            fch.basic_publish("", q, b"probe", mandatory=True)  # a publish does not count as use
        except px.UnroutableError:
            return True
        return False
    until(gone, "the queue to expire")
    with pytest.raises(px.ChannelClosedByBroker) as excinfo:
        fch.queue_declare(q, passive=True)
    assert excinfo.value.reply_code == 404


def test_max_length_drop_head_dead_letters_with_x_death(fch):
    src, dlq, dlx = dead_letter_setup(fch, **{"x-max-length": 2})
    fch.basic_publish("", src, b"1", pika.BasicProperties(expiration="600000", headers={"CC": ["cc-key"]}))
    fch.basic_publish("", src, b"2")
    fch.basic_publish("", src, b"3")
    method, props, body = get_eventually(fch, dlq)
    assert (body, props.expiration) == (b"1", None)
    deaths = props.headers["x-death"]
    check_time(deaths[0])
    assert list(deaths[0]) == ["count", "reason", "queue", "exchange", "routing-keys", "original-expiration"]
    assert deaths == [{"count": 1, "reason": "maxlen", "queue": src, "exchange": "",
                       "routing-keys": [src, "cc-key"], "original-expiration": "600000"}]
    assert {k: v for k, v in props.headers.items() if k != "x-death"} == {
        "CC": ["cc-key"], "x-first-death-exchange": "", "x-first-death-queue": src,
        "x-first-death-reason": "maxlen"}
    assert fch.queue_declare(src, passive=True).method.message_count == 2


def test_max_length_bytes_counts_bodies(fch):
    q = qname()
    fch.queue_declare(q, exclusive=True, arguments={"x-max-length-bytes": 5})
    for body in (b"abc", b"de", b"f"):
        fch.basic_publish("", q, body)
    assert fch.basic_get(q, auto_ack=True)[2] == b"de"
    assert fch.basic_get(q, auto_ack=True)[2] == b"f"


def test_reject_publish_nacks_under_confirms(fch):
    q = qname()
    fch.queue_declare(q, exclusive=True, arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    fch.confirm_delivery()
    fch.basic_publish("", q, b"fits")
    with pytest.raises(px.NackError):
        fch.basic_publish("", q, b"refused")
    assert fch.queue_declare(q, passive=True).method.message_count == 1


def test_reject_publish_dlx_nacks_and_dead_letters(fch):
    src, dlq, _ = dead_letter_setup(fch, **{"x-max-length": 1, "x-overflow": "reject-publish-dlx"})
    fch.confirm_delivery()
    fch.basic_publish("", src, b"fits")
    with pytest.raises(px.NackError):
        fch.basic_publish("", src, b"refused")
    method, props, body = get_eventually(fch, dlq)
    assert body == b"refused" and props.headers["x-death"][0]["reason"] == "maxlen"


def test_reject_then_expire_keeps_both_entries_newest_first(fch):
    src, dlq, dlx = dead_letter_setup(fch, **{"x-dead-letter-routing-key": "dead"})
    fch.basic_publish("", src, b"m", pika.BasicProperties(headers={"CC": ["x"]}))
    method, _, _ = fch.basic_get(src)
    fch.basic_reject(method.delivery_tag, requeue=False)
    method, props, body = get_eventually(fch, dlq)
    assert (method.exchange, method.routing_key) == (dlx, "dead")
    assert "CC" not in props.headers
    first = props.headers["x-death"][0]
    check_time(first)
    assert first == {"count": 1, "reason": "rejected", "queue": src, "exchange": "", "routing-keys": [src, "x"]}
    # through a TTL queue twice: the expired entry is counted, moved first, the rejected one kept
    ttlq, dlq2, _ = dead_letter_setup(fch, **{"x-message-ttl": 0})
    for count in (1, 2):
        fch.basic_publish("", ttlq, body, props)
        _, props, body = get_eventually(fch, dlq2)
        deaths = props.headers["x-death"]
        assert [(d["queue"], d["reason"], d["count"]) for d in deaths] == [(ttlq, "expired", count), (src, "rejected", 1)]
        assert list(deaths[0]) == ["count", "exchange", "queue", "reason", "routing-keys", "time"]
    assert props.headers["x-first-death-reason"] == "rejected"


def test_priorities_highest_first_fifo_within(fch):
    q = qname()
    fch.queue_declare(q, exclusive=True, arguments={"x-max-priority": 5})
    for body, prio in ((b"a", None), (b"b", 3), (b"c", 9), (b"d", 3), (b"e", 5)):
        fch.basic_publish("", q, body, pika.BasicProperties(priority=prio))
    method, _, body = fch.basic_get(q)
    assert body == b"c"
    fch.basic_nack(method.delivery_tag, requeue=True)
    assert [fch.basic_get(q, auto_ack=True)[2] for _ in range(5)] == [b"c", b"e", b"b", b"d", b"a"]


def test_consumer_priorities(fconn):
    setup = fconn.channel()
    q = qname()
    setup.queue_declare(q, exclusive=True)
    got: list = []
    high, low = fconn.channel(), fconn.channel()
    high.basic_qos(prefetch_count=1)
    low.basic_qos(prefetch_count=10)
    low.basic_consume(q, lambda c, m, p, b: got.append(("low", b)))
    high.basic_consume(q, lambda c, m, p, b: got.append(("high", b)), arguments={"x-priority": 10})
    for i in range(3):
        setup.basic_publish("", q, b"%d" % i)
    until(lambda: fconn.process_data_events(0.05) or len(got) == 3, "three deliveries")
    assert got == [("high", b"0"), ("low", b"1"), ("low", b"2")]


def test_single_active_consumer_fails_over(fconn):
    setup = fconn.channel()
    q = qname()
    setup.queue_declare(q, exclusive=True, arguments={"x-single-active-consumer": True})
    got: list = []
    first, second = fconn.channel(), fconn.channel()
    first.basic_consume(q, lambda c, m, p, b: got.append(("first", b, m.redelivered)))
    second.basic_consume(q, lambda c, m, p, b: got.append(("second", b, m.redelivered)))
    assert setup.queue_declare(q, passive=True).method.consumer_count == 2
    setup.basic_publish("", q, b"1")
    until(lambda: fconn.process_data_events(0.05) or got, "the first delivery")
    assert got == [("first", b"1", False)]
    first.close()  # its unacked message goes back and the next consumer becomes active
    setup.basic_publish("", q, b"2")
    until(lambda: fconn.process_data_events(0.05) or len(got) == 3, "fail-over deliveries")
    assert got[1:] == [("second", b"1", True), ("second", b"2", False)]
