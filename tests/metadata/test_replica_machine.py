"""Authoritative registry vs a replica fed only change records (encoded as they travel between
hosts inside MetadataChanged): after every command both route every probe identically and hold the
same snapshot."""
import random

import msgpack
from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from actors.messages import ext_hook, pack_default
from actors.messages.node import MetadataChanged
from metadata import Registry

VH = "/"
QUEUES = st.sampled_from(["q1", "q2", "q3"])
EXCHANGES = st.sampled_from(["e1", "e2", "e3", "amq.topic", "amq.headers"])
TYPES = st.sampled_from(["direct", "fanout", "topic", "headers"])
KEYS = st.sampled_from(["", "a", "a.b", "b.a", "a.#", "*.b", "#"])
OWNERS = st.sampled_from([None, "c1", "c2"])
ARGS = st.sampled_from([None, {"x-match": "any", "h": 1}, {"h": 1}])
PROBES = [(x, k, h) for x in ["e1", "e2", "e3", "amq.topic", "amq.headers", ""]
          for k in ["", "a", "a.b", "q1", "q2"] for h in [None, {"h": 1}]]


class ReplicaMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.auth = Registry(random.Random(1))
        self.replica = Registry()

    def ship(self, result):
        wire = msgpack.packb(MetadataChanged(result[1]), default=pack_default, use_bin_type=True)
        shipped = msgpack.unpackb(wire, raw=False, use_list=False, ext_hook=ext_hook)
        assert shipped.changes == tuple(result[1])
        self.replica.apply(shipped.changes)

    @rule(name=EXCHANGES, type_=TYPES, auto_delete=st.booleans(), ae=st.sampled_from([None, "e1", "e2"]))
    def declare_exchange(self, name, type_, auto_delete, ae):
        args = {"alternate-exchange": ae} if ae else {}
        self.ship(self.auth.declare_exchange(VH, name, type_, auto_delete=auto_delete, arguments=args))

    @rule(name=EXCHANGES, if_unused=st.booleans())
    def delete_exchange(self, name, if_unused):
        self.ship(self.auth.delete_exchange(VH, name, if_unused=if_unused))

    @rule(name=QUEUES, exclusive=st.booleans(), owner=OWNERS)
    def declare_queue(self, name, exclusive, owner):
        self.ship(self.auth.declare_queue(VH, name, exclusive=exclusive, owner=owner))

    @rule(name=QUEUES, owner=OWNERS)
    def delete_queue(self, name, owner):
        self.ship(self.auth.delete_queue(VH, name, owner))

    @rule(q=QUEUES, x=EXCHANGES, key=KEYS, args=ARGS, owner=OWNERS, bind=st.booleans())
    def queue_binding(self, q, x, key, args, owner, bind):
        op = self.auth.bind_queue if bind else self.auth.unbind_queue
        self.ship(op(VH, q, x, key, args, owner))

    @rule(d=EXCHANGES, s=EXCHANGES, key=KEYS, bind=st.booleans())
    def exchange_binding(self, d, s, key, bind):
        op = self.auth.bind_exchange if bind else self.auth.unbind_exchange
        self.ship(op(VH, d, s, key, None))

    @rule(owner=st.sampled_from(["c1", "c2"]))
    def connection_closed(self, owner):
        self.ship(self.auth.connection_closed(owner))

    @invariant()
    def replica_routes_identically(self):
        for x, k, h in PROBES:
            assert self.replica.route(VH, x, k, h) == self.auth.route(VH, x, k, h), (x, k, h)
        assert self.replica.snapshot() == self.auth.snapshot()

    @invariant()
    def bindings_name_existing_things(self):
        queues = {q.name for q in self.auth.queues(VH)}
        exchanges = {x.name for x in self.auth.exchanges(VH)}
        for b in self.auth.bindings(VH):
            assert b.source in exchanges
            assert b.destination in (queues if b.destination_kind == "queue" else exchanges)

    @invariant()
    def late_joiner_matches(self):
        late = Registry()
        late.apply(self.auth.snapshot())
        assert late.snapshot() == self.auth.snapshot()


ReplicaMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
TestReplicaMachine = ReplicaMachine.TestCase
