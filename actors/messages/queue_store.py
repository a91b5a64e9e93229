"""Between a classic queue and its host's message-store actor (actors/store/shell.py).

`StoreWrite` travels queue -> store with credit (400 / 200, as every link): the queue wrote, or owes
the disk, what it took in and settled in one receive. `taken` messages taken in cost that much
credit, a receive that only settled (deliveries, acks: removals) costs 1; the store grants the
credit back once the sync that covers them is done, so a queue more than 400 messages ahead of
its store's syncs is out of credit and holds its publishers. `confirms`: the queue holds
confirms that wait for this sync (False: only removals, which may wait for the store's lazy
commit). `StoreSynced` travels back (no credit): the syncs that cover everything the queue had
written when the store's commit reached it are done, and took [start_ms, end_ms); the queue
confirms what they covered.
"""
from __future__ import annotations

from actors.messages import message


@message
class StoreWrite:
    taken: int
    confirms: bool


@message
class StoreSynced:
    start_ms: int
    end_ms: int
