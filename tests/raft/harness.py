"""Small helpers for core tests: build cores, pick effects out of a list, pump messages."""
from __future__ import annotations

import random

from raft import ClusterConfig, Entry, MemoryLog, RaftCore, RaftSettings
from raft.effects import PersistHardState, ToPeer, WriteSnapshot
from tests.sim.kvmachine import KvMachine, command

SETTINGS = RaftSettings(election_ticks=10, heartbeat_ticks=2, max_inflight=2, max_batch_entries=4,
                        snapshot_chunk_bytes=64, transfer_timeout_ticks=10)


def cfg(*voters: str, learners: tuple[str, ...] = ()) -> ClusterConfig:
    return ClusterConfig(frozenset(voters), frozenset(learners))


def make(id: str = "a", peers: tuple[str, ...] = ("a", "b", "c"), entries: list[Entry] = (),
         term: int = 0, settings: RaftSettings = SETTINGS, seed: int = 0,
         config: ClusterConfig | None = None) -> RaftCore:
    log = MemoryLog()
    log.append(list(entries))
    log.sync()
    log.set_written(log.last_index_term()[0])
    log.save_hard_state(term, None)
    return RaftCore(id, config or cfg(*peers), log, KvMachine(), random.Random(seed), settings)


def sends(effects: list, kind: type | None = None) -> list[ToPeer]:
    return [e for e in effects if isinstance(e, ToPeer) and (kind is None or isinstance(e.msg, kind))]


def of(effects: list, kind: type) -> list:
    return [e for e in effects if isinstance(e, kind)]


def cmd(n: int) -> bytes:
    return command("incr", "k", 1, n)


def elect(core: RaftCore) -> list:
    """Tick `core` to an election timeout and grant it every pre-vote and vote."""
    from raft.messages import PreVoteReply, RequestVoteReply
    out = []
    while not sends(out):
        out = core.tick()
    votes = []
    for s in sends(out):
        votes += core.step(PreVoteReply(core.term + 1, s.to, True))
    won = []
    for s in sends(votes):
        won += core.step(RequestVoteReply(core.term, s.to, True))
    return won


class Cluster:
    """Synchronous in-order delivery; every append is written at once. For scenario tests."""

    def __init__(self, cores: dict[str, RaftCore]) -> None:
        self.cores = cores
        self.down: set[str] = set()
        self.replies: list = []

    def run(self, node: str, effects: list) -> None:
        queue = [(node, e) for e in effects]
        while queue:
            node, e = queue.pop(0)
            core = self.cores[node]
            if isinstance(e, PersistHardState):
                core.log.save_hard_state(e.term, e.voted_for)
            elif isinstance(e, WriteSnapshot):
                core.log.install_snapshot(e.index, e.term, e.data)
                queue += [(node, x) for x in core.snapshot_written(e.index, e.term)]
            elif isinstance(e, ToPeer):
                if e.to in self.cores and e.to not in self.down and node not in self.down:
                    queue += [(e.to, x) for x in self.cores[e.to].step(e.msg)]
            else:
                self.replies.append(e)
            for name, other in sorted(self.cores.items()):
                if name not in self.down and other.log.unsynced():
                    queue += [(name, x) for x in other.written(other.log.sync())]

    def tick(self, n: int = 1) -> None:
        for _ in range(n):
            for node, core in sorted(self.cores.items()):
                if node not in self.down:
                    self.run(node, core.tick())
