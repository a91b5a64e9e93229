"""The alarm relay's actor (the node host's "alarms"): a thin shell that hands its mailbox to
`AlarmRelay` (relay.py) and carries the effects out with the runtime's handlers."""
from __future__ import annotations

from typing import Any

from actors.monitor.relay import AlarmRelay
from actors.runtime.address import Address
from actors.runtime.effects import ActorEffects
from effects.interpreter import Interpreter


class RelayActor:
    def __init__(self, runtime: Any, address: Address, core: AlarmRelay) -> None:
        self.core = core
        self.run = Interpreter(ActorEffects(runtime, address).handlers())

    def receive(self, sender: Address, msg: Any) -> None:
        self.run(self.core.receive(sender, msg))
