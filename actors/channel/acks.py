"""Outstanding deliveries of one channel, by delivery tag.

Theory of operation: every delivery that needs an ack gets an entry keyed by its delivery tag (tags
increase by one per delivery on the channel, acked or not). Settling looks tags up one by one or, for
`multiple`, pops from the oldest end up to the tag; an OrderedDict keeps both O(1) per tag. An entry
records the queue and the queue's own message id, so settlements can be batched per queue, and the
consumer tag (None for basic.get) so prefetch credit can be returned to the right consumer, and
the tick it was delivered at: tags grow with time, so the oldest entry is the first one, which is all
the consumer timeout needs to look at.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Hashable, NamedTuple


class Outstanding(NamedTuple):
    queue: Hashable
    msg_id: int
    consumer_tag: str | None
    at: int = 0  # channel tick of the delivery


class Unacked:
    def __init__(self) -> None:
        self._by_tag: OrderedDict[int, Outstanding] = OrderedDict()

    def __len__(self) -> int:
        return len(self._by_tag)

    def add(self, tag: int, entry: Outstanding) -> None:
        self._by_tag[tag] = entry

    def take(self, tag: int, multiple: bool) -> list[Outstanding] | None:
        """Remove and return what `tag` settles; None if the tag is unknown (a 406 for the caller).

        `multiple` with tag 0 means everything outstanding, as in RabbitMQ."""
        d = self._by_tag
        if multiple:
            if tag == 0:
                out = list(d.values())
                d.clear()
                return out
            if tag not in d:  # RabbitMQ too wants the tag itself outstanding, multiple or not
                return None
            out = []
            while d:
                first = next(iter(d))
                if first > tag:
                    break
                out.append(d.popitem(last=False)[1])
            return out
        entry = d.pop(tag, None)
        return None if entry is None else [entry]

    def oldest(self) -> Outstanding | None:
        for entry in self._by_tag.values():
            return entry
        return None

    def orphan(self, lost: "Callable[[Outstanding], bool]") -> None:
        """Keep the tags of deliveries whose queue lost its state, but point them nowhere, so the
        client may still settle them (RabbitMQ accepts acks for a queue that went down)."""
        for tag, entry in self._by_tag.items():
            if entry.queue is not None and lost(entry):
                self._by_tag[tag] = entry._replace(queue=None)

    def take_all(self) -> list[Outstanding]:
        out = list(self._by_tag.values())
        self._by_tag.clear()
        return out
