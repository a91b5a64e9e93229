"""The dead-letter worker's books (actors/quorum/dead_letter_worker.py), exactly: where copies go,
which confirms settle a message (every target's), and what is published again."""
from __future__ import annotations

from actors.messages.channel_queue import Publish, Published
from actors.quorum.dead_letter_worker import RETRY_MS, DeadLetters, Source
from effects import Send
from persist.classic.message import Message
from tests.quorum.harness import H

SRC = Source("n1:quorum/qq:u", "/", "src", "dlx", None)


class Router:
    """`dlx` routes every key to the queues in `bound` (none: unroutable)."""

    def __init__(self, *bound: str) -> None:
        self.bound = list(bound)

    def route(self, vhost, exchange, routing_key, headers=None):
        return list(self.bound) if exchange == "dlx" else []


def worker(*bound: str) -> tuple[DeadLetters, Router]:
    router = Router(*bound)
    return DeadLetters(router, lambda vhost, name: f"q:{name}"), router


def message(body: bytes) -> Message:
    return Message(0, False, "x", "rk", H, body)


def seqs(sends: list[Send]) -> dict:
    return {s.to: [(p.seq, p.body) for p in s.msg.messages] for s in sends}


def test_at_most_once_copies_go_to_every_target_without_a_seq():
    w, _ = worker("a", "b")
    sends = w.at_most_once(SRC, "expired", (message(b"1"), message(b"2")), 0)
    assert seqs(sends) == {"q:a": [(0, b"1"), (0, b"2")], "q:b": [(0, b"1"), (0, b"2")]}
    assert all(type(s.msg) is Publish and s.msg.messages[0].routing_key == "rk" for s in sends)
    assert w.held == {}


def test_a_message_is_settled_once_every_target_confirmed_it():
    w, _ = worker("a", "b")
    sends = w.hand(SRC, ((0, "rejected", message(b"1")), (1, "rejected", message(b"2"))), 0)
    assert seqs(sends) == {"q:a": [(1, b"1"), (3, b"2")], "q:b": [(2, b"1"), (4, b"2")]}
    assert w.confirmed("q:a", 3) == {}  # b has confirmed nothing yet
    assert w.confirmed("q:b", 2) == {SRC.member: [0]}
    assert w.confirmed("q:b", 4) == {SRC.member: [1]}
    assert w.held == {} and w.confirmed("q:b", 4) == {}


def test_unroutable_and_rejected_copies_are_published_again_later():
    w, router = worker()
    assert w.hand(SRC, ((0, "delivery_limit", message(b"1")),), 0) == []  # nowhere to go yet
    router.bound = ["a"]
    assert w.retry(RETRY_MS - 1) == []
    assert seqs(w.retry(RETRY_MS)) == {"q:a": [(1, b"1")]}
    w.rejected("q:a", [1], RETRY_MS)  # a full reject-publish target, say
    assert w.confirmed("q:a", 1) == {}  # the confirm covering the refused seq settles nothing
    assert seqs(w.retry(2 * RETRY_MS)) == {"q:a": [(2, b"1")]}
    assert w.confirmed("q:a", 2) == {SRC.member: [0]}


def test_a_forgotten_source_settles_nothing_when_late_confirms_arrive():
    w, _ = worker("a")
    w.hand(SRC, ((0, "rejected", message(b"1")),), 0)
    w.forget(SRC.member)
    assert w.confirmed("q:a", 1) == {} and w.held == {}


def test_copies_carry_x_death():
    w, _ = worker("a")
    (send,) = w.hand(SRC, ((0, "rejected", message(b"1")),), 5000)
    record: Published = send.msg.messages[0]
    assert b"x-death" in record.header and b"rejected" in record.header


def test_each_incarnation_of_the_worker_publishes_under_a_name_of_its_own():
    """A target quorum queue takes a publisher's sequence numbers in order by name: a restarted
    worker under its old name, counting from 1 again, had its first copies dropped as duplicates."""
    from actors.quorum.dead_letter_shell import dead_letters_name
    from actors.quorum.names import channel_incarnation
    assert dead_letters_name(0x1a2b) != dead_letters_name(0x1a2c)
    # named as a channel of that incarnation, so HostChannelsGone of the next one takes it
    assert channel_incarnation(f"n1:quorum/{dead_letters_name(0x1a2b)}") == "n1:quorum/ch:1a2b."
