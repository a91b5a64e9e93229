"""Raft for warren's quorum queues and metadata store: a pure core plus its log protocol."""
from raft.config import ClusterConfig, RaftSettings
from raft.core import RaftCore
from raft.log import Entry, Log
from raft.machine import ApplyMeta, Machine
from raft.memlog import MemoryLog

__all__ = ["ApplyMeta", "ClusterConfig", "Entry", "Log", "Machine", "MemoryLog", "RaftCore",
           "RaftSettings"]
