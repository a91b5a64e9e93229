"""A small replicated machine for tests and benchmarks: counters, a key-value map, and blobs.

Commands are msgpack arrays:
    ("incr", key, delta)  -> the key's new value
    ("set", key, value)   -> the index it was applied at
    ("blob", data)        -> the number of blobs so far (the data stays in the log only, like a
                             quorum queue's message body; the state keeps a count and a byte total)
State is a dict updated IN PLACE: the shell keeps no old states (unlike the simulator, which uses
tests/sim/kvmachine.py), and copying a growing map per command would dominate the benchmark.
`digest` is not kept; tests compare `kv`, `blobs` and `applied` across members instead.
"""
from __future__ import annotations

from typing import Any

import msgpack

from raft.machine import ApplyMeta


def incr(key: str, delta: int = 1) -> bytes:
    return msgpack.packb(("incr", key, delta))


def set_(key: str, value: Any) -> bytes:
    return msgpack.packb(("set", key, value))


def blob(data: bytes) -> bytes:
    return msgpack.packb(("blob", data))


class KvMachine:
    def init(self) -> dict:
        return {"kv": {}, "blobs": 0, "blob_bytes": 0, "applied": 0}

    def apply(self, meta: ApplyMeta, command: bytes, state: dict) -> tuple[dict, Any, list]:
        op = msgpack.unpackb(command, raw=False, use_list=False)
        state["applied"] = meta.index
        kind = op[0]
        if kind == "blob":
            state["blobs"] += 1
            state["blob_bytes"] += len(op[1])
            return state, state["blobs"], []
        if kind == "incr":
            value = state["kv"].get(op[1], 0) + op[2]
            state["kv"][op[1]] = value
            return state, value, []
        if kind == "set":
            state["kv"][op[1]] = op[2]
            return state, meta.index, []
        return state, ["error", f"unknown op {kind!r}"], []  # errors are values, never raised

    def snapshot(self, state: dict) -> dict:
        return state

    def restore(self, value: dict) -> dict:
        return {"kv": dict(value["kv"]), "blobs": value["blobs"],
                "blob_bytes": value["blob_bytes"], "applied": value["applied"]}
