"""Message counters of the channel and queue cores: each count after a known sequence of inputs."""
from __future__ import annotations

from actors.messages.calls import Reply
from actors.messages.channel_queue import Confirm, Deliver, Get, GetResult
from actors.stats.counters import FIELDS, MessageCounters, add_into
from actors.queue.core import ClassicQueue
from effects import Send
from wire import methods as m

from tests.channel.helpers import PermRegistry, cmd, declare, make, publish
from tests.channel.test_core import Q, confirming, consuming, delivered
from tests.queue.test_core import pub

ZERO = {name: 0 for name in FIELDS} | {"deliver_get": 0}


def test_a_new_actor_counts_nothing():
    assert MessageCounters().as_dict() == ZERO


def test_channel_counts_publishes_returns_drops_and_confirms():
    core = confirming(3)
    core.command(publish(routing_key="nowhere", mandatory=True))
    core.command(publish(routing_key="nowhere"))
    core.flush()
    # the two unroutable ones are confirmed at once; the three routed wait for their queue
    assert core.message_stats() == ZERO | {"publish": 5, "return_unroutable": 1, "drop_unroutable": 1,
                                               "confirm": 2}
    core.receive(Q, Confirm(2))
    core.flush()
    assert core.message_stats()["confirm"] == 4


def test_channel_counts_deliveries_redeliveries_and_acks():
    reg = PermRegistry()
    declare(reg, "q")
    core = make(reg)
    consuming(core, prefetch_count=10)
    delivered(core, 3)
    core.receive(Q, Deliver("c1", [(200, True, "", "q", b"h", b"x")]))
    core.flush()
    core.command(cmd(m.BasicAck(delivery_tag=2, multiple=True)))
    core.flush()
    assert core.message_stats() == ZERO | {"deliver": 4, "deliver_get": 4, "redeliver": 1, "ack": 2}


def test_channel_counts_gets_by_outcome():
    reg = PermRegistry()
    declare(reg, "q")
    core = make(reg)
    for no_ack, answer in [(False, (1, False, "", "q", b"h", b"a")), (True, (2, True, "", "q", b"h", b"b")),
                           (True, None)]:
        core.command(cmd(m.BasicGet(queue="q", no_ack=no_ack)))
        get = [e for e in core.flush() if isinstance(e, Send) and isinstance(e.msg, Get)][0]
        core.receive(Q, Reply(get.msg.rid, GetResult(answer, 0)))
        core.flush()
    assert core.message_stats() == ZERO | {"get": 1, "get_no_ack": 1, "get_empty": 1, "redeliver": 1,
                                           "deliver_get": 2}


def test_queue_counts_per_batch():
    q = ClassicQueue("/", "q")
    q.publish("P", [pub(b"a"), pub(b"b"), pub(b"c"), pub(b"d")])
    q.consume("C", "t1", ack_required=True, credit=2)
    q.settle("C", acked=[1], requeued=[2])
    q.get("G", ack_required=False)
    q.get("G", ack_required=True)
    # t1 took 1 and 2 (its credit); 2 was requeued to the head, where the no-ack get took it
    assert q.counters.as_dict() == ZERO | {"publish": 4, "deliver": 2, "ack": 1, "redeliver": 1, "get_no_ack": 1,
                                           "get": 1, "deliver_get": 4}


def test_add_into_sums_by_name():
    assert add_into({"publish": 1}, {"publish": 2, "ack": 3}) == {"publish": 3, "ack": 3}
