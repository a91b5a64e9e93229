"""Intake pacing: when a queue holds its publishers' credit so that it stays short.

Theory of operation: credit flow (credit.py) slows a publisher only when an actor on its path cannot
keep up with *taking* messages. A classic queue takes messages far faster than a consumer with
manual acks can round-trip its prefetch window through the connection host and the client, so
without more a publisher with confirms outruns a consumer that could keep up, the queue grows
without bound and latency becomes the backlog (seconds). RabbitMQ's queue process does delivery and
intake in one mailbox, so there the queue itself is the bottleneck and credit paces the publisher
to what it delivers. This is that pacing, made explicit: a queue *holds* the credit its publishers
would get back (the grants of credit.py, which the runtime sends once the queue lets them go) while

- its ready backlog is above `backlog_max` messages, and
- its consumers are keeping up: over the last one to two `window_ms` the queue delivered at least
  `keeping_up_share` of what it took in (and delivered something).

and lets everything held go as soon as either stops being true, or when the oldest hold is
`hold_max_ms` old. The publisher then runs at the pace the queue delivers, with the backlog near
`backlog_max`: a short queue, and the latency of the consumer's window, not of a backlog.

A consumer that is slow by itself (an application that takes its time) is not paced against: it
delivers a small share of what is published, so the queue grows as RabbitMQ's does and the
publisher keeps its speed. The line is a quarter, not a half: before pacing starts, a publisher
can outrun a consumer that would keep up by more than twice (on a busy 2-core machine a 16 KiB
publisher passes bodies through far more cheaply than its consumer takes them; measured 0.74
received / sent with a half), and a consumer slow by itself is usually far below either. `hold_max_ms` is what tells the two apart once a publisher is paced (the
intake then equals what is delivered, whatever the consumer can do): every hold ends by then, the
publisher's next burst shows whether the consumer keeps up, and a publisher is never held longer
than that at a time. A queue with no consumer, or whose consumers deliver nothing, never holds.

Time is ticks in milliseconds, passed in. Pure: the shell counts what it took in and delivered,
asks `hold`, and carries out the answer (actors/queue/shell.py).
"""
from __future__ import annotations

BACKLOG_MAX = 50  # ready messages above which a keeping-up queue holds its publishers
KEEPING_UP_SHARE = 0.25  # delivered / taken in, over the window, for consumers to count as keeping up
WINDOW_MS = 500
HOLD_MAX_MS = 100


class IntakePace:
    """One queue's view of its intake and deliveries (see the module docstring)."""

    __slots__ = ("backlog_max", "keeping_up_share", "window_ms", "hold_max_ms", "_window_start",
                 "_taken", "_delivered", "_taken_before", "_delivered_before", "held_since")

    def __init__(self, backlog_max: int = BACKLOG_MAX, keeping_up_share: float = KEEPING_UP_SHARE,
                 window_ms: int = WINDOW_MS, hold_max_ms: int = HOLD_MAX_MS) -> None:
        assert backlog_max >= 0 and 0 < keeping_up_share <= 1 and window_ms > 0 and hold_max_ms > 0
        self.backlog_max = backlog_max
        self.keeping_up_share = keeping_up_share
        self.window_ms = window_ms
        self.hold_max_ms = hold_max_ms
        self._window_start = 0
        self._taken = self._delivered = 0  # in the current window
        self._taken_before = self._delivered_before = 0  # in the window before it
        self.held_since: int | None = None  # when the credit held now started to be held

    def count(self, now: int, taken: int, delivered: int) -> None:
        """`taken` messages were published to the queue and `delivered` left it for consumers."""
        if now - self._window_start >= self.window_ms:
            recent = now - self._window_start < 2 * self.window_ms
            self._taken_before = self._taken if recent else 0
            self._delivered_before = self._delivered if recent else 0
            self._taken = self._delivered = 0
            self._window_start = now
        self._taken += taken
        self._delivered += delivered

    def keeping_up(self) -> bool:
        """Whether the consumers delivered at least `keeping_up_share` of the intake lately."""
        delivered = self._delivered + self._delivered_before
        return delivered > 0 and delivered >= self.keeping_up_share * (self._taken + self._taken_before)

    def hold(self, now: int, backlog: int) -> bool:
        """Whether the publishers' credit stays held now (see the module docstring); the shell
        releases everything held when this says False."""
        if backlog <= self.backlog_max or not self.keeping_up():
            self.held_since = None
            return False
        if self.held_since is None:
            self.held_since = now
            return True
        if now - self.held_since >= self.hold_max_ms:
            self.held_since = None  # let it go: the next hold starts afresh
            return False
        return True
