"""Core tests for the classic queue: each asserts the exact effects one call returns.

Reply codes and texts were checked against RabbitMQ 3.10 (scripts/rabbitmq_oracle).
"""
from __future__ import annotations

from actors.messages.channel_queue import Confirm, ConsumerCancelled, Deliver
from actors.messages.node import AutoDeleteQueue
from actors.messages.runtime import Undelivered
from actors.queue.core import ClassicQueue
from effects import Send
from wire.errors import AmqpError
from wire.properties import BasicProperties, encode_content_header

H = encode_content_header(60, 0, BasicProperties())  # a real header: the queue peeks at its flags
HP = b"\x00\x3c" + b"\x00" * 10 + b"\x00\x00"    # the same, hand-built, 14 bytes


def get(q: ClassicQueue, channel: str, *, ack_required: bool):
    """basic.get for queues without TTL or x-expires: no effects, (message, remaining)."""
    message, remaining, effects = q.get(channel, ack_required=ack_required)
    assert effects == []
    return message, remaining


def pub(body: bytes, seq: int = 0, rk: str = "q") -> tuple[int, str, str, bytes, bytes]:
    return (seq, "", rk, H, body)


def msg(msg_id: int, body: bytes, redelivered: bool = False, rk: str = "q"):
    return (msg_id, redelivered, "", rk, H, body)


def queue_with(n: int, **kw) -> ClassicQueue:
    q = ClassicQueue("/", "q", **kw)
    assert q.publish("P", [pub(b"m%d" % i) for i in range(1, n + 1)]) == []
    return q


def test_publish_without_consumers_enqueues_and_confirms_max_seq():
    q = ClassicQueue("/", "q")
    assert q.publish("P", [pub(b"a", 5), pub(b"b", 6), pub(b"c", 7)]) == [Send("P", Confirm(7))]
    assert (q.message_count, q.messages_ready, q.messages_unacknowledged) == (3, 3, 0)


def test_publish_without_confirm_emits_no_confirmed():
    assert ClassicQueue("/", "q").publish("P", [pub(b"a")]) == []


def test_publish_delivers_before_confirming():
    q = ClassicQueue("/", "q")
    assert q.consume("C", "t", ack_required=True, credit=10) == []
    assert q.publish("P", [pub(b"a", 1), pub(b"b", 2)]) == [
        Send("C", Deliver("t", [msg(1, b"a"), msg(2, b"b")])), Send("P", Confirm(2))]
    assert (q.messages_ready, q.messages_unacknowledged) == (0, 2)


def test_round_robin_across_three_consumers_one_deliver_each():
    q = ClassicQueue("/", "q")
    for tag in ("a", "b", "c"):
        q.consume("C", tag, ack_required=True, credit=10)
    effects = q.publish("P", [pub(b"m%d" % i) for i in range(1, 8)])
    assert effects == [
        Send("C", Deliver("a", [msg(1, b"m1"), msg(4, b"m4"), msg(7, b"m7")])),
        Send("C", Deliver("b", [msg(2, b"m2"), msg(5, b"m5")])),
        Send("C", Deliver("c", [msg(3, b"m3"), msg(6, b"m6")])),
    ]
    # "a" received last, so it went to the back: the next message goes to "b".
    assert q.publish("P", [pub(b"m8")]) == [Send("C", Deliver("b", [msg(8, b"m8")]))]


def test_round_robin_skips_consumer_out_of_credit():
    q = ClassicQueue("/", "q")
    q.consume("C", "a", ack_required=True, credit=1)
    q.consume("C", "b", ack_required=True, credit=10)
    assert q.publish("P", [pub(b"1"), pub(b"2"), pub(b"3")]) == [
        Send("C", Deliver("a", [msg(1, b"1")])), Send("C", Deliver("b", [msg(2, b"2"), msg(3, b"3")]))]


