"""The quorum queue machine, command by command: the exact (reply, effects) of each.

References are to RabbitMQ's 4.0 quorum queue guide (seeds/002) and rabbit_fifo (4.1 sources).
Raft indexes are the log positions the harness applies at (1, 2, ...); msg ids are the machine's.
"""
from __future__ import annotations

import pytest

from actors.quorum import commands as c
from actors.quorum.config import QueueSettings
from actors.quorum.effects import (DELIVERY_LIMIT, EXPIRE_MSGS, EXPIRED, MAXLEN, QUEUE_EXPIRY,
                                   REJECTED, ConsumerInfo, DeadLetter, Deliver, DeleteQueue, GetOk,
                                   DeadLetterDeliver, OutOfSequence, Purged, Release, Reply,
                                   StartDeadLetterWorker, StopDeadLetterWorker, Timer)
from actors.quorum.queries import checked_out, requeue_plan
from tests.quorum.harness import H, Run, header
from wire.errors import AmqpError

DLX = {"x-dead-letter-exchange": "dlx"}


def consume(run: Run, prefetch: int = 0, *, channel: str = "ch", tag: str = "t", ack: bool = True,
            priority: int = 0, now_ms: int = 0) -> tuple:
    return run(c.Checkout(now_ms, channel, tag, prefetch, ack, priority))


# -- enqueue ---------------------------------------------------------------------------------------

def test_enqueue_keeps_the_index_and_size_only():
    run = Run()
    assert run(c.Enqueue(0, "p", 1, "x", "rk", H, b"hello")) == (Reply.OK, [])
    assert run.stats["messages_ready"] == 1 and run.stats["message_bytes_ready"] == 5
    assert run.live() == [1]
    assert c.published(run.log[0]) == ("x", "rk", H, b"hello")


@pytest.mark.parametrize("seqs, replies", [
    ((1, 2, 3), [Reply.OK, Reply.OK, Reply.OK]),
    ((1, 1), [Reply.OK, Reply.DUPLICATE]),          # a resend after a leader change
    ((1, 2, 1), [Reply.OK, Reply.OK, Reply.DUPLICATE]),
    ((1, 3), [Reply.OK, OutOfSequence(2)]),         # seq 2 was lost: resend from 2
    ((2,), [OutOfSequence(1)]),
])
def test_enqueue_sequence_per_publisher(seqs, replies):
    run = Run()
    got = [run(c.Enqueue(0, "p", seq, "x", "rk", H, b"m"))[0] for seq in seqs]
    assert got == replies
    assert run.stats["messages_ready"] == replies.count(Reply.OK)


def test_untracked_enqueue_and_publishers_are_independent():
    run = Run()
    assert run(c.Enqueue(0, None, 0, "x", "rk", H, b"a"))[0] is Reply.OK
    assert run(c.Enqueue(0, None, 0, "x", "rk", H, b"b"))[0] is Reply.OK
    assert run(c.Enqueue(0, "p1", 1, "x", "rk", H, b"c"))[0] is Reply.OK
    assert run(c.Enqueue(0, "p2", 1, "x", "rk", H, b"d"))[0] is Reply.OK
    assert run.stats["messages_ready"] == 4 and run.stats["publishers"] == 2


# -- consumers, credit, settle -------------------------------------------------------------------

def test_checkout_delivers_fifo_up_to_the_prefetch_and_settle_refills():
    run = Run()
    run.publish(b"a", b"b", b"c")
    assert consume(run, 2) == (ConsumerInfo(True), [Deliver("ch", "t", 0, ((0, 1, 0), (1, 2, 0)))])
    assert run.stats["messages_unacknowledged"] == 2
    assert run(c.Settle(0, "ch", "t", (0,))) == (Reply.OK, [Deliver("ch", "t", 2, ((2, 3, 0),))])
    assert run(c.Settle(0, "ch", "t", (1, 2))) == (Reply.OK, [Release(6)])  # drained: the log may go
    assert run.stats["messages"] == 0 and run.live() == []
    assert run.publish(b"d") == [Deliver("ch", "t", 3, ((3, 7, 0),))]


