"""A channel's quiet point and what goes with it when its connection moves (actors/channel/handover.py)."""
from __future__ import annotations

from actors.channel import handover
from actors.channel.handover import ChannelHandover
from actors.messages.calls import Reply
from actors.messages.channel_queue import Confirm, Consume, Publish
from effects import Send, Write
from wire import methods as m

from tests.channel.helpers import PermRegistry, cmd, declare, frame, make, publish
from tests.channel.test_core import Q, consuming, delivered


def channel():
    """A channel core whose registry has queue "q"."""
    reg = PermRegistry()
    declare(reg, "q")
    return make(reg)


def test_a_fresh_channel_is_quiet():
    assert handover.busy(make()) is None


def test_a_confirming_publisher_is_quiet_once_everything_is_confirmed():
    core = channel()
    core.command(cmd(m.ConfirmSelect()))
    core.command(publish())
    core.flush()
    assert handover.busy(core) == "confirms pending"
    core.receive(Q, Confirm(1))
    assert handover.busy(core) is not None  # the ack is not written yet
    core.flush()
    assert handover.busy(core) is None


def test_a_channel_that_published_without_confirms_never_moves():
    core = channel()
    core.command(publish())
    core.flush()
    assert handover.busy(core) == "published without confirms"


def test_consumers_calls_and_transactions_keep_a_channel_where_it_is():
    core = channel()
    core.command(cmd(m.BasicConsume(queue="q", consumer_tag="c1")))
    core.flush()
    assert handover.busy(core) == "call in flight"
    core.command(cmd(m.BasicQos(prefetch_count=5)))
    assert handover.busy(core) == "call in flight"

    core = channel()
    consuming(core)
    assert handover.busy(core) == "consuming"

    core = channel()
    core.command(cmd(m.TxSelect()))
    core.flush()
    assert handover.busy(core) == "transactional"


def test_unacked_deliveries_keep_a_channel_where_it_is():
    core = channel()
    consuming(core)
    delivered(core, 2)
    core.command(cmd(m.BasicCancel(consumer_tag="c1")))
    out = core.flush()
    cancel = [e for e in out if isinstance(e, Send)][0]
    core.receive(Q, Reply(cancel.msg.rid))
    core.flush()
    assert handover.busy(core) == "unacked deliveries"


def test_what_goes_with_a_channel_is_what_its_client_set():
    core = channel()
    core.command(cmd(m.BasicQos(prefetch_count=7)))
    core.command(cmd(m.BasicQos(prefetch_count=20, global_=True)))
    core.command(cmd(m.ConfirmSelect()))
    for _ in range(3):
        core.command(publish())
    core.flush()
    core.receive(Q, Confirm(3))
    core.flush()
    taken = handover.take(core)
    assert taken == ChannelHandover(1, 7, 20, 4, 0)

    there = channel()
    handover.resume(there, taken)
    there.command(publish())
    sends = [e for e in there.flush() if isinstance(e, Send)]
    assert [msg[0] for e in sends if isinstance(e.msg, Publish) for msg in e.msg.messages] == [4]
    there.receive(Q, Confirm(4))
    assert there.flush() == [Write([frame(m.BasicAck(delivery_tag=4, multiple=False))])]
    assert there.message_stats()["confirm"] == 1  # the three before are counted where they were

    consumer = channel()  # (a channel-wide limit is refused for a quorum queue, which the helper cannot tell)
    handover.resume(consumer, ChannelHandover(1, 7, 0, 0, 12))
    consumer.command(cmd(m.BasicConsume(queue="q", consumer_tag="c9")))
    consume = [e.msg for e in consumer.flush() if isinstance(e, Send) and isinstance(e.msg, Consume)][0]
    assert consume.credit == 7 and consumer.confirm is None
    consumer.receive(Q, Reply(consume.rid))
    consumer.flush()
    written = b"".join(bytes(c) for e in delivered(consumer, 1, tag="c9") if isinstance(e, Write) for c in e.chunks)
    assert written.startswith(frame(m.BasicDeliver(consumer_tag="c9", delivery_tag=13, redelivered=False,
                                                   exchange="", routing_key="q")))
