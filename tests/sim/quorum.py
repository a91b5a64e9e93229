"""The simulator running a quorum queue: the real RaftCores, QuorumMachine, member front, release
cursor and WAL on every node, and channels that publish and consume through the real QuorumClient.

One seed drives everything, as in simulator.py (which this extends: the same nodes, network, disk
faults, crashes inside WAL flushes, partitions and leadership transfers). Each node runs what the
member shell runs (actors/quorum/member.py): every input ends with the front's end-of-run work,
its proposals as one batch, the release cursor's snapshot, and the front's output. Channels live
outside the nodes and never crash; their links to members are reliable and FIFO while the member
is up (ZeroMQ over TCP between live processes), and whatever is in flight to or from a node that
crashes is lost. Publishers publish in confirm mode; consumers ack after a random delay and
sometimes nack with requeue.

Checks (QuorumChecker), besides the Raft checker's:
- at least once: every message a publisher got a confirm for reaches a consumer by the end;
- once unflagged, and never again once acked while the leadership holds: a message reaches
  consumers not flagged redelivered once at most (twice: it was enqueued twice; its first delivery
  may arrive after a redelivery to another consumer), and one a consumer acked reaches no
  consumer again unless some member took the lead since it was first delivered (a delivery lost
  or in flight with a leader that was replaced is given back: at least once);
- none after its ack: once a member has applied the settlement of a message, no member delivers it
  again (checked on every member's applies, leader or not);
- FIFO per publisher: the first deliveries (not redelivered) a consumer gets from one publisher come
  in publishing order;
- no loss across crashes inside WAL flushes: the two above, over the crashes the options arm.
The liveness phase heals the network, restarts every node, stops publishing and waits until every
publisher's messages are confirmed and every confirmed message was delivered.
"""
from __future__ import annotations

import hashlib
import heapq
import random
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import msgpack

from actors.messages.channel_queue import (Confirm, Consume, Deliver, Publish, Published, Rejected,
                                           Settle)
from actors.quorum import commands as c
from actors.quorum import effects as qe
from actors.quorum.client import QuorumClient
from actors.quorum.config import queue_config
from actors.quorum.front import QueueFront, RaftView
from actors.quorum.machine import QuorumMachine, holders
from actors.quorum.release import QueueView, ReleaseCursor
from effects import Send, StartTimer
from raft import RaftCore
from raft.driver import RaftDriver
from raft.roles import LEADER
from tests.sim.simdisk import SimCrash
from tests.sim.simulator import SETTINGS, Node, SimOptions, SimPorts, Simulation
from wire.properties import BasicProperties, encode_content_header

MS_PER_TICK = 10
# the release cursor snapshots (snapshot_interval 0); batches hold a few messages each
QUEUE_SETTINGS = replace(SETTINGS, snapshot_interval=0, max_batch_entries=32, max_batch_bytes=4096)


@dataclass
class QuorumOptions:
    publishers: int = 2
    consumers: int = 2
    publish_rate: float = 0.1   # per publisher and tick, 1-4 messages each time
    prefetch: tuple[int, int] = (5, 30)
    ack_delay_ticks: int = 3
    requeue_rate: float = 0.05
    retry_ticks: int = 40
    max_link_ticks: int = 3
    release_interval_entries: int = 20  # small, so stashed snapshots are written and installed
    arguments: dict = field(default_factory=dict)


class ObservedMachine(QuorumMachine):
    """The real machine, reporting each member's applies to the checkers."""

    def __init__(self, sim: QuorumSimulation, node_id: str, config: Any) -> None:
        super().__init__(config)
        self.sim, self.node_id = sim, node_id

    def apply(self, meta: Any, command: bytes, state: Any) -> tuple:
        cmd = c.decode(command)
        settling = _settling(state, cmd)
        state, reply, effects = super().apply(meta, command, state)
        digest = hashlib.blake2b(msgpack.packb(state.to_value()), digest_size=8).hexdigest()
        self.sim.checker.applied(self.sim.now, self.node_id, meta.index, meta.term, b"u" + command, digest)
        self.sim.qchecker.applied(self.sim.now, self.node_id, meta.index, cmd, settling, state, effects)
        return state, reply, effects


