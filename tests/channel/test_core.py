"""Channel core, testing ladder step 2: the exact effects returned for each input."""
from __future__ import annotations

from actors.messages.calls import Reply
from actors.messages.channel_queue import (
    ChannelDown, Confirm, Consume, ConsumerCancelled, Deliver, Grant, Publish, Rejected, Settle,
)
from actors.messages.node import QueueHostRestarted
from actors.messages.runtime import Undelivered
from effects import ChannelFinished, CloseConnection, Send, Write
from wire import methods as m
from wire.errors import AmqpError

from tests.channel.helpers import (
    NODE, PermRegistry, close_frame, cmd, content, declare, frame, header, make, publish,
)

Q = ("q", "/", "q")
Q2 = ("q", "/", "q2")


def consuming(core, queue="q", tag="c1", no_ack=False, **qos):
    """A consumer set up and answered; returns the credit it was granted with basic.consume."""
    if qos:
        core.command(cmd(m.BasicQos(**qos)))
    core.command(cmd(m.BasicConsume(queue=queue, consumer_tag=tag, no_ack=no_ack)))
    out = core.flush()
    send = [e for e in out if isinstance(e, Send) and isinstance(e.msg, Consume)][0]
    core.receive(("q", "/", queue), Reply(send.msg.rid))
    core.flush()
    return send.msg.credit


def confirming(published: int):
    """A core in confirm mode whose registry has queue q, with `published` publishes to q commanded
    (not flushed yet: their delivery tags are 1 .. published)."""
    reg = PermRegistry()
    declare(reg, "q")
    core = make(reg)
    core.command(cmd(m.ConfirmSelect()))
    for _ in range(published):
        core.command(publish())
    return core


def delivered(core, n, queue=Q, tag="c1", first_id=100):
    msgs = [(first_id + i, False, "", "q", header(), b"hi") for i in range(n)]
    core.receive(queue, Deliver(tag, msgs))
    return core.flush()


# ---------------------------------------------------------------- publish
def test_publish_routed_is_one_send_per_queue_per_flush():
    reg = PermRegistry()
    declare(reg, "q")
    core = make(reg)
    p1, p2 = publish(body=b"a"), publish(body=b"b")
    core.command(p1)
    core.command(p2)
    assert core.flush() == [Send(Q, Publish([(0, "", "q", p1.header, b"a"), (0, "", "q", p2.header, b"b")]), 2)]


def test_publish_unroutable_is_dropped():
    core = make()
    core.command(publish(routing_key="nowhere"))
    assert core.flush() == []


def test_mandatory_unroutable_is_returned_before_its_confirm():
    core = make()
    core.command(cmd(m.ConfirmSelect()))
    p = publish(routing_key="nowhere", mandatory=True)
    core.command(p)
    ret = m.BasicReturn(reply_code=312, reply_text="NO_ROUTE", exchange="", routing_key="nowhere")
    assert core.flush() == [Write([frame(m.ConfirmSelectOk()), *content(ret, p.header, p.body),
                                   frame(m.BasicAck(delivery_tag=1, multiple=False))])]


def test_confirms_coalesce_into_one_multiple_ack():
    core = confirming(3)
    out = core.flush()
    assert [e.msg.messages[i][0] for e in out if isinstance(e, Send) for i in range(3)] == [1, 2, 3]
    core.receive(Q, Confirm(3))
    assert core.flush() == [Write([frame(m.BasicAck(delivery_tag=3, multiple=True))])]


def test_queue_refused_publishes_are_nacked_exactly():
    core = confirming(3)
    core.flush()
    core.receive(Q, Rejected([2]))
    assert core.flush() == [Write([frame(m.BasicNack(delivery_tag=2, multiple=False, requeue=False))])]
    core.receive(Q, Confirm(3))  # 2 is already nacked, so one multiple ack may cover it, as RabbitMQ's
    assert core.flush() == [Write([frame(m.BasicAck(delivery_tag=3, multiple=True))])]


def test_rejected_without_confirm_mode_is_ignored():
    reg = PermRegistry()
    declare(reg, "q")
    core = make(reg)
    core.command(publish())
    core.flush()
    core.receive(Q, Rejected([1]))
    assert core.flush() == []


