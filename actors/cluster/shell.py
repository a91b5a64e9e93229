"""ClusterActor: the node host's shell around the membership core (membership.py), and the metadata
group's membership changes.

It hands the core the node-to-node messages (Hello, Ping, Pong), the local hosts' HostListening
and SubscribeCluster, and a tick every `tick_ms`, and carries out its effects: Send and Log through
the runtime's handlers, SaveClusterFile by replacing `cluster.json` atomically. Before it hands a
peer's message on, it teaches this host's runtime where that peer's node host listens, since the
core may answer at once.

Membership changes of the metadata Raft group are the leader's to make. `change(node, add)` asks
this node's member when it leads, else sends `ChangeMembers` to the cluster actor of the node whose
member leads (the member knows which), and resolves once the configuration entry is committed.
A join (`JoinRequest`, from a new node's `--join`) is admitted that way, then the core makes the
node a member and answers it; `join(seed_endpoint)` is the new node's side. A change the leader
refuses because another is in progress is tried again after `retry_s`.
"""
from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path
from typing import Any, Callable

import structlog

from actors.cluster.membership import Membership
from actors.messages.calls import Reply
from actors.messages.cluster import (
    ChangeMembers, ForgetNode, Hello, HostListening, Introduce, JoinAnswer, JoinRequest, Ping, Pong, SubscribeCluster,
)
from actors.messages.raft import ChangeRefusedReply, Committed, NotLeaderReply
from actors.placement import CLUSTER_NAME, NODE_KIND, QUORUM_KIND, host_of, kind_of, node_of, quorum_kinds
from actors.quorum.names import quorum_hosts
from actors.raft.member import MemberActor
from actors.runtime.address import Address
from actors.runtime.clock import monotonic_ms
from actors.runtime.effects import ActorEffects
from effects import SaveClusterFile
from effects.interpreter import Interpreter
from persist.disk import RealDisk, write_atomic
from raft.roles import LEADER
from wire.errors import INTERNAL_ERROR, AmqpError

log = structlog.get_logger("warren.cluster")

CLUSTER_FILE = "cluster.json"
tick_ms = 100
retry_s = 0.2
attempt_s = 2.0  # a change asked of another node's leader with no answer this long is asked again
SEED_HOST = "seed"  # the directory's name for the node a new node joins through, until it knows its name


def member_id(node: str) -> str:
    """The metadata group's member on `node` (its Raft id is its actor address as text)."""
    return str(Address(host_of(node, NODE_KIND), "metadata"))


