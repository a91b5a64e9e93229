"""Deliberately broken cores and disks: the simulator must catch each of them for some seed."""
from __future__ import annotations

from dataclasses import replace

from actors.messages.channel_queue import Confirm
from actors.messages.quorum import ConsumerResync
from actors.quorum import commands as c
from actors.quorum.client import QuorumClient
from actors.quorum.front import PUBLISH, QueueFront
from raft import RaftCore
from effects import Send
from raft.effects import ToPeer
from raft.messages import AppendReply
from tests.sim.simdisk import SimDisk


class NoUpToDateCheck(RaftCore):
    """Votes for any candidate, skipping Raft §5.4.1's election restriction."""

    def log_up_to_date(self, last_index: int, last_term: int) -> bool:
        return True


class AckBeforeWritten(RaftCore):
    """A follower acks appended entries before the WAL has written them (Ra's rule broken).
    Alone this rarely loses data (the leader still waits for its own write); see IgnoresWal."""

    def ack(self, out, force=False) -> None:
        index = self.verified
        if self.leader_id is not None and (index > self.acked or force):
            self.acked = max(self.acked, index)
            out.append(ToPeer(self.leader_id, AppendReply(self.term, self.id, True, index)))


class IgnoresWal(AckBeforeWritten):
    """Neither followers nor the leader wait for the WAL: commits rest on nothing durable."""

    def maybe_commit(self, out) -> None:
        written = self.log.written_index
        self.log.written_index = lambda: self.log.last_index_term()[0]
        try:
            super().maybe_commit(out)
        finally:
            self.log.written_index = written


class SyncIgnoringDisk(SimDisk):
    """A disk whose sync of WAL files makes nothing durable (a lying write cache): the WAL
    reports entries written that a crash then loses, which the recovery checker must notice."""

    def sync(self, path: str) -> None:
        if not path.startswith("wal/"):
            super().sync(path)
            return
        self._sync_point()
        self.syncs += 1


class ConfirmsOnPropose(QueueFront):
    """Confirms a publish once its leader has proposed it, not once a majority has it on disk."""

    def take_proposals(self):
        proposals = super().take_proposals()
        for _command, corr in proposals:
            if corr is not None and corr[0] == PUBLISH:
                self.out.append(Send(corr[1], Confirm(corr[2])))
        return proposals


class NeverResyncs(QuorumClient):
    """Switches leaders without telling the new one what its consumers hold."""

    def take(self):
        out, up = super().take()
        return [s for s in out if type(s.msg) is not ConsumerResync], up


class ReturnsWhatIsOnItsWay(QueueFront):
    """A resync takes every delivery the channel has not named for lost, even the leader's own still
    on their way: a channel that switches to the leader it had (a probe or a FindLeader answer
    teaching it the term) gets them twice, the second time after its ack."""

    def leader_changed(self, leader):
        super().leader_changed(leader)
        self._own_from = None


class ForgetsPublishers(QueueFront):
    """Enqueues without the publisher's sequence: a publish the client sends again after a leader
    change is enqueued twice."""

    def take_proposals(self):
        proposals = []
        for command, corr in super().take_proposals():
            cmd = c.decode(command)
            if type(cmd) is c.Enqueue:
                command = c.encode(replace(cmd, publisher=None))
            proposals.append((command, corr))
        return proposals
