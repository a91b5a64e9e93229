"""MemberActor: one Raft member as a thin shell around `RaftCore` and its `RaftDriver`.

Inputs (actors/messages/raft.py) and what they become:
    Propose(corr, command)              -> core.propose(command, (sender, corr))
    ProposeBatch(proposals)             -> ONE core.propose_batch for the whole client batch
    a peer's message (raft/messages.py) -> core.step(message)
    tick()    from the host's ticker    -> core.tick()
    written() from the WalActor         -> driver.written(upto)
    end of the loop turn                -> core.replicate(): with `append_per_turn` the leader
                                           sends each follower one AppendEntries per turn, from
                                           the WalActor's flush, before its write and sync
Effects go to raft/driver.py, which keeps the ordering rules (persist the hard state before the
sends after it; snapshot only what the WAL has written) for this shell and the simulator alike.
This actor is the driver's ports:
    a peer send    -> runtime.send; a member's id IS its actor address as text
    a reply        -> Committed(corr, reply) to the client that proposed; all the replies of one
                      run to one client leave as ONE CommittedBatch
    NotLeader      -> NotLeaderReply(corr, leader id or None)
    ChangeRefused  -> ChangeRefusedReply(corr, reason)
    VersionSwitched, MachineHalted -> the log (raft.machine_version_switched, raft.machine_halted)
    after_flush / kick -> the WalActor's hooks (a hard state is a record in its next group commit)
Log appends are not effects: the core writes into its MemberLog, and every input ends with a
`kick` so the WalActor flushes once this loop turn; acks and commits wait for its `written`.
"""
from __future__ import annotations

import time
from typing import Any

import structlog

from actors.messages.raft import (
    ChangeRefusedReply, Committed, CommittedBatch, NotLeaderReply, Outcome, Propose, ProposeBatch,
)
from actors.raft.wal import WalActor
from actors.runtime.address import Address
from raft.core import RaftCore
from raft.driver import RaftDriver

log = structlog.get_logger("warren.raft.member")


class MemberActor:
    def __init__(self, runtime: Any, me: Address, core: RaftCore, wal: WalActor) -> None:
        self.runtime = runtime
        self.me = me
        self.core = core
        self.wal = wal
        self._peers: dict[str, Address] = {}
        self._replies: dict[str, list[Outcome]] = {}  # this run's client replies, per client
        self._turn_scheduled = False
        self._per_turn = core.settings.append_per_turn
        self.recovered = core.log.last_index_term()[0]  # what the WAL/segments held at start
        self.leader_since: float | None = None  # time.monotonic() (system-wide) of taking over
        wal.register(core.id, self.written, core.log.written_index())
        self.driver = RaftDriver(core, self)

    # -- inputs --------------------------------------------------------------------------------
    def receive(self, sender: Address, msg: Any) -> None:
        kind = type(msg)
        if kind is ProposeBatch:
            client = str(sender)
            self.run(self.core.propose_batch([(p.command, (client, p.corr)) for p in msg.proposals]))
        elif kind is Propose:
            self.run(self.core.propose(msg.command, (str(sender), msg.corr)))
        else:
            self.run(self.core.step(msg))
        self._end_turn_soon()

    def tick(self) -> None:
        self.run(self.core.tick())
        self._end_turn_soon()

    def written(self, upto: int) -> None:
        self.driver.written(upto)
        self._flush_replies()
        self._end_turn_soon()

    def _end_turn_soon(self) -> None:
        if self._per_turn and not self._turn_scheduled:
            self._turn_scheduled = True
            self.wal.at_turn_end(self._end_turn)
        else:
            self.wal.kick()

    def _end_turn(self) -> None:
        self._turn_scheduled = False
        self.run(self.core.replicate())

    # -- effects: this actor is the driver's ports ------------------------------------------
    def run(self, effects: list) -> None:
        self.driver.run(effects)
        self._flush_replies()

    def _flush_replies(self) -> None:
        if not self._replies:
            return
        replies, self._replies = self._replies, {}
        send = self.runtime.send
        for client, batch in replies.items():
            to = Address.parse(client)
            if len(batch) == 1:
                send(to, Committed(*batch[0]), sender=self.me)
            else:
                send(to, CommittedBatch(batch), sender=self.me)

    def send(self, to: str, msg: Any) -> None:
        self.runtime.send(self._peer(to), msg, sender=self.me)

    def reply(self, corr: tuple[str, int], reply: Any) -> None:
        client, client_corr = corr
        self._replies.setdefault(client, []).append(Outcome(client_corr, reply))

    def not_leader(self, corr: tuple[str, int], leader: str | None) -> None:
        client, client_corr = corr
        self.runtime.send(Address.parse(client), NotLeaderReply(client_corr, leader), sender=self.me)

    def change_refused(self, corr: tuple[str, int], reason: str) -> None:
        client, client_corr = corr
        self.runtime.send(Address.parse(client), ChangeRefusedReply(client_corr, reason), sender=self.me)

    def leader_changed(self, leader: str | None) -> None:
        if leader == self.core.id:
            self.leader_since = time.monotonic()
        log.info("raft.leader_changed", member=self.core.id, leader=leader, term=self.core.term)

    def machine_effect(self, effect: Any) -> None:
        """The test machine returns none; a machine with effects has a member shell of its own."""

    def version_switched(self, index: int, old: int, new: int) -> None:
        log.info("raft.machine_version_switched", member=self.core.id, index=index, old=old, new=new)

    def machine_halted(self, index: int, reason: str) -> None:
        log.error("raft.machine_halted", member=self.core.id, index=index, reason=reason,
                  action="this member applies nothing more; upgrade this node and restart it")

    def after_flush(self, callback: Any) -> None:
        self.wal.after_flush(callback)

    def kick(self) -> None:
        self.wal.kick()

    def _peer(self, member: str) -> Address:
        address = self._peers.get(member)
        if address is None:
            address = self._peers[member] = Address.parse(member)
        return address

    def status(self) -> dict:
        core = self.core
        last, _ = core.log.last_index_term()
        return {"id": core.id, "role": core.role, "term": core.term, "leader": core.leader_id,
                "commit": core.commit, "applied": core.applied, "last": last,
                "written": core.log.written_index(), "recovered": self.recovered,
                "leader_since": self.leader_since, "machine_version": core.machine_version, "halted": core.halted,
                "state": core.machine.snapshot(core.state)}