def test_credit_exhaustion_then_grant_delivers_the_rest():
    q = queue_with(5)
    assert q.consume("C", "t", ack_required=True, credit=2) == [
        Send("C", Deliver("t", [msg(1, b"m1"), msg(2, b"m2")]))]
    assert q.publish("P", [pub(b"m6")]) == []
    assert q.messages_ready == 4
    assert q.grant("C", "t", 3) == [Send("C", Deliver("t", [msg(3, b"m3"), msg(4, b"m4"), msg(5, b"m5")]))]
    assert q.grant("C", "t", 5) == [Send("C", Deliver("t", [msg(6, b"m6")]))]
    # 4 credits left: the next publish goes straight out.
    assert q.publish("P", [pub(b"m7")]) == [Send("C", Deliver("t", [msg(7, b"m7")]))]


def test_grant_unknown_consumer_is_ignored():
    assert queue_with(1).grant("C", "nope", 5) == []


def test_regranted_consumer_joins_back_of_ring():
    q = ClassicQueue("/", "q")
    q.consume("C", "a", ack_required=False, credit=1)
    q.consume("C", "b", ack_required=False, credit=2)
    q.publish("P", [pub(b"1"), pub(b"2")])  # a gets 1 (now empty), b gets 2
    q.grant("C", "a", 5)  # ring is now b, a
    assert q.publish("P", [pub(b"3"), pub(b"4")]) == [
        Send("C", Deliver("b", [msg(3, b"3")])), Send("C", Deliver("a", [msg(4, b"4")]))]


def test_no_ack_delivery_removes_at_once_but_spends_credit():
    q = queue_with(3)
    assert q.consume("C", "t", ack_required=False, credit=2) == [
        Send("C", Deliver("t", [msg(1, b"m1"), msg(2, b"m2")]))]
    assert (q.messages_ready, q.messages_unacknowledged) == (1, 0)
    assert q.settle("C", acked=[1, 2]) == []  # nothing held: ignored
    assert q.stats()["messages"] == 1


def test_requeue_restores_original_position_and_sets_redelivered():
    q = queue_with(5)
    assert get(q, "G", ack_required=True) == (msg(1, b"m1"), 4)
    assert get(q, "G", ack_required=True) == (msg(2, b"m2"), 3)
    assert get(q, "G", ack_required=True) == (msg(3, b"m3"), 2)
    assert q.settle("G", requeued=[3, 1]) == []
    assert (q.messages_ready, q.messages_unacknowledged) == (4, 1)
    # Same order RabbitMQ gives (checked with the oracle): m1 (redelivered), m3 (redelivered), m4, m5.
    assert [get(q, "G", ack_required=False) for _ in range(5)] == [
        (msg(1, b"m1", True), 3), (msg(3, b"m3", True), 2), (msg(4, b"m4"), 1), (msg(5, b"m5"), 0),
        (None, 0)]


def test_requeue_delivers_to_consumer_with_credit():
    q = queue_with(2)
    q.consume("C", "t", ack_required=True, credit=2)
    q.consume("D", "u", ack_required=True, credit=1)
    assert q.settle("C", requeued=[2]) == [Send("D", Deliver("u", [msg(2, b"m2", True)]))]


def test_settle_ack_and_discard_drop_and_ignore_unknown_ids():
    q = queue_with(4)
    q.consume("C", "t", ack_required=True, credit=4)
    assert q.settle("C", acked=[1, 99], discarded=[2], requeued=[]) == []
    assert q.settle("Other", acked=[3]) == []  # another channel cannot settle C's messages
    assert (q.messages_ready, q.messages_unacknowledged) == (0, 2)
    assert q.settle("C", acked=[3, 4, 3]) == []
    assert q.messages_unacknowledged == 0
    assert q.stats()["memory"] == 0