def _settling(state: Any, cmd: Any) -> list[tuple[Any, int, int]]:
    """(consumer, msg id, raft index) of what a Settle or Discard names, before it applies."""
    if type(cmd) not in (c.Settle, c.Discard):
        return []
    return [(con, msg_id, con.checked[msg_id][0])
            for _key, con, ids in holders(state, cmd.channel, cmd.tag, cmd.msg_ids)
            for msg_id in ids if msg_id in con.checked]


class QuorumChecker:
    def __init__(self) -> None:
        self.bodies: dict[int, bytes] = {}  # raft index of an Enqueue/Requeue -> its body
        # message (its raft index) -> the index its settlement was applied at: the log is the same
        # on every member and every restart re-applies it, so a delivery of that message from a
        # later index is a delivery after its ack, on whichever member
        self.settled_at: dict[int, int] = {}
        self.confirmed: set[bytes] = set()
        self.delivered: dict[bytes, int] = {}  # body -> deliveries a consumer received
        self.acked: set[bytes] = set()  # bodies a consumer acked
        self.fresh: set[bytes] = set()  # bodies a consumer got not flagged redelivered
        self.leaderships = 0  # times a member took the lead
        self.first_delivered: dict[bytes, int] = {}  # body -> leaderships when first delivered
        self.firsts: dict[tuple[str, str], int] = {}  # (consumer, publisher) -> last first-delivery seq
        self.violations: list[str] = []

    def violation(self, now: int, text: str) -> None:
        self.violations.append(f"tick {now}: {text}")

    def applied(self, now: int, node: str, index: int, cmd: Any, settling: list, state: Any, effects: list) -> None:
        kind = type(cmd)
        if kind is c.Enqueue or kind is c.Requeue:
            self.bodies[index] = cmd.body
        settled_at = self.settled_at
        for con, msg_id, at in settling:
            if msg_id not in con.checked:
                settled_at.setdefault(at, index)
        for effect in effects:
            if type(effect) is qe.Deliver:
                for _msg_id, at, _count in effect.messages:
                    self.first_delivered.setdefault(self.bodies[at], self.leaderships)
                    if settled_at.get(at, index) < index:
                        self.violation(now, f"{node} delivers {self.bodies[at]!r} at {index}, after its "
                                            f"ack applied at {settled_at[at]}")

    def received(self, now: int, consumer: str, body: bytes, redelivered: bool) -> None:
        if body in self.acked and self.first_delivered[body] == self.leaderships:
            self.violation(now, f"{consumer} got {body!r} again after a consumer acked it, same leadership")
        self.delivered[body] = self.delivered.get(body, 0) + 1
        if redelivered:
            return
        if body in self.fresh:
            self.violation(now, f"{consumer} got {body!r} unflagged a second time (enqueued twice?)")
        self.fresh.add(body)
        publisher, seq = body.decode().split(":")
        last = self.firsts.get((consumer, publisher), 0)
        if int(seq) <= last:
            self.violation(now, f"{consumer} got {body!r} after {publisher}:{last} (FIFO per publisher)")
        self.firsts[(consumer, publisher)] = int(seq)

    def final(self, now: int) -> None:
        lost = sorted(self.confirmed - set(self.delivered))
        if lost:
            self.violation(now, f"{len(lost)} confirmed message(s) never delivered, e.g. {lost[:3]}")


