"""Raft shells: the node's WAL actor, the Raft member actor, a test/bench machine, host entries.

The algorithm lives in raft/ (pure); these modules only carry its effects out over the
actor runtime (actors/runtime) and the shared WAL writer (persist/wal/writer.py).
"""
