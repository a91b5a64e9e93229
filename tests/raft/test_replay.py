"""A restarted member applies again what its log held: the machine chooses which of those
entries' effects are carried out again (machine.replayed_effects), as ra's recovery drops the
effects of what was applied before the restart; what comes after is carried out whole."""
from __future__ import annotations

import random

from raft import MemoryLog, RaftCore
from raft.effects import MachineEffect
from raft.roles import LEADER
from tests.raft.harness import SETTINGS, cfg


class Echo:
    """Each command gives two effects: ("once", c), which must not be carried out twice, and
    ("again", c), which may."""

    def init(self) -> list:
        return []

    def apply(self, meta, command: bytes, state: list):
        return state + [command], None, [("once", command), ("again", command)]

    def snapshot(self, state: list) -> list:
        return state

    def restore(self, value: list) -> list:
        return list(value)

    def replayed_effects(self, effects: list) -> list:
        return [e for e in effects if e[0] == "again"]


def leader_on(log: MemoryLog) -> tuple[RaftCore, list]:
    core = RaftCore("a", cfg("a"), log, Echo(), random.Random(0), SETTINGS)
    out = core.tick()  # the only voter elects itself
    assert core.role == LEADER
    return core, out


def applied(core: RaftCore, out: list) -> list:
    """Write what is unwritten (the only voter commits what it wrote) and collect machine effects."""
    core.log.sync()
    out = out + core.written(core.log.last_index_term()[0])
    return [e.effect for e in out if isinstance(e, MachineEffect)]


def test_a_restarted_member_carries_out_only_the_replayable_effects_of_what_its_log_held():
    log = MemoryLog()
    first, out = leader_on(log)
    out += first.propose(b"x", 1) + first.propose(b"y", 2)
    assert applied(first, out) == [("once", b"x"), ("again", b"x"), ("once", b"y"), ("again", b"y")]

    again, out = leader_on(log)  # the same log, a new run of the member
    out += again.propose(b"z", 3)
    assert applied(again, out) == [("again", b"x"), ("again", b"y"), ("once", b"z"), ("again", b"z")]
    assert again.state == [b"x", b"y", b"z"]
