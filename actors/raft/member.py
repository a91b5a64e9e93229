"""MemberActor: one Raft member as a thin shell around `RaftCore`.

Inputs and what they become:
    "cmd"   body (corr, command)        -> core.propose(command, (sender, corr))
    "cmds"  body ((corr, command), ...) -> ONE core.propose_batch for the whole client batch
    "raft.*" body (message fields)      -> core.step(message)     (peers, see codec.py)
    tick()    from the host's ticker    -> core.tick()
    written() from the WalActor         -> core.written(upto)
    end of the loop turn                -> core.replicate(): with `append_per_turn` the leader
                                           sends each follower one AppendEntries per turn, from
                                           the WalActor's flush, before its write and sync
Effects are carried out in list order (raft/effects.py):
    Send              -> runtime.send to the peer; a member's id IS its actor address as text
    PersistHardState  -> log.save_hard_state: a HARD_STATE record in the WAL's next group commit
    ClientReply       -> "reply" (corr, reply) to the client that proposed; all the replies of
                         one run to one client leave as ONE "replies" ((corr, reply), ...)
    NotLeader         -> "not_leader" (corr, leader id or None)
    Rejected          -> "rejected" (corr, reason)
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

from actors.raft import codec
from actors.raft.wal import WalActor
from actors.runtime.address import Address
from raft.core import RaftCore
from raft.effects import (ClientReply, LeaderChanged, NotLeader, PersistHardState,
                                  Rejected, Send, WriteSnapshot)

log = structlog.get_logger("warren.raft.member")


class MemberActor:
    def __init__(self, runtime: Any, me: Address, core: RaftCore, wal: WalActor) -> None:
        self.runtime = runtime
        self.me = me
        self.core = core
        self.wal = wal
        self._peers: dict[str, Address] = {}
        self._held: list[tuple[Address, str, tuple]] | None = None  # sends after a hard state
        self._snapshots: list[WriteSnapshot] = []  # waiting for the WAL (snapshot only durable)
        self._turn_scheduled = False
        self._per_turn = core.settings.append_per_turn
        self.recovered = core.log.last_index_term()[0]  # what the WAL/segments held at start
        self.leader_since: float | None = None  # time.monotonic() (system-wide) of taking over
        wal.register(core.id, self.written, core.log.written_index())

    # -- inputs --------------------------------------------------------------------------------
    def receive(self, sender: Address, kind: str, body: Any) -> None:
        if kind == "cmds":
            client = str(sender)
            self.run(self.core.propose_batch([(command, (client, corr))
                                              for corr, command in body]))
        elif kind == "cmd":
            corr, command = body
            self.run(self.core.propose(command, (str(sender), corr)))
        elif codec.is_raft(kind):
            self.run(self.core.step(codec.decode(kind, body)))
        else:
            log.warning("raft.unknown_kind", member=self.core.id, kind=kind, sender=str(sender))
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
        send = self.runtime.send
        replies: dict[str, list] | None = None
        for eff in effects:
            kind = type(eff)
            if kind is Send:
                msg_kind, body = codec.encode(eff.msg)
                if self._held is None:
                    send(self._peer(eff.to), msg_kind, body, sender=self.me)
                else:
                    self._held.append((self._peer(eff.to), msg_kind, body))
            elif kind is ClientReply:
                client, corr = eff.corr
                if replies is None:
                    replies = {}
                replies.setdefault(client, []).append((corr, eff.reply))
            elif kind is PersistHardState:
                self.core.log.save_hard_state(eff.term, eff.voted_for)
                if self._held is None:
                    self._held = []
                    self.wal.after_flush(self._release)
                self.wal.kick()
            elif kind is NotLeader:
                client, corr = eff.corr
                send(Address.parse(client), "not_leader", (corr, eff.leader), sender=self.me)
            elif kind is Rejected:
                client, corr = eff.corr
                send(Address.parse(client), "rejected", (corr, eff.reason), sender=self.me)
            elif kind is WriteSnapshot:
                self._snapshots.append(eff)
                self._write_snapshots()
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

    def _release(self) -> None:
        """The WAL synced the hard state(s) saved since holding began: let the sends go."""
        held, self._held = self._held or [], None
        send = self.runtime.send
        for to, msg_kind, body in held:
            send(to, msg_kind, body, sender=self.me)

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