def test_settle_of_unknown_ids_or_consumer_changes_nothing():
    run = Run()
    run.publish(b"a")
    consume(run, 1)
    assert run(c.Settle(0, "ch", "t", (7,))) == (Reply.OK, [])
    assert run(c.Settle(0, "ch", "other", (0,))) == (Reply.OK, [])
    assert run.stats["messages_unacknowledged"] == 1


def test_prefetch_zero_means_rabbit_fifo_clients_unlimited_2000():
    run = Run()
    run.publish(*[b"m"] * 2001)
    _info, [deliver] = consume(run, 0)
    assert len(deliver.messages) == 2000


def test_no_ack_consumer_is_settled_as_messages_leave_and_tops_up_with_credit():
    run = Run()
    run.publish(b"a", b"b", b"c")
    assert consume(run, 2, ack=False) == (ConsumerInfo(True), [Deliver("ch", "t", 0, ((0, 1, 0), (1, 2, 0)))])
    assert run.stats["messages_unacknowledged"] == 0 and run.live() == [3]
    assert run(c.Credit(0, "ch", "t", 5)) == (Reply.OK, [Deliver("ch", "t", 2, ((2, 3, 0),)), Release(5)])
    assert run.publish(b"d") == [Deliver("ch", "t", 3, ((3, 6, 0),)), Release(6)]
    assert run.live() == []


def test_consumers_of_equal_priority_take_turns_one_message_each():
    run = Run()
    consume(run, 10, channel="A")
    consume(run, 10, channel="B")
    effects = run.publish(b"1", b"2", b"3", b"4")
    assert [(e.channel, e.messages[0][1]) for e in effects] == [("A", 3), ("B", 4), ("A", 5), ("B", 6)]


def test_a_higher_priority_consumer_is_served_while_it_has_credit():
    run = Run()
    consume(run, 10, channel="low", priority=0)
    consume(run, 2, channel="high", priority=5)
    effects = run.publish(b"1", b"2", b"3")
    assert [e.channel for e in effects] == ["high", "high", "low"]


def test_cancel_stops_deliveries_but_unacked_can_still_be_settled():
    run = Run()
    run.publish(b"a", b"b")
    consume(run, 1)
    assert run(c.Cancel(0, "ch", "t")) == (Reply.OK, [])
    assert run.stats["consumers"] == 0 and run.stats["messages_unacknowledged"] == 1
    assert run(c.Settle(0, "ch", "t", (0,))) == (Reply.OK, [])
    assert run.state.consumers == {} and run.stats["messages_ready"] == 1
    assert run(c.Cancel(0, "ch", "t")) == (Reply.NOT_FOUND, [])


def test_reconsuming_a_cancelled_tag_takes_its_unacked_into_account():
    run = Run()
    run.publish(b"a", b"b", b"c")
    consume(run, 2)
    run(c.Cancel(0, "ch", "t"))
    assert consume(run, 2) == (ConsumerInfo(True), [])  # 2 unacked fill the prefetch of 2
    assert run(c.Settle(0, "ch", "t", (0,))) == (Reply.OK, [Deliver("ch", "t", 2, ((2, 3, 0),))])


def test_settlements_without_a_tag_find_the_channels_consumer_of_each_msg_id():
    """A channel's classic Settle names msg ids only; they are unique over the queue's life."""
    run = Run({"x-delivery-limit": -1})
    run.publish(b"a", b"b", b"c", b"d")
    consume(run, 2, tag="t1")
    consume(run, 2, tag="t2")
    consume(run, 2, channel="other", tag="t1")
    assert requeue_plan(run.state, "ch", "", (3, 0, 9)) == ((3, 4), (0, 1))  # t2 holds 3, t1 holds 0
    assert run(c.Settle(0, "ch", "", (0, 3)))[0] is Reply.OK
    assert sorted(run.state.consumers[("ch", "t1")].checked) == [1]
    assert sorted(run.state.consumers[("ch", "t2")].checked) == [2]
    assert run(c.Discard(0, "other", "", (1, 2)))[1] == []  # another channel's ids: untouched
    # the returned message goes to the consumer waiting with credit, redelivered
    assert run(c.Return(0, "ch", "", (1,)))[1] == [Deliver("other", "t1", 0, ((4, 2, 1),))]


