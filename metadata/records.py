"""The registry's records: frozen values handed to callers and rebuilt from change tuples."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Hashable

from metadata.fieldvalues import as_text
from wire.codec import FieldTable


@dataclass(frozen=True, slots=True)
class QueueRecord:
    vhost: str
    name: str
    durable: bool
    exclusive_owner: Hashable | None  # the connection that owns an exclusive queue
    auto_delete: bool
    arguments: FieldTable = field(default_factory=dict, compare=False, hash=False)
    created: bool = False  # True only in the answer to the declare that created it
    home: str = ""  # the host its actor runs on (actors/placement.py); "" until a node adopts it
    # a quorum queue's member nodes, the leader the locator chose first (its home names no host:
    # it is the queue's incarnation, actors/placement.py's quorum_home)
    members: tuple[str, ...] = ()
    created_ms: int = 0  # a quorum queue's creation time (every member's machine starts from it)
    # a replicated stream's member nodes, the declared leader (on `home`'s node) first; () for a
    # stream of one member and every other queue (actors/stream/replication.py)
    replicas: tuple[str, ...] = ()

    @property
    def quorum(self) -> bool:
        return bool(self.members)


@dataclass(frozen=True, slots=True)
class ExchangeRecord:
    vhost: str
    name: str
    type: str
    durable: bool
    auto_delete: bool
    internal: bool
    arguments: FieldTable = field(default_factory=dict, compare=False, hash=False)

    @property
    def alternate(self) -> str | None:
        value = self.arguments.get("alternate-exchange")
        return as_text(value) if isinstance(value, (str, bytes)) else None


QUEUE = "queue"
EXCHANGE = "exchange"


@dataclass(frozen=True, slots=True)
class BindingRecord:
    vhost: str
    source: str
    destination_kind: str  # QUEUE or EXCHANGE
    destination: str
    routing_key: str
    arguments: FieldTable = field(default_factory=dict, compare=False, hash=False)
