"""Snapshots and the release cursor.

A member that restores a snapshot and applies the rest of the log must end where a member that
applied the whole log ends, giving the same replies and effects on the way (Raft §7: the snapshot
replaces the prefix). And the log must be free to go: `live_indexes` names exactly what the
state still refers to, and nothing once the queue is drained (RabbitMQ's release cursor).
"""
from __future__ import annotations

import os

import msgpack
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.quorum import commands as c
from actors.quorum.config import QueueSettings
from actors.quorum.effects import DeadLetterDeliver, Deliver, GetOk, Release
from actors.quorum.machine import lowest_live_index
from tests.quorum.harness import Meta, Run, header

EXAMPLES = int(os.environ.get("QQ_EXAMPLES", "300"))  # more for a soak: QQ_EXAMPLES=5000
CHANNELS = st.sampled_from(["A", "B"])
IDS = st.lists(st.integers(0, 12), max_size=4).map(tuple)
HEADERS = st.sampled_from([header(), header(priority=7), header(expiration="5"), header(priority=9, expiration="0")])
DEAD_LETTERING = st.sampled_from([
    {}, {"x-dead-letter-exchange": "dlx"},
    {"x-dead-letter-exchange": "dlx", "x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish"},
])
CONFIGS = st.builds(lambda base, dlx: {**base, **dlx}, st.fixed_dictionaries({}, optional={
    "x-message-ttl": st.sampled_from([0, 3, 30]), "x-delivery-limit": st.sampled_from([-1, 0, 2]),
    "x-max-length": st.sampled_from([2, 5]), "x-max-length-bytes": st.sampled_from([6, 20]),
    "x-overflow": st.sampled_from(["drop-head", "reject-publish"]),
    "x-single-active-consumer": st.booleans(), "x-expires": st.sampled_from([10, 100]),
}), DEAD_LETTERING)


@st.composite
def command_logs(draw) -> list[c.Command]:
    """Plausible logs: most settles/returns name msg ids the machine handed out."""
    now, seq, log = 0, 0, []
    for _ in range(draw(st.integers(1, 60))):
        now += draw(st.sampled_from([0, 0, 1, 4]))
        kind = draw(st.sampled_from("EEEECSRDQKGPTXWUN"))
        if kind == "E":
            seq += 1
            log.append(c.Enqueue(now, "p", seq, "x", "rk", draw(HEADERS), b"x" * draw(st.integers(0, 4))))
        elif kind == "C":
            log.append(c.Checkout(now, draw(CHANNELS), "t", draw(st.integers(0, 3)), draw(st.booleans()),
                                  draw(st.sampled_from([0, 2]))))
        elif kind in "SRD":
            cls = {"S": c.Settle, "R": c.Return, "D": c.Discard}[kind]
            log.append(cls(now, draw(CHANNELS), draw(st.sampled_from(["t", "g"])), draw(IDS)))
        elif kind == "Q":
            log.append(c.Credit(now, draw(CHANNELS), "t", draw(st.integers(1, 3))))
        elif kind == "K":
            log.append(c.Cancel(now, draw(CHANNELS), "t"))
        elif kind == "G":
            log.append(c.Get(now, draw(CHANNELS), "g", draw(st.booleans())))
        elif kind == "P":
            log.append(c.Purge(now))
        elif kind == "T":
            log.append(c.Tick(now))
        elif kind == "X":
            log.append(c.ChannelDown(now, draw(CHANNELS)))
        elif kind == "W":
            log.append(draw(st.sampled_from([c.DeadLetterCheckout(now, "w", 2), c.DeadLetterSettle(now, (0, 1))])))
        elif kind == "U":
            log.append(c.UpdateSettings(now, QueueSettings(max_length=draw(st.sampled_from([None, 3])),
                                                           dead_letter_exchange="dlx")))
        else:
            log.append(c.ChannelDown(now, "p"))
            seq = 0
    return log


def roundtrip(value):
    """What the Raft snapshot writer and reader do to the value (persist/raft/snapshot.py)."""
    return msgpack.unpackb(msgpack.packb(value, use_bin_type=True), raw=False, strict_map_key=False)


