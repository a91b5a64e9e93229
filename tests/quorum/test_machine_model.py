"""Rule-based state machine: the quorum queue machine against a tiny reference model.

As rabbit_fifo_prop_SUITE: generated command logs (publish, consume, settle, return/requeue,
reject, channel down, basic.get, purge, time passing, dead-letter worker settles, and snapshot ->
restore in the middle) replayed through `QuorumMachine.apply`, with the model checked after every
step. The model is lists and dicts, written from the 4.0 guide's rules rather than the machine's
code:
- where every message is: ready (returned near the head, or on its priority level), unacked by a
  consumer, held for the dead-letter worker, or gone - and `live_indexes` is exactly the Raft
  indexes of the messages not gone; ready/unacked/held counts and bytes match;
- the messages that leave the ready queue in one command are exactly the next ones in the
  guide's order: returned ones first, then high over normal 2:1, except a high message older
  than the normal head; deliveries (by msg id) come in that order;
- a delivered message is not expired and carries its delivery count (times it came back);
- past the delivery limit a message is dead-lettered (`delivery_limit`), rejected ones
  `rejected`, expired ones only once their TTL (the lower of queue and message TTL) passed,
  maxlen ones only with drop-head; at-least-once holds them until the worker settles; after a
  command the head of the queue is not an expired message (unless drop-head just uncovered it);
- a Release never covers a message still held, and a drained queue has released its whole log;
- drop-head keeps ready + held within max-length / max-length-bytes; reject-publish refuses an
  enqueue exactly while over the limit, until below 80% of it;
- a consumer never holds more than its prefetch, and no message waits while a consumer has credit.
A dead-letter exchange is always configured, so every removal is visible in an effect.
"""
from __future__ import annotations

import os

import msgpack
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from actors.quorum import commands as c
from actors.quorum.effects import (DELIVERY_LIMIT, EXPIRED, MAXLEN, REJECTED, DeadLetter,
                                   DeadLetterDeliver, Deliver, GetOk, Purged, Release, Reply)
from actors.quorum.queries import requeue_plan
from tests.quorum.harness import Run, header

EXAMPLES = int(os.environ.get("QQ_EXAMPLES", "300"))  # more for a soak: QQ_EXAMPLES=5000
CHANNELS = ("A", "B")
GETTER = "G"
WORKER = "w"
TURNS = 2


class Msg:
    def __init__(self, index: int, high: bool, expiry: int | None, size: int) -> None:
        self.index, self.high, self.expiry, self.size, self.count = index, high, expiry, size, 0


