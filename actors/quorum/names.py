"""Where a quorum queue's members live and what they are called.

Every node runs `quorum_hosts` quorum hosts (`<node>:quorum`, `<node>:quorum1`, ...;
actors/placement.py's `NODE:KIND`) holding that node's members of every quorum queue, each member
on the host its queue's hash slot names (placement.quorum_kind). A member is the actor
`qq:<uid>` there, where `uid` names the queue's incarnation (a queue deleted and declared again
gets a new one, so nothing of the old one's log can be mistaken for the new one's); its Raft id
is its address as text ("n1:quorum/qq:1f3a..."), so a Raft `Send.to` is an address, and it is
also the member's name in the node's WAL. Each host's manager actor (`members`) starts and deletes its members.

The number of quorum hosts is a node setting that must be the same on every node of a cluster
(any node makes any member's address); each process learns it once, at its start, from its
config (`configure`: the node's main process before it forks its hosts, a test launcher's host
from its spec), and until then it is 1, the layout of a node before there could be more.
"""
from __future__ import annotations

from actors.placement import QUORUM_KIND, WAL_KIND, host_of, quorum_kind, quorum_kinds

MANAGER_NAME = "members"
WAL_CLIENT_NAME = "wal-link"  # in each quorum host of a node whose WAL has a process of its own
_layout = {"quorum_hosts": 1}


def configure(quorum_hosts: int) -> None:
    """This process's number of quorum hosts per node (see the module docstring)."""
    assert quorum_hosts >= 1
    _layout["quorum_hosts"] = quorum_hosts


def quorum_hosts() -> int:
    return _layout["quorum_hosts"]


def host_name(node: str, uid: str | None = None) -> str:
    """The quorum host of `node` that holds its member of the queue `uid`; host 0 without one."""
    return host_of(node, QUORUM_KIND if uid is None else quorum_kind(uid, _layout["quorum_hosts"]))


def host_names(node: str) -> list[str]:
    """Every quorum host of `node`."""
    return [host_of(node, kind) for kind in quorum_kinds(_layout["quorum_hosts"])]


MEMBER_PREFIX = "qq:"


def member_name(uid: str) -> str:
    return f"{MEMBER_PREFIX}{uid}"


def uid_of_member(name: str) -> str:
    """The uid a member's actor name holds (inverse of `member_name`)."""
    return name.removeprefix(MEMBER_PREFIX)


def member_id(node: str, uid: str) -> str:
    return f"{host_name(node, uid)}/{member_name(uid)}"


def manager_id(node: str, uid: str | None = None) -> str:
    """The manager of the quorum host that holds (or is to hold) `node`'s member of `uid`."""
    return f"{host_name(node, uid)}/{MANAGER_NAME}"


def channel_incarnation(channel: str) -> str:
    """The prefix of every channel of the connection host incarnation that `channel` (its address
    as text, "NODE:connN/ch:INCARNATION.N") belongs to: a prefix that no later channel matches."""
    return channel.rpartition(".")[0] + "."


def get_tag(rid: int) -> str:
    """The consumer tag a basic.get with ack holds its message under (the channel's request id)."""
    return f"get:{rid}"


def quorum_process_kinds() -> tuple[str, ...]:
    """The kinds of a node's processes that quorum queues run in: its quorum hosts, and the WAL's
    own process when there are several (what `warrenctl flow` asks)."""
    n = _layout["quorum_hosts"]
    return quorum_kinds(n) + ((WAL_KIND,) if n > 1 else ())
