"""MetadataMachine: the registry as the state machine of the cluster's metadata Raft group.

Theory of operation. An entry of the metadata log is one registry command (metadata/commands.py)
with the node that proposed it and that node's key for the proposal, packed with msgpack (commands
are registered messages, so nested records travel as in an envelope: actors/messages). Every
member applies every committed entry to its node's one `Registry` with `apply_command`, which is a
deterministic function of (state, command), so every node's copy goes through the same states.
The state is that Registry object itself, updated in place: the node core and the listings read
it, and a machine that copied the registry per entry would cost more than the entry. What `apply`
mutates, exactly: the Registry it is given (`apply_command`: its tables - topology, access,
limits, policies - and its routing cache, which every change clears), and `applied_index`; it
returns the same Registry. `restore` resets that same Registry in place.
Raft's core keeps no old states, so in-place updates are what raft/machine.py allows.

Versions (raft/versions.py): the machine runs version 1 (`METADATA_VERSION`), the only one so
far, and every metadata log and snapshot is version 1. A change to what a command does, or to
the snapshot's records, is a new version: `apply` then picks the rules by `meta.machine_version`
(as the quorum queue machine's `_BY_VERSION`), `upgrade` converts the registry at the switch,
and `version()` returns the new number once every node can run it; the group switches by
itself at one index once every node runs the new code.

After each apply the machine calls `on_applied(origin, key, command, result, changes)`, on every
member, leader or not (Raft's machine effects run on the leader only; here every node must act on
what its own copy now says: tell its hosts, create or delete its queues' actors). A snapshot is the
registry's snapshot records (`Reset` first); restoring one resets this same Registry and calls
`on_restored`, so the node re-sends the whole state to its hosts.
Left out: `live_indexes` (the metadata's log is compacted by snapshots only).
"""
from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import msgpack

import actors.messages.node  # noqa: F401 - registers the commands and change records this log carries
from actors.messages import ext_hook, pack_default
from metadata.commands import Command
from metadata.registry import Registry
from raft.machine import ApplyMeta

OnApplied = Callable[[str, Hashable, Command, Any, list], None]
METADATA_VERSION = 1


def encode(origin: str, key: Hashable, command: Command) -> bytes:
    return msgpack.packb((origin, key, command), use_bin_type=True, default=pack_default)


def decode(data: bytes) -> tuple[str, Hashable, Command]:
    origin, key, command = msgpack.unpackb(data, raw=False, use_list=False, ext_hook=ext_hook)
    return origin, key, command


class MetadataMachine:
    def __init__(self, registry: Registry, on_applied: OnApplied, on_restored: Callable[[], None]) -> None:
        self.registry = registry
        self.on_applied = on_applied
        self.on_restored = on_restored
        self.applied_index = 0

    def init(self) -> Registry:
        return self.registry

    def version(self) -> int:
        return METADATA_VERSION

    def apply(self, meta: ApplyMeta, command: bytes, state: Registry) -> tuple[Registry, Any, list]:
        origin, key, cmd = decode(command)
        result, changes = state.apply_command(cmd)
        self.applied_index = meta.index
        self.on_applied(origin, key, cmd, result, changes)
        return state, None, []

    def snapshot(self, state: Registry) -> bytes:
        return msgpack.packb(state.snapshot(), use_bin_type=True, default=pack_default)

    def restore(self, value: bytes) -> Registry:
        self.registry.apply(msgpack.unpackb(value, raw=False, use_list=False, ext_hook=ext_hook))
        self.on_restored()
        return self.registry
