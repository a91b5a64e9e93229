"""Rule-based state machine: a queue with TTL, x-max-length (drop-head), x-max-priority and a
dead-letter exchange, against a model with its own clock.

After every step every published message is in exactly one place - ready, unacked under one channel,
acked, dead-lettered (expired or maxlen, via the router sink) or dropped (no-ack delivery, discard) -
and the queue's counts agree. Checked on the way: nothing expired is ever delivered (except straight
to a waiting consumer on publish, as RabbitMQ), expired dead-letters really had expired, the ready
list stays within x-max-length, basic.get takes the highest priority live message, FIFO within it.
"""
from __future__ import annotations

from actors.messages.channel_queue import Confirm, Deliver, Publish
from actors.queue.core import ClassicQueue
from effects import CancelTimer, Send, StartTimer
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from wire.properties import BasicProperties, encode_content_header

MAX_LENGTH = 6
MAX_PRIORITY = 3
CHANNELS = ("C1", "C2")
T0 = 1_000_000


class Sink:
    def route(self, vhost, exchange, routing_key, headers=None):
        return ["sink"]


class FeatureMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = T0
        self.queue = ClassicQueue("/", "q", arguments={
            "x-max-length": MAX_LENGTH, "x-max-priority": MAX_PRIORITY, "x-dead-letter-exchange": "dlx"},
            router=Sink(), place=lambda vhost, name: name, now_ms=T0)
        self.where: dict[bytes, object] = {}   # body -> "ready" | channel | "acked" | "expired" | "maxlen" | "dropped"
        self.expiry: dict[bytes, int | None] = {}
        self.priority: dict[bytes, int] = {}
        self.ids: dict[bytes, int] = {}
        self.consumers: dict[tuple[str, str], list] = {}
        self.n = 0

    def ready(self) -> list[bytes]:
        return [b for b, w in self.where.items() if w == "ready"]

    def apply(self, effects, *, direct: bool = False) -> None:
        for e in effects:
            if isinstance(e, Send) and isinstance(e.msg, Deliver):
                consumer = self.consumers[(e.to, e.msg.consumer_tag)]
                assert len(e.msg.messages) <= consumer[1]
                consumer[1] -= len(e.msg.messages)
                for m in e.msg.messages:
                    self.leave(m, e.to if consumer[0] else "dropped", direct)
            elif isinstance(e, Send) and isinstance(e.msg, Publish):
                assert e.to == "sink"
                for _, _, _, header, body in e.msg.messages:
                    deaths = BasicProperties.decode(header, 12).headers["x-death"]
                    reason = deaths[0]["reason"]
                    assert self.where[body] == "ready", (body, self.where[body])
                    if reason == "expired":
                        assert self.expiry[body] is not None and self.expiry[body] <= self.now
                    self.where[body] = reason
            else:
                assert isinstance(e, (StartTimer, CancelTimer)) or isinstance(e.msg, Confirm), e

    def leave(self, message, to, direct: bool) -> None:
        body = message[5]
        assert self.where[body] == "ready", (body, self.where[body])
        at = self.expiry[body]
        assert at is None or at > self.now or (direct and at >= self.now), "delivered an expired message"
        self.where[body] = to

    @rule(n=st.integers(1, 4), ttl=st.sampled_from([None, 1, 5, 20]), prio=st.integers(0, 5))
    def publish(self, n, ttl, prio):
        batch = []
        for _ in range(n):
            self.n += 1
            body = b"%d" % self.n
            header = encode_content_header(60, len(body), BasicProperties(
                priority=prio, expiration=None if ttl is None else str(ttl)))
            batch.append((0, "", "q", header, body))
            self.where[body] = "ready"
            self.expiry[body] = None if ttl is None else self.now + ttl
            self.priority[body] = min(prio, MAX_PRIORITY)
            self.ids[body] = self.queue._next_id + len(batch) - 1
        self.apply(self.queue.publish("P", batch, now_ms=self.now), direct=True)

    @rule(ms=st.integers(1, 15))
    def tick(self, ms):
        self.now += ms
        self.apply(self.queue.on_timer("ttl", now_ms=self.now))

    @rule(channel=st.sampled_from(CHANNELS), tag=st.sampled_from(("a", "b")), ack=st.booleans(),
          credit=st.integers(0, 3))
    def consume(self, channel, tag, ack, credit):
        if (channel, tag) in self.consumers:
            return
        self.consumers[(channel, tag)] = [ack, credit]
        self.apply(self.queue.consume(channel, tag, ack_required=ack, credit=credit, now_ms=self.now))

    @precondition(lambda self: self.consumers)
    @rule(data=st.data(), credit=st.integers(1, 4))
    def grant(self, data, credit):
        key = data.draw(st.sampled_from(sorted(self.consumers)))
        self.consumers[key][1] += credit
        self.apply(self.queue.grant(*key, credit, now_ms=self.now))

    @rule(channel=st.sampled_from(CHANNELS))
    def get(self, channel):
        live = [b for b in self.ready() if self.expiry[b] is None or self.expiry[b] > self.now]
        message, remaining, effects = self.queue.get(channel, ack_required=True, now_ms=self.now)
        if message is None:
            assert not live
        else:
            best = min(live, key=lambda b: (-self.priority[b], self.ids[b]))
            assert message[5] == best, "get did not take the highest-priority oldest live message"
        self.apply(effects)
        if message is not None:
            self.leave(message, channel, False)

    @rule(channel=st.sampled_from(CHANNELS), data=st.data())
    def settle(self, channel, data):
        held = sorted(b for b, w in self.where.items() if w == channel)
        if not held:
            return
        chosen = data.draw(st.lists(st.sampled_from(held), unique=True))
        how = data.draw(st.sampled_from(("ack", "requeue", "discard")))
        ids = [self.ids[b] for b in chosen]
        for b in chosen:
            self.where[b] = {"ack": "acked", "requeue": "ready", "discard": "dropped"}[how]
        kw = {"ack": "acked", "requeue": "requeued", "discard": "discarded"}[how]
        # discarded messages dead-letter as "rejected": the sink sees them; mark them ready first
        if how == "discard":
            for b in chosen:
                self.where[b] = "ready"
        effects = self.queue.settle(channel, **{kw: ids}, now_ms=self.now)
        for e in effects:
            if isinstance(e, Send) and isinstance(e.msg, Publish):
                for _, _, _, header, body in e.msg.messages:
                    if BasicProperties.decode(header, 12).headers["x-death"][0]["reason"] == "rejected":
                        assert body in chosen and self.where[body] == "ready"
                        self.where[body] = "rejected"
        self.apply([e for e in effects if not (isinstance(e, Send) and isinstance(e.msg, Publish) and all(
            BasicProperties.decode(r[3], 12).headers["x-death"][0]["reason"] == "rejected" for r in e.msg.messages))])

    @rule(channel=st.sampled_from(CHANNELS))
    def channel_down(self, channel):
        for b, w in self.where.items():
            if w == channel:
                self.where[b] = "ready"
        for key in [k for k in self.consumers if k[0] == channel]:
            del self.consumers[key]
        self.apply(self.queue.channel_down(channel, now_ms=self.now))

    @invariant()
    def every_message_in_exactly_one_place(self):
        q = self.queue
        ready = self.ready()
        unacked = [b for b, w in self.where.items() if w in CHANNELS]
        assert (q.messages_ready, q.messages_unacknowledged) == (len(ready), len(unacked))
        assert q.messages_ready <= MAX_LENGTH

    @invariant()
    def the_head_has_not_expired(self):
        live_or_not = self.ready()
        if live_or_not:
            head = min(live_or_not, key=lambda b: (-self.priority[b], self.ids[b]))
            at = self.expiry[head]
            assert at is None or at > self.now


FeatureMachine.TestCase.settings = settings(max_examples=120, stateful_step_count=40, deadline=None)
TestFeatureMachine = FeatureMachine.TestCase
