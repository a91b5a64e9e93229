"""A deterministic network of a replicated stream's member cores (actors/stream/core.py with
replication.py) over real logs in a temporary directory: the tests choose every step.

Members are named by node ("n1".."n3") and addressed by that name; anything else sent to is a
channel, whose Confirms and Deliveries are kept. Messages between members wait in per-pair FIFO
queues (the runtime keeps order per pair of hosts) until `deliver` hands one on; `sync` does what
the shell does around an fdatasync, or in two steps (`begin_sync`, `end_sync`) with deliveries
between, as the shell's syncing thread allows; a timer fires only when the test says. `crash` closes a
member's files (what a kill -9 after the flush leaves, or with `power` only what was synced) and
drops what was in flight to it. `set_members` is a committed membership change.
"""
from __future__ import annotations

import random
from collections import defaultdict, deque
from pathlib import Path
from typing import Any

from actors.messages.channel_queue import Confirm, Consume, Deliver, Publish, Published
from actors.stream.core import StreamQueue
from actors.stream.replication import Replication
from effects import Send, StartTimer
from persist.stream import epochs
from persist.stream.log import StreamLog, make_durable
from wire.properties import BasicProperties, encode_content_header

HEADER = encode_content_header(60, 1, BasicProperties())
ARGS = {"x-queue-type": "stream"}


def published(seq: int, body: bytes) -> Published:
    return Published(seq, "", "s", HEADER, body)