# ---------------------------------------------------------------- deliveries and settlement
def test_delivery_then_ack():
    reg = PermRegistry()
    declare(reg, "q")
    core = make(reg)
    core.command(cmd(m.BasicConsume(queue="q", consumer_tag="c1")))
    assert core.flush() == [Send(Q, Consume(1, "c1", True, 400, False, {}))]
    core.receive(Q, Reply(1))
    assert core.flush() == [Write([frame(m.BasicConsumeOk(consumer_tag="c1"))])]
    h = header()
    core.receive(Q, Deliver("c1", [(100, False, "", "q", h, b"hi"), (101, True, "", "q", h, b"hi")]))
    d1 = m.BasicDeliver(consumer_tag="c1", delivery_tag=1, redelivered=False, exchange="", routing_key="q")
    d2 = m.BasicDeliver(consumer_tag="c1", delivery_tag=2, redelivered=True, exchange="", routing_key="q")
    assert core.flush() == [Write([*content(d1, h, b"hi"), *content(d2, h, b"hi")])]
    core.command(cmd(m.BasicAck(delivery_tag=2, multiple=True)))
    assert core.flush() == [Send(Q, Settle([100, 101], [], []))]


def test_an_ack_of_a_stream_delivery_only_gives_credit_back():
    """A stream removes nothing on an ack: no Settle goes to it, the consumer's credit comes back."""
    reg = PermRegistry()
    reg.declare_queue("/", "s", durable=True, arguments={"x-queue-type": "stream"})
    core = make(reg)
    core.command(cmd(m.BasicQos(prefetch_count=2)))
    core.command(cmd(m.BasicConsume(queue="s", consumer_tag="c1")))
    core.flush()
    S = ("q", "/", "s")
    core.receive(S, Reply(1))
    core.flush()
    h = header()
    core.receive(S, Deliver("c1", [(100, False, "", "s", h, b"hi"), (101, False, "", "s", h, b"hi")]))
    core.flush()
    core.command(cmd(m.BasicAck(delivery_tag=2, multiple=True)))
    assert core.flush() == [Send(S, Grant("c1", 2))]


def test_nack_reject_single_and_multiple_and_tag_zero():
    reg = PermRegistry()
    declare(reg, "q")
    core = make(reg)
    consuming(core)
    delivered(core, 5)
    core.command(cmd(m.BasicReject(delivery_tag=1, requeue=True)))
    core.command(cmd(m.BasicNack(delivery_tag=3, multiple=True, requeue=False)))
    assert core.flush() == [Send(Q, Settle([], [100], [101, 102]))]
    core.command(cmd(m.BasicNack(delivery_tag=0, multiple=True, requeue=True)))
    assert core.flush() == [Send(Q, Settle([], [103, 104], []))]


def test_unknown_delivery_tag_closes_the_channel_and_releases_queues():
    reg = PermRegistry()
    declare(reg, "q")
    core = make(reg)
    consuming(core)
    core.command(cmd(m.BasicAck(delivery_tag=5)))
    assert core.flush() == [Write([close_frame(406, "PRECONDITION_FAILED - unknown delivery tag 5", 60, 80)]),
                            Send(Q, ChannelDown())]


def test_per_consumer_prefetch_is_credit():
    reg = PermRegistry()
    declare(reg, "q")
    core = make(reg)
    assert consuming(core, prefetch_count=2) == 2
    delivered(core, 2)
    core.command(cmd(m.BasicAck(delivery_tag=1)))
    assert core.flush() == [Send(Q, Settle([100], [], [])), Send(Q, Grant("c1", 1))]


def test_consume_grants_only_the_new_consumer_and_keeps_others_due_credit():
    reg = PermRegistry()
    declare(reg, "q", "q2")
    core = make(reg)
    consuming(core, tag="a", no_ack=True)
    # a is left with 150 credit, due for a top-up; the consume in the same batch must not swallow it
    core.receive(Q, Deliver("a", [(i, False, "", "q", header(), b"hi") for i in range(250)]))
    core.command(cmd(m.BasicConsume(queue="q2", consumer_tag="b", no_ack=True)))
    out = [e for e in core.flush() if not isinstance(e, Write)]
    assert out == [Send(Q2, Consume(2, "b", False, 400, False, {})), Send(Q, Grant("a", 250))]


