"""max_message_size (actors/channel/publish_checks.py): a publish whose body is larger closes the
channel with RabbitMQ's 406 and text, before permissions are looked at; one at the limit passes."""
from __future__ import annotations

from actors.channel.publish_checks import MAX_MESSAGE_SIZE_CAP, effective_max_message_size
from actors.messages.channel_queue import Publish
from effects import Send, Write
from tests.channel.helpers import PermRegistry, close_frame, declare, make, publish


class Sized(bytes):
    """A body that only says how long it is (512 MiB are not worth allocating to be refused)."""

    def __new__(cls, size: int) -> "Sized":
        body = super().__new__(cls)
        body.size = size
        return body

    def __len__(self) -> int:
        return self.size


def close(text: str) -> Write:
    return Write([close_frame(406, f"PRECONDITION_FAILED - {text}", 60, 40)])


def test_a_body_above_the_limit_closes_the_channel_and_one_at_it_is_routed():
    reg = PermRegistry()
    declare(reg, "q")
    core = make(reg, max_message_size=10)
    at_limit = publish(body=b"x" * 10)
    core.command(at_limit)
    assert core.flush() == [Send(("q", "/", "q"), Publish([(0, "", "q", at_limit.header, at_limit.body)]), 1)]
    core.command(publish(body=b"x" * 11))
    assert core.flush() == [close("message size 11 is larger than configured max size 10")]


def test_the_size_is_checked_before_write_permission():
    reg = PermRegistry()
    reg.permissions[("guest", "/")] = {"write": "^$"}
    core = make(reg, max_message_size=1)
    core.command(publish(body=b"xy"))
    assert core.flush() == [close("message size 2 is larger than configured max size 1")]


def test_a_limit_above_rabbitmqs_cap_is_the_cap_and_its_text_says_so():
    assert effective_max_message_size(2**40) == MAX_MESSAGE_SIZE_CAP == 512 * 1024 * 1024
    core = make(max_message_size=effective_max_message_size(2**40))
    core.command(publish()._replace(body=Sized(MAX_MESSAGE_SIZE_CAP + 1)))  # refused before it is read
    assert core.flush() == [close(f"message size {MAX_MESSAGE_SIZE_CAP + 1} is larger than max size "
                                  f"{MAX_MESSAGE_SIZE_CAP}")]