class Channel:
    """A channel stand-in: one QuorumClient, a publisher or a consumer."""

    def __init__(self, sim: QuorumSimulation, cid: str, consumer: bool) -> None:
        self.sim, self.id, self.consumer = sim, cid, consumer
        self.client = sim.client_class(sim.member_ids, retry_ticks=sim.qoptions.retry_ticks)
        self.next_seq = 1
        self.sent: dict[int, bytes] = {}  # confirm seq -> body
        self.pending_acks: list[tuple[int, int, bool, bytes]] = []  # (due tick, msg id, requeue, body)
        if consumer:
            low, high = sim.qoptions.prefetch
            self.client.send(Consume(1, "t", True, sim.rng.randint(low, high), False, {}))

    def act(self) -> None:
        sim, o = self.sim, self.sim.qoptions
        if not self.consumer and sim.publishing and sim.rng.random() < o.publish_rate:
            batch = []
            for _ in range(sim.rng.randint(1, 4)):
                body = b"%s:%d" % (self.id.encode(), self.next_seq)
                self.sent[self.next_seq] = body
                batch.append(Published(self.next_seq, "", "q", HEADER, body))
                self.next_seq += 1
            self.client.send(Publish(batch))
        due = [p for p in self.pending_acks if p[0] <= sim.now]
        if due:
            self.pending_acks = [p for p in self.pending_acks if p[0] > sim.now]
            acked = [msg_id for _at, msg_id, requeue, _body in due if not requeue]
            requeued = [msg_id for _at, msg_id, requeue, _body in due if requeue]
            sim.qchecker.acked.update(body for _at, _msg_id, requeue, body in due if not requeue)
            self.client.send(Settle(acked, requeued, []))
        self.client.tick()
        self.flush()

    def receive(self, sender: str, msg: Any) -> None:
        self.client.receive(sender, msg)
        self.flush()

    def flush(self) -> None:
        out, up = self.client.take()
        for send in out:
            self.sim.to_member(self.id, send.to, send.msg)
        sim = self.sim
        for msg in up:
            kind = type(msg)
            if kind is Confirm:
                for seq in [s for s in self.sent if s <= msg.upto]:
                    sim.qchecker.confirmed.add(self.sent.pop(seq))
            elif kind is Rejected:
                for seq in msg.seqs:
                    self.sent.pop(seq, None)
            elif kind is Deliver:
                for msg_id, redelivered, _x, _rk, _h, body in msg.messages:
                    sim.qchecker.received(sim.now, self.id, body, redelivered)
                    requeue = sim.publishing and sim.rng.random() < sim.qoptions.requeue_rate
                    delay = sim.rng.randint(0, sim.qoptions.ack_delay_ticks)
                    self.pending_acks.append((sim.now + delay, msg_id, requeue, body))


HEADER = encode_content_header(60, 0, BasicProperties(delivery_mode=2))