# -- returns, delivery limit -------------------------------------------------------------------------

def test_a_return_goes_near_the_head_when_a_delivery_limit_is_set():
    """4.0 guide, "Repeatedly Requeued Deliveries": with a delivery-limit a rejected message
    returns near the head of the queue."""
    run = Run()
    run.publish(b"a", b"b", b"c")
    consume(run, 1)
    assert run(c.Return(0, "ch", "t", (0,))) == (Reply.OK, [Deliver("ch", "t", 1, ((1, 1, 1),))])
    assert requeue_plan(run.state, "ch", "t", (1,)) is None  # limited: the shell proposes Return


def test_returns_keep_their_order_and_go_before_fresh_messages():
    run = Run()
    run.publish(b"a", b"b", b"c", b"d")
    consume(run, 3)
    run(c.Cancel(0, "ch", "t"))
    run(c.Return(0, "ch", "t", (2, 0)))
    _info, effects = consume(run, 10, channel="other")
    assert effects == [Deliver("other", "t", 0, ((3, 3, 1), (4, 1, 1), (5, 4, 0)))]


def test_an_unlimited_queue_requeues_to_the_back_under_a_new_index():
    """4.0 guide: without a delivery limit (-1) a rejected message goes to the back of the queue,
    re-appended to the log (rabbit_fifo's #requeue{}) so its old entry can be compacted."""
    run = Run({"x-delivery-limit": -1})
    run.publish(b"a", b"b")
    consume(run, 1)
    assert requeue_plan(run.state, "ch", "t", (0, 9)) == ((0, 1),)
    exchange, routing_key, hdr, body = c.published(run.log[0])
    reply, effects = run(c.Requeue(0, "ch", "t", 0, 1, exchange, routing_key, hdr, body))
    assert (reply, effects) == (Reply.OK, [Deliver("ch", "t", 1, ((1, 2, 0),))])
    assert run.live() == [2, 4]  # index 1 is free; the message lives on at 4
    assert run(c.Settle(0, "ch", "t", (1,))) == (Reply.OK, [Deliver("ch", "t", 2, ((2, 4, 1),))])
    assert run.body(4) == b"a"
    # a stale requeue (already settled) does nothing
    assert run(c.Requeue(0, "ch", "t", 0, 1, exchange, routing_key, hdr, body)) == (Reply.OK, [])


def test_a_message_past_the_delivery_limit_is_dead_lettered():
    """4.0 guide, poison message handling: more redeliveries than the limit -> dead-lettered with
    reason delivery_limit (the count goes above the limit on the limit+1-th return)."""
    run = Run({"x-delivery-limit": 2, **DLX})
    run.publish(b"poison", b"next")
    consume(run, 1)
    assert run(c.Return(0, "ch", "t", (0,)))[1] == [Deliver("ch", "t", 1, ((1, 1, 1),))]
    assert run(c.Return(0, "ch", "t", (1,)))[1] == [Deliver("ch", "t", 2, ((2, 1, 2),))]
    assert run(c.Return(0, "ch", "t", (2,))) == (Reply.OK, [
        DeadLetter(DELIVERY_LIMIT, "dlx", None, ((1, 3),)), Deliver("ch", "t", 3, ((3, 2, 0),))])
    assert run.live() == [2]


def test_without_a_dead_letter_exchange_a_poison_message_is_dropped():
    run = Run({"x-delivery-limit": 0})
    run.publish(b"poison")
    consume(run, 1)
    assert run(c.Return(0, "ch", "t", (0,))) == (Reply.OK, [Release(3)])
    assert run.stats["messages"] == 0 and run.live() == []


