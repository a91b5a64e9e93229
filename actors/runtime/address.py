"""Actor addresses: which host process, and which actor inside it.

An address is location-transparent for actors: they hand it around in messages and give it
back to `Runtime.send`; only the runtime looks at `host` to pick a mailbox.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Address:
    host: str  # host process name, e.g. "conn0", "queue0", "node"
    name: str  # actor name inside that host, e.g. "reader:17", "q:/:orders"

    def __str__(self) -> str:
        return f"{self.host}/{self.name}"

    @classmethod
    def parse(cls, text: str) -> Address:
        """Inverse of `str`: the host is everything before the first "/", the name may hold "/"."""
        host, sep, name = text.partition("/")
        if not sep or not host or not name:
            raise ValueError(f"not an actor address: {text!r}")
        return cls(host, name)
