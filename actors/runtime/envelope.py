"""Encoding of one host-to-host batch as a Cap'n Proto `Envelope` (wire/envelope.capnp).

Bodies are msgpack with `use_bin_type=True`; they decode with `raw=False, use_list=False`, so a
list sent to another host arrives as a tuple. Receivers must accept any sequence. Messages
between actors of the same host never pass through here (they get the same Python object).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import capnp
import msgpack

_schema = capnp.load(str(Path(__file__).resolve().parents[2] / "wire" / "envelope.capnp"))
Envelope = _schema.Envelope

# A frame is one envelope; capnp's default read limit (64 MiB) would reject a large batch.
traversal_limit_words = 1 << 40

# (sender name, target name, kind, credit, body)
Item = tuple[str, str, str, int, Any]


def encode(source: str, items: list[Item]) -> bytes:
    """One envelope holding `items` in order."""
    message = Envelope.new_message(source=source)
    slots = message.init("items", len(items))
    packb = msgpack.packb
    for slot, (sender, target, kind, credit, body) in zip(slots, items):
        slot.sender = sender
        slot.target = target
        slot.kind = kind
        slot.credit = credit
        slot.body = packb(body, use_bin_type=True)
    return message.to_bytes()


def decode(frame: bytes | memoryview) -> tuple[str, list[Item]]:
    """The source host and the items of one envelope, bodies unpacked."""
    unpackb = msgpack.unpackb
    with Envelope.from_bytes(frame, traversal_limit_in_words=traversal_limit_words) as message:
        items = [
            (item.sender, item.target, item.kind, item.credit,
             unpackb(item.body, raw=False, use_list=False))
            for item in message.items
        ]
        return message.source, items