def test_the_default_delivery_limit_is_20():
    run = Run(DLX)
    run.publish(b"m")
    consume(run, 1)
    for msg_id in range(20):
        assert run(c.Return(0, "ch", "t", (msg_id,)))[1] == [Deliver("ch", "t", msg_id + 1, ((msg_id + 1, 1, msg_id + 1),))]
    assert run(c.Return(0, "ch", "t", (20,)))[1] == [DeadLetter(DELIVERY_LIMIT, "dlx", None, ((1, 21),)),
                                                  Release(23)]


def test_discard_dead_letters_with_reason_rejected():
    run = Run({**DLX, "x-dead-letter-routing-key": "dead"})
    run.publish(b"a", b"b")
    consume(run, 2)
    assert run(c.Discard(0, "ch", "t", (1, 0))) == (Reply.OK, [
        DeadLetter(REJECTED, "dlx", "dead", ((2, 1), (1, 1))), Release(4)])
    assert run.stats["messages"] == 0 and run.live() == []


def test_a_channel_going_down_returns_its_unacked_with_a_higher_count():
    run = Run()
    run.publish(b"a", b"b", b"c")
    consume(run, 2, channel="A")
    consume(run, 2, channel="B")
    assert run(c.ChannelDown(0, "A")) == (Reply.OK, [Deliver("B", "t", 1, ((3, 1, 1),))])
    assert checked_out(run.state, "B", "t") == ((2, 3, 0), (3, 1, 1))
    assert run.stats["publishers"] == 1  # "p" published; A never did
    run(c.ChannelDown(0, "p"))
    assert run.stats["publishers"] == 0


def test_a_channel_going_down_returns_its_deliveries_in_delivery_order():
    run = Run()
    run.publish(b"a", b"b", b"c")
    consume(run, 3, channel="A")
    run(c.Settle(0, "A", "t", (1,)))
    consume(run, 5, channel="B")
    assert run(c.ChannelDown(0, "A")) == (Reply.OK, [Deliver("B", "t", 0, ((3, 1, 1), (4, 3, 1)))])


# -- message TTL ----------------------------------------------------------------------------------

def test_message_ttl_expires_the_head_on_the_timer_tick():
    run = Run({"x-message-ttl": 100, **DLX})
    assert run.publish(b"a", now_ms=10) == [Timer(EXPIRE_MSGS, 110)]
    assert run.publish(b"b", now_ms=50) == []  # the timer already asked for is earlier
    assert run(c.Tick(109)) == (Reply.OK, [Timer(EXPIRE_MSGS, 110)])
    assert run(c.Tick(110)) == (Reply.OK, [DeadLetter(EXPIRED, "dlx", None, ((1, 0),)),
                                           Timer(EXPIRE_MSGS, 150)])
    assert run.stats["messages_ready"] == 1
    assert consume(run, 1, now_ms=160) == (ConsumerInfo(True), [DeadLetter(EXPIRED, "dlx", None, ((2, 0),)),
                                                                Release(5)])


@pytest.mark.parametrize("queue_ttl, expiration, expiry", [
    (None, "50", 50), (100, "50", 50), (100, "500", 100), (None, None, None), (None, "junk", None),
    (0, None, 1),   # TTL 0: until the next millisecond
])
def test_the_lower_of_queue_and_message_ttl_wins(queue_ttl, expiration, expiry):
    run = Run({} if queue_ttl is None else {"x-message-ttl": queue_ttl})
    effects = run.publish(b"m", hdr=header(expiration=expiration))
    assert effects == ([] if expiry is None else [Timer(EXPIRE_MSGS, expiry)])


def test_ttl_zero_delivers_to_a_waiting_consumer_but_never_waits():
    run = Run({"x-message-ttl": 0})
    consume(run, 1, channel="A")
    assert run.publish(b"a", now_ms=5) == [Deliver("A", "t", 0, ((0, 2, 0),))]
    run.publish(b"b", now_ms=5)
    assert run(c.Tick(6)) == (Reply.OK, [])  # dropped: no dead-letter exchange
    assert run.stats["messages_ready"] == 0