def test_channel_down_requeues_only_that_channels_messages():
    q = queue_with(4)
    q.consume("C", "t", ack_required=True, credit=2)   # holds 1, 2
    q.consume("D", "u", ack_required=True, credit=1)   # holds 3
    assert get(q, "D", ack_required=True) == (msg(4, b"m4"), 0)
    assert q.channel_down("D") == []  # no consumer has credit left
    assert (q.messages_ready, q.messages_unacknowledged, q.consumer_count) == (2, 2, 1)
    # Channel C's own messages stay unacked; D's come back redelivered, at their original positions.
    assert q.grant("C", "t", 10) == [Send("C", Deliver("t", [msg(3, b"m3", True), msg(4, b"m4", True)]))]
    assert q.settle("C", acked=[1, 2, 3, 4]) == []
    assert (q.messages_ready, q.messages_unacknowledged) == (0, 0)


def test_channel_down_delivers_requeued_messages_to_others():
    q = queue_with(2)
    q.consume("C", "t", ack_required=True, credit=2)
    q.consume("D", "u", ack_required=True, credit=0)
    q.grant("D", "u", 5)
    assert q.channel_down("C") == [Send("D", Deliver("u", [msg(1, b"m1", True), msg(2, b"m2", True)]))]
    assert q.consumer_count == 1


def test_get_with_and_without_ack_and_remaining_count():
    q = queue_with(3)
    assert get(q, "G", ack_required=False) == (msg(1, b"m1"), 2)
    assert get(q, "G", ack_required=True) == (msg(2, b"m2"), 1)
    assert (q.messages_ready, q.messages_unacknowledged) == (1, 1)
    assert get(q, "G", ack_required=True) == (msg(3, b"m3"), 0)
    assert get(q, "G", ack_required=True) == (None, 0)
    assert q.channel_down("G") == []
    assert (q.messages_ready, q.messages_unacknowledged) == (2, 0)


def test_exclusive_consume_refused_when_queue_has_consumers():
    q = ClassicQueue("/", "q")
    q.consume("C", "a", ack_required=True, credit=1)
    err = q.consume("D", "x", ack_required=True, credit=1, exclusive=True)
    assert isinstance(err, AmqpError)
    assert (err.code, err.text) == (403, "ACCESS_REFUSED - queue 'q' in vhost '/' in exclusive use")


def test_any_consume_refused_while_exclusive_consumer_exists_until_it_cancels():
    q = ClassicQueue("vh", "q")
    assert q.consume("C", "x", ack_required=True, credit=1, exclusive=True) == []
    for exclusive in (False, True):
        err = q.consume("D", "y", ack_required=True, credit=1, exclusive=exclusive)
        assert err == AmqpError(403, "queue 'q' in vhost 'vh' in exclusive use")
    q.cancel("C", "x")
    assert q.consume("D", "y", ack_required=True, credit=1) == []


def test_reused_consumer_tag_on_same_channel_refused():
    q = ClassicQueue("/", "q")
    q.consume("C", "a", ack_required=True, credit=1)
    err = q.consume("C", "a", ack_required=True, credit=1)
    assert isinstance(err, AmqpError) and err.text == "NOT_ALLOWED - attempt to reuse consumer tag 'a'"
    assert q.consume("D", "a", ack_required=True, credit=1) == []  # tags are per channel


def test_auto_delete_after_last_cancel_but_not_before_any_consumer():
    q = queue_with(1, auto_delete=True)
    assert get(q, "G", ack_required=True)[0] is not None
    assert q.channel_down("G") == []  # never had a consumer: stays
    assert q.cancel("C", "nope") == []
    q.consume("C", "a", ack_required=True, credit=0)
    q.consume("C", "b", ack_required=True, credit=0)
    assert q.cancel("C", "a") == []
    assert q.cancel("C", "b") == [Send("node", AutoDeleteQueue("/", "q"))]


def test_auto_delete_when_channel_down_removes_last_consumer():
    q = queue_with(1, auto_delete=True)
    q.consume("C", "a", ack_required=True, credit=1)
    assert q.channel_down("C") == [Send("node", AutoDeleteQueue("/", "q"))]
    assert q.messages_ready == 1