class QuorumModel(RuleBasedStateMachine):
    @initialize(ttl=st.sampled_from([None, 0, 5, 20]), limit=st.sampled_from([-1, 0, 1, 3]),
                max_length=st.sampled_from([None, 1, 3, 6]), max_bytes=st.sampled_from([None, 8, 20]),
                overflow=st.sampled_from(["drop-head", "reject-publish"]),
                strategy=st.sampled_from(["at-most-once", "at-least-once"]))
    def setup(self, ttl, limit, max_length, max_bytes, overflow, strategy) -> None:
        arguments = {"x-delivery-limit": limit, "x-overflow": overflow, "x-dead-letter-exchange": "dlx",
                     "x-dead-letter-strategy": strategy}
        for key, value in (("x-message-ttl", ttl), ("x-max-length", max_length),
                           ("x-max-length-bytes", max_bytes)):
            if value is not None:
                arguments[key] = value
        self.run = Run(arguments)
        self.ttl, self.limit = ttl, (None if limit < 0 else limit)
        self.max_length, self.max_bytes, self.overflow = max_length, max_bytes, overflow
        self.at_least_once = strategy == "at-least-once" and overflow == "reject-publish"
        self.now = 0
        self.seq = 0
        self.gets = 0
        self.msgs: dict[int, Msg] = {}   # index -> message, for every message not gone
        self.returns: list[Msg] = []     # returned near the head, in order
        self.level: list[Msg] = []       # ready on a priority level
        self.turn = 0
        self.unacked: dict[tuple[str, str, int], Msg] = {}  # (channel, tag, msg_id)
        self.held: dict[int, Msg] = {}   # dead-lettered, at-least-once: worker msg id -> message
        self.consumers: dict[str, dict] = {}  # channel -> ack, prefetch, granted, delivered, cancelled
        self.delivered: dict[tuple[str, str], int] = {}
        self.blocked = False
        self.dropped = False
        self.released = 0
        self.releases: list[int] = []  # Release effects of the last rule, checked once it is done
        self.last_message = 0
        if self.at_least_once:
            self.step(c.DeadLetterCheckout(self.now, WORKER, 1000))

    # -- the model's rules -------------------------------------------------------------------------

    def ready(self) -> list[Msg]:
        return self.returns + self.level

    def order(self) -> list[Msg]:
        """The order ready messages leave in, and the turn counter after each level take."""
        out = list(self.returns)
        high = sorted((m for m in self.level if m.high), key=lambda m: m.index)
        normal = sorted((m for m in self.level if not m.high), key=lambda m: m.index)
        turn = self.turn
        while high or normal:
            normal_turn = turn == TURNS and normal and (not high or normal[0].index < high[0].index)
            out.append((normal if normal_turn or not high else high).pop(0))
            turn = 0 if turn == TURNS else turn + 1
        return out

    def over_limit(self) -> bool:
        n, size = len(self.ready()) + len(self.held), sum(m.size for m in self.ready() + list(self.held.values()))
        return ((self.max_length is not None and n > self.max_length)
                or (self.max_bytes is not None and size > self.max_bytes))

    def below_soft_limit(self) -> bool:
        n, size = len(self.ready()) + len(self.held), sum(m.size for m in self.ready() + list(self.held.values()))
        return ((self.max_length is None or n <= int(self.max_length * 0.8))
                and (self.max_bytes is None or size <= int(self.max_bytes * 0.8)))

    def free_credit(self, channel: str) -> int:
        con = self.consumers[channel]
        if con["cancelled"]:
            return 0
        if con["ack"]:
            return con["prefetch"] - sum(1 for k in self.unacked if k[0] == channel and k[1] == "t")
        return con["granted"] - con["delivered"]

    def come_back(self, msg: Msg, dead: list[Msg]) -> None:
        """A consumer's message returns: near the head, or dead-lettered past the limit."""
        msg.count += 1
        if self.limit is not None and msg.count > self.limit:
            dead.append(msg)
        else:
            self.returns.append(msg)

    # -- running commands and checking their effects ------------------------------------------------

    def step(self, command: c.Command, dead: list[Msg] = (), reason: str = "",
             leaving: list[Msg] | None = None) -> tuple:
        """Apply `command`; `dead` must come out dead-lettered for `reason`, and `leaving` are
        messages the reply took from the ready queue (basic.get)."""
        reply, effects = self.run(command)
        self.dropped = False
        gone: list[Msg] = list(leaving or [])
        delivered: list[tuple[int, Msg]] = []
        dead_seen: list[Msg] = []
        for effect in effects:
            if isinstance(effect, Deliver):
                key = (effect.channel, effect.tag)
                assert effect.delivered_before == self.delivered.get(key, 0), effect
                self.delivered[key] = effect.delivered_before + len(effect.messages)
                con = self.consumers[effect.channel]
                for msg_id, index, count in effect.messages:
                    msg = self.msgs[index]
                    assert count == msg.count, (msg.count, effect)
                    assert msg.expiry is None or self.now < msg.expiry, "delivered an expired message"
                    gone.append(msg)
                    delivered.append((msg_id, msg))
                    con["delivered"] += 1
                    if con["ack"]:
                        self.unacked[(effect.channel, effect.tag, msg_id)] = msg
                    else:
                        del self.msgs[index]
            elif isinstance(effect, (DeadLetter, DeadLetterDeliver)):
                at_least_once = isinstance(effect, DeadLetterDeliver)
                assert at_least_once == self.at_least_once, effect
                rows = ([(r, i, n) for _id, r, i, n in effect.messages] if at_least_once
                        else [(effect.reason, i, n) for i, n in effect.messages])
                for (why, index, count), row in zip(rows, effect.messages):
                    msg = self.msgs[index]
                    assert count == msg.count, (msg.count, effect)
                    if why == EXPIRED:
                        assert msg.expiry is not None and msg.expiry <= self.now, (msg.expiry, self.now)
                        gone.append(msg)
                    elif why == MAXLEN:
                        assert self.overflow == "drop-head" and not self.at_least_once
                        gone.append(msg)
                        self.dropped = True
                    else:
                        assert why == reason and msg in dead, (why, reason)
                        dead_seen.append(msg)
                    if at_least_once:
                        self.held[row[0]] = msg
                    else:
                        del self.msgs[index]
        assert sorted(m.index for m in dead_seen) == sorted(m.index for m in dead), "dead-lettered"
        self.releases += [e.upto for e in effects if isinstance(e, Release)]
        self.took(gone, [m for _i, m in sorted(delivered, key=lambda d: d[0])])
        if self.over_limit():  # reject-publish: blocked over the limit, until below 80% of it
            self.blocked = True
        elif self.blocked and self.below_soft_limit():
            self.blocked = False
        return reply, effects

    def took(self, gone: list[Msg], delivered: list[Msg]) -> None:
        """`gone` left the ready queue: they must be the next ones in order, and the deliveries
        (by msg id) must come in that order."""
        order = self.order()
        nxt = order[:len(gone)]
        assert sorted(m.index for m in gone) == sorted(m.index for m in nxt), "left out of order"
        rank = {id(m): i for i, m in enumerate(order)}
        assert [rank[id(m)] for m in delivered] == sorted(rank[id(m)] for m in delivered)
        for msg in nxt:
            if msg in self.returns:
                self.returns.remove(msg)
            else:
                self.level.remove(msg)
                self.turn = 0 if self.turn == TURNS else self.turn + 1

    # -- rules --------------------------------------------------------------------------------------

    @rule(high=st.booleans(), expiration=st.sampled_from([None, "0", "3", "50"]), size=st.integers(0, 5))
    def publish(self, high, expiration, size):
        self.seq += 1
        blocked = self.blocked
        if not blocked:  # the guide's TTL: the lower of queue and message TTL; 0 lives 1 ms
            ttls = [t for t in (self.ttl, None if expiration is None else int(expiration)) if t is not None]
            msg = Msg(self.run.index + 1, high, self.now + max(min(ttls), 1) if ttls else None, size)
            self.last_message = msg.index
            self.msgs[msg.index] = msg
            self.level.append(msg)
        hdr = header(priority=9 if high else None, expiration=expiration)
        reply, _ = self.step(c.Enqueue(self.now, "p", self.seq, "x", "rk", hdr, b"x" * size))
        assert reply is (Reply.REJECTED if blocked else Reply.OK)

    @rule()
    def resend_last_publish(self):
        assert self.run(c.Enqueue(self.now, "p", self.seq, "x", "rk", header(), b"")) == (Reply.DUPLICATE, [])

    @rule(channel=st.sampled_from(CHANNELS), ack=st.booleans(), prefetch=st.sampled_from([1, 2, 3, 0]))
    def consume(self, channel, ack, prefetch):
        if channel in self.consumers:
            return
        self.consumers[channel] = {"ack": ack, "prefetch": prefetch or 2000, "granted": prefetch or 2000,
                                   "delivered": 0, "cancelled": False}
        self.delivered.pop((channel, "t"), None)
        self.step(c.Checkout(self.now, channel, "t", prefetch, ack))

    @rule(channel=st.sampled_from(CHANNELS), credit=st.integers(1, 3))
    def credit(self, channel, credit):
        con = self.consumers.get(channel)
        if con is None or con["ack"] or con["cancelled"]:
            return
        con["granted"] += credit
        self.step(c.Credit(self.now, channel, "t", credit))

    @rule(channel=st.sampled_from(CHANNELS))
    def cancel(self, channel):
        con = self.consumers.get(channel)
        if con is None or con["cancelled"]:
            return
        con["cancelled"] = True
        self.step(c.Cancel(self.now, channel, "t"))
        self.forget_drained(channel)

    def forget_drained(self, channel: str) -> None:
        con = self.consumers.get(channel)
        if con is not None and con["cancelled"] and not any(k[0] == channel and k[1] == "t" for k in self.unacked):
            del self.consumers[channel]

    def pick(self, data) -> tuple[tuple[str, str], list[int]]:
        key = data.draw(st.sampled_from(sorted({k[:2] for k in self.unacked})))
        ids = [k[2] for k in self.unacked if k[:2] == key]
        return key, data.draw(st.permutations(ids).flatmap(lambda p: st.just(p[:max(1, len(p) // 2)]) | st.just(p)))

    @precondition(lambda self: self.unacked)
    @rule(data=st.data())
    def settle(self, data):
        (channel, tag), ids = self.pick(data)
        for msg_id in ids:
            del self.msgs[self.unacked.pop((channel, tag, msg_id)).index]
        self.step(c.Settle(self.now, channel, tag, tuple(ids)))
        self.forget_drained(channel)

    @precondition(lambda self: self.unacked)
    @rule(data=st.data())
    def reject(self, data):
        (channel, tag), ids = self.pick(data)
        dead = []
        for msg_id in ids:
            msg = self.unacked.pop((channel, tag, msg_id))
            msg.count += 1
            dead.append(msg)
        self.step(c.Discard(self.now, channel, tag, tuple(ids)), dead, REJECTED)
        self.forget_drained(channel)

    @precondition(lambda self: self.unacked)
    @rule(data=st.data())
    def requeue(self, data):
        (channel, tag), ids = self.pick(data)
        plan = requeue_plan(self.run.state, channel, tag, tuple(ids))
        if self.limit is not None:
            assert plan is None
            dead: list[Msg] = []
            for msg_id in ids:
                self.come_back(self.unacked.pop((channel, tag, msg_id)), dead)
            self.step(c.Return(self.now, channel, tag, tuple(ids)), dead, DELIVERY_LIMIT)
        else:  # unlimited: each to the back of the normal level, re-appended under a new index
            assert plan == tuple((i, self.unacked[(channel, tag, i)].index) for i in ids)
            for msg_id, index in plan:
                msg = self.unacked.pop((channel, tag, msg_id))
                exchange, routing_key, hdr, body = c.published(self.run.log[index - 1])
                del self.msgs[msg.index]
                msg.index, msg.high = self.run.index + 1, False
                self.last_message = msg.index
                msg.count += 1
                self.msgs[msg.index] = msg
                self.level.append(msg)
                self.step(c.Requeue(self.now, channel, tag, msg_id, index, exchange, routing_key, hdr, body))
        self.forget_drained(channel)

    @rule(channel=st.sampled_from(CHANNELS + (GETTER, "p")))
    def channel_down(self, channel):
        if channel == "p":  # the publisher's channel: its next enqueue starts at seq 1 again
            self.seq = 0
        dead: list[Msg] = []
        for key in sorted((k for k in self.unacked if k[0] == channel), key=lambda k: k[2]):
            self.come_back(self.unacked.pop(key), dead)
        self.consumers.pop(channel, None)
        self.step(c.ChannelDown(self.now, channel), dead, DELIVERY_LIMIT)

    @rule(ack=st.booleans())
    def get(self, ack):
        self.gets += 1
        tag = f"g{self.gets}"
        order = self.order()
        # the expired head goes (observed as dead-lettered), then the first live message is taken
        expected = next((m for m in order if m.expiry is None or self.now < m.expiry), None)
        reply, _ = self.step(c.Get(self.now, GETTER, tag, ack), leaving=[expected] if expected else [])
        if expected is None:
            assert reply is Reply.EMPTY
            return
        left = len(order) - order.index(expected) - 1
        assert reply == GetOk(reply.msg_id, expected.index, expected.count, left), reply
        if ack:
            self.unacked[(GETTER, tag, reply.msg_id)] = expected
        else:
            del self.msgs[expected.index]

    @rule()
    def purge(self):
        ready = self.ready()
        for msg in ready:
            del self.msgs[msg.index]
        self.returns, self.level, self.turn = [], [], 0
        reply, effects = self.step(c.Purge(self.now))
        assert reply == Purged(len(ready)) and all(isinstance(e, Release) for e in effects)

    @rule(delta=st.sampled_from([0, 1, 2, 3, 5, 20, 50]))
    def time_passes(self, delta):
        self.now += delta
        self.step(c.Tick(self.now))

    @precondition(lambda self: self.held)
    @rule(data=st.data())
    def worker_settles(self, data):
        ids = data.draw(st.lists(st.sampled_from(sorted(self.held)), min_size=1, unique=True))
        for msg_id in ids:
            del self.msgs[self.held.pop(msg_id).index]
        self.step(c.DeadLetterSettle(self.now, tuple(ids)))

    @rule()
    def snapshot_and_restore(self):
        machine = self.run.machine
        value = msgpack.unpackb(msgpack.packb(machine.snapshot(self.run.state), use_bin_type=True),
                                raw=False, strict_map_key=False)
        restored = machine.restore(value)
        assert machine.snapshot(restored) == machine.snapshot(self.run.state)
        self.run.state = restored

    # -- invariants ---------------------------------------------------------------------------------

    @invariant()
    def counts_and_live_indexes_match(self):
        stats = self.run.stats
        ready = self.ready()
        assert stats["messages_ready"] == len(ready)
        assert stats["message_bytes_ready"] == sum(m.size for m in ready)
        assert stats["messages_unacknowledged"] == len(self.unacked)
        assert stats["messages_dead_lettered"] == len(self.held)
        assert self.run.live() == sorted(self.msgs)
        assert len(self.msgs) == len(ready) + len(self.unacked) + len(self.held)

    @invariant()
    def the_head_is_not_expired(self):
        """Every command expires the head before it delivers (time moves only with Tick here);
        only a drop-head, which comes after, can leave an expired message at the head."""
        order = self.order()
        assert self.dropped or not order or order[0].expiry is None or self.now < order[0].expiry

    @invariant()
    def releases_are_safe_and_a_drained_queue_releases_its_log(self):
        for upto in self.releases:  # never a message still held, never beyond the log
            assert upto <= self.run.index and all(i > upto for i in self.msgs), upto
            self.released = upto
        self.releases = []
        if not self.msgs:
            assert self.released >= self.last_message

    @invariant()
    def limits_hold(self):
        if self.overflow == "drop-head" and not self.at_least_once:
            assert not self.over_limit()

    @invariant()
    def consumers_within_credit_and_none_starved(self):
        for channel in self.consumers:
            free = self.free_credit(channel)
            assert free >= 0
            if free > 0:
                assert not self.ready(), f"{channel} has credit {free} while messages wait"


QuorumModel.TestCase.settings = settings(max_examples=EXAMPLES, stateful_step_count=40, deadline=None,
                                         suppress_health_check=[HealthCheck.too_slow])
test_quorum_machine_against_model = QuorumModel.TestCase