def test_an_expired_returned_message_is_not_redelivered():
    run = Run({"x-message-ttl": 100, **DLX})
    run.publish(b"a", now_ms=0)
    consume(run, 1)
    assert run(c.Return(200, "ch", "t", (0,)))[1] == [DeadLetter(EXPIRED, "dlx", None, ((1, 1),)), Release(3)]


# -- length limits --------------------------------------------------------------------------------

def test_max_length_drop_head_dead_letters_the_oldest():
    run = Run({"x-max-length": 2, **DLX})
    assert run.publish(b"a", b"b") == []
    assert run.publish(b"c") == [DeadLetter(MAXLEN, "dlx", None, ((1, 0),))]
    assert run.live() == [2, 3]


def test_max_length_bytes_drop_head():
    run = Run({"x-max-length-bytes": 10})
    run.publish(b"12345", b"12345")
    assert run.publish(b"1") == []  # dropped without a dead-letter exchange
    assert run.live() == [2, 3] and run.stats["message_bytes_ready"] == 6


def test_reject_publish_overshoots_by_one_then_refuses_until_below_80_percent():
    """4.0 guide, Length Limit: reject-publish may overshoot the limit; rabbit_fifo unblocks
    publishers below 80% of the limit."""
    run = Run({"x-max-length": 5, "x-overflow": "reject-publish"})
    replies = [run(c.Enqueue(0, "p", seq, "x", "rk", H, b"m"))[0] for seq in range(1, 9)]
    assert replies == [Reply.OK] * 6 + [Reply.REJECTED] * 2
    consume(run, 2)  # 4 ready: at 80% of the limit, so publishers may go again
    assert run(c.Enqueue(0, "p", 9, "x", "rk", H, b"m"))[0] is Reply.OK
    assert run.stats["messages_ready"] == 5


def test_reject_publish_stays_blocked_between_the_soft_and_hard_limit():
    run = Run({"x-max-length": 10, "x-overflow": "reject-publish"})
    run.publish(*[b"m"] * 11)
    consume(run, 2)  # 9 ready: below 10 but above 8
    assert run(c.Enqueue(0, "q", 1, "x", "rk", H, b"m"))[0] is Reply.REJECTED
    run(c.Settle(0, "ch", "t", (0,)))  # one more delivered: 8 ready
    assert run(c.Enqueue(0, "q", 2, "x", "rk", H, b"m"))[0] is Reply.OK


def test_reject_publish_trace_as_rabbitmq_answers_it():
    """The oracle (RabbitMQ 3.10, quorum queue, x-max-length 10, reject-publish, pika with
    confirms): 12 publishes -> 11 acks then a nack; then basic.get (no-ack) and publish, four
    times: nack at 10 and 9 ready, ack at 8 and again at 8."""
    run = Run({"x-max-length": 10, "x-overflow": "reject-publish"})
    seq = iter(range(1, 100))

    def publish() -> str:
        reply = run(c.Enqueue(0, "p", next(seq), "", "soft", H, b"m"))[0]
        return {Reply.OK: "ack", Reply.REJECTED: "nack"}[reply]

    assert [publish() for _ in range(12)] == ["ack"] * 11 + ["nack"]
    trace = []
    for n in range(4):
        run(c.Get(0, "ch", f"g{n}", False))
        trace.append((run.stats["messages_ready"], publish()))
    assert trace == [(10, "nack"), (9, "nack"), (8, "ack"), (8, "ack")]


# -- priorities -----------------------------------------------------------------------------------

@pytest.mark.parametrize("published, delivered", [
    # 4.0 guide, Priorities: 2 high for every normal one...
    ("n1 n2 n3 h1 h2 h3 h4", "h1 h2 n1 h3 h4 n2 n3"),
    # ...but a high message published before the normal one goes first even on normal's turn
    ("h1 h2 h3 n1", "h1 h2 h3 n1"),
    ("n1 n2 n3", "n1 n2 n3"),
    ("h1 n1 h2 n2 h3 n3 h4 n4", "h1 h2 n1 h3 h4 n2 n3 n4"),
])
def test_two_priority_levels_share_two_to_one(published, delivered):
    run = Run()
    names = published.split()
    for name in names:  # priority above 4 is high, 0-4 and none are normal
        run.publish(name.encode(), hdr=header(priority=9 if name[0] == "h" else (None if name == "n1" else 4)))
    _info, [deliver] = consume(run, 100)
    assert " ".join(run.body(index).decode() for _id, index, _n in deliver.messages) == delivered


