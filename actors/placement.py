"""Where things live: host names, which host holds a queue, and the fixed names of per-host actors.

Every host process of a cluster has a name unique in the cluster, `NODE:KIND` ("n1@box:conn0",
"n1@box:queue1", "n1@box:node"), so an `Address` means the same thing on every node and can travel
inside messages. A queue lives where its record says (`QueueRecord.home`, the host its actor runs
on): the node that declares a classic queue homes it on one of its own hosts that hold classic
queues, chosen by a crc32 of the queue's identity (not Python's salted hash(), so every process
computes the same).
Which hosts hold classic queues is configuration (`queue_hosts`): by default the connection hosts
(`queue_kinds` names them), so a queue runs in the process of one of its channels and a message
crosses one process boundary fewer on its way; with `queue_hosts = N` dedicated queue hosts. Where
the docstrings say *queue host* they mean any host that holds classic queues: by default a
connection host, otherwise a queueN host (actors/hosts.py: QueueService runs the same in both).
A quorum queue has no one host: its members run on several nodes' quorum hosts and any of them may
lead. On a node with `quorum_hosts = N` its member runs on one of N quorum hosts, by a hash slot of
the queue's uid (`quorum_kind`); N must be the same on every node of a cluster, since any node
makes any member's address. Its record's home is `quorum_home(uid)`, a name no process has, so that `queue_address`
still gives every queue one cluster-wide address (what channels key their queues by, and what
QueuesGone names); a channel's quorum client (actors/channel/quorum_links.py) turns sends to it
into sends to the member that leads.
"""
from __future__ import annotations

import functools
import zlib
from collections.abc import Sequence
from typing import Any

from actors.runtime.address import Address

META_NAME = "meta"            # the node core's actor in each node host
ROUTER_NAME = "router"        # the registry replica in each connection host
QUEUE_ROUTER_NAME = "qrouter"  # the registry replica in each queue host (dead-letter routing)
QUEUE_MANAGER_NAME = "qmgr"   # creates queue actors in each queue host
CLUSTER_NAME = "cluster"      # the membership actor in each node host
NODE_KIND = "node"            # the node host's kind
ALARMS_NAME = "alarms"        # the alarm relay in each node host (actors/monitor/relay.py)
RESOURCE_MONITOR_NAME = "resource_monitor"  # the memory and disk monitor in each node host


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


QUEUE_ACTOR_PREFIX = "q:"  # a classic queue's actor is named q:VHOST:NAME


def queue_kinds(queue_hosts: int, connection_hosts: int) -> tuple[str, ...]:
    """The kinds of a node's hosts that hold its classic queues: `queue_hosts` dedicated ones, or
    with 0 the connection hosts."""
    if queue_hosts:
        return tuple(f"queue{i}" for i in range(queue_hosts))
    return tuple(f"conn{i}" for i in range(connection_hosts))


def queue_kind(vhost: str, name: str, kinds: Sequence[str]) -> str:
    """Which of a node's hosts holding classic queues (`queue_kinds`) a queue homed there runs on."""
    return kinds[zlib.crc32(f'{vhost}/{name}'.encode()) % len(kinds)]


# On every publish's path: a hit costs 65 ns, building the address 310 ns. Bounded small, since
# every host that routes keeps it and churned queues never come back: at 65536 it held ~380 bytes
# for every queue an hour of declares and deletes had seen, in every connection host.
@functools.lru_cache(maxsize=1024)
def queue_address(home: str, vhost: str, name: str) -> Address:
    return Address(home, f"{QUEUE_ACTOR_PREFIX}{vhost}:{name}")


QUORUM_KIND = "quorum"  # quorum host 0's kind; quorum host k>0 is "quorumK"
WAL_KIND = "wal"  # the node's WAL, in a process of its own when the node has several quorum hosts
QUORUM_SLOTS = 64  # hash slots of quorum queue members, spread over a node's quorum hosts


def quorum_kinds(quorum_hosts: int) -> tuple[str, ...]:
    """The kinds of a node's `quorum_hosts` quorum hosts. Host 0 keeps the kind a node with one
    quorum host always had ("quorum"), so its members' Raft ids (which name their host, and are
    written in every log and member table) are the same with one quorum host as before there
    could be several."""
    assert quorum_hosts >= 1
    return tuple(QUORUM_KIND if i == 0 else f"{QUORUM_KIND}{i}" for i in range(quorum_hosts))


def quorum_slot(uid: str) -> int:
    """The hash slot of the quorum queue incarnation `uid` (crc32: the same in every process)."""
    return zlib.crc32(uid.encode()) % QUORUM_SLOTS


def quorum_kind(uid: str, quorum_hosts: int) -> str:
    """Which of a node's quorum hosts holds its member of the queue `uid`. The slots are dealt
    to the hosts in turn (slot s to host s mod N), so each host holds 64/N of them, give or take
    one. Placed by the queue's incarnation (uid), not its name: every address of a member is
    made from a node and a uid (a Raft id, a channel's quorum client, the node's asks), and a
    queue declared again is a new incarnation anyway. Which *nodes* hold members is the leader
    locator's choice (actors/node/quorum_queues.py's `place`); this is only where on a node."""
    return quorum_kinds(quorum_hosts)[quorum_slot(uid) % quorum_hosts]


def member_hosts(home: str, replicas: Sequence[str]) -> list[str]:
    """The hosts a queue's actors run on: its home, or a replicated stream's members, one on each
    of its nodes, on the host of its home's kind (every node of a cluster runs the same kinds)."""
    if not replicas:
        return [home]
    kind = kind_of(home)
    return [host_of(node, kind) for node in replicas]


def stream_member_here(rec: Any, host: str) -> bool:
    """`host` runs a member of the replicated stream `rec` (a QueueRecord)."""
    return bool(rec.replicas) and host in member_hosts(rec.home, rec.replicas)


def route_host(home: str, replicas: Sequence[str], node: str) -> str:
    """The host a channel on `node` sends to: a replicated stream's member on its own node when
    it has one (it hands publishes on to the leader and serves consumers itself), else its first
    member's (the home's node may hold none since delete_replica), else the home."""
    if replicas:
        return host_of(node if node in replicas else replicas[0], kind_of(home))
    return home


QUORUM_HOME_PREFIX = "quorum!"  # "!" is in no node name (name@host) and no kind


def quorum_home(uid: str) -> str:
    """The home of the quorum queue whose incarnation is `uid`."""
    return QUORUM_HOME_PREFIX + uid


def quorum_uid(home: str) -> str | None:
    """The incarnation a quorum queue's home names; None for a classic queue's host."""
    return home[len(QUORUM_HOME_PREFIX):] if home.startswith(QUORUM_HOME_PREFIX) else None


def queue_manager(host: str) -> Address:
    return Address(host, QUEUE_MANAGER_NAME)


def alarm_relay(node: str) -> Address:
    """`node`'s alarm relay: every node's resource alarms reach every node through these."""
    return Address(host_of(node, NODE_KIND), ALARMS_NAME)


def resource_monitor(node: str) -> Address:
    """`node`'s resource monitor (its queue hosts watch the memory limit there)."""
    return Address(host_of(node, NODE_KIND), RESOURCE_MONITOR_NAME)