def test_non_auto_delete_queue_never_asks():
    q = ClassicQueue("/", "q")
    q.consume("C", "a", ack_required=True, credit=1)
    assert q.cancel("C", "a") == []


def test_delete_if_unused_and_if_empty_errors():
    q = queue_with(1)
    q.consume("C", "a", ack_required=True, credit=0)
    # RabbitMQ checks emptiness first.
    err = q.delete(if_unused=True, if_empty=True)
    assert isinstance(err, AmqpError)
    assert (err.code, err.text) == (406, "PRECONDITION_FAILED - queue 'q' in vhost '/' not empty")
    q.grant("C", "a", 1)  # the message is now unacked, so the queue counts as empty
    err = q.delete(if_unused=True, if_empty=True)
    assert isinstance(err, AmqpError) and err.text == "PRECONDITION_FAILED - queue 'q' in vhost '/' in use"
    assert q.consumer_count == 1 and q.messages_unacknowledged == 1


def test_delete_returns_ready_count_and_cancels_consumers():
    q = queue_with(3)
    q.consume("C", "a", ack_required=True, credit=1)
    q.consume("D", "b", ack_required=False, credit=0)
    assert q.delete(if_unused=False, if_empty=False) == (
        2, [Send("C", ConsumerCancelled("a")), Send("D", ConsumerCancelled("b"))])
    assert (q.messages_ready, q.messages_unacknowledged, q.consumer_count) == (0, 0, 0)
    assert q.settle("C", acked=[1]) == []


def test_delete_if_empty_ignores_unacked_messages():
    q = queue_with(1)
    get(q, "G", ack_required=True)
    assert q.delete(if_unused=True, if_empty=True) == (0, [])


def test_purge_leaves_unacked():
    q = queue_with(4)
    q.consume("C", "a", ack_required=True, credit=1)
    assert q.purge() == 3
    assert (q.messages_ready, q.messages_unacknowledged) == (0, 1)
    assert q.settle("C", requeued=[1]) == []
    assert get(q, "G", ack_required=False) == (msg(1, b"m1", True), 0)


def test_stats_counts_and_memory():
    q = ClassicQueue("/", "q")
    q.publish("P", [(0, "", "q", HP, b"345"), (0, "", "q", HP, b"6789")])
    get(q, "G", ack_required=True)
    assert q.stats() == {"name": "q", "vhost": "/", "messages": 2, "messages_ready": 1,
                         "messages_unacknowledged": 1, "consumers": 0, "memory": 14 + 14 + 7,
                         "message_bytes": 7, "message_bytes_ready": 4, "message_bytes_unacknowledged": 3,
                         "exclusive_consumer_pid": None, "exclusive_consumer_tag": None}
    q.channel_down("G")
    assert q.stats()["memory"] == 14 + 14 + 7
    q.purge()
    assert q.stats()["memory"] == 0


def test_stats_name_the_exclusive_consumer():
    q = ClassicQueue("/", "q")
    q.consume("C", "only", ack_required=True, credit=1, exclusive=True)
    assert (q.stats()["exclusive_consumer_pid"], q.stats()["exclusive_consumer_tag"]) == ("C", "only")
    q.cancel("C", "only")
    assert q.stats()["exclusive_consumer_tag"] is None


def test_a_delivery_to_a_channel_that_is_gone_comes_back_undelivered_and_is_requeued():
    """The channel closed (or its node went away) while the Deliver was on its way: the runtime
    answers Undelivered, which is the channel's ChannelDown (found by the fault suite: the queue
    crashed on it and its actor was gone until the node restarted)."""
    q = queue_with(2)
    q.consume("C", "t", ack_required=True, credit=2)
    q.consume("D", "u", ack_required=True, credit=0)
    q.grant("D", "u", 5)
    back = Undelivered(Deliver("t", [msg(1, b"m1"), msg(2, b"m2")]))
    assert q.handle("C", back) == [Send("D", Deliver("u", [msg(1, b"m1", True), msg(2, b"m2", True)]))]
    assert q.consumer_count == 1
