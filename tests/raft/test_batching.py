"""Batched proposals and AppendEntries once per shell turn (the leader's hot path)."""
from __future__ import annotations

from dataclasses import replace

from raft.effects import ClientReply, NotLeader
from raft.messages import AppendEntries, AppendReply
from raft.roles import LEADER
from tests.raft.harness import SETTINGS, cmd, elect, make, of, sends


def leader(settings=SETTINGS):
    core = make("a", settings=settings)
    elect(core)
    assert core.role == LEADER
    core.written(core.log.sync())
    for peer in ("b", "c"):  # followers caught up to the leader's no-op
        core.step(AppendReply(core.term, peer, True, core.log.last_index_term()[0]))
    return core


def test_propose_batch_is_one_append_per_follower_and_one_reply_per_command():
    """Raft §5.3: the leader appends the commands to its log and sends them to each follower;
    a batch of k commands costs one AppendEntries per follower, not k."""
    core = leader(replace(SETTINGS, max_batch_entries=64))
    first = core.log.last_index_term()[0] + 1
    out = core.propose_batch([(cmd(n), f"c{n}") for n in range(5)])
    appends = sends(out, AppendEntries)
    assert sorted(s.to for s in appends) == ["b", "c"]
    assert [e.index for e in appends[0].msg.entries] == list(range(first, first + 5))
    core.written(core.log.sync())
    replies = of(core.step(AppendReply(core.term, "b", True, first + 4)), ClientReply)
    assert [r.corr for r in replies] == [f"c{n}" for n in range(5)]


def test_a_follower_refuses_the_whole_batch_with_not_leader():
    core = make("b")
    out = core.propose_batch([(cmd(1), 1), (cmd(2), 2)])
    assert out == [NotLeader(1, None), NotLeader(2, None)]


def test_append_per_turn_sends_only_from_replicate_with_everything_due():
    core = leader(replace(SETTINGS, append_per_turn=True, max_batch_entries=64))
    first = core.log.last_index_term()[0] + 1
    assert not sends(core.propose_batch([(cmd(1), 1)]))
    assert not sends(core.propose(cmd(2), 2))
    out = core.replicate()
    assert [[e.index for e in s.msg.entries] for s in sends(out, AppendEntries)] == \
        [[first, first + 1]] * 2
    assert core.replicate() == []  # nothing new: nothing sent
    # an ack makes room in the window: the next send waits for the turn as well
    assert not sends(core.step(AppendReply(core.term, "b", True, first + 1)))
