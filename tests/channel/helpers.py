"""A channel core wired to a real Registry (with permissions), and builders for its inputs."""
from __future__ import annotations

import random
import re

from actors.channel.core import ChannelCore
from metadata.registry import Registry
from wire import methods as m
from wire.errors import ACCESS_REFUSED, AmqpError
from wire.frames import content_frames, method_frame
from wire.inbound import Command
from wire.properties import BasicProperties, encode_content_header

NODE = "node"
ME = "conn0/ch:1"
FRAME_MAX = 131072


class PermRegistry(Registry):
    """A real registry plus RabbitMQ's configure/write/read regexes per (user, vhost)."""

    def __init__(self) -> None:
        super().__init__(random.Random(7))
        self.permissions: dict[tuple[str, str], dict[str, str]] = {}
        self.permission_checks = 0

    def check_permission(self, user: str, vhost: str, perm: str, kind: str, name: str) -> AmqpError | None:
        self.permission_checks += 1
        pattern = self.permissions.get((user, vhost), {}).get(perm, ".*")
        if re.search(pattern, name):
            return None
        return AmqpError(ACCESS_REFUSED, f"access to {kind} '{name}' in vhost '{vhost}' refused for user '{user}'")


def place(vhost: str, name: str) -> tuple:
    return ("q", vhost, name)


def make(registry: PermRegistry | None = None, number: int = 1, **kw) -> ChannelCore:
    kw.setdefault("capabilities", {"consumer_cancel_notify": True})
    return ChannelCore(number, vhost="/", owner="owner-1", router=registry or PermRegistry(), place=kw.pop("place", place),
                       node=NODE, frame_max=FRAME_MAX, rng=random.Random(1), address=kw.pop("address", ME),
                       **kw)


def cmd(method: m.Method, number: int = 1) -> Command:
    return Command(number, method, None, None)


def header(body: bytes = b"hi", **props) -> bytes:
    return encode_content_header(60, len(body), BasicProperties(**props))


def publish(exchange: str = "", routing_key: str = "q", body: bytes = b"hi", *, mandatory: bool = False,
            number: int = 1, **props) -> Command:
    return Command(number, m.BasicPublish(exchange=exchange, routing_key=routing_key, mandatory=mandatory),
                   header(body, **props), body)


def frame(method: m.Method, number: int = 1) -> bytes:
    return method_frame(number, method)


def close_frame(code: int, text: str, class_id: int, method_id: int, number: int = 1) -> bytes:
    return method_frame(number, m.ChannelClose(reply_code=code, reply_text=text, class_id=class_id,
                                               method_id=method_id))


def content(method: m.Method, hdr: bytes, body: bytes, number: int = 1) -> list:
    return content_frames(number, method, hdr, body, FRAME_MAX)


def declare(registry: Registry, *queues: str) -> None:
    for q in queues:
        result, _ = registry.declare_queue("/", q)
        assert not isinstance(result, AmqpError)
