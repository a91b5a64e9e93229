"""A channel's links to the quorum queues it talks to: one QuorumClient each (actors/quorum/client.py).

Theory of operation. The channel core keys every queue by its address (actors/placement.py); a
quorum queue's address is on its home `quorum!<uid>`, which no process has. Whatever the core
produces for such an address (publish batches, settlements, calls, grants, its goodbye) goes
through that queue's client, which sends it to the member it believes leads (`route`), and
whatever a member sends back goes into the client, whose output reaches the core as if the queue's
address had sent it (`receive`). A message a member's host could not deliver (no such member
yet, or any more) is that member refusing: the client asks who leads. Clients are made on first
use, from the member nodes in the registry (a member added later is learnt when it first speaks),
and time (`tick`) lets them ask every member who
leads when their target went quiet.
"""
from __future__ import annotations

from typing import Any, Callable

from actors.messages.channel_queue import Publish
from actors.messages.quorum import NotQueueLeader, QueueLeader, ResendFrom
from actors.messages.runtime import Undelivered
from actors.placement import QUORUM_HOME_PREFIX, quorum_uid
from actors.quorum.client import QuorumClient
from actors.quorum.names import MEMBER_PREFIX, member_id, uid_of_member
from actors.runtime.address import Address
from effects import Send


_CLIENT_ONLY = (QueueLeader, NotQueueLeader, ResendFrom)  # what only a queue's client understands


class QuorumLinks:
    def __init__(self, members_of: Callable[[str], tuple[str, ...]], retry_ticks: int) -> None:
        self._members_of = members_of  # a quorum queue's home -> its member nodes
        self._retry_ticks = retry_ticks
        self._clients: dict[Address, QuorumClient] = {}
        self._queue_of: dict[Address, Address] = {}  # member -> its queue
        self._addresses: dict[str, Address] = {}  # member id -> member

    def clients(self) -> int:
        """How many quorum queues the channel has talked to."""
        return len(self._clients)

    def route(self, effects: list) -> list:
        """`effects` with every Send to a quorum queue replaced by its client's sends to members."""
        if not any(type(e) is Send and _is_quorum(e.to) for e in effects):
            return effects
        out = []
        for e in effects:
            if type(e) is Send and _is_quorum(e.to):
                client = self._client(e.to)
                if client is None:
                    continue  # a queue deleted meanwhile (QueuesGone settles what it owed)
                client.send(e.msg)
                out += self._sends(e.to, client.take()[0])
            else:
                out.append(e)
        return out

    def receive(self, sender: Address, msg: Any) -> tuple[Address, list[Any], list[Send]] | None:
        """(the queue, what it says to the channel, sends to members) for a message from a member;
        None when `sender` is not a member of a queue this channel talks to."""
        queue = self._queue_of.get(sender)
        if queue is None:
            if type(sender) is not Address or not sender.name.startswith(MEMBER_PREFIX):
                return None  # a classic queue's, the node's, another channel's: on every delivery's path
            queue = self._added_member(sender)
            if queue is None:
                # a member of a queue this channel no longer talks to (deleted, its client gone):
                # a late answer to a FindLeader, or a new leader's announcement, is news of nothing
                return (sender, [], []) if type(msg) in _CLIENT_ONLY else None
        client = self._clients[queue]
        if type(msg) is Undelivered:
            refused = msg.msg
            msg = NotQueueLeader(None, client.term, None if type(refused) is Publish else refused)
        client.receive(str(sender), msg)
        sends, up = client.take()
        return queue, up, self._sends(queue, sends)

    def tick(self) -> list[Send]:
        out: list[Send] = []
        for queue, client in self._clients.items():
            client.tick()
            out += self._sends(queue, client.take()[0])
        return out

    def host_restarted(self, host: str) -> None:
        """A quorum host crashed and came back: the clients whose target member lives there lost
        what they sent it."""
        for client in self._clients.values():
            if Address.parse(client.target).host == host:
                client.target_restarted()

    def forget(self, queue: Address) -> None:
        """The queue was deleted: its client goes."""
        if self._clients.pop(queue, None) is not None:
            for member, address in list(self._addresses.items()):
                if self._queue_of.get(address) == queue:
                    del self._addresses[member], self._queue_of[address]

    def _client(self, queue: Address) -> QuorumClient | None:
        client = self._clients.get(queue)
        if client is None:
            uid = quorum_uid(queue.host)
            nodes = self._members_of(queue.host)
            if not nodes:
                return None
            members = [member_id(node, uid) for node in nodes]
            client = self._clients[queue] = QuorumClient(members, members[0], retry_ticks=self._retry_ticks)
            for member in members:  # any of them may be the one that announces it leads
                self._address(queue, member)
        return client

    def _added_member(self, sender: Address) -> Address | None:
        """The queue of a member this channel did not know: one added since its client was made
        (warrenctl add_member, grow), announcing that it leads."""
        uid = uid_of_member(sender.name)
        for queue in self._clients:
            if quorum_uid(queue.host) == uid:
                self._addresses[str(sender)] = sender
                self._queue_of[sender] = queue
                return queue
        return None

    def _sends(self, queue: Address, sends: list[Send]) -> list[Send]:
        """A client's sends, to members' addresses (a member named by a leader change is learnt)."""
        return [Send(self._address(queue, s.to), s.msg, s.credit) for s in sends]

    def _address(self, queue: Address, member: str) -> Address:
        address = self._addresses.get(member)
        if address is None:
            address = self._addresses[member] = Address.parse(member)
            self._queue_of[address] = queue
        return address


def _is_quorum(to: Any) -> bool:
    return type(to) is Address and to.host.startswith(QUORUM_HOME_PREFIX)
