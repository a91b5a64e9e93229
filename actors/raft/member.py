"""MemberActor: one Raft member as a thin shell around `RaftCore`.

Inputs (actors/messages/raft.py) and what they become:
    Propose(corr, command)              -> core.propose(command, (sender, corr))
    ProposeBatch(proposals)             -> ONE core.propose_batch for the whole client batch
    a peer's message (raft/messages.py) -> core.step(message)
    tick()    from the host's ticker    -> core.tick()
    written() from the WalActor         -> core.written(upto)
    end of the loop turn                -> core.replicate(): with `append_per_turn` the leader
                                           sends each follower one AppendEntries per turn, from
                                           the WalActor's flush, before its write and sync
Effects are carried out in list order by one Interpreter (raft/core.py has the rules):
    Send              -> runtime.send to the peer; a member's id IS its actor address as text
    PersistHardState  -> log.save_hard_state: a HARD_STATE record in the WAL's next group commit
    ClientReply       -> Committed(corr, reply) to the client that proposed; all the replies of
                         one run to one client leave as ONE CommittedBatch
    NotLeader         -> NotLeaderReply(corr, leader id or None)
    ChangeRefused     -> ChangeRefusedReply(corr, reason)
    WriteSnapshot     -> log.install_snapshot (durable), then core.snapshot_written
    LeaderChanged     -> remembered and logged
    MachineEffect     -> nothing: the test machine returns none

Ordering rules kept here (etcd's `Ready` rules, Ra's written events):
- Persist before send. A PersistHardState is durable only once the WAL flush that carries it
  has synced, so from that effect on every peer Send (this run's and later runs') is held, in
  order, and released by the WalActor right after that flush (`after_flush`), before it tells
  any member `written`. A term or vote is never acted on by a peer and then forgotten.
- Snapshot only what is durable. A WriteSnapshot of entries this log holds waits until the WAL
  has reported them written: a crash could otherwise keep the snapshot and lose the entries
  under it (recovery copes - persist/wal/writer.py - but the live entries below a snapshot that
  the machine still refers to would be gone). A snapshot that replaces the log (a follower's
  InstallSnapshot from the leader) is written at once: nothing of this log is under it.
- Ack only what is written: the core does it (raft/replication.py); the WalActor calls
  `written` only after its sync.
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
from effects import (
    ChangeRefused, ClientReply, LeaderChanged, MachineEffect, NotLeader, PersistHardState, Send, WriteSnapshot,
)
from effects.interpreter import Interpreter
from raft.core import RaftCore

log = structlog.get_logger("warren.raft.member")


class MemberActor:
    def __init__(self, runtime: Any, me: Address, core: RaftCore, wal: WalActor) -> None:
        self.runtime = runtime
        self.me = me
        self.core = core
        self.wal = wal
        self._peers: dict[str, Address] = {}
        self._held: list[tuple[Address, object]] | None = None  # sends after a hard state
        self._replies: dict[str, list[Outcome]] = {}  # this run's client replies, per client
        self._snapshots: list[WriteSnapshot] = []  # waiting for the WAL (snapshot only durable)
        self._turn_scheduled = False
        self._per_turn = core.settings.append_per_turn
        self.recovered = core.log.last_index_term()[0]  # what the WAL/segments held at start
        self.leader_since: float | None = None  # time.monotonic() (system-wide) of taking over
        wal.register(core.id, self.written, core.log.written_index())
        self._apply = Interpreter({
            Send: self._send, ClientReply: self._client_reply, PersistHardState: self._persist_hard_state,
            NotLeader: lambda e: self._to_client(e.corr, lambda corr: NotLeaderReply(corr, e.leader)),
            ChangeRefused: lambda e: self._to_client(e.corr, lambda corr: ChangeRefusedReply(corr, e.reason)),
            WriteSnapshot: self._write_snapshot, LeaderChanged: self._leader_changed,
            MachineEffect: lambda _: None})  # the test machine returns none

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
        self.run(self.core.written(upto))
        if self._snapshots:
            self._write_snapshots()
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

    # -- effects -------------------------------------------------------------------------------
    def run(self, effects: list) -> None:
        self._apply(effects)
        if self._replies:
            replies, self._replies = self._replies, {}
            send = self.runtime.send
            for client, batch in replies.items():
                to = Address.parse(client)
                if len(batch) == 1:
                    send(to, Committed(*batch[0]), sender=self.me)
                else:
                    send(to, CommittedBatch(batch), sender=self.me)

    def _send(self, e: Send) -> None:
        to = self._peer(e.to)
        if self._held is None:
            self.runtime.send(to, e.msg, sender=self.me)
        else:
            self._held.append((to, e.msg))

    def _client_reply(self, e: ClientReply) -> None:
        client, corr = e.corr
        self._replies.setdefault(client, []).append(Outcome(corr, e.reply))

    def _to_client(self, corr: tuple[str, int], build: Any) -> None:
        client, client_corr = corr
        self.runtime.send(Address.parse(client), build(client_corr), sender=self.me)

    def _persist_hard_state(self, e: PersistHardState) -> None:
        self.core.log.save_hard_state(e.term, e.voted_for)
        if self._held is None:
            self._held = []
            self.wal.after_flush(self._release)
        self.wal.kick()

    def _write_snapshot(self, e: WriteSnapshot) -> None:
        self._snapshots.append(e)
        self._write_snapshots()

    def _leader_changed(self, e: LeaderChanged) -> None:
        if e.leader == self.core.id:
            self.leader_since = time.monotonic()
        log.info("raft.leader_changed", member=self.core.id, leader=e.leader, term=self.core.term)

    def _release(self) -> None:
        """The WAL synced the hard state(s) saved since holding began: let the sends go."""
        held, self._held = self._held or [], None
        send = self.runtime.send
        for to, msg in held:
            send(to, msg, sender=self.me)

    def _write_snapshots(self) -> None:
        """Write the waiting snapshots the WAL now covers, in order (see the module doc)."""
        logged = self.core.log
        while self._snapshots:
            snap = self._snapshots[0]
            current = logged.snapshot_meta()
            if current is not None and current[0] >= snap.index:
                self._snapshots.pop(0)  # superseded by one restored from the leader meanwhile
                continue
            if logged.written_index() < snap.index and logged.term_at(snap.index) == snap.term:
                return  # entries under it not durable yet; `written` brings us back
            self._snapshots.pop(0)
            logged.install_snapshot(snap.index, snap.term, snap.data)
            self.run(self.core.snapshot_written(snap.index, snap.term))

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
