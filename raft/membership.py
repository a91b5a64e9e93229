"""Membership changes, one member at a time (Raft dissertation §4.1-§4.2).

Theory of operation. A configuration entry takes effect on a member as soon as it is in its
log, committed or not; truncating it reverts to the previous one (the core keeps the history
of config entries since the snapshot). The leader accepts a change only when the previous one
is committed, so configurations differ by one member and majorities always overlap. A new
member is added as a learner: it receives the log but neither votes nor counts for commit.
Once its match index reaches the leader's commit index the leader appends the entry that
promotes it to voter. A leader that removes itself keeps leading until that entry commits
(counting a majority of the new voters only) and then steps down; a member outside the voters
never starts an election.
"""
from __future__ import annotations

from typing import Hashable

from raft.config import ClusterConfig
from raft.effects import Effect, NotLeader, ChangeRefused
from raft.progress import Progress
from raft.roles import LEADER
from raft import commands


class MembershipMixin:
    def add_member(self, member: str, corr: Hashable) -> list[Effect]:
        cfg = self.config
        return self.change_config(member in cfg.members(), corr,
                                  ClusterConfig(cfg.voters, cfg.learners | {member}))

    def remove_member(self, member: str, corr: Hashable) -> list[Effect]:
        cfg = self.config
        return self.change_config(member not in cfg.members(), corr,
                                  ClusterConfig(cfg.voters - {member}, cfg.learners - {member}))

    def change_config(self, noop: bool, corr: Hashable, new: ClusterConfig) -> list[Effect]:
        if self.role != LEADER or self.transferee is not None:
            return [NotLeader(corr, self.leader_id if self.leader_id != self.id else None)]
        if self.config_pending():
            return [ChangeRefused(corr, "change_in_progress")]
        if noop:
            return [ChangeRefused(corr, "no_change")]
        if self.quiet:
            self.wake_up()
        out: list[Effect] = []
        index = self.append_local(commands.config(new))
        self.pending[index] = (self.term, corr)
        self.broadcast_append(out)
        self.maybe_commit(out)
        return out

    def config_pending(self) -> bool:
        return self.configs[-1][0] > self.commit

    def config_changed(self) -> None:
        """Keep the leader's progress table in step with the configuration in force."""
        if self.role != LEADER:
            return
        members = self.config.members() - {self.id}
        last, _ = self.log.last_index_term()
        for m in members - self.progress.keys():
            self.progress[m] = Progress(next=last + 1)
        for m in self.progress.keys() - members:
            del self.progress[m]

    def maybe_promote(self, out: list[Effect]) -> None:
        """Promote the first caught-up learner (one change at a time)."""
        if self.role != LEADER or self.config_pending() or self.commit == 0:
            return
        cfg = self.config
        for learner in sorted(cfg.learners):
            pr = self.progress.get(learner)
            if pr is not None and pr.match >= self.commit:
                self.append_local(commands.config(
                    ClusterConfig(cfg.voters | {learner}, cfg.learners - {learner})))
                self.broadcast_append(out)
                self.maybe_commit(out)
                return
