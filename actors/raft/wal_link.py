"""The WAL link's pure cores: a quorum host's side (`LinkCore`) and the WAL process's (`WalServerCore`).

Theory of operation. On a node with several quorum hosts every member still appends through the
node's one WAL, which runs in a process of its own (actors/raft/wal_host.py). A host's members
append to their logs as ever (persist/wal/member_log.py: memtables in the host, records queued);
once a loop turn the host takes everything queued as one batch and sends it as one `WalAppend`
(its records joined into one bytes), numbered `seq` 1, 2, 3 ... in this host incarnation. At most
`window` batches are in flight; what is queued meanwhile goes out as one bigger batch when an ack
frees the window. The WAL drains every frame that arrived, writes the accepted ones with one
write, syncs once and answers each host with `WalAck(upto)`: all its batches up to `upto` are
durable. Only then does the host tell its members (`written`, hard states), so a follower's ack
and a leader's commit count only records on disk, as with a WAL in the members' own process.

Epochs. Each incarnation of a quorum host and of the WAL process has a random epoch, and every
frame names both: the host's (`host_epoch`) and the WAL's it is meant for (`wal_epoch`).
- A quorum host that starts (after kill -9 too) first *fences* the WAL (`WalServerCore.fence`):
  from then on the WAL refuses every frame of the host's earlier incarnations (the dead process's
  last frames may still be in the WAL's socket queue, and would land after this incarnation read
  the files: stale records over its new ones). Only after the answer does the host read the WAL
  files to recover its members, so what it reads is everything of its earlier incarnation that
  will ever be written. An ack is taken only if it names this host incarnation and the WAL
  incarnation it sent to: acks queued for a dead host incarnation reach its successor (a PUSH
  socket keeps its queue) and mean nothing to it.
- A WAL process that starts tells every host (`WalStarted`): each host sends again, in order,
  every batch not acknowledged, tagged with the new WAL epoch; frames tagged with an old one are
  refused. A batch that the old WAL wrote but did not acknowledge is then in the files twice; that
  is harmless, because the batches resent are a suffix of the host's batch sequence replayed in
  the same order, and replaying a run of records again after itself gives the same log (every
  record sets the log from its index up: persist/wal/core.py's MemberReplay).
- A host that the WAL has never heard of in this WAL incarnation is registered by its first
  frame (a live host after a WAL restart); one fenced with another epoch is refused.

Rollover. The WAL process counts the bytes written since its last rollover; past
`wal_max_size_bytes` it starts a new file and asks every quorum host to roll over (`WalRoll`,
naming the new file). A host then sends what it has queued (into the new file), freezes its
memtables (they hold at least what the old files hold of its members), sends every member's
hard state in a batch of its own (hard states live only in the WAL files) and writes the frozen
tables into its members' segment files; once those are synced and that batch acknowledged it
answers `WalRolled`. The WAL deletes the old files once every host has answered. A host that
restarts meanwhile is told of the rollover in its fence's answer and rolls over once it has
recovered; a WAL that restarts finds its files still there and starts another rollover.

Left out: the WAL does not bound a batch (the host's window does), and a batch is refused or
taken whole, never in part.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from actors.messages.wal import WalAck, WalAppend, WalRoll, WalRolled

WINDOW_BATCHES = 4  # a host's batches in flight to the WAL (bench/wal_hop.py measured 4)


@dataclass
class Sent:
    """A batch in flight: its frame (as sent; resent with another WAL epoch) and what the shell
    keeps beside it until it is acknowledged (the WAL core's Batch, callbacks)."""

    msg: WalAppend
    payload: Any


class LinkCore:
    """A quorum host's side of the link: numbering, the window, which acks count, what to resend."""

    def __init__(self, host: str, host_epoch: int, wal_epoch: int, window: int = WINDOW_BATCHES) -> None:
        assert window >= 1
        self.host = host
        self.host_epoch = host_epoch
        self.wal_epoch = wal_epoch
        self.window = window
        self.next_seq = 1
        self.inflight: OrderedDict[int, Sent] = OrderedDict()

    def can_send(self) -> bool:
        return len(self.inflight) < self.window

    def send(self, records: bytes, payload: Any) -> WalAppend:
        """A new batch (the window is the caller's to respect; a rollover's batches go past it)."""
        msg = WalAppend(self.host, self.host_epoch, self.wal_epoch, self.next_seq, records)
        self.inflight[self.next_seq] = Sent(msg, payload)
        self.next_seq += 1
        return msg

    def last_seq(self) -> int:
        """The newest batch in flight (0: none)."""
        return next(reversed(self.inflight)) if self.inflight else 0

    def ack(self, msg: WalAck) -> list[Sent]:
        """The batches `msg` makes durable, oldest first; none if it is not for this link as it is now."""
        if msg.host_epoch != self.host_epoch or msg.wal_epoch != self.wal_epoch:
            return []
        done = []
        while self.inflight and next(iter(self.inflight)) <= msg.upto:
            done.append(self.inflight.popitem(last=False)[1])
        return done

    def wal_started(self, wal_epoch: int) -> list[WalAppend]:
        """A WAL incarnation started: every batch in flight again, in order, tagged for it (none
        if it is the one this link already sends to)."""
        if wal_epoch == self.wal_epoch:
            return []
        self.wal_epoch = wal_epoch
        for sent in self.inflight.values():
            m = sent.msg
            sent.msg = WalAppend(m.host, m.host_epoch, wal_epoch, m.seq, m.records)
        return [sent.msg for sent in self.inflight.values()]


@dataclass
class WalServerCore:
    """The WAL process's side: which frames to write, what to acknowledge, the rollover's round."""

    wal_epoch: int
    hosts: tuple[str, ...]  # every quorum host of the node
    registered: dict[str, int] = field(default_factory=dict)  # host -> the incarnation it writes for
    rolling: int = 0  # the first file of the rollover in progress (0: none)
    waiting: set[str] = field(default_factory=set)  # the hosts whose WalRolled it still needs

    def fence(self, host: str, host_epoch: int) -> tuple[int, int]:
        """A host incarnation starts: refuse its predecessors' frames from now on. Answers
        (this WAL's epoch, the rollover the host must still do, or 0)."""
        assert host in self.hosts, host
        self.registered[host] = host_epoch
        return self.wal_epoch, self.rolling if host in self.waiting else 0

    def accept(self, msg: WalAppend) -> bool:
        """Whether to write this frame (see the module docstring)."""
        if msg.wal_epoch != self.wal_epoch or msg.host not in self.hosts:
            return False
        return self.registered.setdefault(msg.host, msg.host_epoch) == msg.host_epoch

    def written(self, frames: list[WalAppend]) -> list[tuple[str, WalAck]]:
        """These accepted frames are synced: one ack per host, for its newest."""
        upto: dict[tuple[str, int], int] = {}
        for m in frames:
            key = (m.host, m.host_epoch)
            upto[key] = max(upto.get(key, 0), m.seq)
        return [(host, WalAck(epoch, self.wal_epoch, seq)) for (host, epoch), seq in upto.items()]

    def start_roll(self, file_seq: int) -> list[tuple[str, WalRoll]]:
        """The shell started file `file_seq`: every host is asked to roll over the ones before."""
        assert not self.rolling, "one rollover at a time"
        self.rolling = file_seq
        self.waiting = set(self.hosts)
        return [(host, WalRoll(self.wal_epoch, file_seq)) for host in self.hosts]

    def rolled(self, msg: WalRolled) -> bool:
        """A host is done with the old files; True once every host is (the shell deletes them)."""
        if (msg.wal_epoch != self.wal_epoch or msg.file_seq != self.rolling
                or msg.host not in self.waiting
                or self.registered.setdefault(msg.host, msg.host_epoch) != msg.host_epoch):
            return False
        self.waiting.discard(msg.host)
        if self.waiting:
            return False
        self.rolling = 0
        return True