# -- single active consumer -----------------------------------------------------------------------

def test_single_active_consumer_serves_one_consumer_and_fails_over_on_cancel():
    run = Run({"x-single-active-consumer": True})
    run.publish(b"a", b"b", b"c")
    assert consume(run, 1, channel="A") == (ConsumerInfo(True), [Deliver("A", "t", 0, ((0, 1, 0),))])
    assert consume(run, 5, channel="B") == (ConsumerInfo(False), [])
    assert run(c.Cancel(0, "A", "t")) == (Reply.OK, [Deliver("B", "t", 0, ((1, 2, 0), (2, 3, 0)))])
    assert run(c.Settle(0, "A", "t", (0,))) == (Reply.OK, [])
    assert run.stats["consumers"] == 1


def test_single_active_consumer_fails_over_when_its_channel_goes_down():
    run = Run({"x-single-active-consumer": True})
    run.publish(b"a")
    consume(run, 1, channel="A")
    consume(run, 1, channel="B")
    assert run(c.ChannelDown(0, "A")) == (Reply.OK, [Deliver("B", "t", 0, ((1, 1, 1),))])


def test_a_higher_priority_single_active_consumer_takes_over_once_the_active_settles():
    run = Run({"x-single-active-consumer": True})
    run.publish(b"a", b"b")
    consume(run, 1, channel="A")
    assert consume(run, 1, channel="B", priority=5) == (ConsumerInfo(False), [])
    assert run.state.consumers[("A", "t")].status == "quiescing"
    assert run(c.Settle(0, "A", "t", (0,))) == (Reply.OK, [Deliver("B", "t", 0, ((1, 2, 0),))])
    assert [k for k, _ in run.state.waiting] == [("A", "t")]


def test_a_cancelled_single_active_consumer_consuming_again_keeps_its_unacked():
    run = Run({"x-single-active-consumer": True})
    run.publish(b"a", b"b")                           # 1, 2
    consume(run, 1, channel="A")                      # 3: A holds delivery 0
    run(c.Cancel(0, "A", "t"))                        # 4
    consume(run, 1, channel="B", ack=False)           # 5: B active, b delivered and settled
    # 6: A again, outranking B, which holds nothing: A takes over at once, still holding 0
    assert consume(run, 1, channel="A", priority=5) == (ConsumerInfo(True), [])
    assert run.stats["messages_unacknowledged"] == 1 and [k for k, _ in run.state.waiting] == [("B", "t")]
    assert run.publish(b"c") == []                    # 7: A's prefetch is full
    assert run(c.Settle(0, "A", "t", (0,))) == (Reply.OK, [Deliver("A", "t", 1, ((2, 7, 0),))])


def test_waiting_single_active_consumers_are_ordered_by_priority_then_arrival():
    run = Run({"x-single-active-consumer": True})
    consume(run, 1, channel="A")
    consume(run, 1, channel="B")
    consume(run, 1, channel="C", priority=3)  # takes over at once: A has nothing unacked
    consume(run, 1, channel="D")
    assert next(iter(run.state.consumers)) == ("C", "t")
    assert [k[0] for k, _ in run.state.waiting] == ["A", "B", "D"]


# -- basic.get ------------------------------------------------------------------------------------

def test_get_with_ack_is_a_one_message_consumer():
    run = Run()
    run.publish(b"a", b"b")
    assert run(c.Get(0, "ch", "g1", True)) == (GetOk(0, 1, 0, 1), [])
    assert run.stats["messages_unacknowledged"] == 1 and run.stats["consumers"] == 0
    assert run(c.Return(0, "ch", "g1", (0,))) == (Reply.OK, [])
    assert run(c.Get(0, "ch", "g2", False)) == (GetOk(1, 1, 1, 1), [])
    assert run(c.Get(0, "ch", "g3", False)) == (GetOk(2, 2, 0, 0), [Release(6)])
    assert run(c.Get(0, "ch", "g4", False)) == (Reply.EMPTY, [])
    assert run.state.consumers == {} and run.live() == []


