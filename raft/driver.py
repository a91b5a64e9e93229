"""RaftDriver: carries out a RaftCore's effects with the ordering rules, in one place for every shell.

Theory of operation. The core returns Raft's own effects (raft/effects.py, their rules in
raft/core.py); a member actor in a host process (actors/quorum/member.py, actors/raft/member.py)
and the deterministic simulator (tests/sim) both hand them to a driver, which calls the port named
for each one, in list order, and keeps the rules that need memory across effect lists:
- Persist before send. A PersistHardState is saved into the log; when the log keeps hard state
  in the WAL's group commit (`hard_state_in_wal`), it is durable only after the next sync, so from
  that effect on every ToPeer - of this list and of later ones - is held, in order, and released
  by the port's `after_flush` callback right after that sync. A term or vote is never acted on by
  a peer and then forgotten.
- Snapshot only what is durable. A WriteSnapshot of entries this log holds waits until the WAL
  has written them (`written`); one that replaces the log (a follower's InstallSnapshot) is
  written at once; one superseded meanwhile by a newer snapshot is dropped. `defer_snapshots=False`
  breaks this rule on purpose (the simulator's regression runs check recovery copes).
- Everything else goes to the ports in list order: peer sends, client replies, NotLeader,
  ChangeRefused, leader changes, version switches, a halted machine and the machine's own effects.
The driver does no IO and knows no addresses: ports do. The ports are where Raft's vocabulary
becomes the broker's: each shell turns a reply, a peer message or a halt into its own messages,
effects (effects/) and log lines; nothing in raft/ knows them. The driver never calls the core
except to report what it did (`snapshot_written`) and to pass on `written`.
"""
from __future__ import annotations

from typing import Any, Callable, Hashable, Protocol

from raft.effects import (ChangeRefused, ClientReply, LeaderChanged, MachineEffect, MachineHalted, NotLeader,
                          PersistHardState, ToPeer, VersionSwitched, WriteSnapshot)
from raft.core import RaftCore


class RaftPorts(Protocol):
    """What a driver needs from where it runs."""

    def send(self, to: str, msg: Any) -> None: ...                     # to a peer member

    def reply(self, corr: Hashable, reply: Any) -> None: ...           # a committed command's answer

    def not_leader(self, corr: Hashable, leader: str | None) -> None: ...

    def change_refused(self, corr: Hashable, reason: str) -> None: ...

    def leader_changed(self, leader: str | None) -> None: ...

    def machine_effect(self, effect: Any) -> None: ...

    def version_switched(self, index: int, old: int, new: int) -> None: ...  # raft/versions.py

    def machine_halted(self, index: int, reason: str) -> None: ...  # applying stopped before `index`

    def after_flush(self, callback: Callable[[], None]) -> None: ...  # once the next WAL sync is done

    def kick(self) -> None: ...                                        # something awaits a WAL flush


class RaftDriver:
    def __init__(self, core: RaftCore, ports: RaftPorts, *, hard_state_in_wal: bool = True,
                 defer_snapshots: bool = True) -> None:
        self.core = core
        self.ports = ports
        self.hard_state_in_wal = hard_state_in_wal
        self.defer_snapshots = defer_snapshots
        self.held: list[ToPeer] | None = None  # peer sends behind a hard state not yet synced
        self.deferred: list[WriteSnapshot] = []  # snapshots waiting for the WAL
        self._handlers: dict[type, Callable[[Any], None]] = {
            ToPeer: self._send, PersistHardState: self._persist_hard_state,
            ClientReply: lambda e: ports.reply(e.corr, e.reply),
            NotLeader: lambda e: ports.not_leader(e.corr, e.leader),
            ChangeRefused: lambda e: ports.change_refused(e.corr, e.reason),
            LeaderChanged: lambda e: ports.leader_changed(e.leader),
            MachineEffect: lambda e: ports.machine_effect(e.effect),
            VersionSwitched: lambda e: ports.version_switched(e.index, e.old, e.new),
            MachineHalted: lambda e: ports.machine_halted(e.index, e.reason),
            WriteSnapshot: self._write_snapshot}

    def run(self, effects: list) -> None:
        handlers = self._handlers
        for effect in effects:
            handlers[type(effect)](effect)  # a KeyError: an effect raft/effects.py does not declare

    def written(self, upto: int) -> None:
        """The WAL synced this member's log up to `upto`."""
        self.run(self.core.written(upto))
        if self.deferred:
            self._write_deferred()

    # -- effects ----------------------------------------------------------------------------------

    def _send(self, e: ToPeer) -> None:
        if self.held is None:
            self.ports.send(e.to, e.msg)
        else:
            self.held.append(e)

    def _persist_hard_state(self, e: PersistHardState) -> None:
        self.core.log.save_hard_state(e.term, e.voted_for)
        if self.hard_state_in_wal:
            if self.held is None:
                self.held = []
                self.ports.after_flush(self._release)
            self.ports.kick()

    def _release(self) -> None:
        """The WAL synced the hard state(s) saved since holding began: let the sends go."""
        held, self.held = self.held or [], None
        for e in held:
            self.ports.send(e.to, e.msg)

    def _write_snapshot(self, e: WriteSnapshot) -> None:
        self.deferred.append(e)
        self._write_deferred()

    def _write_deferred(self) -> None:
        """Write the waiting snapshots the WAL now covers, in order; drop superseded ones."""
        log = self.core.log
        while self.deferred:
            snap = self.deferred[0]
            current = log.snapshot_meta()
            if current is not None and current[0] >= snap.index:
                self.deferred.pop(0)  # a newer one restored from the leader meanwhile
                continue
            if (self.defer_snapshots and log.written_index() < snap.index
                    and log.term_at(snap.index) == snap.term):
                return  # entries under it not durable yet; `written` brings us back
            self.deferred.pop(0)
            log.install_snapshot(snap.index, snap.term, snap.data)
            self.run(self.core.snapshot_written(snap.index, snap.term))
