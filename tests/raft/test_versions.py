"""Machine versions (raft/versions.py): the leader switches the machine to a new version at one
committed index once every member runs it; a member that cannot run it halts there.

Reference: Ra's machine versions (ra_machine:version/0, which_module/1), as rabbit_fifo uses them."""
from __future__ import annotations

import random

from raft import MemoryLog, RaftCore
from raft import commands
from raft.effects import MachineHalted, VersionSwitched
from raft.roles import LEADER
from tests.raft.harness import SETTINGS, Cluster, cfg, cmd
from tests.sim.kvmachine import KvMachine


class Versioned(KvMachine):
    """Version 2 doubles every increment: an entry applied by the wrong version's rules shows."""

    def __init__(self, runs: int) -> None:
        super().__init__()
        self.runs = runs
        self.upgrades: list[tuple[int, int]] = []

    def version(self) -> int:
        return self.runs

    def apply(self, meta, command, state):
        if meta.machine_version >= 2:
            command = command.replace(b"\x01", b"\x02", 1)  # ["incr", "k", 1, n]: the delta
        return super().apply(meta, command, state)

    def upgrade(self, state, old, new):
        self.upgrades.append((state["n"], old, new))
        return state


def cluster(runs: dict[str, int]) -> Cluster:
    ids = tuple(sorted(runs))
    c = Cluster({i: RaftCore(i, cfg(*ids), MemoryLog(), Versioned(runs[i]), random.Random(n), SETTINGS)
                 for n, i in enumerate(ids)})
    c.tick(25)
    return c


def leader(c: Cluster) -> RaftCore:
    (core,) = [x for n, x in c.cores.items() if x.role == LEADER and n not in c.down]
    return core


def version_entries(core: RaftCore) -> list[tuple[int, int]]:
    last = core.log.last_index_term()[0]
    return [(e.index, commands.version_of(e.command)) for e in core.log.entries(core.log.first_index(), last + 1)
            if e.command[0] == commands.VERSION]


def test_no_switch_while_a_member_runs_the_old_version():
    c = cluster({"a": 2, "b": 2, "c": 1})
    lead = leader(c)
    c.run(lead.id, lead.propose(cmd(1), "x"))
    c.tick(4)
    assert {core.machine_version for core in c.cores.values()} == {1}
    assert version_entries(lead) == []
    assert {core.state["kv"]["k"] for core in c.cores.values()} == {1}


def test_the_switch_is_one_committed_index_on_every_member():
    """Entries before the VERSION entry apply by version 1's rules and those after it by version
    2's, on every member: the same states at the same indexes."""
    c = cluster({"a": 2, "b": 2, "c": 2})
    lead = leader(c)
    c.tick(4)
    ((at, version),) = version_entries(lead)
    assert version == 2 and lead.commit >= at
    c.run(lead.id, lead.propose(cmd(1), "x"))
    c.tick(4)
    assert [core.machine_version for core in c.cores.values()] == [2, 2, 2]
    assert {core.state["kv"]["k"] for core in c.cores.values()} == {2}
    assert [core.machine.upgrades for core in c.cores.values()] == [[(0, 1, 2)]] * 3  # before "x"
    switched = [e for e in c.replies if isinstance(e, VersionSwitched)]
    assert switched == [VersionSwitched(at, 1, 2)] * 3


def test_the_last_member_upgraded_triggers_the_switch():
    """A rolling upgrade: c restarts running version 2 (same log), its replies say so, the
    leader appends the switch."""
    c = cluster({"a": 2, "b": 2, "c": 1})
    lead = leader(c)
    c.run(lead.id, lead.propose(cmd(1), "x"))
    c.tick(4)
    assert lead.id == "c"  # the old member leads (the seeds): its restart ends its term too
    old = c.cores["c"]
    c.cores["c"] = RaftCore("c", cfg("a", "b", "c"), old.log, Versioned(2), random.Random(9), SETTINGS)
    c.tick(40)  # c led: the others elect a leader again once its heartbeats stop
    assert [core.machine_version for core in c.cores.values()] == [2, 2, 2]
    lead = leader(c)
    c.run(lead.id, lead.propose(cmd(2), "y"))
    c.tick(4)
    assert {core.state["kv"]["k"] for core in c.cores.values()} == {1 + 2}