class ClusterActor:
    def __init__(self, runtime: Any, membership: Membership, member: MemberActor, data_dir: str) -> None:
        self.runtime = runtime
        self.core = membership
        self.member = member
        self._quorum_mismatch_logged: set[str] = set()
        self.address = runtime.spawn(CLUSTER_NAME, self)
        self._disk = RealDisk(data_dir)
        self._corr = itertools.count(1)
        self._changes: dict[int, tuple[str, str, bool, asyncio.Future]] = {}  # corr -> (node, endpoint, add, future)
        self._asked: dict[int, Callable[[Reply], None]] = {}  # rid -> what to do with a leader's answer
        self._joined: asyncio.Future | None = None
        self._ticked_ms: int | None = None  # the clock the core's ticks have reached, once started
        self._run = Interpreter(ActorEffects(runtime, self.address).handlers()).extend(
            {SaveClusterFile: self._save})

    def start(self) -> None:
        for node, endpoint in self.core.members().items():
            if node != self.core.me:
                self._learn(node, endpoint)
        self._run(self.core.start())
        loop = asyncio.get_running_loop()
        self._ticked_ms = monotonic_ms()

        def tick() -> None:
            loop.call_later(tick_ms / 1000, tick)
            self._catch_up()
        loop.call_later(tick_ms / 1000, tick)

    def _catch_up(self) -> None:
        """Give the core the ticks the clock says are due: a node that was stopped (SIGSTOP) or
        stalled for longer than `down_after_ticks` sees its peers down on waking, as the peers saw
        it, before it hears from them again (so its channels let go of their consumers on the
        peers' queues, which let go of them: RabbitMQ's nodedown on both sides). Done before every
        peer's message too, which may be handled before the timer on waking."""
        if self._ticked_ms is None:
            return
        owed = (monotonic_ms() - self._ticked_ms) // tick_ms
        if owed <= 0:
            return
        self._ticked_ms += owed * tick_ms
        for _ in range(min(owed, self.core.down_after_ticks + 1)):  # enough to see anyone down
            self._run(self.core.tick())

    # -- inputs ------------------------------------------------------------------------------
    def receive(self, sender: Address, msg: Any) -> None:
        kind = type(msg)
        if kind is Hello or kind is Ping or kind is Pong:
            self._catch_up()
        if kind is Hello:
            self._learn(msg.node, msg.endpoint, msg.hosts)
            self._run(self.core.receive(msg))
        elif kind is Ping or kind is Pong:
            self._run(self.core.receive(msg))
        elif kind is HostListening:
            self._run(self.core.host_listening(msg.host, msg.endpoint))
        elif kind is SubscribeCluster:
            self._run(self.core.subscribe(sender))
        elif kind is JoinRequest:
            self._learn(msg.node, msg.endpoint)
            asyncio.ensure_future(self._admit(msg))
        elif kind is JoinAnswer:
            self._answered(msg)
        elif kind is ChangeMembers:
            self._learn(msg.node, msg.endpoint)
            asyncio.ensure_future(self._change_for(sender, msg))
        elif kind is Introduce:
            self._learn(msg.node, msg.endpoint)
        elif kind is ForgetNode:
            self._run(self.core.forget(msg.node))
        elif kind is Reply:
            on_reply = self._asked.pop(msg.rid, None)
            if on_reply is not None:
                on_reply(msg)
        elif kind is Committed:
            self._settle(msg.corr, None)
        elif kind is ChangeRefusedReply:
            self._refused(msg.corr, msg.reason)
        elif kind is NotLeaderReply:
            self._not_leader(msg.corr, msg.leader)
        else:
            log.warning("cluster.unexpected_message", kind=kind.__name__, sender=str(sender))

    def _learn(self, node: str, endpoint: str, hosts: dict[str, str] | None = None) -> None:
        self.runtime.add_hosts({**(hosts or {}), host_of(node, NODE_KIND): endpoint})
        self._check_quorum_hosts(node, hosts or {})

    def _check_quorum_hosts(self, node: str, hosts: dict[str, str]) -> None:
        """Every node must run as many quorum hosts (any node makes any member's address:
        actors/quorum/names.py). A peer with a quorum host this node has no counterpart for
        runs more; the peer finds the reverse in this node's Hello. Logged once per peer."""
        mine = set(quorum_kinds(quorum_hosts()))
        theirs = {kind_of(h) for h in hosts if kind_of(h).startswith(QUORUM_KIND) and node_of(h) == node}
        if theirs - mine and node not in self._quorum_mismatch_logged:
            self._quorum_mismatch_logged.add(node)
            log.error("cluster.quorum_hosts_differ", node=node, theirs=sorted(theirs), ours=quorum_hosts(),
                      action="set quorum_hosts to the same number on every node: quorum queues with members on "
                             "both are unreachable until then")

    def _save(self, e: SaveClusterFile) -> None:
        write_atomic(self._disk, CLUSTER_FILE, e.data)

    def save_members(self) -> None:
        """Write cluster.json as the core knows the members now (a new node that serves)."""
        self._save(SaveClusterFile(self.core.cluster_file()))

    # -- joining -----------------------------------------------------------------------------
    async def join(self, seed_endpoint: str) -> None:
        """This new node asks the cluster of the node listening at `seed_endpoint` to admit it;
        returns once admitted (raises RuntimeError with the reason when refused)."""
        self.runtime.add_hosts({SEED_HOST: seed_endpoint})
        self._joined = asyncio.get_running_loop().create_future()
        request = JoinRequest(self.core.me, self.core.endpoint)
        while not self._joined.done():
            self.runtime.send(Address(SEED_HOST, CLUSTER_NAME), request, sender=self.address)
            try:
                await asyncio.wait_for(asyncio.shield(self._joined), 5.0)
            except TimeoutError:
                log.info("cluster.join_waiting", seed=seed_endpoint)
        answer: JoinAnswer = self._joined.result()
        if not answer.admitted:
            raise RuntimeError(f"the cluster at {seed_endpoint} refused to admit {self.core.me}: {answer.reason}")

    def _answered(self, answer: JoinAnswer) -> None:
        if self._joined is None or self._joined.done():
            return
        if answer.admitted:
            for node, endpoint in answer.members.items():
                if node != self.core.me:
                    self._learn(node, endpoint)
            self._run(self.core.joined(answer))
        self._joined.set_result(answer)

    async def _admit(self, request: JoinRequest) -> None:
        joiner = Address(host_of(request.node, NODE_KIND), CLUSTER_NAME)
        if self.core.admission(request) is None:  # a member already (a retried request)
            self._run(self.core.admitted(request.node, request.endpoint, joiner))
            return
        try:
            await self.change(request.node, add=True, endpoint=request.endpoint)
        except RuntimeError as e:
            self._run(self.core.refused(str(e), joiner))
            return
        self._run(self.core.admitted(request.node, request.endpoint, joiner))

    # -- membership changes of the metadata group --------------------------------------------
    async def change(self, node: str, *, add: bool, endpoint: str = "") -> None:
        """Add `node`'s member (its node host at `endpoint`) to the metadata group, or remove it,
        through the group's leader."""
        future = asyncio.get_running_loop().create_future()
        corr = next(self._corr)
        self._changes[corr] = (node, endpoint, add, future)
        self._try(corr)
        await future

    def _try(self, corr: int) -> None:
        node, endpoint, add, future = self._changes[corr]
        core = self.member.core
        if core.role == LEADER:
            if add:  # the new member hears from this one before it knows the cluster
                self.runtime.send(Address(host_of(node, NODE_KIND), CLUSTER_NAME),
                                  Introduce(self.core.me, self.core.endpoint), sender=self.address)
            change = core.add_member if add else core.remove_member
            self.member.run(change(member_id(node), (str(self.address), corr)))
            self.member.kick()
            return
        if core.leader_id is None:  # an election: ask again shortly
            asyncio.get_running_loop().call_later(retry_s, self._retry, corr)
            return
        leader_cluster = Address(Address.parse(core.leader_id).host, CLUSTER_NAME)
        self.runtime.send(leader_cluster, ChangeMembers(corr, node, endpoint, add), sender=self.address)

        def answered(reply: Reply) -> None:
            if reply.ok:
                self._settle(corr, None)
            else:
                self._settle(corr, reply.error.detail)
        self._asked[corr] = answered
        asyncio.get_running_loop().call_later(attempt_s, self._unanswered, corr)

    def _unanswered(self, corr: int) -> None:
        """The leader asked did not answer (it died, say): ask whoever leads now."""
        if self._asked.pop(corr, None) is not None and corr in self._changes:
            self._try(corr)

    def _retry(self, corr: int) -> None:
        if corr in self._changes:
            self._try(corr)

    async def _change_for(self, sender: Address, msg: ChangeMembers) -> None:
        """Another node's cluster actor asks this one, which it believes leads, to make a change."""
        try:
            await self.change(msg.node, add=msg.add, endpoint=msg.endpoint)
        except RuntimeError as e:
            self.runtime.send(sender, Reply(msg.rid, error=AmqpError(INTERNAL_ERROR, str(e))), sender=self.address)
        else:
            self.runtime.send(sender, Reply(msg.rid), sender=self.address)

    def _settle(self, corr: int, error: str | None) -> None:
        change = self._changes.pop(corr, None)
        if change is None or change[3].done():
            return
        if error is None:
            change[3].set_result(None)
        else:
            change[3].set_exception(RuntimeError(error))

    def _refused(self, corr: int, reason: str) -> None:
        if reason == "no_change":  # already so (a retried change)
            self._settle(corr, None)
        elif corr in self._changes:  # another change is in progress
            asyncio.get_running_loop().call_later(retry_s, self._retry, corr)

    def _not_leader(self, corr: int, leader: str | None) -> None:
        if corr in self._changes:
            asyncio.get_running_loop().call_later(retry_s, self._retry, corr)

    # -- status ------------------------------------------------------------------------------
    def status(self) -> dict:
        core = self.member.core
        leader = node_of(Address.parse(core.leader_id).host) if core.leader_id else None
        voters = sorted(node_of(Address.parse(m).host) for m in core.config.voters)
        return {"node": self.core.me, "members": sorted(self.core.members()), "running": self.core.up(),
                "down": self.core.down(), "metadata_leader": leader, "metadata_voters": voters,
                "metadata_term": core.term, "metadata_commit": core.commit}


def read_members(data_dir: str) -> dict[str, str] | None:
    """The members kept in `cluster.json` (None: the node has never been started)."""
    path = Path(data_dir) / CLUSTER_FILE
    if not path.exists():
        return None
    return dict(json.loads(path.read_bytes())["members"])
