"""Core tests for issue 4's queue features: TTL, x-expires, length limits, dead-lettering, priorities,
consumer priorities, single active consumer and policies. Each asserts the exact effects of a call.

Behaviour checked against RabbitMQ 3.10 (scripts/rabbitmq_oracle, pika): x-death layout and field
order, TTL 0 reaching a waiting consumer, reject-publish refusing even with a consumer waiting,
reject-publish-dlx nacking AND dead-lettering.
"""
from __future__ import annotations

from actors.messages.channel_queue import Confirm, Deliver, Publish, Rejected
from actors.messages.node import AutoDeleteQueue
from actors.queue.core import ClassicQueue
from effects import CancelTimer, Send, StartTimer
from wire.codec import Timestamp
from wire.properties import BasicProperties, encode_content_header

T0 = 1_700_000_000_000  # wall-clock ms


def header(**props) -> bytes:
    return encode_content_header(60, 0, BasicProperties(**props))


H = header()


def pub(body: bytes, seq: int = 0, rk: str = "q", hdr: bytes = H, exchange: str = "") -> tuple:
    return (seq, exchange, rk, hdr, body)


def msg(msg_id: int, body: bytes, redelivered: bool = False, rk: str = "q", hdr: bytes = H) -> tuple:
    return (msg_id, redelivered, "", rk, hdr, body)


class Router:
    """routes[(exchange, routing_key)] -> queue names, the registry's route() shape."""

    def __init__(self, routes: dict) -> None:
        self.routes = routes
        self.calls: list = []

    def route(self, vhost, exchange, routing_key, headers=None):
        self.calls.append((exchange, routing_key))
        return list(self.routes.get((exchange, routing_key), []))


def place(vhost: str, name: str) -> str:
    return f"Q:{name}"


def dl_queue(name: str = "q", routes: dict | None = None, **args) -> ClassicQueue:
    args.setdefault("x-dead-letter-exchange", "dlx")
    return ClassicQueue("/", name, arguments=args, router=Router(routes or {("dlx", "q"): ["dead"]}),
                        place=place, now_ms=T0)


def decoded(record) -> BasicProperties:
    return BasicProperties.decode(record[3], 12)


# -- TTL ------------------------------------------------------------------------------------------

def test_queue_ttl_expires_at_head_and_arms_a_timer():
    q = ClassicQueue("/", "q", arguments={"x-message-ttl": 1000}, now_ms=T0)
    assert q.publish("P", [pub(b"a")], now_ms=T0) == [StartTimer("ttl", 1000)]
    assert q.publish("P", [pub(b"b")], now_ms=T0 + 500) == []  # the timer already covers the head
    assert q.on_timer("ttl", now_ms=T0 + 1000) == [StartTimer("ttl", 500)]  # a gone, b is the head
    assert q.message_count == 1
    assert q.on_timer("ttl", now_ms=T0 + 1500) == []
    assert q.message_count == 0


def test_expired_message_is_never_delivered_or_got():
    q = ClassicQueue("/", "q", arguments={"x-message-ttl": 100}, now_ms=T0)
    q.publish("P", [pub(b"a"), pub(b"b")], now_ms=T0)
    q.publish("P", [pub(b"c")], now_ms=T0 + 50)
    message, remaining, effects = q.get("G", ack_required=False, now_ms=T0 + 100)
    assert (message, remaining) == (msg(3, b"c"), 0)
    assert q.consume("C", "t", ack_required=True, credit=5, now_ms=T0 + 200) == []


def test_ttl_zero_reaches_a_waiting_consumer_but_not_the_queue():
    q = ClassicQueue("/", "q", arguments={"x-message-ttl": 0}, now_ms=T0)
    q.consume("C", "t", ack_required=False, credit=1)
    assert q.publish("P", [pub(b"a"), pub(b"b")], now_ms=T0) == [Send("C", Deliver("t", [msg(1, b"a")]))]
    assert q.message_count == 0


def test_per_message_expiration_and_the_lower_ttl_wins():
    q = ClassicQueue("/", "q", arguments={"x-message-ttl": 1000}, now_ms=T0)
    short = header(expiration="10")
    assert q.publish("P", [pub(b"a", hdr=short)], now_ms=T0) == [StartTimer("ttl", 10)]
    long_ = header(expiration="5000")
    q.publish("P", [pub(b"b", hdr=long_)], now_ms=T0)
    assert q.on_timer("ttl", now_ms=T0 + 10) == [StartTimer("ttl", 990)]
    assert q.message_count == 1


