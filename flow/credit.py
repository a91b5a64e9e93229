"""Credit-based flow control between actors: a pure ledger, as RabbitMQ's credit_flow.

Theory of operation
-------------------
Every sender->receiver *link* starts with `initial` credit on the sender's side. Sending n
messages over a link consumes n credit; when a link's credit reaches zero or below, the sender is
*blocked* on it and must stop taking work from upstream (the ledger does not stop it: sends never
block, the caller checks `blocked()` before pulling more input). The receiver counts what it has
*processed* per incoming link and, every `more_after` messages, grants `more_after` credit back.
Like h2's WindowManager the ledger never sends anything: `processed` and `release_deferred`
*return* the grants and the shell turns them into messages.

Back-pressure propagates up a chain because a receiver that is itself blocked on any of its
outgoing links *defers* its grants. A queue blocked on the message store stops granting to its
channel, the channel runs out of credit and stops granting to its reader, and the reader stops
reading the socket. When credit comes back and the actor is no longer blocked, `bumped` returns
True and the shell calls `release_deferred` to pass the accumulated grants upstream.

One ledger serves one actor in both roles; outgoing and incoming links are kept apart, so the
same peer may be both.

Invariants (asserted):
- `0 <= unacked[link] < more_after` after every call: grants leave in whole `more_after` units.
- a grant is never produced while the actor is blocked; it is deferred instead.
- credit may go below zero by one batch: a sender checks `blocked()` *between* batches, so the
  *batch overshoot* is the size of the last batch sent while it still had credit. Callers that
  respect `blocked()` therefore see `credit > -batch` where `batch` is their largest `sent(n)`.
  The ledger itself accepts any overshoot (the runtime cannot refuse a send).

A sender that is gone for good is dropped from its receivers' ledgers (`sender_closed`, which
the shell calls when the sender's runtime says so), or every sender that ever sent would stay.

Deliberately left out: time (RabbitMQ's flow-state timestamps live in flow/state.py), message
accounting for peers that die (the shell returns their credit with `bumped`, or calls `forget`).
"""
from __future__ import annotations

from typing import Hashable

Grant = tuple[Hashable, int]


class CreditLedger:
    """The credit state of one actor: credit per outgoing link, progress per incoming link."""

    __slots__ = ("initial", "more_after", "_credit", "_blocked", "_unacked", "_deferred")

    def __init__(self, initial: int = 400, more_after: int = 200) -> None:
        assert initial > 0 and 0 < more_after <= initial, (initial, more_after)
        self.initial = initial
        self.more_after = more_after
        self._credit: dict[Hashable, int] = {}
        self._blocked: set[Hashable] = set()
        self._unacked: dict[Hashable, int] = {}
        self._deferred: dict[Hashable, int] = {}

    # -- sender side -------------------------------------------------------------------------
    def sent(self, link: Hashable, n: int = 1) -> bool:
        """Consume n credit on `link`; True if the link is now blocked (credit <= 0)."""
        assert n >= 0, n
        credit = self._credit.get(link, self.initial) - n
        self._credit[link] = credit
        if credit <= 0:
            self._blocked.add(link)
            return True
        return False

    def bumped(self, link: Hashable, n: int) -> bool:
        """Credit `n` arrived on `link`; True if this actor went from blocked to unblocked."""
        assert n >= 0, n
        was_blocked = bool(self._blocked)
        credit = self._credit.get(link, self.initial) + n
        self._credit[link] = credit
        if credit > 0:
            self._blocked.discard(link)
        return was_blocked and not self._blocked

    def blocked(self) -> bool:
        """Whether any outgoing link is out of credit."""
        return bool(self._blocked)

    def blocked_links(self) -> list[Hashable]:
        return list(self._blocked)

    def credit(self, link: Hashable) -> int:
        """Credit left on an outgoing link (the initial credit for a link never used)."""
        return self._credit.get(link, self.initial)

    def credits(self) -> dict[Hashable, int]:
        """Credit left on every outgoing link used so far (for warrenctl flow)."""
        return dict(self._credit)

    # -- receiver side -----------------------------------------------------------------------
    def processed(self, link: Hashable, n: int = 1) -> list[Grant]:
        """n messages from `link` are done; returns the grants to send upstream now."""
        assert n >= 0, n
        unacked = self._unacked.get(link, 0) + n
        units, unacked = divmod(unacked, self.more_after)
        self._unacked[link] = unacked
        assert 0 <= unacked < self.more_after
        if units == 0:
            return []
        amount = units * self.more_after
        if self._blocked:
            self._deferred[link] = self._deferred.get(link, 0) + amount
            return []
        return [(link, amount)]

    def release_deferred(self) -> list[Grant]:
        """The grants held back while blocked; empty while still blocked."""
        if self._blocked or not self._deferred:
            return []
        grants = list(self._deferred.items())
        self._deferred.clear()
        return grants

    def owed(self) -> list[Grant]:
        """Everything processed but not yet granted, per incoming link (for handing back on death)."""
        owed: dict[Hashable, int] = dict(self._deferred)
        for link, n in self._unacked.items():
            if n:
                owed[link] = owed.get(link, 0) + n
        return list(owed.items())

    def links(self) -> list[Hashable]:
        """Every link this ledger holds anything for, in either direction."""
        return list(self._credit.keys() | self._unacked.keys() | self._deferred.keys())

    def outgoing(self) -> list[Hashable]:
        """Every outgoing link used so far (where this actor sends with credit)."""
        return list(self._credit)

    def sender_closed(self, link: Hashable) -> None:
        """The sender at the incoming `link` is gone for good: what it is owed goes with it.
        Without this a long-lived receiver (a queue, the message store) keeps one entry for every
        short-lived sender (a channel, a deleted queue) that ever sent it something."""
        self._unacked.pop(link, None)
        self._deferred.pop(link, None)

    def forget(self, link: Hashable) -> None:
        """The peer at `link` is gone: drop both directions. If that unblocks this actor, the
        caller finds out with `blocked()` and should then `release_deferred()`."""
        self._credit.pop(link, None)
        self._blocked.discard(link)
        self._unacked.pop(link, None)
        self._deferred.pop(link, None)
