"""RaftClient: the client side of a Raft group, as an actor in the caller's own Runtime.

It sends `Propose(corr, command)` to the member it believes leads the group and resolves the
future of `corr` when `Committed` (or a `CommittedBatch`) comes back. `NotLeaderReply` names the
leader (or None while an election runs): the call retries there, or after `retry_s` at the next member. A call that hears nothing
within `attempt_s` (its member's node may be dead: its pipe keeps the message queued for it) retries
at the next member. Retries can apply a command twice; callers that care send idempotent
commands ("set"). Replies for calls already given up are dropped.
"""
from __future__ import annotations

import asyncio
import itertools
from typing import Any

from actors.messages.raft import ChangeRefusedReply, Committed, CommittedBatch, NotLeaderReply, Propose
from actors.runtime.address import Address

attempt_s = 1.0
retry_s = 0.05


class NoLeader(Exception):
    pass


class RaftClient:
    def __init__(self, runtime: Any, name: str, groups: dict[str, list[str]]) -> None:
        """`groups`: group name -> member ids (= addresses as text)."""
        self.runtime = runtime
        self.me = runtime.spawn(name, self)
        self.groups = {g: [Address.parse(m) for m in ms] for g, ms in groups.items()}
        self.leader: dict[str, Address] = {}
        self._corr = itertools.count(1)
        self._waiting: dict[int, asyncio.Future] = {}

    def receive(self, sender: Address, msg: Any) -> None:
        kind = type(msg)
        if kind is CommittedBatch:
            for corr, reply in msg.outcomes:
                self._resolve(corr, ("ok", sender, reply))
        elif kind is Committed:
            self._resolve(msg.corr, ("ok", sender, msg.reply))
        elif kind is NotLeaderReply:
            self._resolve(msg.corr, ("not_leader", sender, msg.leader))
        elif kind is ChangeRefusedReply:
            self._resolve(msg.corr, ("rejected", sender, msg.reason))

    def _resolve(self, corr: int, outcome: tuple) -> None:
        future = self._waiting.pop(corr, None)
        if future is not None and not future.done():
            future.set_result(outcome)

    def send(self, to: Address, command: bytes) -> tuple[int, asyncio.Future]:
        """One attempt at `to`: its corr, and a future that gets (status, member, value)."""
        corr = next(self._corr)
        future = asyncio.get_running_loop().create_future()
        self._waiting[corr] = future
        self.runtime.send(to, Propose(corr, command), sender=self.me)
        return corr, future

    async def call(self, group: str, command: bytes, timeout_s: float = 10.0) -> Any:
        """Commit `command` on `group`; the machine's reply. Raises NoLeader after `timeout_s`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        members = self.groups[group]
        turn = itertools.cycle(members)
        target = self.leader.get(group) or next(turn)
        while loop.time() < deadline:
            corr, future = self.send(target, command)
            try:
                status, member, value = await asyncio.wait_for(
                    future, min(attempt_s, max(0.0, deadline - loop.time())))
            except TimeoutError:
                self._waiting.pop(corr, None)
                self.leader.pop(group, None)
                target = next(turn)
                continue
            if status == "ok":
                self.leader[group] = member
                return value
            if status == "not_leader" and value is not None:
                target = Address.parse(value)
                continue
            await asyncio.sleep(retry_s)  # an election is running; back off, then ask around
            target = next(turn)
        raise NoLeader(f"group {group}: no commit within {timeout_s} s")
