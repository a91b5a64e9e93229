"""Where a quorum queue's members live and what they are called.

Every node runs one quorum host (`<node>:quorum`, actors/placement.py's `NODE:KIND`) holding
that node's members of every quorum queue. A member is the actor `qq:<uid>` there, where `uid`
names the queue's incarnation (a queue deleted and declared again gets a new one, so nothing of
the old one's log can be mistaken for the new one's); its Raft id is its address as text
("n1:quorum/qq:1f3a..."), so a Raft `Send.to` is an address, and it is also the member's name in
the node's WAL. The host's manager actor (`members`) starts and deletes members.
"""
from __future__ import annotations

from actors.placement import host_of

QUORUM_KIND = "quorum"
MANAGER_NAME = "members"


def host_name(node: str) -> str:
    return host_of(node, QUORUM_KIND)


MEMBER_PREFIX = "qq:"


def member_name(uid: str) -> str:
    return f"{MEMBER_PREFIX}{uid}"


def uid_of_member(name: str) -> str:
    """The uid a member's actor name holds (inverse of `member_name`)."""
    return name.removeprefix(MEMBER_PREFIX)


def member_id(node: str, uid: str) -> str:
    return f"{host_name(node)}/{member_name(uid)}"


def manager_id(node: str) -> str:
    return f"{host_name(node)}/{MANAGER_NAME}"


def channel_incarnation(channel: str) -> str:
    """The prefix of every channel of the connection host incarnation that `channel` (its address
    as text, "NODE:connN/ch:INCARNATION.N") belongs to: a prefix that no later channel matches."""
    return channel.rpartition(".")[0] + "."


def get_tag(rid: int) -> str:
    """The consumer tag a basic.get with ack holds its message under (the channel's request id)."""
    return f"get:{rid}"
