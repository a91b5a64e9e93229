"""The metadata machine's version (actors/node/metadata_machine.py, raft/versions.py): a metadata log
written before versions replays as version 1, and a member whose code does not run the version
its log switches to halts there, applying nothing after it."""
from __future__ import annotations

import random

from actors.node.metadata_machine import METADATA_VERSION, MetadataMachine, encode
from metadata import Registry
from metadata.commands import AddVhost
from raft import ClusterConfig, Entry, MemoryLog, RaftCore
from raft import commands
from raft.effects import MachineHalted

ME = "n1:node/metadata"


def written_log(*commands_: bytes) -> MemoryLog:
    log = MemoryLog()
    log.append([Entry(i, 1, command) for i, command in enumerate(commands_, 1)])
    log.sync()
    log.set_written(len(commands_))
    log.save_hard_state(1, ME)
    return log


def member(log: MemoryLog) -> tuple[RaftCore, Registry, list]:
    registry, applied = Registry(), []
    machine = MetadataMachine(registry, lambda origin, key, cmd, result, changes: applied.append(cmd),
                              lambda: None)
    return RaftCore(ME, ClusterConfig(frozenset({ME})), log, machine, random.Random(0)), registry, applied


def lead(core: RaftCore) -> list:
    out: list = []
    for _ in range(40):
        out += core.tick()
    out += core.written(core.log.sync())
    return out


def test_a_log_without_versions_replays_as_version_1() -> None:
    assert METADATA_VERSION == 1
    log = written_log(commands.user(encode("n1", 1, AddVhost("a"))), commands.user(encode("n1", 2, AddVhost("b"))))
    core, registry, applied = member(log)
    lead(core)
    assert core.machine_version == 1 and applied == [AddVhost("a"), AddVhost("b")]
    assert registry.vhost_exists("a") and registry.vhost_exists("b")
    assert not [e for e in log.entries(1, log.last_index_term()[0] + 1) if e.command[0] == commands.VERSION]


def test_a_member_that_does_not_run_the_logs_version_halts_before_it() -> None:
    log = written_log(commands.user(encode("n1", 1, AddVhost("a"))), commands.version(2),
                      commands.user(encode("n1", 2, AddVhost("b"))))
    core, registry, applied = member(log)
    out = lead(core)
    assert [e for e in out if isinstance(e, MachineHalted)] == [
        MachineHalted(2, "the log switches the machine to version 2 at index 2; this member runs versions up to 1")]
    assert applied == [AddVhost("a")] and not registry.vhost_exists("b")
    assert core.halted == 2 and core.applied == 1
