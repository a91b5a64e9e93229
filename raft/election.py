"""Leader election: pre-vote, votes, check-quorum and leadership transfer (Raft §5.2, §5.4.1;
dissertation §3.10 transfer, §6.2 check-quorum and leases, §9.6 pre-vote).

Theory of operation. A follower whose election timer (randomized in [T, 2T) ticks) runs out
first asks the voters whether they *would* vote for it at term+1 (PreVote) without touching its
own term; only with a majority of pre-votes does it bump the term and ask for real votes. A
group's only voter does not wait for the timer: it elects itself on its first tick; a new
group's preferred leader does not wait either (`campaign_now`). A voter grants a (pre-)vote only to a candidate whose log is at least as up to date as its own
(§5.4.1) and, for a real vote, only once per term. A member that has heard from a leader within
the last election timeout ignores higher-term vote requests (the leader lease), unless the
request comes from a leadership transfer or from the leader itself (which then no longer leads:
it restarted, quiescence.py). A leader that has not heard from a quorum within an election
timeout steps down (check-quorum), which makes the lease safe to rely on.
"""
from __future__ import annotations

from raft.effects import Effect, PersistHardState, ToPeer
from raft.messages import (PreVote, PreVoteReply, RequestVote, RequestVoteReply,
                                   TimeoutNow)
from raft.roles import CANDIDATE, FOLLOWER, LEADER, PRE_CANDIDATE


class ElectionMixin:
    def tick_election(self, out: list[Effect]) -> None:
        self.election_elapsed += 1
        # the only voter has nobody to wait for: the timeout would elect it alone all the same
        alone = self.config.voters == {self.id}
        if (alone or self.election_elapsed >= self.timeout) and self.promotable():
            self.start_prevote(out)

    def campaign_now(self) -> list[Effect]:
        """Stand for election now rather than at the timeout: a new group's preferred leader
        (RabbitMQ's queue leader locator; Ra's trigger_election on a new queue's first member),
        so that the group has a leader one vote round after its members exist. A group that
        never had a term skips the pre-vote, which guards a leader that cannot exist yet."""
        out: list[Effect] = []
        if self.role != LEADER and self.promotable():
            if self.term == 0:
                self.campaign(out)
            else:
                self.start_prevote(out)
        return out

    def promotable(self) -> bool:
        return self.id in self.config.voters and self.halted is None  # a halted machine cannot lead

    def in_lease(self) -> bool:
        return self.leader_id is not None and self.election_elapsed < self.settings.election_ticks

    def log_up_to_date(self, last_index: int, last_term: int) -> bool:
        """§5.4.1: the candidate's last entry has a higher term, or the same term and an index
        at least as high, as ours."""
        my_index, my_term = self.log.last_index_term()
        return last_term > my_term or (last_term == my_term and last_index >= my_index)

    def won(self) -> bool:
        return len(self.votes & self.config.voters) >= self.config.quorum()

    def start_prevote(self, out: list[Effect]) -> None:
        self.role = PRE_CANDIDATE
        self.set_leader(None, out)
        self.votes = {self.id}
        self.election_elapsed = 0
        self.reset_timeout()
        if self.won():
            self.campaign(out)
            return
        last, last_term = self.log.last_index_term()
        for v in sorted(self.config.voters - {self.id}):
            out.append(ToPeer(v, PreVote(self.term + 1, self.id, last, last_term)))

    def campaign(self, out: list[Effect], transfer: bool = False) -> None:
        self.term += 1
        self.voted_for = self.id
        self.role = CANDIDATE
        self.verified = self.acked = 0
        self.snap_rx = None
        self.set_leader(None, out)
        self.votes = {self.id}
        self.election_elapsed = 0
        self.reset_timeout()
        out.append(PersistHardState(self.term, self.id))
        if self.won():
            self.become_leader(out)
            return
        last, last_term = self.log.last_index_term()
        for v in sorted(self.config.voters - {self.id}):
            out.append(ToPeer(v, RequestVote(self.term, self.id, last, last_term, transfer)))

    def on_prevote(self, msg: PreVote, out: list[Effect]) -> None:
        grant = msg.term > self.term and self.log_up_to_date(msg.last_index, msg.last_term)
        out.append(ToPeer(msg.src, PreVoteReply(msg.term if grant else self.term, self.id, grant)))

    def on_prevote_reply(self, msg: PreVoteReply, out: list[Effect]) -> None:
        if self.role != PRE_CANDIDATE or msg.term != self.term + 1 or not msg.granted:
            return
        self.votes.add(msg.src)
        if self.won():
            self.campaign(out)

    def on_vote(self, msg: RequestVote, out: list[Effect]) -> None:
        grant = (self.voted_for in (None, msg.src)
                 and self.log_up_to_date(msg.last_index, msg.last_term))
        if grant:
            self.voted_for = msg.src
            self.election_elapsed = 0
            out.append(PersistHardState(self.term, msg.src))
        out.append(ToPeer(msg.src, RequestVoteReply(self.term, self.id, grant)))

    def on_vote_reply(self, msg: RequestVoteReply, out: list[Effect]) -> None:
        if self.role != CANDIDATE or not msg.granted:
            return
        self.votes.add(msg.src)
        if self.won():
            self.become_leader(out)

    def on_timeout_now(self, msg: TimeoutNow, out: list[Effect]) -> None:
        if self.role == FOLLOWER and self.promotable():
            self.campaign(out, transfer=True)

    # -- leader side --------------------------------------------------------------------------
    def check_quorum(self, out: list[Effect]) -> None:
        active = {self.id} | {p for p, pr in self.progress.items() if pr.recent_active}
        for pr in self.progress.values():
            pr.recent_active = False
        if len(active & self.config.voters) < self.config.quorum():
            self.become_follower(self.term, None, out)

    def transfer_leadership(self, target: str) -> list[Effect]:
        """Hand leadership to `target` (§3.10): stop taking proposals, bring it up to date,
        then tell it to time out now. Gives up after `transfer_timeout_ticks`."""
        out: list[Effect] = []
        if self.role != LEADER or target == self.id or target not in self.config.voters:
            return out
        if self.quiet:
            self.wake_up()
        self.transferee = target
        self.transfer_elapsed = 0
        self.transfer_sent = False
        self.maybe_send_timeout_now(out)
        if not self.transfer_sent:
            self.send_append(target, out, allow_empty=True)
        return out

    def maybe_send_timeout_now(self, out: list[Effect]) -> None:
        pr = self.progress.get(self.transferee)
        last, _ = self.log.last_index_term()
        if pr is not None and pr.match == last and not self.transfer_sent:
            out.append(ToPeer(self.transferee, TimeoutNow(self.term, self.id)))
            self.transfer_sent = True