class QuorumSimulation(Simulation):
    base_settings = QUEUE_SETTINGS

    def __init__(self, seed: int, options: SimOptions = SimOptions(),
                 qoptions: QuorumOptions = QuorumOptions(), *, front_class: type[QueueFront] = QueueFront,
                 client_class: type[QuorumClient] = QuorumClient, **kwargs: Any) -> None:
        self.qoptions = qoptions
        self.front_class = front_class
        self.client_class = client_class
        self.qchecker = QuorumChecker()
        self.member_ids = [f"n{i + 1}" for i in range(options.nodes)]
        self.links: list[tuple[int, int, str, str, Any]] = []  # (due, seq, src, dst, msg) heap
        self.link_last: dict[tuple[str, str], int] = {}
        self.link_seq = 0
        self.timers: list[tuple[int, int, str, int, str]] = []  # (due, seq, node, incarnation, name)
        self.publishing = True
        self.fronts: dict[str, QueueFront] = {}
        self.releases: dict[str, ReleaseCursor] = {}
        self.incarnation: dict[str, int] = {}
        self.channels: dict[str, Channel] = {}
        super().__init__(seed, options, **kwargs)
        self.channels = {f"p{i}": Channel(self, f"p{i}", False) for i in range(qoptions.publishers)}
        self.channels.update({f"c{i}": Channel(self, f"c{i}", True) for i in range(qoptions.consumers)})

    # -- nodes ---------------------------------------------------------------------------------
    def build(self, node: Node) -> None:
        """The queue's member over the recovered log: core, front, release cursor, driver."""
        config = queue_config("q", "/", self.qoptions.arguments, created_ms=0)
        machine = ObservedMachine(self, node.id, config)
        node.core = RaftCore(node.id, self.config, node.log, machine, random.Random(self.rng.getrandbits(32)),
                             self.settings)
        self.fronts[node.id] = self.front_class(RaftView(node.core), machine, self.qoptions.arguments)
        self.releases[node.id] = ReleaseCursor(node.core.snapshot_index, self.qoptions.release_interval_entries,
                                               drained_min_entries=5)
        self.incarnation[node.id] = self.incarnation.get(node.id, 0) + 1
        node.driver = RaftDriver(node.core, QueuePorts(self, node), hard_state_in_wal=node.storage.hard_state_in_wal,
                                 defer_snapshots=self.options.defer_snapshots)

    def after_run(self, node: Node) -> None:
        """The member shell's end of every input, then the simulator's bookkeeping."""
        try:
            self.end_input(node)
        except SimCrash:  # an armed sync point reached by a snapshot write
            self.crash(node)
            return
        super().after_run(node)

    def end_input(self, node: Node) -> None:
        core = node.core
        if core is not None:
            front = self.fronts[node.id]
            front.now_ms = self.now * MS_PER_TICK
            front.after_run()
            proposals = front.take_proposals()
            if proposals:
                node.driver.run(core.propose_batch(proposals))
            release = self.releases[node.id]
            if core.snapshot_index > release.snapshot_index:
                release.restored(core.snapshot_index)
            if not core.snapshot_pending:
                snapshot = release.after_apply(self.view(core), core.capture_snapshot)
                if snapshot is not None:
                    node.driver.run(core.write_snapshot(*snapshot))
            for effect in front.flush():
                if type(effect) is Send:
                    self.to_channel(node.id, effect.to, effect.msg)
                elif type(effect) is StartTimer:
                    self.link_seq += 1
                    due = self.now + max(1, effect.ticks // MS_PER_TICK)
                    heapq.heappush(self.timers, (due, self.link_seq, node.id, self.incarnation[node.id], effect.name))
            if self.settings.append_per_turn and node.core is not None:
                node.driver.run(node.core.replicate())

    @staticmethod
    def view(core: RaftCore) -> QueueView:
        state = core.state
        return QueueView(core.applied, not state.ready.count and not state.tracked, state.released_upto,
                         state.ready.count + state.unacked + len(state.dlx))

    def drive(self, node: Node, call: Callable[[RaftCore], list]) -> None:
        if node.core is not None:
            self.fronts[node.id].now_ms = self.now * MS_PER_TICK
        super().drive(node, call)

    # -- links between channels and members ------------------------------------------------------
    def _link(self, src: str, dst: str, msg: Any) -> None:
        self.link_seq += 1
        due = max(self.now + self.rng.randint(1, self.qoptions.max_link_ticks), self.link_last.get((src, dst), 0))
        self.link_last[(src, dst)] = due
        heapq.heappush(self.links, (due, self.link_seq, src, dst, msg))

    def to_member(self, channel: str, member: str, msg: Any) -> None:
        if self.nodes[member].core is not None:
            self._link(channel, member, msg)

    def to_channel(self, member: str, channel: str, msg: Any) -> None:
        self._link(member, channel, msg)

    def deliver_links(self) -> None:
        while self.links and self.links[0][0] <= self.now:
            _due, _seq, src, dst, msg = heapq.heappop(self.links)
            if dst in self.channels:
                self.channels[dst].receive(src, msg)
            else:
                node = self.nodes[dst]
                if node.core is not None:
                    self.fronts[dst].now_ms = self.now * MS_PER_TICK
                    self.fronts[dst].handle(src, msg)
                    self.drive(node, lambda core: [])

    def fire_timers(self) -> None:
        while self.timers and self.timers[0][0] <= self.now:
            _due, _seq, node_id, incarnation, name = heapq.heappop(self.timers)
            node = self.nodes[node_id]
            if node.core is not None and self.incarnation[node_id] == incarnation:
                self.fronts[node_id].timer(name)
                self.drive(node, lambda core: [])

    def crash(self, node: Node) -> None:
        # what the node had in flight to channels dies with it
        self.links = [x for x in self.links if x[2] != node.id]
        heapq.heapify(self.links)
        super().crash(node)

    # -- time ----------------------------------------------------------------------------------
    def tick(self, faults: bool) -> None:
        super().tick(faults)
        self.deliver_links()
        self.fire_timers()
        for node in self.live():
            front = self.fronts[node.id]
            front.now_ms = self.now * MS_PER_TICK
            front.probe()  # as the member shell's tick: channels holding deliveries hear who leads
            if front.pending():
                self.drive(node, lambda core: [])
            core, release = node.core, self.releases[node.id]
            if core is None:
                continue
            if not core.snapshot_pending:
                snapshot = release.on_tick(self.view(core), core.capture_snapshot)
                if snapshot is not None:
                    self.drive(node, lambda core: core.write_snapshot(*snapshot))
        for channel in self.channels.values():
            channel.act()

    def propose(self) -> int | None:
        return None  # the channels publish

    def run(self) -> list[str]:
        violations = super().run()
        return violations + self.qchecker.violations

    def liveness(self) -> None:
        self.net.heal()
        self.net.faults = replace(self.net.faults, loss=0.0, duplicate=0.0)
        self.publishing = False
        for node in self.nodes.values():
            if node.core is None:
                self.start(node)
        start = self.now
        while self.now - start < self.options.liveness_ticks:
            for node in self.nodes.values():
                if node.core is None:
                    self.start(node)
            self.tick(faults=False)
            unconfirmed = any(ch.client.unconfirmed for ch in self.channels.values())
            if not unconfirmed and self.qchecker.confirmed <= set(self.qchecker.delivered):
                self.qchecker.final(self.now)
                return
        self.qchecker.final(self.now)
        self.checker.violation(self.now, f"no progress within {self.options.liveness_ticks} ticks after healing "
                                         f"(unconfirmed: {sum(len(ch.client.unconfirmed) for ch in self.channels.values())})")

    def stats(self) -> dict[str, int]:
        switches = sum(ch.client.switches for ch in self.channels.values())
        snapshots = max((n.core.snapshot_index for n in self.nodes.values() if n.core is not None), default=0)
        redelivered = sum(n - 1 for n in self.qchecker.delivered.values() if n > 1)
        return {"confirmed": len(self.qchecker.confirmed), "switches": switches, "crashes": self.crashes,
                "snapshot_index": snapshots, "redelivered": redelivered,
                "duplicates_dropped": sum(ch.client.duplicates for ch in self.channels.values())}


class QueuePorts(SimPorts):
    """A member's ports in the simulation: the Raft network, and its front for the rest."""

    def reply(self, corr: object, reply: object) -> None:
        self.sim.fronts[self.node.id].committed(corr, reply)

    def not_leader(self, corr: object, leader: str | None) -> None:
        self.sim.fronts[self.node.id].not_leader(corr, leader)

    def leader_changed(self, leader: str | None) -> None:
        if leader == self.node.id:
            self.sim.qchecker.leaderships += 1
        self.sim.fronts[self.node.id].leader_changed(leader)

    def machine_effect(self, effect: object) -> None:
        self.sim.fronts[self.node.id].machine_effect(effect)


def leaders_now(sim: QuorumSimulation) -> list[str]:
    return [n.id for n in sim.live() if n.core.role == LEADER]