@settings(max_examples=EXAMPLES, deadline=None)
@given(CONFIGS, command_logs(), st.data())
def test_snapshot_restore_continue_matches_an_uninterrupted_run(arguments, log, data):
    cut = data.draw(st.integers(0, len(log)))
    straight, resumed = Run(arguments), Run(arguments)
    for command in log[:cut]:
        straight(command)
        resumed(command)
    value = roundtrip(resumed.machine.snapshot(resumed.state))
    resumed.state = resumed.machine.restore(value)
    assert resumed.machine.snapshot(resumed.state) == straight.machine.snapshot(straight.state)
    assert resumed.live() == straight.live()
    for command in log[cut:]:
        assert resumed(command) == straight(command), command
    assert roundtrip(resumed.machine.snapshot(resumed.state)) == roundtrip(straight.machine.snapshot(straight.state))
    assert resumed.machine.on_leader(resumed.state) == straight.machine.on_leader(straight.state)


def drain(run: Run, effects: list) -> None:
    """Settle everything: consume with acks, settle each delivery and what the worker gets."""
    effects = effects + run(c.Checkout(0, "drain", "t", 50, True))[1]
    while effects:
        more = []
        for effect in effects:
            if isinstance(effect, Deliver):
                more += run(c.Settle(0, effect.channel, effect.tag, tuple(m[0] for m in effect.messages)))[1]
            elif isinstance(effect, DeadLetterDeliver):
                more += run(c.DeadLetterSettle(0, tuple(m[0] for m in effect.messages)))[1]
        effects = more


def test_a_drained_queue_lets_the_whole_log_go():
    run = Run({"x-dead-letter-exchange": "dlx", "x-dead-letter-strategy": "at-least-once",
               "x-overflow": "reject-publish", "x-delivery-limit": 1})
    run(c.DeadLetterCheckout(0, "w", 32))
    run.publish(*[b"m"] * 30)
    run.publish(*[b"h"] * 10, hdr=header(priority=9))
    run(c.Checkout(0, "A", "t", 5, True))
    to_worker = []
    for msg_id in range(10):  # each returned twice: past the limit of 1, held for the worker
        to_worker += [e for e in run(c.Return(0, "A", "t", (msg_id,)))[1] if isinstance(e, DeadLetterDeliver)]
    assert run.stats["messages_dead_lettered"] == 5
    reply, _ = run(c.Get(0, "B", "g", True))
    assert isinstance(reply, GetOk)
    live = run.live()
    assert len(live) == 40 and lowest_live_index(run.state) == live[0]
    run(c.ChannelDown(0, "A"))
    run(c.ChannelDown(0, "B"))
    drain(run, to_worker)
    assert run.stats["messages"] == 0
    assert run.live() == [] and lowest_live_index(run.state) is None
    # persist/raft/snapshot.py compacts below min(live, default=index + 1): the whole log
    assert min(run.machine.live_indexes(run.state), default=run.index + 1) == run.index + 1


def test_live_indexes_are_exactly_what_is_held():
    run = Run({"x-delivery-limit": -1})
    run.publish(b"a", b"b", b"c", b"d")                 # indexes 1-4
    run(c.Checkout(0, "A", "t", 2, True))               # 5: A holds 1 and 2
    run(c.Settle(0, "A", "t", (0,)))                    # 6: 1 settled, A gets 3
    ex, rk, hdr, body = c.published(run.log[1])
    run(c.Requeue(0, "A", "t", 1, 2, ex, rk, hdr, body))  # 7: 2 moves to the back as 7, A gets 4
    assert run.live() == [3, 4, 7]
    assert lowest_live_index(run.state) == 3
    state, _reply, _effects = run.machine.apply(Meta(8, 1), c.encode(c.Purge(0)), run.state)
    assert run.live() == [3, 4]


def test_a_busy_queue_releases_below_its_lowest_live_index_every_4096_entries():
    """rabbit_fifo's checkpoints move the release cursor while a long queue is in use."""
    run = Run()
    effects = run.publish(*[b"m"] * 4200)                  # indexes 1-4200; checked at 4096
    assert [e for e in effects if isinstance(e, Release)] == []  # index 1 is still needed
    run(c.Checkout(0, "A", "t", 100, True))                 # 4201: A holds 1-100
    run(c.Settle(0, "A", "t", tuple(range(100))))           # 4202: A holds 101-200
    effects = run.publish(*[b"m"] * (8191 - run.index))     # up to 8191: not yet time
    assert [e for e in effects if isinstance(e, Release)] == []
    assert run.publish(b"m") == [Release(100)]              # 8192
    assert run.publish(b"m") == []