def test_a_member_that_cannot_run_the_version_halts_before_it():
    """A member whose code runs only version 1 applies nothing from the switch on, says why once,
    keeps acking the log (the group keeps its majority) and stands for no election."""
    c = cluster({"a": 2, "b": 2, "c": 2})
    lead = leader(c)
    c.tick(4)
    ((at, _),) = version_entries(lead)
    # a follower's node is downgraded: it restarts with its log, running version 1 only
    name = min(n for n in c.cores if n != lead.id)
    c.cores[name] = old = RaftCore(name, cfg("a", "b", "c"), c.cores[name].log, Versioned(1), random.Random(9),
                                   SETTINGS)
    c.replies.clear()
    c.run(lead.id, lead.propose(cmd(1), "x"))
    c.tick(4)
    halts = [e for e in c.replies if isinstance(e, MachineHalted)]
    assert halts == [MachineHalted(at, f"the log switches the machine to version 2 at index {at}; "
                                       "this member runs versions up to 1")]
    assert old.halted == at and old.applied == at - 1 and "k" not in old.state["kv"]
    assert lead.commit == old.log.last_index_term()[0]  # c still acks what it holds
    c.down = {lead.id}
    c.tick(60)  # the leader gone: the member that runs the log's version leads, with the halted one's vote
    assert old.role != LEADER and leader(c).id not in (lead.id, name)
    assert len([e for e in c.replies if isinstance(e, MachineHalted)]) == 1  # said once


def test_a_log_written_before_versions_replays_as_version_1():
    """A log of user entries only (written by code without versions) is a version-1 log."""
    c = cluster({"a": 1, "b": 1, "c": 1})
    lead = leader(c)
    for n in range(3):
        c.run(lead.id, lead.propose(cmd(n), n))
    c.tick(4)
    log = lead.log
    replay = RaftCore("z", cfg("z"), log, Versioned(2), random.Random(1), SETTINGS)
    assert replay.machine_version == 1
    for _ in range(30):
        replay.tick()
    replay.written(log.sync())
    # alone now, it leads, switches to its version after the old entries: they kept version 1's rules
    assert replay.role == LEADER and replay.machine_version == 2
    assert replay.state["kv"]["k"] == 3


def test_a_snapshot_records_its_version():
    from raft.snapshot import decode_snapshot
    c = cluster({"a": 2, "b": 2, "c": 2})
    lead = leader(c)
    c.tick(4)
    index, term, data = lead.capture_snapshot()
    assert decode_snapshot(data)[1] == 2
    old = RaftCore("c", cfg("a", "b", "c"), MemoryLog(), Versioned(1), random.Random(3), SETTINGS)
    out: list = []
    old.restore_snapshot(index, term, data, out)
    assert [type(e) for e in out if isinstance(e, MachineHalted)] == [MachineHalted]
    assert old.halted == index and old.applied == 0


def test_a_member_restarting_on_a_snapshot_of_a_newer_version_halts_and_says_so_at_its_first_tick():
    from raft.snapshot import encode_snapshot
    log = MemoryLog()
    log.install_snapshot(5, 1, encode_snapshot(Versioned(2), cfg("a", "b", "c"), {"kv": {}, "n": 0, "digest": "",
                                                                                  "live": []}, 2))
    old = RaftCore("a", cfg("a", "b", "c"), log, Versioned(1), random.Random(0), SETTINGS)
    assert old.halted == 6 and old.machine_version == 1 and old.state == Versioned(1).init()
    assert [e for e in old.tick() if isinstance(e, MachineHalted)] == [
        MachineHalted(6, "the snapshot at index 5 holds machine version 2; this member runs versions up to 1")]
    assert not [e for e in old.tick() if isinstance(e, MachineHalted)]  # said once


def test_a_snapshot_written_before_versions_is_version_1():
    import msgpack
    from raft.snapshot import decode_snapshot
    data = msgpack.packb([cfg("a").encode(), {"kv": {}}], use_bin_type=True)
    assert decode_snapshot(data)[1:] == (1, {"kv": {}})


def test_an_uncommitted_switch_that_a_new_leader_overwrites_is_forgotten():
    """§5.3: a follower's conflicting suffix goes, and with it the switch it held."""
    from raft import Entry
    from raft.messages import AppendEntries
    log = MemoryLog()
    log.append([Entry(1, 1, commands.NOOP_COMMAND), Entry(2, 1, commands.version(2))])
    log.sync()
    log.set_written(2)
    b = RaftCore("b", cfg("a", "b", "c"), log, Versioned(2), random.Random(0), SETTINGS)
    assert b.log_version() == 2
    b.step(AppendEntries(2, "c", 1, 1, (Entry(2, 2, commands.NOOP_COMMAND),), 0))
    assert b.log_version() == 1 and b.versions == [(0, 1)]


def test_a_switch_held_back_by_a_leadership_transfer_happens_when_it_times_out():
    c = cluster({"a": 1, "b": 2, "c": 2})
    lead = leader(c)
    assert lead.id != "a"  # the seeds: b or c leads, the other is the transfer's target
    (target,) = {"b", "c"} - {lead.id}
    c.down = {target}  # the transfer cannot complete
    c.run(lead.id, lead.transfer_leadership(target))
    c.cores["a"] = RaftCore("a", cfg("a", "b", "c"), c.cores["a"].log, Versioned(2), random.Random(5), SETTINGS)
    c.tick(3)
    assert lead.transferee is not None and lead.log_version() == 1  # every member runs 2, held back
    c.tick(SETTINGS.transfer_timeout_ticks)
    assert lead.transferee is None and lead.log_version() == 2