def test_get_expires_the_head_first():
    run = Run({"x-message-ttl": 10, **DLX})
    run.publish(b"a", now_ms=0)
    assert run(c.Get(20, "ch", "g", True)) == (Reply.EMPTY, [DeadLetter(EXPIRED, "dlx", None, ((1, 0),)),
                                                         Release(2)])


def test_get_is_refused_with_single_active_consumer():
    run = Run({"x-single-active-consumer": True}, name="jobs")
    reply, effects = run(c.Get(0, "ch", "g", True))
    assert effects == [] and isinstance(reply, AmqpError)
    assert (reply.text, reply.class_id, reply.method_id) == (
        "RESOURCE_LOCKED - cannot obtain access to locked queue 'jobs' in vhost '/'. basic.get "
        "operations are not supported by quorum queues with single active consumer", 60, 70)


# -- purge ----------------------------------------------------------------------------------------

def test_purge_drops_ready_messages_not_unacked_ones():
    run = Run()
    run.publish(b"a", b"b", b"c")
    consume(run, 2)
    run(c.Cancel(0, "ch", "t"))
    run(c.Return(0, "ch", "t", (0,)))
    assert run(c.Purge(0)) == (Purged(2), [])
    assert run.stats["messages_ready"] == 0 and run.stats["messages_unacknowledged"] == 1
    assert run.live() == [2]


# -- x-expires ------------------------------------------------------------------------------------

def test_an_unused_queue_expires():
    run = Run({"x-expires": 1000}, created_ms=5)
    assert run.publish(b"a", now_ms=10) == [Timer(QUEUE_EXPIRY, 1006)]  # publishing is not use
    assert run(c.Tick(1005)) == (Reply.OK, [Timer(QUEUE_EXPIRY, 1006)])
    assert run(c.Tick(1006)) == (Reply.OK, [DeleteQueue()])
    assert run(c.Tick(2000)) == (Reply.OK, [])  # asked once, and no timer spins meanwhile
    assert run.machine.on_leader(run.state) == [DeleteQueue()]


def test_a_new_leader_of_a_queue_never_used_arms_its_expiry_from_creation():
    run = Run({"x-expires": 1000}, created_ms=5)
    assert run.machine.on_leader(run.state) == [Timer(QUEUE_EXPIRY, 1006)]


def test_consumers_and_gets_keep_a_queue_alive():
    run = Run({"x-expires": 1000})
    consume(run, 1, now_ms=100)
    assert run(c.Tick(5000)) == (Reply.OK, [])
    assert run(c.Cancel(6000, "ch", "t")) == (Reply.OK, [Timer(QUEUE_EXPIRY, 7001)])
    assert run(c.Get(6500, "ch", "g", True)) == (Reply.EMPTY, [])
    assert run(c.Tick(7001)) == (Reply.OK, [Timer(QUEUE_EXPIRY, 7501)])


# -- at-least-once dead-lettering -----------------------------------------------------------------

AT_LEAST_ONCE = {**DLX, "x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish"}


def test_at_least_once_holds_dead_letters_until_the_worker_settles_them():
    run = Run(AT_LEAST_ONCE)
    run.publish(b"a", b"b")
    consume(run, 2)
    assert run(c.Discard(0, "ch", "t", (0, 1))) == (Reply.OK, [])
    assert run.stats["messages_dead_lettered"] == 2 and run.live() == [1, 2]
    assert run(c.DeadLetterCheckout(0, "w1", 32)) == (Reply.OK, [
        DeadLetterDeliver("w1", ((0, REJECTED, 1, 1), (1, REJECTED, 2, 1)))])
    assert run(c.DeadLetterSettle(0, (1,))) == (Reply.OK, [])
    assert run.live() == [1]
    # a new worker gets back what the old one held, with msg ids from 0
    assert run(c.DeadLetterCheckout(0, "w2", 32)) == (Reply.OK, [
        DeadLetterDeliver("w2", ((0, REJECTED, 1, 1),))])
    run(c.DeadLetterSettle(0, (0,)))
    assert run.live() == [] and run.stats["messages"] == 0


