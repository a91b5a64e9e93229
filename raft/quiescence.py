"""Quiescence: an idle group sends nothing and its members need no ticks (CockroachDB's quiesced
ranges; Ra's idle members, which send nothing either and leave failure detection to the nodes).

Theory of operation. With `settings.quiesce`, a leader whose every follower holds its whole log,
written, with nothing proposed, in flight, uncommitted, unapplied, changing membership or
transferring leadership, sends each follower one quiet heartbeat (carrying the commit index) and
goes quiet instead of heartbeating; a follower whose log then ends at that commit index goes quiet
too and does not answer. A quiet member's `tick` does nothing, so a shell may stop ticking it:
thousands of idle groups cost no CPU and no messages. Anything a quiet member is given wakes it
(`wake_up`): a message (other than a quiet heartbeat), a proposal, a membership change. A woken
leader heartbeats at its next tick and starts a fresh check-quorum window, and goes quiet again
only once every follower has answered in it (a leader woken because a follower's node is down
keeps heartbeating, and steps down if it has lost its majority); a woken follower starts a fresh
election timeout.

What replaces the heartbeats for finding a dead leader:
- its node going down, which the shell learns from the cluster's liveness and passes on as
  `peer_down(leader=True)`: the follower forgets its leader (no lease protects it) and stands for
  election after the random part of its timeout (and a quiet leader told of a follower's node
  wakes, so that its check-quorum runs);
- a leader that restarted (its host process crashed, the node stayed up) asks for votes like any
  member that found no leader: a (pre-)vote request from the very member a follower follows says
  that member no longer leads, so the follower's lease does not stand in its way (election.py).
A quiet heartbeat that is lost leaves its follower awake: it times out, and its pre-vote wakes the
leader, which heartbeats and tries again. Safety is untouched: quiescence only stops messages that
carry nothing a quiet group needs.
"""
from __future__ import annotations

from raft.effects import Effect, ToPeer
from raft.messages import Heartbeat
from raft.progress import REPLICATE
from raft.roles import FOLLOWER, LEADER


class QuiescenceMixin:
    def can_quiesce(self) -> bool:
        """A leader with nothing to tell its followers but that there is nothing, having heard
        from every one of them in this check-quorum window."""
        if (self.role != LEADER or self.transferee is not None or self.append_due or self.pending
                or self.snapshot_pending is not None):
            return False
        last, _ = self.log.last_index_term()
        if not (self.commit == self.applied == last == self.log.written_index()) or self.configs[-1][0] > self.commit:
            return False
        return all(pr.match == last and pr.state == REPLICATE and not pr.inflight and pr.recent_active
                   for pr in self.progress.values())

    def quiesce(self, out: list[Effect]) -> bool:
        """At a leader's tick: go quiet if it can, telling every follower (True: it did)."""
        if not self.settings.quiesce or not self.can_quiesce():
            return False
        for peer in sorted(self.progress):
            self.progress[peer].commit_told = self.commit
            out.append(ToPeer(peer, Heartbeat(self.term, self.id, self.commit, quiet=True)))
        self.quiet = True
        return True

    def quiet_heartbeat(self, msg: Heartbeat) -> bool:
        """A follower given a quiet heartbeat by its leader: quiet too, when its log ends where
        the leader's does (True: it is, and the heartbeat needs no answer)."""
        last = self.log.last_index_term()[0]
        if self.settings.quiesce and self.role == FOLLOWER and last == msg.commit == self.commit:
            self.quiet = True
        return self.quiet

    def wake_up(self) -> None:
        """Something was given to a quiet member: it takes part again (see the module docstring)."""
        self.quiet = False
        self.election_elapsed = 0
        if self.role == LEADER:  # quiet again only once every follower answered since
            self.heartbeat_elapsed = self.settings.heartbeat_ticks
            for pr in self.progress.values():
                pr.recent_active = False

    def peer_down(self, leader: bool) -> list[Effect]:
        """The shell learnt that a peer's node is down (`leader`: this member's leader's). A quiet
        member takes part again (a leader runs its check-quorum); a follower that lost its leader
        stands for election after the random part of its timeout, with no lease holding the vote
        requests back."""
        out: list[Effect] = []
        if self.quiet:
            self.wake_up()
        if leader and self.role != LEADER and self.leader_id is not None:
            self.set_leader(None, out)
            self.election_elapsed = self.settings.election_ticks
        return out
