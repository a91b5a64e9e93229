"""MemberActor: one Raft member as a thin shell around `RaftCore`.

Inputs and what they become:
    "cmd"   body (corr, command)        -> core.propose(command, (sender, corr))
    "cmds"  body ((corr, command), ...) -> the same for each, in order (a client's batch)
    "raft.*" body (message fields)      -> core.step(message)     (peers, see codec.py)
    tick()    from the host's ticker    -> core.tick()
    written() from the WalActor         -> core.written(upto)
Effects are carried out in list order (persist/raft/effects.py):
    Send              -> runtime.send to the peer; a member's id IS its actor address as text
    PersistHardState  -> log.save_hard_state, durable on return, so before any later Send leaves
    ClientReply       -> "reply" (corr, reply) to the client that proposed; all the replies of
                         one run to one client leave as ONE "replies" ((corr, reply), ...)
    NotLeader         -> "not_leader" (corr, leader id or None)
    Rejected          -> "rejected" (corr, reason)
    WriteSnapshot     -> log.install_snapshot (durable), then core.snapshot_written
    LeaderChanged     -> remembered and logged
    MachineEffect     -> nothing: the test machine returns none
Log appends are not effects: the core writes into its MemberLog, and every input ends with a
`kick` so the WalActor flushes once this loop turn; acks and commits wait for its `written`.
"""
from __future__ import annotations

import time
from typing import Any

import structlog

from actors.raft import codec
from actors.raft.wal import WalActor
from actors.runtime.address import Address
from persist.raft.core import RaftCore
from persist.raft.effects import (ClientReply, LeaderChanged, NotLeader, PersistHardState,
                                  Rejected, Send, WriteSnapshot)

log = structlog.get_logger("warren.raft.member")


class MemberActor:
    def __init__(self, runtime: Any, me: Address, core: RaftCore, wal: WalActor) -> None:
        self.runtime = runtime
        self.me = me
        self.core = core
        self.wal = wal
        self._peers: dict[str, Address] = {}
        self.recovered = core.log.last_index_term()[0]  # what the WAL/segments held at start
        self.leader_since: float | None = None  # time.monotonic() (system-wide) of taking over
        wal.register(core.id, self.written, core.log.written_index())

    # -- inputs --------------------------------------------------------------------------------
    def receive(self, sender: Address, kind: str, body: Any) -> None:
        if kind == "cmd":
            corr, command = body
            self.run(self.core.propose(command, (str(sender), corr)))
        elif kind == "cmds":
            client = str(sender)
            propose, run = self.core.propose, self.run
            for corr, command in body:
                run(propose(command, (client, corr)))
        elif codec.is_raft(kind):
            self.run(self.core.step(codec.decode(kind, body)))
        else:
            log.warning("raft.unknown_kind", member=self.core.id, kind=kind, sender=str(sender))
        self.wal.kick()

    def tick(self) -> None:
        self.run(self.core.tick())
        self.wal.kick()

    def written(self, upto: int) -> None:
        self.run(self.core.written(upto))
        self.wal.kick()

    # -- effects -------------------------------------------------------------------------------
    def run(self, effects: list) -> None:
        send = self.runtime.send
        replies: dict[str, list] | None = None
        for eff in effects:
            kind = type(eff)
            if kind is Send:
                msg_kind, body = codec.encode(eff.msg)
                send(self._peer(eff.to), msg_kind, body, sender=self.me)
            elif kind is ClientReply:
                client, corr = eff.corr
                if replies is None:
                    replies = {}
                replies.setdefault(client, []).append((corr, eff.reply))
            elif kind is PersistHardState:
                self.core.log.save_hard_state(eff.term, eff.voted_for)
            elif kind is NotLeader:
                client, corr = eff.corr
                send(Address.parse(client), "not_leader", (corr, eff.leader), sender=self.me)
            elif kind is Rejected:
                client, corr = eff.corr
                send(Address.parse(client), "rejected", (corr, eff.reason), sender=self.me)
            elif kind is WriteSnapshot:
                self.core.log.install_snapshot(eff.index, eff.term, eff.data)
                self.run(self.core.snapshot_written(eff.index, eff.term))
            elif kind is LeaderChanged:
                if eff.leader == self.core.id:
                    self.leader_since = time.monotonic()
                log.info("raft.leader_changed", member=self.core.id, leader=eff.leader,
                         term=self.core.term)
        if replies is not None:
            for client, batch in replies.items():
                if len(batch) == 1:
                    send(Address.parse(client), "reply", batch[0], sender=self.me)
                else:
                    send(Address.parse(client), "replies", batch, sender=self.me)

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
                "leader_since": self.leader_since, "state": core.machine.snapshot(core.state)}
