"""Where things live: host names, which queue host holds a queue, and the fixed names of per-host actors.

Every host process of a cluster has a name unique in the cluster, `NODE:KIND` ("n1@box:conn0",
"n1@box:queue1", "n1@box:node"), so an `Address` means the same thing on every node and can travel
inside messages. A queue lives where its record says (`QueueRecord.home`, the host its actor runs
on): the node that declares a classic queue homes it on one of its own queue hosts, chosen by a
crc32 of the queue's identity (not Python's salted hash(), so every process computes the same).
"""
from __future__ import annotations

import functools
import zlib

from actors.runtime.address import Address

META_NAME = "meta"            # the node core's actor in each node host
ROUTER_NAME = "router"        # the registry replica in each connection host
QUEUE_ROUTER_NAME = "qrouter"  # the registry replica in each queue host (dead-letter routing)
QUEUE_MANAGER_NAME = "qmgr"   # creates queue actors in each queue host
CLUSTER_NAME = "cluster"      # the membership actor in each node host
NODE_KIND = "node"            # the node host's kind


def host_of(node: str, kind: str) -> str:
    """The cluster-wide name of `node`'s host of this kind ("queue0", "conn1", "node")."""
    return f"{node}:{kind}"


def node_of(host: str) -> str:
    """The node a host belongs to (inverse of `host_of`)."""
    return host.rpartition(":")[0]


def kind_of(host: str) -> str:
    return host.rpartition(":")[2]


def node_address(node: str) -> Address:
    """The node core of `node` (metadata calls, connection closes, queue auto-deletes)."""
    return Address(host_of(node, NODE_KIND), META_NAME)


def queue_kind(vhost: str, name: str, queue_hosts: int) -> str:
    """Which of a node's `queue_hosts` queue hosts a queue homed on that node runs on."""
    return f"queue{zlib.crc32(f'{vhost}/{name}'.encode()) % queue_hosts}"


@functools.lru_cache(maxsize=65536)  # on every publish's path; a queue's home never changes
def queue_address(home: str, vhost: str, name: str) -> Address:
    return Address(home, f"q:{vhost}:{name}")


def queue_manager(host: str) -> Address:
    return Address(host, QUEUE_MANAGER_NAME)