def test_expired_message_behind_a_live_head_waits_for_the_head():
    q = ClassicQueue("/", "q", now_ms=T0)
    q.publish("P", [pub(b"live"), pub(b"dies", hdr=header(expiration="1"))], now_ms=T0)
    assert q.on_timer("ttl", now_ms=T0 + 10) == []
    assert q.message_count == 2  # as RabbitMQ: only the head is checked
    message, remaining, _ = q.get("G", ack_required=False, now_ms=T0 + 10)
    assert (message[5], remaining) == (b"live", 0)  # and then the expired one went at once


def test_requeued_message_keeps_its_expiry():
    q = ClassicQueue("/", "q", arguments={"x-message-ttl": 100}, now_ms=T0)
    q.publish("P", [pub(b"a")], now_ms=T0)
    q.get("G", ack_required=True, now_ms=T0 + 10)
    assert q.settle("G", requeued=[1], now_ms=T0 + 200) == []
    assert q.message_count == 0


def test_expired_messages_are_dead_lettered_with_x_death():
    q = dl_queue(**{"x-message-ttl": 5})
    q.publish("P", [pub(b"a", hdr=header(expiration="60000", headers={"z": 1, "CC": ["k"]}))], now_ms=T0)
    effects = q.on_timer("ttl", now_ms=T0 + 5)
    assert len(effects) == 1 and isinstance(effects[0], Send)
    send = effects[0]
    assert (send.to, type(send.msg), len(send.msg.messages)) == ("Q:dead", Publish, 1)
    seq, exchange, rk, hdr, body = send.msg.messages[0]
    assert (seq, exchange, rk, body) == (0, "dlx", "q", b"a")
    props = decoded(send.msg.messages[0])
    assert props.expiration is None
    assert list(props.headers.items()) == [
        ("CC", ["k"]),
        ("x-death", [{"count": 1, "reason": "expired", "queue": "q", "time": Timestamp(T0 // 1000),
                      "exchange": "", "routing-keys": ["q", "k"], "original-expiration": "60000"}]),
        ("x-first-death-exchange", ""), ("x-first-death-queue", "q"), ("x-first-death-reason", "expired"),
        ("z", 1)]


# -- x-expires ------------------------------------------------------------------------------------

def test_x_expires_restarts_on_use_and_deletes_when_unused():
    q = ClassicQueue("/", "q", arguments={"x-expires": 1000}, now_ms=T0)
    assert q.start(now_ms=T0) == [StartTimer("expires", 1000)]
    assert q.touch(now_ms=T0 + 10) == [StartTimer("expires", 1000)]  # redeclare (the node's stats call)
    assert q.get("G", ack_required=False, now_ms=T0 + 20)[2] == [StartTimer("expires", 1000)]
    assert q.consume("C", "t", ack_required=True, credit=1) == [CancelTimer("expires")]
    assert q.on_timer("expires", now_ms=T0 + 5000) == []  # in use
    assert q.cancel("C", "t") == [StartTimer("expires", 1000)]
    assert q.on_timer("expires", now_ms=T0 + 6000) == [Send("node", AutoDeleteQueue("/", "q"))]


# -- length limits --------------------------------------------------------------------------------

def test_max_length_drop_head_dead_letters_the_oldest():
    q = dl_queue(**{"x-max-length": 2})
    effects = q.publish("P", [pub(b"1"), pub(b"2"), pub(b"3", seq=7)], now_ms=T0)
    assert [type(e.msg) for e in effects] == [Publish, Confirm]
    assert [r[4] for r in effects[0].msg.messages] == [b"1"]
    assert decoded(effects[0].msg.messages[0]).headers["x-death"][0]["reason"] == "maxlen"
    assert effects[1] == Send("P", Confirm(7))
    assert q.message_count == 2


def test_max_length_bytes_counts_bodies_only():
    q = ClassicQueue("/", "q", arguments={"x-max-length-bytes": 5})
    q.publish("P", [pub(b"abc"), pub(b"de"), pub(b"f")])
    assert q.message_count == 2
    assert get_bodies(q) == [b"de", b"f"]


def get_bodies(q: ClassicQueue) -> list[bytes]:
    out = []
    while (m := q.get("G", ack_required=False)[0]) is not None:
        out.append(m[5])
    return out


def test_reject_publish_refuses_and_reports_seqs_before_confirming():
    q = ClassicQueue("/", "q", arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    assert q.publish("P", [pub(b"a", 1), pub(b"b", 2), pub(b"c", 0)]) == [Send("P", Rejected([2])), Send("P", Confirm(2))]
    assert get_bodies(q) == [b"a"]


def test_reject_publish_refuses_even_with_a_waiting_consumer_at_length_zero():
    q = ClassicQueue("/", "q", arguments={"x-max-length": 0, "x-overflow": "reject-publish"})
    q.consume("C", "t", ack_required=False, credit=5)
    assert q.publish("P", [pub(b"a", 1)]) == [Send("P", Rejected([1])), Send("P", Confirm(1))]


def test_reject_publish_counts_direct_deliveries_out():
    q = ClassicQueue("/", "q", arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    q.consume("C", "t", ack_required=True, credit=1)
    effects = q.publish("P", [pub(b"a", 1), pub(b"b", 2), pub(b"c", 3)])
    assert effects == [Send("C", Deliver("t", [msg(1, b"a")])), Send("P", Rejected([3])), Send("P", Confirm(3))]


def test_reject_publish_dlx_refuses_and_dead_letters():
    q = dl_queue(**{"x-max-length": 1, "x-overflow": "reject-publish-dlx"})
    effects = q.publish("P", [pub(b"a", 1), pub(b"b", 2)], now_ms=T0)
    assert [type(e.msg) for e in effects] == [Publish, Rejected, Confirm]
    assert [r[4] for r in effects[0].msg.messages] == [b"b"]
    assert effects[1:] == [Send("P", Rejected([2])), Send("P", Confirm(2))]


# -- dead-lettering -------------------------------------------------------------------------------

def test_rejected_with_routing_key_drops_cc_and_routes_by_that_key():
    q = dl_queue(routes={("dlx", "k"): ["dead", "dead2"]}, **{"x-dead-letter-routing-key": "k"})
    q.publish("P", [pub(b"a", hdr=header(headers={"CC": ["zz"]}))])
    q.get("G", ack_required=True)
    effects = q.settle("G", discarded=[1], now_ms=T0)
    assert [(e.to, [r[2] for r in e.msg.messages]) for e in effects] == [("Q:dead", ["k"]), ("Q:dead2", ["k"])]
    headers = decoded(effects[0].msg.messages[0]).headers
    assert "CC" not in headers
    assert headers["x-death"][0]["routing-keys"] == ["q", "zz"]


def test_without_routing_key_cc_keys_route_too():
    q = dl_queue(routes={("dlx", "q"): ["a"], ("dlx", "cc"): ["a", "b"]})
    q.publish("P", [pub(b"m", hdr=header(headers={"CC": ["cc"]}))])
    q.get("G", ack_required=True)
    effects = q.settle("G", discarded=[1], now_ms=T0)
    assert [e.to for e in effects] == ["Q:a", "Q:b"]  # each target queue gets the message once


def test_repeated_death_increments_the_entry_and_moves_it_first():
    first = {"count": 1, "reason": "rejected", "queue": "other", "time": Timestamp(1), "exchange": "",
             "routing-keys": ["other"]}
    mine = {"count": 3, "exchange": "", "queue": "q", "reason": "expired", "routing-keys": ["q"],
            "time": Timestamp(2)}
    hdr = header(headers={"x-death": [first, mine], "x-first-death-queue": "other"})
    q = dl_queue(routes={("dlx", "q"): ["elsewhere"]}, **{"x-message-ttl": 0})
    effects = q.publish("P", [pub(b"m", hdr=hdr)], now_ms=T0)
    headers = decoded(effects[0].msg.messages[0]).headers
    assert headers["x-death"] == [{**mine, "count": 4}, first]
    assert list(headers["x-death"][0]) == ["count", "exchange", "queue", "reason", "routing-keys", "time"]
    assert "x-first-death-reason" not in headers  # only added with the first x-death


def test_automatic_cycle_is_dropped_but_a_rejected_one_is_not():
    q = dl_queue(routes={("dlx", "q"): ["q"]}, **{"x-message-ttl": 0})
    assert q.publish("P", [pub(b"m")], now_ms=T0) == []  # expired back to itself: a cycle, dropped
    q2 = dl_queue(routes={("dlx", "q"): ["q"]})
    q2.publish("P", [pub(b"m")])
    q2.get("G", ack_required=True)
    assert [e.to for e in q2.settle("G", discarded=[1], now_ms=T0)] == ["Q:q"]


def test_no_dead_letter_exchange_drops():
    q = ClassicQueue("/", "q", arguments={"x-max-length": 0}, router=Router({}), place=place)
    assert q.publish("P", [pub(b"m")]) == []
    assert q.message_count == 0


# -- priorities -----------------------------------------------------------------------------------

def test_priority_queue_orders_by_priority_then_fifo_and_requeues_in_place():
    q = ClassicQueue("/", "q", arguments={"x-max-priority": 5})
    p = {n: header(priority=n) for n in (0, 3, 5, 9)}
    q.publish("P", [pub(b"a", hdr=H), pub(b"b", hdr=p[3]), pub(b"c", hdr=p[9]), pub(b"d", hdr=p[3]),
                    pub(b"e", hdr=p[5]), pub(b"f", hdr=p[0])])
    first = q.get("G", ack_required=True)[0]
    assert first[5] == b"c"  # 9 counts as the maximum, 5, and came before e
    q.settle("G", requeued=[first[0]])
    assert get_bodies(q) == [b"c", b"e", b"b", b"d", b"a", b"f"]


# -- consumer priorities and single active consumer -----------------------------------------------

def test_higher_priority_consumer_first_lower_only_when_it_is_full():
    q = ClassicQueue("/", "q")
    q.consume("C", "low", ack_required=True, credit=10)
    q.consume("C", "high", ack_required=True, credit=2, arguments={"x-priority": 5})
    effects = q.publish("P", [pub(b"%d" % i) for i in range(1, 5)])
    assert effects == [Send("C", Deliver("high", [msg(1, b"1"), msg(2, b"2")])),
                       Send("C", Deliver("low", [msg(3, b"3"), msg(4, b"4")]))]
    q.grant("C", "high", 1)
    assert q.publish("P", [pub(b"5")]) == [Send("C", Deliver("high", [msg(5, b"5")]))]


def test_single_active_consumer_fails_over_in_registration_order():
    q = ClassicQueue("/", "q", arguments={"x-single-active-consumer": True})
    for ch in ("A", "B", "C"):
        assert q.consume(ch, "t", ack_required=True, credit=10) == []
    assert q.consumer_count == 3
    assert q.publish("P", [pub(b"1"), pub(b"2")]) == [Send("A", Deliver("t", [msg(1, b"1"), msg(2, b"2")]))]
    assert q.channel_down("A") == [Send("B", Deliver("t", [msg(1, b"1", True), msg(2, b"2", True)]))]
    assert q.cancel("B", "t") == []  # B's deliveries stay with B's channel
    assert q.publish("P", [pub(b"3")]) == [Send("C", Deliver("t", [msg(3, b"3")]))]


# -- policies -------------------------------------------------------------------------------------

def test_policy_replaces_the_settings_and_applies_at_once():
    q = dl_queue(**{"x-max-length": 10})
    q.publish("P", [pub(b"%d" % i) for i in range(5)])
    effects = q.apply_policy({"max-length": 2, "dead-letter-exchange": "dlx", "expires": 500}, now_ms=T0)
    assert [type(e) for e in effects] == [Send, StartTimer]
    assert [r[4] for r in effects[0].msg.messages] == [b"0", b"1", b"2"]
    assert effects[1] == StartTimer("expires", 500)
    assert q.apply_policy({}, now_ms=T0) == [CancelTimer("expires")]  # nothing set now: no limit, no expiry
    q.publish("P", [pub(b"x")] * 5)
    assert q.message_count == 7


def test_policy_message_ttl_applies_to_new_messages():
    q = ClassicQueue("/", "q", now_ms=T0)
    q.publish("P", [pub(b"old")], now_ms=T0)
    assert q.apply_policy({"message-ttl": 100}, now_ms=T0) == []
    assert q.publish("P", [pub(b"new")], now_ms=T0) == []  # the head (old) has no expiry
    assert q.get("G", ack_required=False, now_ms=T0 + 200)[0][5] == b"old"
    assert q.get("G", ack_required=False, now_ms=T0 + 200)[0] is None
