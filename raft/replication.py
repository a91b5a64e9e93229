"""Log replication and commit (Raft §5.3, §5.4.2; Ra's written-index acks; etcd's flow control).

Theory of operation. The leader appends a client command to its own log (queued to the WAL) and
sends it to every follower at once, without waiting for its own write. Per follower it keeps a
Progress (progress.py): in replicate state it pipelines up to `max_inflight` AppendEntries of at
most `max_batch_entries` / `max_batch_bytes` each. A follower checks that its log holds the
entry before the batch (prev index and term, §5.3), drops any conflicting suffix, appends, and
acks only once the WAL reports the entries written - the ack carries min(written, verified)
where verified is the last index it knows matches this leader. On a mismatch it rejects with a
hint (its last index whose term is <= the leader's prev term), so the leader skips a whole
term per round trip. The leader's commit index is the highest index written on a majority of
voters, itself counted only up to its own written index, and only if that entry is of the
current term (§5.4.2). Heartbeats carry min(follower match, commit) so a follower never commits
an entry it has not been shown to share with the leader.

Batching: `propose_batch` appends a client's whole batch at once. With `append_per_turn` the
leader does not send on each proposal or ack; it notes that followers are due and the shell
calls `replicate()` once per loop turn, so each follower gets one AppendEntries per turn
(probes, rejects and snapshots are still answered at once).
"""
from __future__ import annotations

from typing import Hashable, Sequence

from raft.effects import Effect, NotLeader, ToPeer
from raft.log import Entry
from raft.messages import AppendEntries, AppendReply, Heartbeat, HeartbeatReply
from raft.progress import PROBE, REPLICATE, SNAPSHOT
from raft.roles import FOLLOWER, LEADER
from raft import commands


