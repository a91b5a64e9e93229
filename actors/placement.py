"""Where things live: which queue host holds a queue, and the fixed names of per-host actors.

Placement is a pure function of the queue's identity so every host computes the same answer without
asking anyone. crc32 (not Python's hash(), which is salted per process) keeps it stable.
"""
from __future__ import annotations

import functools
import zlib

from actors.runtime.address import Address

NODE = Address("node", "meta")
ROUTER_NAME = "router"        # the registry replica in each connection host
QUEUE_ROUTER_NAME = "qrouter"  # the registry replica in each queue host (dead-letter routing)
QUEUE_MANAGER_NAME = "qmgr"   # creates queue actors in each queue host


def queue_host(vhost: str, name: str, queue_hosts: int) -> str:
    return f"queue{zlib.crc32(f'{vhost}/{name}'.encode()) % queue_hosts}"


@functools.lru_cache(maxsize=65536)  # on every publish's path; placement never changes
def queue_address(vhost: str, name: str, queue_hosts: int) -> Address:
    return Address(queue_host(vhost, name, queue_hosts), f"q:{vhost}:{name}")


def queue_manager(host: str) -> Address:
    return Address(host, QUEUE_MANAGER_NAME)
