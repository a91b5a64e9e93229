"""The node actor: the thin shell around NodeCore (core.py), which makes every decision.

It hands the core what arrives in its mailbox and the admin asks of warrenctl (through the node
host's control function, actors/hosts.py), and carries out the core's effects with one Interpreter:
Send and Log through the runtime's common handlers, SaveDefinitions by rewriting the definitions
file atomically and durably before the next effect (definitions_file.py), AnswerAdmin by resolving
the future the control function awaits. It reads the definitions file once, at start, and draws
password salts from the OS. Read-only listings are answered from the registry directly
(listings.py).
"""
from __future__ import annotations

import asyncio
import itertools
import os
from pathlib import Path
from typing import Any

from actors.node import definitions_file
from actors.node.core import DefinitionsCorrupt, NodeCore
from actors.node.listings import listing
from actors.runtime.address import Address
from actors.runtime.effects import ActorEffects
from effects import AnswerAdmin, SaveDefinitions
from effects.interpreter import Interpreter
from metadata.registry import Registry

DEFINITIONS_FILE = "definitions.json"


class NodeActor:
    def __init__(self, runtime: Any, name: str, registry: Registry, queue_hosts: int, *,
                 data_dir: str | None = None, default_user: str = "guest", default_pass: str = "guest") -> None:
        self.address = Address(runtime.host, name)
        self._path = Path(data_dir) / DEFINITIONS_FILE if data_dir else None
        self.core = NodeCore(registry, queue_hosts, salt=os.urandom, persist=self._path is not None)
        self._asks: dict[int, asyncio.Future] = {}
        self._ask_ids = itertools.count(1)
        self._run = Interpreter(ActorEffects(runtime, self.address).handlers()).extend(
            {SaveDefinitions: self._save, AnswerAdmin: self._answer})
        saved = definitions_file.read_bytes(self._path) if self._path is not None else None
        try:
            effects = self.core.start(saved, default_user, default_pass)
        except DefinitionsCorrupt as e:  # a corrupt file stops the node rather than start it with the wrong users
            raise DefinitionsCorrupt(f"{self._path}: {e}") from None
        self._run(effects)

    def receive(self, sender: Address, msg: Any) -> None:
        self._run(self.core.receive(sender, msg))

    async def admin(self, op: str, args: dict) -> Any:
        """Run admin `op` (one of core.ADMIN_OPS) in turn with the channels' requests."""
        ask = next(self._ask_ids)
        answer = self._asks[ask] = asyncio.get_running_loop().create_future()
        self._run(self.core.admin(ask, op, args))
        return await answer

    def listing(self, op: str, args: dict) -> Any:
        """Answers that need no turn in the serial order (one of listings.LISTING_OPS)."""
        return listing(self.core.registry, op, args, queue_hosts=self.core.queue_hosts,
                       connection_hosts=[sub.host for sub in self.core.connection_hosts()], pid=os.getpid())

    def _save(self, e: SaveDefinitions) -> None:
        assert self._path is not None
        definitions_file.write_atomic(self._path, e.data)

    def _answer(self, e: AnswerAdmin) -> None:
        answer = self._asks.pop(e.ask, None)
        if answer is not None and not answer.done():
            answer.set_result(e.value)
