"""How the core tags the opaque bytes it stores in each log entry.

The first byte says what the entry is: a client command for the machine, a configuration
change (takes effect when appended, dissertation §4.1) or the no-op a new leader appends so
that entries of earlier terms get committed (§5.4.2, §8). The rest is the payload.
"""
from __future__ import annotations

from raft.config import ClusterConfig

USER = 0x75     # 'u'
CONFIG = 0x63   # 'c'
NOOP = 0x6e     # 'n'


def user(command: bytes) -> bytes:
    return bytes((USER,)) + command


def config(cfg: ClusterConfig) -> bytes:
    return bytes((CONFIG,)) + cfg.encode()


NOOP_COMMAND = bytes((NOOP,))


def kind(command: bytes) -> int:
    return command[0]


def payload(command: bytes) -> bytes:
    return command[1:]


def config_of(command: bytes) -> ClusterConfig | None:
    return ClusterConfig.decode(command[1:]) if command[0] == CONFIG else None
