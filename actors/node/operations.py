"""Operations: the node core's requests (actors/node/core.py), run side by side where they touch
different things, one at a time where they touch the same one.

Theory of operation. Every request the core takes (a channel's declare, bind or delete, a queue's
auto-delete, an admin ask, a clean-up) is an operation: a generator that yields steps (steps.py:
`Apply` a registry command, `Ask` an actor) and returns its answer. An operation claims what it
touches (`claims`): the origin it came from (a channel's requests keep their order), and the
queues and exchanges it names; or it claims everything (None: admin asks, start-up, clean-ups,
membership rounds), which makes it run alone. An operation starts once no running operation and
no operation that arrived before it and is still waiting shares a claim with it: requests to
different queues from different channels run at once (as RabbitMQ's channel processes do), so
their proposals reach the metadata group in the same loop turn and go out in one WAL write and
one sync (actors/raft/wal.py) instead of one round each; those that share a claim keep their
arrival order, and one that claims everything waits for every earlier one to finish and holds
back every later one.

Why this is safe: every registry command validates against the state it is applied to
(metadata/registry.py), so two operations that read the registry before proposing cannot make
it inconsistent; what they must not do is race on one name (two declares of one quorum queue
placing it twice, a delete overtaking the declare's actor creation), which the claims prevent.
An operation resumes only once THIS node's member applied its command, so an answer never runs
ahead of this node's copy, whichever other operations' entries came between.

Each running operation waits for one step at a time: a proposal (by its key, with a timer named
`propose:KEY`), a call (by rid, in `calls`, resumed by the `Reply` or by the step's error) or
several calls at once (`AskAll`, resumed once every one is answered).
A call not answered within `timeout_ms` (timer `call:RID`) is resumed with its step's error, as
one to a node seen down is: a request lost on its way (to a node that restarted faster than its
silence was noticed, say) must not hold its operation, and every later one that shares a claim
with it, for good; RabbitMQ's calls have time-outs too (a quorum queue's stat gives 0, 0).
A proposal whose timer fires ends its operation with the step's `timeout_error`; with None it is
proposed again (a start-up command: the node cannot serve without it); with RETRY_LATER the
operation starts over behind everything that arrived meanwhile (a clean-up must happen some time,
but not before the requests queued behind it had their turn and their own time-outs).
"""
from __future__ import annotations

import traceback
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from actors.messages.calls import Reply
from actors.messages.node import (
    AutoDeleteQueue, BindExchange, BindQueue, DeclareExchange, DeclareQueue, DeleteExchange, DeleteQueue,
    UnbindExchange, UnbindQueue,
)
from actors.node.steps import RETRY_LATER, Apply, Ask, AskAll, Op
from actors.placement import node_of
from actors.runtime.address import Address
from effects import CancelTimer, Effect, Log, ProposeCommand, Send, StartTimer
from wire.errors import INTERNAL_ERROR, AmqpError

Origin = Address | None  # who sent a request (None for an admin ask or an internal operation)
Claims = frozenset | None  # None: everything (the operation runs alone)
TIMER_PREFIX = "propose:"
CALL_TIMER_PREFIX = "call:"


def claims(origin: Origin, msg: Any) -> Claims:
    """What a request touches (see the module docstring); None for every request not named here."""
    kind = type(msg)
    if kind is DeclareQueue or kind is DeleteQueue:
        return frozenset({origin, ("q", msg.vhost, msg.queue)})
    if kind is AutoDeleteQueue:
        return frozenset({("q", msg.vhost, msg.name)})
    if kind is DeclareExchange or kind is DeleteExchange:
        return frozenset({origin, ("x", msg.vhost, msg.exchange)})
    if kind is BindQueue or kind is UnbindQueue:
        return frozenset({origin, ("q", msg.vhost, msg.queue), ("x", msg.vhost, msg.exchange)})
    if kind is BindExchange or kind is UnbindExchange:
        return frozenset({origin, ("x", msg.vhost, msg.source), ("x", msg.vhost, msg.destination)})
    return None


@dataclass(eq=False, slots=True)
class Run:
    origin: Origin
    msg: Any
    claims: Claims
    op: Op | None = None  # None until it starts