# ---------------------------------------------------------------- tx and confirm modes
def test_tx_commit_and_rollback():
    reg = PermRegistry()
    declare(reg, "q")
    core = make(reg)
    core.command(cmd(m.TxSelect()))
    core.command(publish(body=b"dropped"))
    core.command(cmd(m.TxRollback()))
    assert core.flush() == [Write([frame(m.TxSelectOk()), frame(m.TxRollbackOk())])]
    p = publish(body=b"kept")
    core.command(p)
    core.command(cmd(m.TxCommit()))
    assert core.flush() == [Send(Q, Publish([(1, "", "q", p.header, b"kept")]), 1)]
    core.receive(Q, Confirm(1))
    assert core.flush() == [Write([frame(m.TxCommitOk())])]


def test_confirm_and_tx_refuse_each_other():
    core = make()
    core.command(cmd(m.ConfirmSelect()))
    core.command(cmd(m.TxSelect()))
    assert core.flush() == [Write([frame(m.ConfirmSelectOk()),
                                   close_frame(406, "PRECONDITION_FAILED - cannot switch from confirm to tx mode",
                                               90, 10)])]
    core = make()
    core.command(cmd(m.TxSelect()))
    core.command(cmd(m.ConfirmSelect()))
    assert core.flush() == [Write([frame(m.TxSelectOk()),
                                   close_frame(406, "PRECONDITION_FAILED - cannot switch from tx to confirm mode",
                                               85, 10)])]


# ---------------------------------------------------------------- cancel and close
def test_server_cancel_notifies_only_with_the_capability():
    reg = PermRegistry()
    declare(reg, "q")
    core = make(reg)
    consuming(core)
    core.receive(Q, ConsumerCancelled("c1"))
    assert core.flush() == [Write([frame(m.BasicCancel(consumer_tag="c1", nowait=True))])]
    core = make(reg, capabilities={})
    consuming(core)
    core.receive(Q, ConsumerCancelled("c1"))
    assert core.flush() == []
    assert "c1" not in core.consumers


def test_deleting_the_queue_it_consumes_from_answers_delete_ok_before_basic_cancel():
    """RabbitMQ's order (its channel reads the queue's cancel after the call returns); py-amqp
    raises ConsumerCancelled inside queue_delete on the other one."""
    reg = PermRegistry()
    declare(reg, "q")
    core = make(reg)
    consuming(core)
    core.command(cmd(m.QueueDelete(queue="q")))
    call = core.flush()[0].msg
    core.receive(Q, ConsumerCancelled("c1"))   # the queue cancels before the node answers
    assert core.flush() == []
    core.receive(NODE, Reply(call.rid, 0))
    assert core.flush() == [Write([frame(m.QueueDeleteOk(message_count=0)),
                                   frame(m.BasicCancel(consumer_tag="c1", nowait=True))])]
    assert "c1" not in core.consumers


def test_a_cancel_during_a_call_that_closes_the_channel_is_not_told_to_the_client():
    reg = PermRegistry()
    declare(reg, "q")
    core = make(reg)
    consuming(core)
    core.command(cmd(m.QueueDeclare(queue="q", passive=True)))
    call = core.flush()[0].msg
    core.receive(Q, ConsumerCancelled("c1"))
    core.receive(NODE, Reply(call.rid, error=AmqpError(404, "no queue 'q' in vhost '/'")))
    # the channel closed on the error: the cancel is not told to the client
    assert core.flush() == [Write([close_frame(404, "NOT_FOUND - no queue 'q' in vhost '/'", 50, 10)]),
                            Send(Q, ChannelDown())]
    assert core.consumers == {}


def test_close_releases_every_touched_queue():
    reg = PermRegistry()
    declare(reg, "q")
    core = make(reg)
    consuming(core)
    delivered(core, 1)
    core.command(cmd(m.ChannelClose()))
    assert core.flush() == [Send(Q, ChannelDown()), Write([frame(m.ChannelCloseOk())]), ChannelFinished()]
    assert len(core.unacked) == 0


