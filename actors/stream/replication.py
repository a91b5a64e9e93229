"""A stream's replication across its members: one leader appends, replicas copy its chunks, a
majority on disk is what may be confirmed and read; elections by epoch when the leader is lost.

Theory of operation (Osiris' model, with Raft's election and commit rules). A stream has a fixed
set of members, one per node (`members`, the declared leader first), each with its own log
(persist/stream/log.py). Time is divided into *epochs*, each with at most one leader. The leader
appends every publish batch as one chunk and pushes the encoded chunk to each replica that is in
step (`StreamAppend`); a replica writes it as it is at the same offset, and after its fdatasync
tells the leader how far its log is on disk (`StreamAck`). The leader's *commit* is the highest
offset that a majority of members (itself counted by its own fdatasync) has on disk: below it a
publish is confirmed and every member hands entries to its consumers (a replica learns the
commit with the next StreamAppend, an empty one if nothing else is to go). A replica behind the
leader (restarted, or away) is sent its missing chunks a batch at a time, the next batch when it
has acked the last (CATCH_UP_BYTES_MAX each), so a replica far behind costs bounded memory; a
replica in step whose acks lag more than IN_FLIGHT_BYTES_MAX behind is no longer pushed to and
catches up the same way.

Every log carries its *epoch history* (persist/stream/epochs.py): (epoch, first offset) for
each leader whose chunks it holds. One leader assigns each offset in its epoch once, so two logs
whose histories give an offset the same epoch hold the same chunk there, and everything before
it is the same too (a replica appends only at its end, after the leader checked where they
agree). A member that finds a leader of its epoch sends `StreamHello` (its end and history); the
leader answers with the first offset where the two histories disagree or the shorter log ends
(`divergence`), the replica cuts its log back to there (what it cuts was never committed) and
takes the leader's history as its own, then the chunks from there on.

Elections. A member whose leader's node went down (`nodes_down`), or that started without
knowing a leader, or whose leader restarted (its StreamHello), waits ELECTION_BASE_MS plus
ELECTION_STEP_MS per member before it in `members` among those not known down (so one member
usually stands alone: no randomness), then stands for the next epoch (`StreamVote` with the end
and last epoch of its log). A member grants one vote per epoch, to a candidate whose log is at
least as new as its own ((last epoch, end) compared, Raft's 5.4.1); the epoch and the vote are
on disk before the reply. A candidate with a majority leads: it syncs its log, appends (epoch,
its end) to its history on disk and announces itself. Its commit moves only by acks of members
whose log reaches the start of its epoch (they took its history, epoch entry included), so an
entry of an older epoch is committed only together with the new epoch (Raft's 5.4.2: no leader of
a later election can lack it). The leader of epoch 1 is the declared one, unopposed: the others
start counting from epoch 2.

A replica takes a leader's epoch into its history when its log reaches the epoch's start, before
that data is synced (the history is on disk before any ack); a member that restarts drops the
epochs that begin past what its log kept, so it never claims an epoch whose chunks it lost.

Membership changes (`set_members`, warrenctl add_replica / delete_replica): the member list
is the stream's metadata record (QueueRecord.replicas), committed by the metadata Raft group
before any member hears of it, one member added or removed per change (actors/node/
stream_membership.py), so any majority of the old list and any of the new one overlap (Raft's
single-server change, section 4.1 of Ongaro's thesis). Each member takes the new list when told;
from then on the majority is the new list's, and what comes from a node not in it (a removed
member that has not heard yet) is ignored. A new member starts with an empty log and no epoch,
behind the others in `members`, so it says StreamHello and catches up through the leader's
catch-up path as a restarted replica does; it counts towards the commit once its log reaches the
epoch's start, as any member does. A leader that is removed steps down (its node then deletes
its log) and the others elect a leader among themselves, as RabbitMQ 3.10's coordinator restarts
the stream with a new writer; a removed replica just stops. A member of the old list that was
down hears the new list when its host restarts (the record it is built from).

Invariants: one leader per epoch (a majority voted for it, each member once per epoch); a
confirmed entry is on a majority's disks and in every later leader's log; a member hands out
nothing at or past the commit it knows, nor past its own disk.
Retention is each member's own, as in RabbitMQ: every member applies the stream's limits to its
own log (core.py), so members may drop a segment at different moments, and a new member whose
leader's retention dropped the first segments starts its empty log where the leader's begins.
Osiris (v1.3.3, RabbitMQ 3.10's) does the same: osiris_log's write_chunk, which the writer's
writes and a replica's accept_chunk both run, evaluates retention (trigger_retention_eval ->
osiris_retention:eval -> evaluate_retention over that member's own index files) whenever it
rolls a segment over, and the stream coordinator only hands each member the limits
(rabbit_stream_coordinator's eval_retention -> osiris:update_retention on each member's pid).
Left out: pre-vote (a restarted member that stands before it hears the leader moves the epoch
on; safe, one election more).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Sequence

from actors.messages.stream import StreamAck, StreamAppend, StreamHello, StreamVote, StreamVoteReply
from effects import Send, StartTimer
from persist.stream import chunk
from persist.stream.epochs import Epochs
from persist.stream.log import StreamLog

Effect = Any
LEADER, REPLICA, CANDIDATE = "writer", "replica", "candidate"  # rabbitmq-streams' role names
ELECTION_TIMER = "election"
ELECTION_BASE_MS = 500
ELECTION_STEP_MS = 500  # per member ahead in `members`: the first one usually stands alone
CATCH_UP_BYTES_MAX = 1 << 20  # chunks sent to a replica behind the leader per StreamAppend
IN_FLIGHT_BYTES_MAX = 8 << 20  # chunks pushed to a replica and not acked yet, at most


def divergence(a_history: Sequence[tuple[int, int]], a_end: int,
               b_history: Sequence[tuple[int, int]], b_end: int) -> int:
    """The first offset at which two logs may differ: where their histories first give an offset
    different epochs, else where the shorter one ends. Offsets before a history's first entry
    belong to epoch 0 (a stream's log from before it was replicated)."""
    end = min(a_end, b_end)
    bounds = sorted({0, *(o for _, o in a_history), *(o for _, o in b_history)})
    for at in bounds:
        if at >= end:
            break
        if _epoch_at(a_history, at) != _epoch_at(b_history, at):
            return at
    return end


def _epoch_at(history: Sequence[tuple[int, int]], offset: int) -> int:
    epoch = 0
    for e, start in history:
        if start > offset:
            break
        epoch = e
    return epoch


@dataclass
class Replication:
    """One member's part: its role, its epoch state and, leading, each replica's progress.

    `address(member)` is the member's actor; `save(epochs)` makes the epoch state durable before
    it returns. The owner (core.py) appends, reads `commit`, and calls `synced` after each
    fdatasync of the log.
    """

    me: str
    members: tuple[str, ...]
    log: StreamLog
    state: Epochs
    save: Callable[[Epochs], None]
    address: Callable[[str], Hashable]
    role: str = REPLICA
    leader: str | None = None
    commit: int = 0  # below it: on a majority's disks (as far as this member knows)
    down: set[str] = field(default_factory=set)
    ack_due: bool = False  # a replica owes its leader an ack after the next sync
    _sent: dict[str, int] = field(default_factory=dict)  # leading: attached replicas' next offset to send
    _acked: dict[str, int] = field(default_factory=dict)  # leading: their acks in this epoch
    _in_flight: dict[str, list[tuple[int, int]]] = field(default_factory=dict)  # leading: (end, bytes) pushed
    _votes: set[str] = field(default_factory=set)
    _attached: bool = False  # a replica: its log agrees with its leader's up to its end
    _hello_sent: bool = False
    _leader_history: list[tuple[int, int]] = field(default_factory=list)
    _timer: bool = False

    def __post_init__(self) -> None:
        assert self.me in self.members, (self.me, self.members)
        # an epoch taken with chunks a crash then lost (they were appended, not synced) is not the log's
        self.state.history = [h for h in self.state.history if h[1] <= self.log.next_offset]
        if self.members == (self.me,):  # a stream of one member leads unopposed, from the start
            self.role, self.leader = LEADER, self.me
            self.commit = self.log.committed
            self.state.epoch = max(self.state.epoch, 1)  # what its status shows (never contested)

    # -- shape -----------------------------------------------------------------------------------

    @property
    def leads(self) -> bool:
        return self.role == LEADER

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def readable(self) -> int:
        """Consumers here read below this: committed, and on this member's disk (one member: its
        disk is the majority)."""
        if len(self.members) == 1:
            return self.log.committed
        return min(self.commit, self.log.committed)

    @property
    def _majority(self) -> int:
        return len(self.members) // 2 + 1

    def _others(self) -> list[str]:
        return [m for m in self.members if m != self.me and m not in self.down]

    def _last_epoch(self) -> int:
        return self.state.history[-1][0] if self.state.history else 0

    def _send(self, member: str, msg: Any) -> Effect:
        return Send(self.address(member), msg)

    # -- starting and elections ------------------------------------------------------------------

    def start(self) -> list[Effect]:
        if self.leads:
            return []
        if self.state.epoch == 0 and self.me == self.members[0]:
            return self._lead(1)  # the declared leader: epoch 1 is its alone (others stand from 2)
        out = [self._send(m, self._hello()) for m in self._others()]
        return out + self._arm()

    def _hello(self) -> StreamHello:
        return StreamHello(self.state.epoch, self.me, self.log.next_offset, list(self.state.history))

    def _arm(self) -> list[Effect]:
        if self._timer or self.leads or self.me not in self.members:
            return []
        self._timer = True
        live = [m for m in self.members if m not in self.down or m == self.me]
        return [StartTimer(ELECTION_TIMER, ELECTION_BASE_MS + ELECTION_STEP_MS * live.index(self.me))]

    def on_timer(self) -> list[Effect]:
        self._timer = False
        if self.leads or self.leader is not None or self.me not in self.members:
            return []
        return self._stand() + self._arm()  # armed again: a split vote or a refusal tries once more

    def _stand(self) -> list[Effect]:
        epoch = max(self.state.epoch, 1) + 1
        self.state.epoch, self.state.voted = epoch, self.me
        self.save(self.state)
        self.role, self._votes = CANDIDATE, {self.me}
        if len(self._votes) >= self._majority:
            return self._lead(epoch)
        ask = StreamVote(epoch, self.me, self._last_epoch(), self.log.next_offset)
        return [self._send(m, ask) for m in self._others()]

    def _lead(self, epoch: int) -> list[Effect]:
        self.log.sync()  # the end it claims in its history is on disk
        state = self.state
        state.epoch, state.voted = epoch, self.me
        if self._last_epoch() != epoch:
            state.history.append((epoch, self.log.next_offset))
        self.save(state)
        self.role, self.leader = LEADER, self.me
        self._sent, self._acked, self._in_flight = {}, {}, {}
        out = [self._send(m, StreamAppend(epoch, self.me, self.log.next_offset, [], self.commit))
               for m in self._others()]
        return out + self._advance()

    def vote(self, msg: StreamVote) -> list[Effect]:
        if msg.candidate not in self.members:
            return []  # removed, or not added yet as far as this member knows
        out = self._newer(msg.epoch)
        state = self.state
        mine = (self._last_epoch(), self.log.next_offset)
        granted = (msg.epoch == state.epoch and state.voted in (None, msg.candidate)
                   and (msg.last_epoch, msg.next_offset) >= mine)
        if granted and state.voted is None:
            state.voted = msg.candidate
            self.save(state)
        return out + [self._send(msg.candidate, StreamVoteReply(state.epoch, self.me, granted))]

    def vote_reply(self, msg: StreamVoteReply) -> list[Effect]:
        out = self._newer(msg.epoch)
        if self.role == CANDIDATE and msg.epoch == self.state.epoch and msg.granted:
            self._votes.add(msg.member)
            if len(self._votes) >= self._majority:
                out += self._lead(msg.epoch)
        return out

    def _newer(self, epoch: int, leader: str | None = None) -> list[Effect]:
        """A message of a later epoch: this member follows it (its leader, if it names one)."""
        if epoch <= self.state.epoch:
            return []
        self.state.epoch, self.state.voted = epoch, None
        self.save(self.state)
        self._follow(leader)
        return [] if leader is not None else self._arm()

    def _follow(self, leader: str | None) -> None:
        self.role, self.leader = REPLICA, leader
        self._attached = self._hello_sent = self.ack_due = False
        self._sent, self._acked, self._in_flight = {}, {}, {}

    # -- a replica -------------------------------------------------------------------------------

    def append(self, msg: StreamAppend) -> list[Effect]:
        if msg.leader not in self.members or self.me not in self.members:
            return []  # a removed leader that has not heard yet, or this member was removed
        if msg.epoch < self.state.epoch:  # a deposed leader: it steps down when it hears the epoch
            return [self._send(msg.leader, self._hello())]
        out = self._newer(msg.epoch, msg.leader)
        if self.leader != msg.leader:
            assert not self.leads, f"two leaders of epoch {msg.epoch}"
            self._follow(msg.leader)
        log = self.log
        if msg.truncate_to is not None and not self._attached:  # attached: an answer to a second Hello
            assert msg.truncate_to >= min(self.commit, log.next_offset), "a committed entry is never cut"
            log.truncate(msg.truncate_to)
            self._leader_history = list(msg.history or [])
            self._attached, self._hello_sent, self.ack_due = True, False, True
        if self._attached and msg.truncate_to is not None and msg.at > log.next_offset and not log.segments:
            log.start_at(msg.at)  # a new member; the leader's retention dropped what came before
        if not self._attached or msg.at > log.next_offset:
            self._attached = False
            return out + self._ask_attach()
        skip = log.next_offset - msg.at  # chunks a resend carries that this log has already
        for data in msg.chunks:
            header = chunk.read_header(data)
            assert header is not None
            if skip > 0:
                skip -= header.count
                continue
            log.append_chunk(data)
            self.ack_due = True
        self._take_history()
        self.commit = max(self.commit, msg.commit)
        return out

    def _ask_attach(self) -> list[Effect]:
        if self._hello_sent or self.leader is None:
            return []
        self._hello_sent = True
        return [self._send(self.leader, self._hello())]

    def _take_history(self) -> None:
        """The leader's epochs that this log reaches are its own (on disk before any ack)."""
        history = [h for h in self._leader_history if h[1] <= self.log.next_offset]
        if history != self.state.history:
            self.state.history = history
            self.save(self.state)

    def synced(self) -> list[Effect]:
        """The log's fdatasync returned (`log.committed` moved)."""
        if self.leads:
            return self._advance()
        # owed to the leader it attached to, if it still has it; chunks appended while that sync ran
        # are not on disk yet: another sync is owed, and its ack (the leader may push nothing more)
        due, self.ack_due = self.ack_due, self.log.next_offset > self.log.committed
        if due and self._attached and self.leader is not None:
            return [self._send(self.leader, StreamAck(self.state.epoch, self.me, self.log.committed))]
        return []

    # -- the leader ------------------------------------------------------------------------------

    def hello(self, msg: StreamHello) -> list[Effect]:
        if msg.member not in self.members:
            return []  # its StreamHello comes again once it is a member here (set_members announces)
        out = self._newer(msg.epoch)
        if not self.leads:
            if msg.member == self.leader:  # my leader restarted: it leads no more
                self.leader = None
                out += self._arm()
            return out
        self.down.discard(msg.member)
        log = self.log
        at = divergence(self.state.history, log.next_offset, msg.history, msg.next_offset)
        found = log.chunk_at(at)
        if found is not None:
            at = found[2]  # a chunk's start (both logs hold the same chunks below the divergence)
        chunks = log.read_chunks(at, CATCH_UP_BYTES_MAX) if at < log.next_offset else []
        self._acked.pop(msg.member, None)
        self._sent[msg.member] = _end(chunks, at)
        self._in_flight[msg.member] = []
        return out + [self._send(msg.member, StreamAppend(self.state.epoch, self.me, at, chunks, self.commit,
                                                          at, list(self.state.history)))]

    def appended(self, data: bytes) -> list[Effect]:
        """The leader appended one chunk: it goes to every replica in step."""
        header = chunk.read_header(data)
        assert header is not None
        out = []
        for member, sent in self._sent.items():
            if sent != header.first_offset or member in self.down:
                continue
            flight = self._in_flight.setdefault(member, [])
            if sum(size for _, size in flight) + len(data) > IN_FLIGHT_BYTES_MAX:
                continue  # out of step: the next batch goes when it acks what it has (`ack`)
            flight.append((header.next_offset, len(data)))
            self._sent[member] = header.next_offset
            out.append(self._send(member, StreamAppend(self.state.epoch, self.me, sent, [data], self.commit)))
        return out

    def ack(self, msg: StreamAck) -> list[Effect]:
        if msg.member not in self.members:
            return []
        out = self._newer(msg.epoch)
        if not self.leads or msg.epoch != self.state.epoch or msg.member not in self._sent:
            return out
        self._acked[msg.member] = max(self._acked.get(msg.member, 0), msg.written)
        flight = self._in_flight.get(msg.member)
        if flight:
            self._in_flight[msg.member] = [f for f in flight if f[0] > msg.written]
        out += self._advance()
        sent = self._sent[msg.member]
        if self._acked[msg.member] >= sent and sent < self.log.next_offset and msg.member not in self.down:
            chunks = self.log.read_chunks(sent, CATCH_UP_BYTES_MAX)
            self._sent[msg.member] = _end(chunks, sent)
            out.append(self._send(msg.member, StreamAppend(self.state.epoch, self.me, sent, chunks, self.commit)))
        return out

    def _advance(self) -> list[Effect]:
        """The commit: the highest offset a majority has on disk, counting only members whose log
        reaches this epoch's start (Raft 5.4.2). Replicas hear of a move at once."""
        if not self.leads:
            return []
        start = self.state.history[-1][1] if self.state.history else 0
        on_disk = sorted([self.log.committed] + [a for a in self._acked.values() if a >= start], reverse=True)
        if len(on_disk) < self._majority or on_disk[self._majority - 1] <= self.commit:
            return []
        self.commit = on_disk[self._majority - 1]
        return [self._send(m, StreamAppend(self.state.epoch, self.me, sent, [], self.commit))
                for m, sent in self._sent.items() if m not in self.down]

    # -- the cluster -----------------------------------------------------------------------------

    def nodes_down(self, nodes: set[str]) -> list[Effect]:
        lost = nodes & set(self.members) - {self.me}
        self.down |= lost
        for m in lost:
            self._sent.pop(m, None)  # attached again by its StreamHello when it is back
        if self.leader in lost:
            self.leader = None
            self.role = REPLICA
            return self._arm()
        return []

    def nodes_up(self, nodes: set[str]) -> list[Effect]:
        back = nodes & self.down
        self.down -= back
        if not self.leads:
            return []
        announce = StreamAppend(self.state.epoch, self.me, self.log.next_offset, [], self.commit)
        return [self._send(m, announce) for m in sorted(back)]  # it answers with a StreamHello

    def set_members(self, members: Sequence[str]) -> list[Effect]:
        """The stream's committed member list changed (see the docstring): the majority is the
        new list's; a leader announces itself to new members (they attach with a StreamHello) and
        may commit more with a smaller majority; a replica whose leader went stands for election;
        a member that was removed serves no more (it steps down if it led)."""
        members = tuple(members)
        if members == self.members or not members:
            return []
        old, self.members = self.members, members
        for m in set(old) - set(members):
            self._sent.pop(m, None)
            self._acked.pop(m, None)
            self._in_flight.pop(m, None)
            self.down.discard(m)
        self._votes &= set(members)
        if self.me not in members:
            self._follow(None)
            return []
        if self.leads:
            announce = StreamAppend(self.state.epoch, self.me, self.log.next_offset, [], self.commit)
            new = [m for m in members if m not in old and m not in self.down]
            return [self._send(m, announce) for m in new] + self._advance()
        if self.leader is not None and self.leader not in members:
            self._follow(None)
            return self._arm()
        return []

    def status(self) -> dict[str, Any]:
        return {"role": self.role, "epoch": self.state.epoch, "leader": self.leader}


def _end(chunks: list[bytes], at: int) -> int:
    if not chunks:
        return at
    header = chunk.read_header(chunks[-1])
    assert header is not None
    return header.next_offset
