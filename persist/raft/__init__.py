"""Raft for warren's quorum queues and metadata store: a pure core plus its log protocol."""
from persist.raft.config import ClusterConfig, RaftSettings
from persist.raft.core import RaftCore
from persist.raft.log import Entry, Log
from persist.raft.machine import ApplyMeta, Machine
from persist.raft.memlog import MemoryLog

__all__ = ["ApplyMeta", "ClusterConfig", "Entry", "Log", "Machine", "MemoryLog", "RaftCore",
           "RaftSettings"]
