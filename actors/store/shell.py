"""The message-store actor: one per host that holds classic queues, the last link of their chain.

Theory of operation. The host's durable classic queues share one message store and sync their
queue indexes together (persist/classic/host_storage.py); this actor owns that group commit
(actors/queue/group_commit.py says when it runs and what it syncs). A durable queue that wrote,
or owes the disk, something in a receive sends it a `StoreWrite` over a credit link
(actors/messages/queue_store.py): the queue -> msg_store link of RabbitMQ's credit chain, 400
messages of credit topped up by 200. The store marks the queue for its next commit; the commit
has every marked queue write what it owes and ask for the syncs, runs them (on the sync thread),
then sends each queue a `StoreSynced`, from which the queue confirms, and only then grants back
the credit of what that commit covered. So a slow disk leaves a queue without credit once it is
400 messages ahead of the syncs; the queue then holds its publishers' credit, and the chain backs
up to the readers: the runtime's flow state shows the queue in flow, blocked on this actor's
address, and `warrenctl flow` names the store.

Why one per host and not one per vhost (RabbitMQ's choice): the store lives in the process of
the queues it serves, so a queue hands it its messages as Python objects, never encoded, and
one fdatasync covers every queue of the host; a store per vhost would either split the host's
commits into one sync per vhost or put a process hop between a queue and its store, whereas
RabbitMQ's per-vhost stores serve isolation (one vhost's store crashing spares the others'),
which a host process already gives: the host is the unit that crashes and recovers.

In one process the hand-over is direct: the runtime hands `StoreWrite` over as an object, and the
commit calls the queue actor's `write`/`flush` (the queue and the store share the host's files),
so a queue's link to its store costs one local dispatch per receive, not a hop. After a commit
the store hands its `StoreSynced`s over at once (`dispatch_local`), so a confirm does not wait a
loop turn for its sync's news.

What is deliberately not here: the formats (persist/classic), the decision of when to commit
(group_commit.py, pure), paging (flow/paging.py via the queue host's housekeeping).
"""
from __future__ import annotations

from typing import Any, Protocol

from actors.messages.queue_store import StoreSynced, StoreWrite
from actors.queue.group_commit import GroupCommit
from actors.runtime.address import Address

NAME = "msg_store"


class StoredQueue(Protocol):
    """What the commit does with a queue actor of this host (actors/queue/shell.py)."""
    deleted: bool

    def write(self) -> None: ...

    def flush(self) -> None: ...


class _Member:
    """One queue in the store's commits: its writes, and the credit those commits will grant back."""

    __slots__ = ("store", "queue", "address", "credit_pending", "credit_in_commit")

    def __init__(self, store: MsgStoreActor, queue: StoredQueue, address: Address) -> None:
        self.store = store
        self.queue = queue
        self.address = address
        self.credit_pending = 0  # received since the queue's last flush
        self.credit_in_commit = 0  # covered by the commit in flight

    def write(self) -> None:
        if not self.queue.deleted:
            self.queue.write()

    def flush(self) -> None:
        self.credit_in_commit += self.credit_pending
        self.credit_pending = 0
        if not self.queue.deleted:
            self.queue.flush()

    def synced(self) -> None:
        self.store.done.append(self)

    def waited(self, start_ms: int, end_ms: int) -> None:
        """How long the commit took (told only when it took a millisecond or more)."""
        self.store.span = (start_ms, end_ms)


class MsgStoreActor:
    """The store of one host's durable classic queues (see the module docstring)."""

    manual_credit = True  # a queue's credit goes back when its writes are synced, not when received

    def __init__(self, runtime: Any, commit: GroupCommit) -> None:
        self.runtime = runtime
        self.address = Address(runtime.host, NAME)
        self.commit = commit
        commit.on_done = self._commit_done
        self._members: dict[str, _Member] = {}
        self.done: list[_Member] = []  # the queues of the commit that just ended
        self.span = (0, 0)  # how long it took, when it took a millisecond or more

    def receive(self, sender: Address, msg: Any) -> None:
        if type(msg) is not StoreWrite:
            return  # an Undelivered StoreSynced: the queue was deleted meanwhile
        member = self._members.get(sender.name)
        if member is None:  # (a deleted queue is forgotten: one of the same name is new)
            queue = self.runtime.actor(sender.name) if sender.host == self.runtime.host else None
            if queue is None:  # a queue already gone: nothing to write
                self.runtime.processed(self.address, sender, max(1, msg.taken))
                return
            member = self._members[sender.name] = _Member(self, queue, sender)
        member.credit_pending += max(1, msg.taken)
        self.commit.mark(member, lazy=not msg.confirms, taken=msg.taken)

    def forget(self, name: str) -> None:
        """A queue of this host was deleted: no commit touches its storage again."""
        member = self._members.pop(name, None)
        if member is not None:
            self.commit.forget(member)
            owed = member.credit_pending + member.credit_in_commit  # no commit will grant it now
            if owed:
                self.runtime.processed(self.address, member.address, owed)

    def _commit_done(self) -> None:
        """Every queue of the commit learns it is synced, then gets the credit it covered back
        (a deleted queue's too: the runtime's ledger forgets it)."""
        done, self.done = self.done, []
        (start_ms, end_ms), self.span = self.span, (0, 0)
        runtime = self.runtime
        for member in done:
            if not member.queue.deleted:
                runtime.send(member.address, StoreSynced(start_ms, end_ms), sender=self.address)
            if member.credit_in_commit:
                runtime.processed(self.address, member.address, member.credit_in_commit)
                member.credit_in_commit = 0
        runtime.dispatch_local()

    def flow_share(self, now_ms: int) -> float:
        """The share of the last second the host spent in commits (flow/state.py)."""
        return self.commit.syncing.flow_share(now_ms)
