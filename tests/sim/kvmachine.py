"""The replicated machine the simulator runs: a key-value store with increments.

State is a plain dict, replaced (never mutated) on every apply, so the simulator can compare
states across members. `digest` chains a hash of every applied command, which makes "same state
at the same applied index" a cheap equality. The last few `set` commands stay live (like quorum
queue message bodies kept in the log), which exercises compaction below the lowest live index.
"""
from __future__ import annotations

import hashlib
from typing import Any, Callable

import msgpack

from raft.machine import ApplyMeta

LIVE_SETS = 3


def command(op: str, key: str, value: int, op_id: int) -> bytes:
    return msgpack.packb([op, key, value, op_id])


class KvMachine:
    def __init__(self, on_apply: Callable[[ApplyMeta, bytes, dict], None] | None = None) -> None:
        self.on_apply = on_apply

    def init(self) -> dict:
        return {"kv": {}, "n": 0, "digest": "", "live": []}

    def apply(self, meta: ApplyMeta, cmd: bytes, state: dict) -> tuple[dict, Any, list]:
        op, key, value, op_id = msgpack.unpackb(cmd)
        kv = dict(state["kv"])
        live = list(state["live"])
        if op == "incr":
            kv[key] = kv.get(key, 0) + value
        else:
            kv[key] = value
            live = (live + [meta.index])[-LIVE_SETS:]
        digest = hashlib.blake2b(state["digest"].encode() + cmd, digest_size=8).hexdigest()
        new = {"kv": kv, "n": state["n"] + 1, "digest": digest, "live": live}
        if self.on_apply is not None:
            self.on_apply(meta, cmd, new)
        return new, (meta.index, meta.term, op_id), [("applied", op_id)]

    def live_indexes(self, state: dict) -> list[int]:
        return state["live"]

    def snapshot(self, state: dict) -> dict:
        return state

    def restore(self, value: dict) -> dict:
        return value
