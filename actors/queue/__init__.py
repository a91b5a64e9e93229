"""The classic queue: a pure core (`core.ClassicQueue`) and its effects; the actor shell is separate."""
from actors.queue.core import ClassicQueue
from actors.queue.effects import AutoDelete, Confirmed, ConsumerCancelled, Deliver, QueueEffect, Rejected
from persist.classic.message import Message

__all__ = ["AutoDelete", "ClassicQueue", "Confirmed", "ConsumerCancelled", "Deliver", "Message", "QueueEffect", "Rejected"]
