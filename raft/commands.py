"""How the core tags the opaque bytes it stores in each log entry.

The first byte says what the entry is: a client command for the machine, a configuration
change (takes effect when appended, dissertation §4.1), the no-op a new leader appends so
that entries of earlier terms get committed (§5.4.2, §8), or the switch of the machine to a
new version (takes effect when applied, versions.py). The rest is the payload.
"""
from __future__ import annotations

from raft.config import ClusterConfig

USER = 0x75     # 'u'
CONFIG = 0x63   # 'c'
NOOP = 0x6e     # 'n'
VERSION = 0x76  # 'v': the payload is the version, 2 bytes big-endian


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


def version(number: int) -> bytes:
    return bytes((VERSION,)) + number.to_bytes(2, "big")


def version_of(command: bytes) -> int:
    return int.from_bytes(command[1:3], "big")