class Net:
    def __init__(self, root: Path, members: tuple[str, ...] = ("n1", "n2", "n3")) -> None:
        self.root = root
        self.members = members
        self.known = set(members)  # every member there has been: a removed one is still addressed
        self.cores: dict[str, StreamQueue] = {}
        self.wires: dict[tuple[str, str], deque] = defaultdict(deque)
        self.timers: dict[str, set[str]] = defaultdict(set)
        self.confirmed: dict[Any, int] = defaultdict(int)  # channel -> highest confirm seen
        self.delivered: dict[Any, list[tuple[int, bytes]]] = defaultdict(list)
        self.down: set[str] = set()
        self.starts: dict[str, int] = defaultdict(int)  # each member's incarnation
        self.syncing: dict[str, tuple[int, list[int]]] = {}  # a member's sync in flight: its flush
        for m in members:
            self.start(m)

    # -- members ---------------------------------------------------------------------------------

    def start(self, m: str) -> None:
        self.starts[m] += 1
        directory = self.root / m
        log = StreamLog.open(directory, 1 << 20)
        rep = Replication(m, self.members, log, epochs.load(directory), lambda s, d=directory: epochs.save(d, s),
                          lambda member: member)
        core = self.cores[m] = StreamQueue("/", "s", log, dict(ARGS), 1000, rep)
        self.run(m, core.start(now_ms=1000))

    def crash(self, m: str, *, power: bool = False) -> None:
        """m's process dies; with `power`, its disk keeps only what was synced (the log cut back
        to `committed`; the EPOCHS file is synced whenever it is written)."""
        log = self.cores.pop(m).log
        _, fds = self.syncing.pop(m, (0, []))
        make_durable(fds)  # closes them (the sync never returned to the dead process)
        if power:
            log.truncate(log.committed)
        log.close()
        for pair in list(self.wires):
            if m in pair:
                self.wires[pair].clear()
        self.timers[m].clear()

    def node_down(self, m: str, *, power: bool = False) -> None:
        self.crash(m, power=power)
        self.down.add(m)
        for other, core in self.cores.items():
            self.run(other, core.nodes_down({m}))

    def node_up(self, m: str) -> None:
        self.down.discard(m)
        self.start(m)
        for other, core in self.cores.items():
            if other != m:
                self.run(other, core.nodes_up({m}))

    def set_members(self, members: tuple[str, ...]) -> None:
        """A committed membership change (actors/node/stream_membership.py): every running member
        of the old list takes the new one, then a new member starts (empty) from it."""
        old, self.members = self.members, tuple(members)
        self.known |= set(members)
        for m in old:
            if m in self.cores:
                self.run(m, self.cores[m].set_members(self.members))
        for m in self.members:
            if m not in old:
                self.start(m)

    def dispose(self, m: str) -> None:
        """A removed member is disposed of: its log's directory goes."""
        core = self.cores.pop(m)
        self.run(m, core.delete())
        core.log.delete()
        self.timers[m].clear()

    def leader(self) -> str | None:
        leaders = [m for m, c in self.cores.items() if c.rep.leads]
        return leaders[-1] if leaders else None

    # -- effects and steps -----------------------------------------------------------------------

    def run(self, m: str, effects: list) -> None:
        for e in effects:
            if type(e) is StartTimer:
                self.timers[m].add(e.name)
            elif type(e) is Send and e.to in self.known:
                self.wires[(m, e.to)].append(e.msg)
            elif type(e) is Send and type(e.msg) is Confirm:
                self.confirmed[e.to] = max(self.confirmed[e.to], e.msg.upto)
            elif type(e) is Send and type(e.msg) is Deliver:
                self.delivered[e.to] += [(d.msg_id, d.body) for d in e.msg.messages]
            else:
                assert type(e) is Send, e

    def deliver(self, src: str, dst: str) -> bool:
        wire = self.wires.get((src, dst))
        if not wire:
            return False
        msg = wire.popleft()
        if dst in self.cores:
            self.run(dst, self.cores[dst].handle(src, msg, now_ms=1000))
        return True

    def sync(self, m: str) -> None:
        self.begin_sync(m)
        self.end_sync(m)

    def begin_sync(self, m: str) -> None:
        """The shell's flush and hand-over to its syncing thread (one sync in flight per member)."""
        assert m not in self.syncing
        core = self.cores[m]
        self.syncing[m] = core.log.flush()
        core.sync_started()

    def end_sync(self, m: str) -> None:
        """The fdatasync begun by `begin_sync` returned."""
        target, fds = self.syncing.pop(m)
        make_durable(fds)
        core = self.cores[m]
        core.log.commit(target)
        self.run(m, core.synced())

    def fire(self, m: str, name: str = "election") -> None:
        if name in self.timers[m]:
            self.timers[m].discard(name)
            self.run(m, self.cores[m].on_timer(name, now_ms=1000))

    def round(self) -> bool:
        """Deliver everything in flight, then sync every member that owes one; whether anything moved."""
        moved = False
        for pair in list(self.wires):
            while self.deliver(*pair):
                moved = True
        for m in list(self.cores):
            if m in self.syncing:
                self.end_sync(m)
                moved = True
            if self.cores[m].unsynced:
                self.sync(m)
                moved = True
        return moved

    def settle(self, rounds: int = 200) -> None:
        """Rounds until nothing moves (no timer fires)."""
        for _ in range(rounds):
            if not self.round():
                return
        raise AssertionError("the network did not settle")

    def step(self, rng: random.Random) -> None:
        """One random step: a delivery, a sync, or a timer."""
        choices: list[tuple] = [("deliver", p) for p, w in self.wires.items() if w and p[1] in self.cores]
        choices += [("begin_sync", m) for m, c in self.cores.items() if c.unsynced and m not in self.syncing]
        choices += [("end_sync", m) for m in self.syncing]
        choices += [("fire", m) for m in self.cores if "election" in self.timers[m]]
        if not choices:
            return
        kind, arg = rng.choice(choices)
        if kind == "deliver":
            self.deliver(*arg)
        elif kind == "begin_sync":
            self.begin_sync(arg)
        elif kind == "end_sync":
            self.end_sync(arg)
        else:
            self.fire(arg)

    # -- clients ---------------------------------------------------------------------------------

    def publish(self, m: str, channel: str, seq: int, body: bytes) -> None:
        self.run(m, self.cores[m].handle(channel, Publish([published(seq, body)]), now_ms=1000))

    def consume(self, m: str, channel: str, offset: Any = "first", credit: int = 10_000) -> None:
        self.run(m, self.cores[m].handle(channel, Consume(1, "c", True, credit, False, {"x-stream-offset": offset}),
                                         now_ms=1000))

    def bodies(self, m: str) -> list[bytes]:
        """Every entry in member m's log, committed or not."""
        log = self.cores[m].log
        reader = log.reader(log.first_offset)
        out: list[bytes] = []
        saved, log.committed = log.committed, log.next_offset
        try:
            while True:
                got = reader.read(1000)
                if not got:
                    return out
                out += [m.body for m in got]
        finally:
            log.committed = saved
            reader.close()
