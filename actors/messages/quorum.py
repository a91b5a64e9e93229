"""Quorum queues: a node's quorum host, and what a quorum queue member says beyond the classic protocol.

A quorum queue's leader speaks actors/messages/channel_queue.py exactly as a classic queue does
(Publish, Settle, Grant, ChannelDown, Consume, Cancel, Get, Purge -> Reply, Deliver, Confirm,
Rejected, ConsumerCancelled), with one difference a channel never sees: the `seq` of each
`Published` is the publisher's own gapless sequence for this queue (1, 2, 3, ...), which the
channel-side client (actors/quorum/client.py) assigns and maps back to confirm seqs. What a member
adds, member -> channel:
- `NotQueueLeader`: this member does not lead the queue; `leader` (its member id, or None while an
  election runs) is where to send `refused` again (None: a publish batch or proposals that an
  ex-leader dropped; the client resends everything unconfirmed).
- `QueueLeader`: a member became leader and has applied everything committed: channels it knows
  switch to it, resend what is unconfirmed and resynchronise their consumers.
- `ResendFrom`: the publisher's sequence has a gap; resend from `expected`.
channel -> any member:
- `FindLeader`: a channel that heard nothing for a while asks; a leader answers `QueueLeader`, any
  other member `NotQueueLeader(leader, term, None)`.
channel -> leader:
- `ConsumerResync`: after a leader change, what the channel holds of one consumer's deliveries
  and the last msg id it was given; the leader returns the rest (lost in flight: redelivered,
  delivery count + 1), but for its own deliveries after that msg id (still on their way).
node -> a node's quorum host (its manager, actors/quorum/host.py), each answered with `Reply`:
- `StartMember` (durable before the answer), `DeleteMember` (its files gone before the answer),
  `MemberStatus` (the answer's value: the member's status dict, or None when there is none).
- `KeepMembers(uids)` (no answer): the queues this node's metadata has members of here; any other
  member is left from a queue deleted while this node was down, and is deleted.
node -> a member (the leader; any other answers `NotQueueLeader` with `refused` the request):
- `ChangeQueueMembers(member, add)`: add (as a learner, promoted once caught up) or remove one Raft
  member, one change at a time; `Reply` once the change is committed, or with an error when it is
  refused or does not commit in time.
- `TransferQueueLeader(member)`: hand leadership to that member; `Reply` at once (the transfer runs).
anyone -> a member, or a quorum host's manager (then to every member on that node):
- `HostChannelsGone(host, current)` (to a quorum host's manager, from the node that saw a
  connection host restart): the channels of that host's earlier incarnations are gone.
- `ChannelsGone(prefix)`: every channel whose address starts with `prefix` (a node's or a host's)
  is gone: the leader proposes a ChannelDown for each one it knows, and every member remembers the
  prefix, so a leader elected later does the same when it takes over. No answer. Prefixes must not
  name live channels later: channel addresses must not be reused by a restarted host.
"""
from __future__ import annotations

from typing import Any

from actors.messages import message
from wire.codec import FieldTable


@message
class NotQueueLeader:
    leader: str | None
    term: int
    refused: Any


@message
class QueueLeader:
    leader: str
    term: int


@message
class FindLeader:
    pass


@message
class ResendFrom:
    expected: int


@message
class ConsumerResync:
    consumer_tag: str
    held: list[int]       # msg ids delivered to the channel and not settled
    acked: list[int]      # settled since the last leader change (their Settle may have been lost)
    discarded: list[int]
    last_msg_id: int      # the highest msg id the channel was given for this consumer (-1: none)


@message
class StartMember:
    """Start (or recover) this node's member of a quorum queue. `uid` names the queue's
    incarnation (a queue declared again after a delete gets a new one); `nodes` are the nodes
    of its initial Raft configuration; `arguments` its declaration arguments (x-...); `leader` the
    node that should lead first (metadata/quorum.py's placement; any member may win)."""

    rid: int
    uid: str
    vhost: str
    name: str
    nodes: list[str]
    arguments: FieldTable
    created_ms: int
    leader: str = ""  # the node the leader locator chose: its member asks for votes first


@message
class DeleteMember:
    rid: int
    uid: str


@message
class ChannelsGone:
    prefix: str


@message
class HostChannelsGone:
    """Connection host `host` restarted: its channels named before `current` (its new incarnation,
    in hex: "HOST/ch:CURRENT.N") are gone. To a quorum host's manager, which gives each member's
    channels of that host back by their own incarnation prefix (ChannelsGone). No answer."""

    host: str
    current: str


@message
class MemberStatus:
    rid: int
    uid: str


@message
class KeepMembers:
    uids: list[str]


@message
class ChangeQueueMembers:
    rid: int
    member: str  # the Raft id of the member to add or remove (actors/quorum/names.py's member_id)
    add: bool


@message
class TransferQueueLeader:
    rid: int
    member: str
