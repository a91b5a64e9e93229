"""The one interpreter: carries out a core's effects, in list order, with the handlers of a place.

Every shell and the simulator run effects through this class; what differs between them is only
the table of handlers, one per effect type, that says what "send" or "start a timer" means where
the core runs (a Runtime and an event loop in a host process; a fake network and clock in
tests/sim). `extend` adds or replaces handlers, so a shell starts from the runtime's common ones
(actors/runtime/effects.py) and adds its own (a socket write, a Raft hard state).

An effect with no handler is a bug in the wiring, not something to skip: it raises `KeyError`
naming the effect type, and the shell's own error path takes over.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

Handler = Callable[[Any], None]


class Interpreter:
    __slots__ = ("_handlers",)

    def __init__(self, handlers: Mapping[type, Handler] = ()) -> None:
        self._handlers: dict[type, Handler] = dict(handlers)

    def extend(self, handlers: Mapping[type, Handler]) -> Interpreter:
        """A new interpreter with these handlers added (or replacing existing ones)."""
        return Interpreter({**self._handlers, **handlers})

    def handles(self, effect_type: type) -> bool:
        return effect_type in self._handlers

    def __call__(self, effects: Iterable[Any]) -> None:
        handlers = self._handlers
        for effect in effects:
            handler = handlers.get(type(effect))
            if handler is None:
                raise KeyError(f"no handler for effect {type(effect).__name__}")
            handler(effect)