def test_reusing_a_consumer_tag_is_a_connection_error():
    reg = PermRegistry()
    declare(reg, "q")
    core = make(reg)
    consuming(core)
    core.command(cmd(m.BasicConsume(queue="q", consumer_tag="c1")))
    out = core.flush()
    assert out[0] == CloseConnection(AmqpError(530, "attempt to reuse consumer tag 'c1'", 60, 20, True))


def test_prefetch_top_ups_are_batched_but_never_starve_the_consumer():
    reg = PermRegistry()
    declare(reg, "q")
    core = make(reg)
    assert consuming(core, prefetch_count=8) == 8
    delivered(core, 6)                      # the queue still holds 2 credit
    core.command(cmd(m.BasicAck(delivery_tag=1)))
    assert core.flush() == [Send(Q, Settle([100], [], []))]      # room 1 < 8/4: wait
    core.command(cmd(m.BasicAck(delivery_tag=2)))
    assert core.flush() == [Send(Q, Settle([101], [], [])), Send(Q, Grant("c1", 2))]
    delivered(core, 4, first_id=200)        # credit used up: any room is granted at once
    core.command(cmd(m.BasicAck(delivery_tag=3)))
    assert core.flush() == [Send(Q, Settle([102], [], [])), Send(Q, Grant("c1", 1))]


def test_publishes_to_a_missing_queue_actor_are_nacked():
    core = confirming(2)
    [send] = [e for e in core.flush() if isinstance(e, Send)]
    core.receive(Q, Undelivered(send.msg))  # the runtime found no queue actor
    assert core.flush() == [Write([frame(m.BasicNack(delivery_tag=1, multiple=False, requeue=False)),
                                   frame(m.BasicNack(delivery_tag=2, multiple=False, requeue=False))])]


def test_publishes_to_a_queue_deleted_on_their_way_are_confirmed():
    """The queue's actor was removed for good before this channel's metadata said so: RabbitMQ
    settles what a queue deleted normally still owed, so the publisher sees acks, not nacks."""
    core = confirming(1)
    [send] = [e for e in core.flush() if isinstance(e, Send)]
    core.receive(Q, Undelivered(send.msg, gone=True))
    assert core.flush() == [Write([frame(m.BasicAck(delivery_tag=1, multiple=False))])]


def test_a_restarted_queue_host_nacks_pending_publishes_cancels_consumers_and_orphans_deliveries():
    from actors.runtime.address import Address
    reg = PermRegistry()
    declare(reg, "q")
    core = make(reg, place=lambda vhost, name: Address("queue0", f"q:{vhost}:{name}"))
    queue = Address("queue0", "q:/:q")
    core.command(cmd(m.BasicConsume(queue="q", consumer_tag="c1")))
    core.flush()
    core.receive(queue, Reply(1))
    core.receive(queue, Deliver("c1", [(7, False, "", "q", header(), b"hi")]))
    core.command(cmd(m.ConfirmSelect()))
    core.command(publish())
    core.flush()
    core.receive(NODE, QueueHostRestarted("queue0"))
    assert core.flush() == [Write([frame(m.BasicNack(delivery_tag=1, multiple=False, requeue=False)),
                                   frame(m.BasicCancel(consumer_tag="c1", nowait=True))])]
    core.command(cmd(m.BasicAck(delivery_tag=1)))  # the orphaned delivery may still be acked, to nowhere
    assert core.flush() == []


def test_a_call_to_a_queue_whose_host_restarted_fails_as_down():
    """The basic.consume-ok would have come from the host that died: RabbitMQ's 404 "down or
    inaccessible" instead of a channel that waits forever."""
    from actors.runtime.address import Address
    reg = PermRegistry()
    declare(reg, "q")
    core = make(reg, place=lambda vhost, name: Address("queue0", f"q:{vhost}:{name}"))
    core.command(cmd(m.BasicConsume(queue="q", consumer_tag="c1")))
    core.flush()
    core.receive(NODE, QueueHostRestarted("queue0"))
    close = frame(m.ChannelClose(reply_code=404, reply_text="NOT_FOUND - queue 'q' in vhost '/' is down or "
                                 "inaccessible", class_id=60, method_id=20))
    assert Write([close]) in core.flush()
