"""Machine versions: every member switches its machine to a new version at one committed index
(Ra's machine versions, rabbit_fifo's `version/0` and `which_module/1`).

Theory of operation. A machine says the highest version its code runs (`version()`, 1 when it
says nothing); every log starts at version 1 (`BASE_VERSION`: a log written before versions
existed is a version-1 log). Each member tells its leader the version it runs in every
AppendReply and HeartbeatReply (`machine_version`; a member whose code predates the field is
read as 1). A leader appends a VERSION entry for the highest version that it and every member of
the configuration run, once that is above the version its log already switches to; so the
switch waits until the last member is upgraded (and, on a leader handing over, until the
transfer is over), and a member added later that cannot run it halts (below). Applying the entry switches the machine on every member at that one index: the
entries before it are applied by the old version's rules, those after it by the new one's
(`ApplyMeta.machine_version`), and a machine with an `upgrade(state, old, new)` hook converts
its state there. A rolling upgrade therefore never lets two members apply one entry differently,
whatever order their nodes are upgraded in.

A member that applies a VERSION entry above what its code runs (its node was not upgraded, or
was downgraded) refuses it: it halts before that entry (`MachineHalted`, said once; the shell
logs why), applies nothing more, stands for no election and, if it led, steps down; it still
writes and acks the log, so the group keeps its majority, and once its node runs the new code
it restarts and applies from where it stopped. A snapshot records the version its state was
taken at (snapshot.py); one above what the code runs halts the member likewise.

Invariants: versions only go up; `machine_version` is the version of the entry at `applied`;
`versions` lists (index, version) of the log's VERSION entries above the snapshot, the first
being the snapshot's own, and a truncation drops those it cuts (as `configs`).
Left out: Ra's rule that a voter refuses a candidate with a lower machine version; here an old
member that wins an election halts at the entry and steps down instead.
"""
from __future__ import annotations

from typing import Any

from raft import commands
from raft.effects import Effect, MachineHalted, VersionSwitched
from raft.log import Entry
from raft.machine import Machine
from raft.roles import LEADER

BASE_VERSION = 1


def supported_version(machine: Machine) -> int:
    """The highest machine version `machine`'s code runs."""
    hook = getattr(machine, "version", None)
    return hook() if hook else BASE_VERSION


def upgrade(machine: Machine, state: Any, old: int, new: int) -> Any:
    hook = getattr(machine, "upgrade", None)
    return hook(state, old, new) if hook else state


class VersionMixin:
    def log_version(self) -> int:
        """The version the log switches to by its last entry (committed or not)."""
        return self.versions[-1][1]

    def note_version(self, entry: Entry) -> None:
        self.versions.append((entry.index, commands.version_of(entry.command)))

    def maybe_switch_version(self, out: list[Effect]) -> None:
        """A leader: append the VERSION entry every member can run, if it is new."""
        if (self.supported <= self.log_version() or self.role != LEADER or self.halted is not None
                or self.transferee is not None):
            return
        progress = self.progress
        target = min([self.supported] + [progress[m].machine_version if m in progress else BASE_VERSION
                                         for m in self.config.members() if m != self.id])
        if target <= self.log_version():
            return
        if self.quiet:
            self.wake_up()
        self.append_local(commands.version(target))
        self.replicate_soon(out)
        self.maybe_commit(out)

    def heard_version(self, pr: Any, version: int, out: list[Effect]) -> None:
        """A follower's reply said which version it runs."""
        if version != pr.machine_version:
            pr.machine_version = version
            self.maybe_switch_version(out)

    def apply_version(self, e: Entry, out: list[Effect]) -> None:
        new, old = commands.version_of(e.command), self.machine_version
        if new <= old:
            return  # a version the log switched to already (versions only go up)
        if new > self.supported:
            self.halt(e.index, f"the log switches the machine to version {new} at index {e.index}; "
                               f"this member runs versions up to {self.supported}", out)
            return
        self.state = upgrade(self.machine, self.state, old, new)
        self.machine_version = new
        out.append(VersionSwitched(e.index, old, new))

    def halt(self, index: int, reason: str, out: list[Effect]) -> None:
        self.halted = index
        out.append(MachineHalted(index, reason))
        if self.role == LEADER:
            self.become_follower(self.term, None, out)
