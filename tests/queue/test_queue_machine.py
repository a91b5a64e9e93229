"""Rule-based state machine: the classic queue core against a tiny list model.

After every step: each published message is in exactly one of ready / unacked (under one channel) /
gone; deliveries and gets always take the lowest ready msg_ids (FIFO by msg_id, requeued messages at
their original position); redelivered is set exactly on messages delivered before; consumers never get
more than their credit; no ready message waits while a consumer has credit; counts match.
"""
from __future__ import annotations

from actors.messages.channel_queue import Confirm, Deliver
from actors.messages.node import AutoDeleteQueue
from actors.queue.core import ClassicQueue
from effects import Send
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from wire.properties import BasicProperties, encode_content_header

CHANNELS = ("C1", "C2", "C3")
H = encode_content_header(60, 0, BasicProperties())
TAGS = ("a", "b")
READY = "ready"


class QueueMachine(RuleBasedStateMachine):
    header = H  # the content header every message carries

    def __init__(self) -> None:
        super().__init__()
        self.queue = ClassicQueue("/", "q")
        self.where: dict[int, str] = {}          # msg_id -> READY or the holding channel; absent = gone
        self.delivered_before: set[int] = set()
        self.consumers: dict[tuple[str, str], list] = {}  # (channel, tag) -> [ack_required, credit]
        self.next_id = 1
        self.seq = 0

    # -- model helpers ----------------------------------------------------------------------------

    def ready_ids(self) -> list[int]:
        return sorted(i for i, w in self.where.items() if w == READY)

    def take(self, message, channel: str | None) -> None:
        """A message left the ready list: to `channel`'s unacked, or gone when None."""
        msg_id, redelivered, exchange, routing_key, header, body = message
        assert self.where.get(msg_id) == READY, f"{msg_id} delivered but not ready"
        assert redelivered == (msg_id in self.delivered_before)
        assert (exchange, routing_key, header, body) == ("x", "rk", self.header, b"%d" % msg_id)
        self.delivered_before.add(msg_id)
        if channel is None:
            del self.where[msg_id]
        else:
            self.where[msg_id] = channel

    def apply(self, effects) -> None:
        ready_before = self.ready_ids()
        taken: list[int] = []
        for effect in effects:
            assert isinstance(effect, Send), effect
            if isinstance(effect.msg, Deliver):
                consumer = self.consumers[(effect.to, effect.msg.consumer_tag)]
                ids = [m[0] for m in effect.msg.messages]
                assert ids == sorted(ids) and ids, ids
                assert len(ids) <= consumer[1], "delivered beyond credit"
                consumer[1] -= len(ids)
                for message in effect.msg.messages:
                    self.take(message, effect.to if consumer[0] else None)
                taken += ids
            else:
                assert isinstance(effect.msg, Confirm), effect
        assert sorted(taken) == ready_before[:len(taken)], "delivery skipped a lower ready id"

    # -- rules ------------------------------------------------------------------------------------

    @rule(channel=st.sampled_from(CHANNELS), n=st.integers(1, 5), confirm=st.booleans())
    def publish(self, channel, n, confirm):
        batch = []
        for _ in range(n):
            self.seq += 1
            batch.append((self.seq if confirm else 0, "x", "rk", self.header, b"%d" % self.next_id))
            self.where[self.next_id] = READY
            self.next_id += 1
        effects = self.queue.publish(channel, batch)
        confirms = [e for e in effects if isinstance(e.msg, Confirm)]
        assert confirms == ([Send(channel, Confirm(self.seq))] if confirm else [])
        assert all(isinstance(e.msg, Deliver) for e in effects[:len(effects) - len(confirms)])
        self.apply(effects)

    @rule(channel=st.sampled_from(CHANNELS), tag=st.sampled_from(TAGS), ack=st.booleans(),
          credit=st.integers(0, 4))
    def consume(self, channel, tag, ack, credit):
        result = self.queue.consume(channel, tag, ack_required=ack, credit=credit)
        if (channel, tag) in self.consumers:
            assert result.code == 530
            return
        self.consumers[(channel, tag)] = [ack, credit]
        self.apply(result)

    @precondition(lambda self: self.consumers)
    @rule(data=st.data())
    def cancel(self, data):
        key = data.draw(st.sampled_from(sorted(self.consumers)))
        del self.consumers[key]
        assert self.queue.cancel(*key) == []
        assert self.queue.cancel(*key) == []

    @precondition(lambda self: self.consumers)
    @rule(data=st.data(), credit=st.integers(1, 6))
    def grant(self, data, credit):
        key = data.draw(st.sampled_from(sorted(self.consumers)))
        self.consumers[key][1] += credit
        self.apply(self.queue.grant(*key, credit))

    @rule(channel=st.sampled_from(CHANNELS), ack=st.booleans())
    def get(self, channel, ack):
        ready = self.ready_ids()
        message, remaining, effects = self.queue.get(channel, ack_required=ack)
        assert effects == []
        if not ready:
            assert (message, remaining) == (None, 0)
            return
        assert message[0] == ready[0]
        self.take(message, channel if ack else None)
        assert remaining == len(ready) - 1

    @rule(channel=st.sampled_from(CHANNELS), data=st.data())
    def settle(self, channel, data):
        held = sorted(i for i, w in self.where.items() if w == channel)
        others = sorted(i for i, w in self.where.items() if w not in (channel, READY))
        pool = held + others + [self.next_id + 100]  # unknown and foreign ids are ignored
        chosen = data.draw(st.lists(st.sampled_from(pool), unique=True, max_size=len(pool)))
        how = data.draw(st.lists(st.sampled_from(("ack", "requeue", "discard")),
                                 min_size=len(chosen), max_size=len(chosen)))
        split = {k: [i for i, h in zip(chosen, how) if h == k] for k in ("ack", "requeue", "discard")}
        for msg_id in split["ack"] + split["discard"]:
            if self.where.get(msg_id) == channel:
                del self.where[msg_id]
        for msg_id in split["requeue"]:
            if self.where.get(msg_id) == channel:
                self.where[msg_id] = READY
        self.apply(self.queue.settle(channel, acked=split["ack"], requeued=split["requeue"],
                                     discarded=split["discard"]))

    @rule(channel=st.sampled_from(CHANNELS))
    def channel_down(self, channel):
        for msg_id, w in self.where.items():
            if w == channel:
                self.where[msg_id] = READY
        for key in [k for k in self.consumers if k[0] == channel]:
            del self.consumers[key]
        effects = self.queue.channel_down(channel)
        assert not any(isinstance(e.msg, AutoDeleteQueue) for e in effects)
        self.apply(effects)

    @rule()
    def purge(self):
        ready = self.ready_ids()
        assert self.queue.purge() == len(ready)
        for msg_id in ready:
            del self.where[msg_id]

    # -- invariants -------------------------------------------------------------------------------

    @invariant()
    def counts_match(self):
        ready = len(self.ready_ids())
        unacked = len(self.where) - ready
        q = self.queue
        assert (q.messages_ready, q.message_count, q.messages_unacknowledged) == (ready, ready, unacked)
        assert q.consumer_count == len(self.consumers)
        assert q.stats()["messages"] == ready + unacked
        assert q.stats()["memory"] == sum(len(self.header) + len(b"%d" % i) for i in self.where)

    @invariant()
    def no_ready_message_waits_for_a_consumer_with_credit(self):
        if self.ready_ids():
            assert all(credit == 0 for _, credit in self.consumers.values())


QueueMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestQueueMachine = QueueMachine.TestCase