class ReplicationMixin:
    def propose(self, command: bytes, corr: Hashable) -> list[Effect]:
        """A client command; the reply comes as ClientReply(corr, ...) once applied here."""
        return self.propose_batch(((command, corr),))

    def propose_batch(self, batch: Sequence[tuple[bytes, Hashable]]) -> list[Effect]:
        """Client commands (command, corr), in order: one log append, one AppendEntries per
        follower and one commit check for all of them (per-command work was the leader's
        bottleneck). Each gets its own ClientReply once applied, or NotLeader here."""
        if self.role != LEADER or self.transferee is not None:
            leader = self.leader_id if self.leader_id != self.id else None
            return [NotLeader(corr, leader) for _, corr in batch]
        if not batch:
            return []
        if self.quiet:
            self.wake_up()
        out: list[Effect] = []
        first = self.log.last_index_term()[0] + 1
        term, user = self.term, commands.user
        self.log.append([Entry(first + k, term, user(command))
                         for k, (command, _) in enumerate(batch)])
        pending = self.pending
        for k, (_, corr) in enumerate(batch):
            pending[first + k] = (term, corr)
        self.replicate_soon(out)
        self.maybe_commit(out)
        return out

    def replicate_soon(self, out: list[Effect]) -> None:
        """New entries for the followers: send now, or once per shell loop turn (`replicate`)
        when `settings.append_per_turn` batches AppendEntries per peer."""
        if self.settings.append_per_turn:
            self.append_due = True
        else:
            self.broadcast_append(out)

    def replicate(self) -> list[Effect]:
        """The shell's end of a loop turn (append_per_turn): one AppendEntries per follower
        carrying everything proposed and everything acks made room for since the last turn."""
        out: list[Effect] = []
        if self.append_due and self.role == LEADER:
            self.broadcast_append(out)
        self.append_due = False
        return out

    # -- leader ---------------------------------------------------------------------------------
    def tick_leader(self, out: list[Effect]) -> None:
        self.election_elapsed += 1
        self.heartbeat_elapsed += 1
        if self.transferee is not None:
            self.transfer_elapsed += 1
            if self.transfer_elapsed >= self.settings.transfer_timeout_ticks:
                self.transferee = None
                self.maybe_switch_version(out)  # held back while the transfer ran
        if self.election_elapsed >= self.settings.election_ticks:
            self.election_elapsed = 0
            self.check_quorum(out)
            if self.role != LEADER:
                return
        if self.heartbeat_elapsed >= self.settings.heartbeat_ticks:
            self.heartbeat_elapsed = 0
            if self.quiesce(out):
                return
            for peer, pr in sorted(self.progress.items()):
                pr.commit_told = max(pr.commit_told, min(pr.match, self.commit))
                out.append(ToPeer(peer, Heartbeat(self.term, self.id, min(pr.match, self.commit))))

    def tell_commit(self, peer: str, out: list[Effect]) -> None:
        """`notify_commit`: the follower learns the commit index covering what it holds now, with a
        heartbeat, rather than with the next append or heartbeat."""
        pr = self.progress[peer]
        known = min(pr.match, self.commit)
        if known > pr.commit_told:
            pr.commit_told = known
            out.append(ToPeer(peer, Heartbeat(self.term, self.id, known)))

    def broadcast_append(self, out: list[Effect]) -> None:
        for peer in sorted(self.progress):
            self.send_append(peer, out)

    def send_append(self, peer: str, out: list[Effect], allow_empty: bool = False) -> None:
        pr = self.progress[peer]
        last, _ = self.log.last_index_term()
        while True:
            if pr.state == SNAPSHOT:
                if allow_empty:
                    self.send_snapshot_chunk(peer, out)
                return
            if pr.paused(self.settings.max_inflight):
                return
            prev = pr.next - 1
            prev_term = self.log.term_at(prev)
            # term_at(0) is 0 even in a compacted log: a follower probed from next=1 (its log
            # is empty) needs the snapshot too, not entries below our first index (§7)
            if prev_term is None or pr.next < self.log.first_index():
                self.start_snapshot(peer, out)
                return
            entries = []
            if pr.next <= last:
                hi = min(last + 1, pr.next + self.settings.max_batch_entries)
                entries = self.log.entries(pr.next, hi, self.settings.max_batch_bytes)
            if not entries and not allow_empty:
                return
            out.append(ToPeer(peer, AppendEntries(self.term, self.id, prev, prev_term,
                                                tuple(entries), self.commit)))
            sent = entries[-1].index if entries else prev
            pr.commit_told = max(pr.commit_told, min(self.commit, sent))
            pr.sent(sent, bool(entries))
            allow_empty = False
            if pr.state != REPLICATE:
                return

    def on_append_reply(self, msg: AppendReply, out: list[Effect]) -> None:
        pr = self.progress.get(msg.src)
        if pr is None:
            return
        pr.recent_active = True
        self.heard_version(pr, msg.machine_version, out)
        if self.role != LEADER:
            return  # it halted applying the switch and stepped down (versions.py)
        if msg.success:
            if pr.update(msg.index):
                if pr.state == PROBE:
                    pr.become_replicate()
                self.maybe_commit(out)
                if self.role != LEADER:
                    return
                if self.settings.notify_commit:
                    self.tell_commit(msg.src, out)
                if msg.src == self.transferee:
                    self.maybe_send_timeout_now(out)
                self.maybe_promote(out)
            elif pr.state == PROBE:
                pr.probe_sent = False
            if self.settings.append_per_turn and pr.state == REPLICATE:
                self.append_due = True
            else:
                self.send_append(msg.src, out)
        elif pr.decrease(msg.index, self.probe_index(msg.hint_index, msg.hint_term)):
            self.send_append(msg.src, out, allow_empty=True)

    def probe_index(self, hint_index: int, hint_term: int) -> int:
        if hint_term > 0:
            return self.conflict_by_term(hint_index, hint_term)[0]
        return hint_index

    def on_heartbeat_reply(self, msg: HeartbeatReply, out: list[Effect]) -> None:
        pr = self.progress.get(msg.src)
        if pr is None:
            return
        pr.recent_active = True
        self.heard_version(pr, msg.machine_version, out)
        if self.role != LEADER:
            return
        pr.probe_sent = False
        if pr.state == REPLICATE and len(pr.inflight) >= self.settings.max_inflight:
            pr.inflight.popleft()  # an append may be lost; let one more through
        last, _ = self.log.last_index_term()
        if pr.match < last:
            self.send_append(msg.src, out, allow_empty=True)

    def maybe_commit(self, out: list[Effect]) -> None:
        voters = self.config.voters
        if not voters:
            return
        matches = sorted((self.log.written_index() if v == self.id else
                          (self.progress[v].match if v in self.progress else 0)) for v in voters)
        index = matches[len(matches) - self.config.quorum()]
        if index > self.commit and self.log.term_at(index) == self.term:
            self.advance_commit(index, out)

    # -- follower -------------------------------------------------------------------------------
    def follow(self, leader: str, out: list[Effect]) -> None:
        if self.role != FOLLOWER:
            self.become_follower(self.term, leader, out)
        self.set_leader(leader, out)
        self.election_elapsed = 0

    def on_append(self, msg: AppendEntries, out: list[Effect]) -> None:
        self.follow(msg.src, out)
        prev, prev_term, entries = msg.prev_index, msg.prev_term, msg.entries
        if prev < self.commit:
            # entries up to commit are committed, hence identical (§5.4 Log Matching)
            entries = tuple(e for e in entries if e.index > self.commit)
            prev, prev_term = self.commit, self.log.term_at(self.commit)
        if self.log.term_at(prev) != prev_term:
            last, _ = self.log.last_index_term()
            hint, hint_term = self.conflict_by_term(min(prev, last), prev_term)
            out.append(ToPeer(msg.src, AppendReply(self.term, self.id, False, msg.prev_index,
                                                   hint, hint_term, self.supported)))
            return
        self.append_matching(entries)
        msg_last = prev + len(entries)
        self.verified = max(self.verified, msg_last)
        self.advance_commit(min(msg.commit, msg_last), out)
        if self.log.written_index() >= msg_last:
            self.ack(out, force=True)

    def append_matching(self, entries) -> None:
        for pos, e in enumerate(entries):
            term = self.log.term_at(e.index)
            if term == e.term:
                continue
            if term is not None:
                self.truncate_from(e.index)
            self.log.append(entries[pos:])
            user = commands.USER
            for new in entries[pos:]:
                if new.command[0] != user:  # rare: skip the call for every user entry
                    self.note_entry(new)
            return

    def conflict_by_term(self, index: int, term: int) -> tuple[int, int]:
        """The last index <= `index` whose term is <= `term` (etcd's findConflictByTerm)."""
        while index > 0:
            t = self.log.term_at(index)
            if t is None:
                return index, 0
            if t <= term:
                return index, t
            index -= 1
        return 0, 0

    def ack(self, out: list[Effect], force: bool = False) -> None:
        """Tell the leader how far our log is written and known to match its own."""
        index = min(self.log.written_index(), self.verified)
        if self.leader_id is None or (index <= self.acked and not force):
            return
        self.acked = max(self.acked, index)
        out.append(ToPeer(self.leader_id, AppendReply(self.term, self.id, True, index,
                                                      machine_version=self.supported)))

    def on_heartbeat(self, msg: Heartbeat, out: list[Effect]) -> None:
        self.follow(msg.src, out)
        self.advance_commit(msg.commit, out)
        if msg.quiet and self.quiet_heartbeat(msg):
            return  # quiet with its leader: the leader needs no answer (quiescence.py)
        out.append(ToPeer(msg.src, HeartbeatReply(self.term, self.id, self.supported)))

    def after_commit_leader(self, out: list[Effect]) -> None:
        cfg_index, cfg = self.configs[-1]
        if self.id not in cfg.voters and self.commit >= cfg_index:
            self.become_follower(self.term, None, out)  # removed: step down (dissertation §4.2.2)
            return
        self.maybe_promote(out)
