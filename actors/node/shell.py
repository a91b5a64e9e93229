"""The node actor: the thin shell around NodeCore (core.py), which makes every decision.

It hands the core what arrives in its mailbox, the admin asks of warrenctl (through the node host's
control function, actors/hosts.py), every entry the node's metadata member applies
(`applied`, from metadata_machine.py) and the cluster's view of which nodes are up, and carries out
the core's effects with one Interpreter: Send, timers and Log through the runtime's common
handlers, AnswerAdmin by resolving the future the control function awaits, and ProposeCommand by
proposing to the metadata group.

Proposing. The command is packed with this node's name and the core's key (metadata_machine.py)
and sent as a `Propose` to the member this node believes leads the group: its own member first. A
`NotLeaderReply` names the leader (the proposal goes there) or none while an election runs (it is
tried again after `retry_s`); `Committed` ends the attempt, since the core waits for this node's
own member to apply the entry, not for the leader's answer. One unanswered for `attempt_s` (its
leader died) goes to this node's member again. A proposal may so be applied twice: the core acts
on the first application of its key, and every registry command applied a second time changes
nothing or is refused harmlessly. A proposal is given up after the core's time-out: the core has
answered it by then. Proposals wait for a turn of the event loop
before they leave (`call_soon`), because `applied` runs inside the member's apply loop and a
core that proposes must not re-enter its Raft core.
"""
from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections.abc import Hashable
from typing import Any

from actors.messages.raft import ChangeRefusedReply, Committed, CommittedBatch, NotLeaderReply, Propose
from actors.node import metadata_machine
from actors.node.core import NodeCore, Startup
from actors.node.listings import listing
from actors.node.quorum_membership import Reconciliation
from actors.node.quorum_queues import Declaring
from actors.placement import kind_of
from actors.quorum.names import quorum_process_kinds
from actors.runtime.address import Address
from actors.runtime.effects import ActorEffects
from effects import AnswerAdmin, ProposeCommand
from effects.interpreter import Interpreter
from metadata.commands import Command
from metadata.registry import Registry

retry_s = 0.05  # a proposal that met an election is tried again this much later
attempt_s = 1.0  # a proposal with no answer this long (its leader died, say) is sent again


class NodeActor:
    def __init__(self, runtime: Any, name: str, registry: Registry, node: str, queue_kinds: tuple[str, ...], *,
                 timeout_ms: int, member: Address, quorum_cluster_size: int,
                 reconciliation: Reconciliation = Reconciliation(), declaring: Declaring = Declaring()) -> None:
        self.runtime = runtime
        self.address = Address(runtime.host, name)
        self.node = node
        self.member = member  # this node's metadata member
        self.leader: Address = member  # where proposals go first
        self.core = NodeCore(registry, node, queue_kinds, salt=os.urandom, timeout_ms=timeout_ms,
                             incarnation=int.from_bytes(os.urandom(6), "big"),
                             now_ms=lambda: time.time_ns() // 1_000_000, quorum_cluster_size=quorum_cluster_size,
                             reconciliation=reconciliation, declaring=declaring)
        self._asks: dict[int, asyncio.Future] = {}
        self._ask_ids = itertools.count(1)
        self._corr = itertools.count(1)
        self._in_flight: dict[int, tuple[bytes, float, float]] = {}  # corr -> (entry, sent at, give up at)
        self._outgoing: list[bytes] = []
        self.serving = asyncio.Event()  # set once the core serves (its start-up operations are applied)
        effects = ActorEffects(runtime, self.address, on_timer=lambda name: self._run(self.core.timer(name)))
        self._interpret = Interpreter(effects.handlers()).extend({AnswerAdmin: self._answer,
                                                                  ProposeCommand: self._propose})

    def _run(self, effects: list) -> None:
        self._interpret(effects)
        if self.core.serving and not self.serving.is_set():
            self.serving.set()

    def start(self, startup: Startup) -> None:
        self._run(self.core.start(startup))

    def receive(self, sender: Address, msg: Any) -> None:
        kind = type(msg)
        if kind is NotLeaderReply:
            self._redirect(msg.corr, msg.leader)
        elif kind is Committed:
            self._in_flight.pop(msg.corr, None)
        elif kind is CommittedBatch:
            for outcome in msg.outcomes:
                self._in_flight.pop(outcome.corr, None)
        elif kind is ChangeRefusedReply:
            self._in_flight.pop(msg.corr, None)
        else:
            self._run(self.core.receive(sender, msg))

    def applied(self, origin: str, key: Hashable, cmd: Command, result: Any, changes: list) -> None:
        """The metadata member applied an entry (called from inside its apply loop)."""
        self._run(self.core.applied(origin, key, cmd, result, changes))

    def restored(self) -> None:
        """The member installed a snapshot: every subscriber gets the whole state again."""
        self._run(self.core.restored())

    def nodes(self, up: list[str], down: list[str]) -> None:
        self._run(self.core.nodes(up, down))

    async def admin(self, op: str, args: dict) -> Any:
        """Run admin `op` (one of admin.ADMIN_OPS) in turn with the channels' requests."""
        ask = next(self._ask_ids)
        answer = self._asks[ask] = asyncio.get_running_loop().create_future()
        self._run(self.core.admin(ask, op, args))
        return await answer

    def listing(self, op: str, args: dict) -> Any:
        """Answers that need no turn in the serial order (one of listings.LISTING_OPS)."""
        return listing(self.core.registry, op, args, queue_hosts=self.core.queue_kinds,
                       connection_hosts=[kind_of(sub.host) for sub in self.core.connection_hosts()], pid=os.getpid(),
                       quorum_hosts=quorum_process_kinds())

    # -- proposing ---------------------------------------------------------------------------
    def _propose(self, e: ProposeCommand) -> None:
        entry = metadata_machine.encode(self.node, e.key, e.command)
        if not self._outgoing:
            asyncio.get_running_loop().call_soon(self._send_proposals)
        self._outgoing.append(entry)

    def _send_proposals(self) -> None:
        now = time.monotonic()
        give_up = now + self.core.timeout_ms / 1000
        outgoing, self._outgoing = self._outgoing, []
        if not self._in_flight:
            asyncio.get_running_loop().call_later(attempt_s, self._resend_stale)
        for entry in outgoing:
            corr = next(self._corr)
            self._in_flight[corr] = (entry, now, give_up)
            self.runtime.send(self.leader, Propose(corr, entry), sender=self.address)

    def _send(self, corr: int, to: Address) -> None:
        attempt = self._in_flight.get(corr)
        if attempt is None:
            return
        now = time.monotonic()
        if now > attempt[2]:
            del self._in_flight[corr]
            return
        self._in_flight[corr] = (attempt[0], now, attempt[2])
        self.runtime.send(to, Propose(corr, attempt[0]), sender=self.address)

    def _redirect(self, corr: int, leader: str | None) -> None:
        if leader is not None:
            self.leader = Address.parse(leader)
            self._send(corr, self.leader)
        else:
            self.leader = self.member
            asyncio.get_running_loop().call_later(retry_s, self._send, corr, self.member)

    def _resend_stale(self) -> None:
        stale = time.monotonic() - attempt_s
        for corr, (_, sent_at, _) in list(self._in_flight.items()):
            if sent_at < stale:
                self.leader = self.member
                self._send(corr, self.member)
        if self._in_flight:
            asyncio.get_running_loop().call_later(attempt_s, self._resend_stale)

    def _answer(self, e: AnswerAdmin) -> None:
        answer = self._asks.pop(e.ask, None)
        if answer is not None and not answer.done():
            answer.set_result(e.value)