def test_the_dead_letter_worker_holds_at_most_its_prefetch():
    run = Run(AT_LEAST_ONCE)
    run(c.DeadLetterCheckout(0, "w", 2))
    run.publish(b"a", b"b", b"c")
    consume(run, 3)
    _reply, [deliver] = run(c.Discard(0, "ch", "t", (0, 1, 2)))
    assert deliver == DeadLetterDeliver("w", ((0, REJECTED, 2, 1), (1, REJECTED, 3, 1)))
    assert run(c.DeadLetterSettle(0, (0,))) == (Reply.OK, [DeadLetterDeliver("w", ((2, REJECTED, 4, 1),))])


def test_held_dead_letters_count_towards_the_length_limit():
    """4.0 guide, at-least-once caveats: held messages count towards max-length, so the source
    queue refuses publishes while the target does not confirm."""
    run = Run({**AT_LEAST_ONCE, "x-max-length": 1})
    run.publish(b"a")
    consume(run, 1)
    run(c.Cancel(0, "ch", "t"))
    run(c.Discard(0, "ch", "t", (0,)))
    assert run.publish(b"b") == []           # 1 held + 1 ready: over the limit from now on
    assert run(c.Enqueue(0, "p", 3, "x", "rk", H, b"c"))[0] is Reply.REJECTED


def test_at_least_once_needs_reject_publish_else_it_is_at_most_once():
    run = Run({**DLX, "x-dead-letter-strategy": "at-least-once"})
    run.publish(b"a")
    consume(run, 1)
    assert run(c.Discard(0, "ch", "t", (0,)))[1] == [DeadLetter(REJECTED, "dlx", None, ((1, 1),)), Release(3)]


def test_leaving_at_least_once_drops_the_held_messages():
    run = Run(AT_LEAST_ONCE)
    run.publish(b"a")
    consume(run, 1)
    run(c.Discard(0, "ch", "t", (0,)))
    assert run.machine.on_leader(run.state) == [StartDeadLetterWorker()]
    reply, effects = run(c.UpdateSettings(0, QueueSettings(dead_letter_exchange="dlx")))
    assert (reply, effects) == (Reply.OK, [StopDeadLetterWorker(), Release(4)])
    assert run.live() == [] and run.stats["messages"] == 0
    assert run(c.UpdateSettings(0, QueueSettings(
        dead_letter_exchange="dlx", dead_letter_strategy="at-least-once", overflow="reject-publish"
    ))) == (Reply.OK, [StartDeadLetterWorker()])


# -- policies, time, bad input --------------------------------------------------------------------

def test_a_lower_max_length_from_a_policy_drops_at_once():
    run = Run(DLX)
    run.publish(b"a", b"b", b"c")
    reply, effects = run(c.UpdateSettings(0, QueueSettings(max_length=1, dead_letter_exchange="dlx")))
    assert (reply, effects) == (Reply.OK, [DeadLetter(MAXLEN, "dlx", None, ((1, 0), (2, 0)))])


def test_time_never_goes_back():
    run = Run({"x-message-ttl": 100})
    run.publish(b"a", now_ms=1000)
    run(c.Tick(900))  # a proposer with a slow clock
    assert run.state.now_ms == 1000
    assert run.publish(b"b", now_ms=500) == []
    assert run.state.ready.normal.head_expiry() == 1100


def test_bytes_that_are_no_command_change_nothing():
    run = Run()
    run.state, reply, effects = run.machine.apply(type("M", (), {"index": 1, "term": 1})(), b"\x93\x01",
                                                  run.state)
    assert (reply, effects) == (Reply.INVALID, [])