class Operations:
    def __init__(self, *, begin: Callable[[Any], Op], answer: Callable[[Origin, Any, Any], None],
                 unreachable: Callable[[], set[str]], emit: Callable[[Effect], None], incarnation: int,
                 timeout_ms: int) -> None:
        self._begin = begin  # msg -> its operation
        self._answer = answer  # (origin, msg, result): the operation ended
        self._unreachable = unreachable  # the nodes a call cannot reach
        self._emit = emit
        self._incarnation = incarnation  # tells this run's proposals from an earlier run's in the log
        self.timeout_ms = timeout_ms
        self._waiting: list[Run] = []
        self._running: list[Run] = []
        self._proposals: dict[Hashable, tuple[Run, Apply]] = {}  # key -> the operation waiting on it
        self._proposed = 0
        self.calls: dict[int, tuple[Callable[[Reply], None], Ask]] = {}  # rid -> resume, its step
        self._rid = 0  # 0 is never a call's rid: fire-and-forget requests carry it
        self._pumping = False
        self._again = False

    # ------------------------------------------------------------------ inputs
    def submit(self, origin: Origin, msg: Any) -> None:
        self._waiting.append(Run(origin, msg, claims(origin, msg)))
        self.pump()

    def waits_for(self, key: Hashable) -> bool:
        """Whether an operation of this node waits for the proposal `key`."""
        return key in self._proposals

    def applied(self, key: Hashable, value: Any) -> None:
        """The proposal `key` was applied here: its operation goes on with (result, changes)."""
        run, _ = self._proposals.pop(key)
        self._emit(CancelTimer(timer_name(key)))
        self._advance(run, value)
        self.pump()

    def timer(self, name: str) -> bool:
        """A proposal's or a call's time-out (see the module docstring); False: neither's timer."""
        if name.startswith(CALL_TIMER_PREFIX):
            rid = int(name[len(CALL_TIMER_PREFIX):])
            call = self.calls.pop(rid, None)
            if call is not None:  # not answered meanwhile
                resume, step = call
                resume(Reply(rid, error=step.absent or step.down or step.missing))
            return True
        if not name.startswith(TIMER_PREFIX):
            return False
        entry = next(((key, e) for key, e in self._proposals.items() if timer_name(key) == name), None)
        if entry is None:
            return True  # applied meanwhile
        key, (run, step) = entry
        del self._proposals[key]
        if step.timeout_error is None:
            self._propose(run, step)
        elif step.timeout_error is RETRY_LATER:
            self._running.remove(run)
            run.op.close()
            self._waiting.append(Run(run.origin, run.msg, run.claims))
            self.pump()
        else:
            self._finish(run, step.timeout_error)
            self.pump()
        return True

    def call(self, resume: Callable[[Reply], None], step: Ask) -> int:
        """A call outside any operation's steps (an admin answer's Syncs): its rid."""
        self._rid += 1
        self.calls[self._rid] = (resume, step)
        self._emit(StartTimer(f"{CALL_TIMER_PREFIX}{self._rid}", step.timeout_ms or self.timeout_ms))
        return self._rid

    # ------------------------------------------------------------------ the order
    def pump(self) -> None:
        """Start every waiting operation that may start (see the module docstring)."""
        if self._pumping:
            self._again = True  # an operation ended inside this pump: look again once it is done
            return
        self._pumping = True
        try:
            while self._start_one() or self._again:
                self._again = False
        finally:
            self._pumping = False

    def _start_one(self) -> bool:
        running = self._running
        if any(r.claims is None for r in running):
            return False
        held: set = set()
        for r in running:
            held |= r.claims
        for i, run in enumerate(self._waiting):
            if run.claims is None:
                if running or i:
                    return False  # it waits for every operation before it; everything after waits for it
            elif not held.isdisjoint(run.claims):
                held |= run.claims  # waits, and holds back later requests to the same things
                continue
            del self._waiting[i]
            running.append(run)
            run.op = self._begin(run.msg)
            self._advance(run, None)
            return True
        return False

    def _advance(self, run: Run, value: Any) -> None:
        """Run the operation until it waits for a proposal or a call, or finishes."""
        while True:
            try:
                step = run.op.send(value)
            except StopIteration as done:
                self._finish(run, done.value)
                return
            except Exception:  # a bug in one request must not stop the node's metadata service
                name = type(run.msg).__name__
                self._emit(Log("node.op_failed", "error", (("op", name), ("traceback", traceback.format_exc()))))
                name = "AdminOp" if name == "AdminAsk" else name
                self._finish(run, AmqpError(INTERNAL_ERROR, f"internal error in {name}", connection=True))
                return
            if type(step) is Apply:
                self._propose(run, step)
                return
            if type(step) is AskAll:
                value = self._ask_all(run, step.asks)
                if value is None:
                    return
                continue
            if node_of(step.to.host) not in self._unreachable():
                break
            value = Reply(0, error=step.down or step.missing)
        self._send(step, lambda reply: self._resume(run, reply))

    def _send(self, step: Ask, resume: Callable[[Reply], None]) -> None:
        rid = self.call(resume, step)
        self._emit(Send(step.to, step.request(rid)))

    def _ask_all(self, run: Run, asks: tuple[Ask, ...]) -> list[Reply] | None:
        """Send every ask; their replies at once if none had to be sent, else None (the operation
        resumes when the last is answered)."""
        unreachable = self._unreachable()
        replies: list[Reply | None] = [None] * len(asks)
        left = [0]

        def answered(i: int, reply: Reply) -> None:
            replies[i] = reply
            left[0] -= 1
            if left[0] == 0:
                self._resume(run, replies)
        for i, ask in enumerate(asks):
            if node_of(ask.to.host) in unreachable:
                replies[i] = Reply(0, error=ask.down or ask.missing)
            else:
                left[0] += 1
                self._send(ask, lambda reply, i=i: answered(i, reply))
        return replies if left[0] == 0 else None

    def _propose(self, run: Run, step: Apply) -> None:
        self._proposed += 1
        key = (self._incarnation, self._proposed)
        self._proposals[key] = (run, step)
        self._emit(ProposeCommand(key, step.cmd))
        self._emit(StartTimer(timer_name(key), self.timeout_ms))

    def _resume(self, run: Run, reply: Any) -> None:
        self._advance(run, reply)
        self.pump()

    def _finish(self, run: Run, result: Any) -> None:
        self._running.remove(run)
        run.op.close()
        self._again = True
        self._answer(run.origin, run.msg, result)


def timer_name(key: Hashable) -> str:
    return f"{TIMER_PREFIX}{key}"
