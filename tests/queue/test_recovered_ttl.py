"""A durable classic queue keeps its messages' TTL and body bytes across a restart (clean stop or
crash), as RabbitMQ does: the queue core over a real DurableBacking on real files (CrashDisk).

Reference: RabbitMQ stores each message's expiry in its queue index entry; at queue start
`init_ttl` drops (dead-letters) what expired while the node was down and arms the TTL timer for the
head, and `init_max_length` / `init_max_bytes` count the recovered messages.
"""
from __future__ import annotations

from actors.messages.channel_queue import Confirm, Deliver, Publish, Rejected
from effects import Send, StartTimer
import random
import shutil
import tempfile

import pytest

from persist.classic.backed import BackedReady
from actors.queue.core import TTL_TIMER, ClassicQueue
from persist.classic.durable_queue import DurableBacking
from persist.classic.msg_store import MsgStore
from tests.classic_store.crashdisk import CrashDisk
from wire.properties import BasicProperties, encode_content_header

T0 = 1_700_000_000_000
CH = "ch1"


def header(expiration: str | None = None) -> bytes:
    return encode_content_header(60, 0, BasicProperties(delivery_mode=2, expiration=expiration))


def published(seq: int, *, body: bytes | None = None, expiration: str | None = None) -> tuple:
    return (seq, "", "q", header(expiration), body if body is not None else b"m%d" % seq)


class Sink:
    def route(self, vhost, exchange, routing_key, headers=None):
        return ["dlq"]


class Node:
    """One queue's files under a temp dir; `restart` reopens them as a clean stop or a crash."""

    def __init__(self, segment_entries: int = 4, embed_below: int = 4096) -> None:
        self.root = tempfile.mkdtemp(prefix="recovered_ttl_")
        self.disk = CrashDisk(self.root)
        self.segment_entries = segment_entries
        self.embed_below = embed_below
        self.backing = self._open()

    def _open(self) -> DurableBacking:
        self.store = MsgStore(self.disk, "persistent")
        self.transient = MsgStore(self.disk, "transient", transient=True)
        self.store.open()
        self.transient.open()
        backing = DurableBacking(self.disk, "q", self.store, self.transient, embed_below=self.embed_below,
                                 segment_entries=self.segment_entries, ram_max_messages=2)
        backing.recover()
        if self.store.recovering:
            self.store.finish_recovery()
        return backing

    def queue(self, arguments: dict, now_ms: int) -> ClassicQueue:
        return ClassicQueue("/", "q", arguments=arguments, router=Sink(), place=lambda v, n: n,
                            now_ms=now_ms, ready=BackedReady(self.backing),
                            next_id=self.backing.next_msg_id)

    def restart(self, crash: bool) -> None:
        self.backing.flush()  # what was confirmed is on disk either way
        if crash:
            self.disk.crash(random.Random(0))
        else:
            self.backing.close()
            self.store.close()
            self.transient.close()
        self.backing = self._open()

    def close(self) -> None:
        self.disk.close()
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def node():
    n = Node()
    yield n
    n.close()


def dead_lettered(effects) -> list[tuple[bytes, str]]:
    out = []
    for e in effects:
        if isinstance(e, Send) and isinstance(e.msg, Publish):
            for _, _, _, head, body in e.msg.messages:
                out.append((body, BasicProperties.decode(head, 12).headers["x-death"][0]["reason"]))
    return out


def timers(effects) -> list[int]:
    return [e.ticks for e in effects if isinstance(e, StartTimer) and e.name == TTL_TIMER]


@pytest.mark.parametrize("crash", [False, True])
def test_messages_that_expired_while_down_are_dead_lettered_at_start(node, crash):
    args = {"x-message-ttl": 1000, "x-dead-letter-exchange": "dlx"}
    q = node.queue(args, T0)
    q.publish(CH, [published(i) for i in range(1, 11)], now_ms=T0)
    node.restart(crash)
    q = node.queue(args, T0 + 5000)
    assert q.message_count == 10
    effects = q.start(now_ms=T0 + 5000)
    assert dead_lettered(effects) == [(b"m%d" % i, "expired") for i in range(1, 11)]
    assert q.message_count == 0 and timers(effects) == []
    node.restart(crash=False)
    assert len(node.backing.vq) == 0  # the drops reached the index


@pytest.mark.parametrize("crash", [False, True])
def test_a_recovered_head_that_expires_later_arms_the_timer(node, crash):
    args = {"x-dead-letter-exchange": "dlx"}
    q = node.queue(args, T0)
    q.publish(CH, [published(1, expiration="100"), published(2, expiration="3000"), published(3)],
              now_ms=T0)
    node.restart(crash)
    q = node.queue(args, T0 + 1000)
    effects = q.start(now_ms=T0 + 1000)
    assert dead_lettered(effects) == [(b"m1", "expired")]
    assert timers(effects) == [2000]  # message 2 expires 3000 ms after its publish
    assert dead_lettered(q.on_timer(TTL_TIMER, now_ms=T0 + 3000)) == [(b"m2", "expired")]
    message, remaining, _ = q.get(CH, ack_required=False, now_ms=T0 + 3000)
    assert message[5] == b"m3" and remaining == 0  # no TTL: it stays


def test_a_head_in_a_later_segment_is_checked_when_consumers_reach_it(node):
    """Segments of 4 entries (msg_ids start at 1, so the first holds 1-3): messages 1-3 have no
    TTL, the next ones do, so the queue meets their expiry only once it has read the second
    segment back from disk, which no take of 1-3 needs."""
    args = {"x-dead-letter-exchange": "dlx"}
    q = node.queue(args, T0)
    q.publish(CH, [published(i) for i in range(1, 4)]
              + [published(i, expiration="500") for i in range(4, 11)], now_ms=T0)
    node.restart(crash=False)
    q = node.queue(args, T0 + 100)
    assert timers(q.start(now_ms=T0 + 100)) == []  # the head (message 1) has no TTL
    effects = q.consume(CH, "c", ack_required=True, credit=3, now_ms=T0 + 100)
    (deliver,) = [e.msg for e in effects if isinstance(getattr(e, "msg", None), Deliver)]
    assert [m[5] for m in deliver.messages] == [b"m%d" % i for i in range(1, 4)]
    assert timers(effects) == [400]  # the new head, message 4, read back with its expiry
    effects = q.grant(CH, "c", 10, now_ms=T0 + 600)
    assert not [e.msg for e in effects if isinstance(getattr(e, "msg", None), Deliver)]
    assert dead_lettered(effects) == [(b"m%d" % i, "expired") for i in range(4, 11)]


@pytest.mark.parametrize("crash", [False, True])
def test_max_length_bytes_counts_recovered_bodies(crash):
    node = Node(embed_below=16)  # bodies of 10 bytes embedded, of 20 in the store
    try:
        args = {"x-max-length-bytes": 60, "x-overflow": "reject-publish"}
        q = node.queue(args, T0)
        q.publish(CH, [published(1, body=b"a" * 10), published(2, body=b"b" * 20),
                       published(3, body=b"c" * 20)], now_ms=T0)
        node.restart(crash)
        q = node.queue(args, T0)
        q.start(now_ms=T0)
        assert q._ready.body_bytes == 50
        effects = q.publish(CH, [published(4, body=b"d" * 11), published(5, body=b"e" * 10)])
        assert Send(CH, Rejected([4])) in effects and Send(CH, Confirm(5)) in effects
        assert q._ready.body_bytes == 60
        message, _, _ = q.get(CH, ack_required=True)
        assert message[5] == b"a" * 10 and q._ready.body_bytes == 50
        q.settle(CH, requeued=[message[0]])
        assert q._ready.body_bytes == 60
        node.restart(crash)
        q = node.queue(args, T0)
        assert (q.message_count, q._ready.body_bytes) == (4, 60)
        assert q.purge() == 4 and q._ready.body_bytes == 0
        node.restart(crash)
        q = node.queue(args, T0)
        assert (q.message_count, q._ready.body_bytes) == (0, 0)
    finally:
        node.close()


@pytest.mark.parametrize("crash", [False, True])
def test_max_length_counts_recovered_messages(node, crash):
    args = {"x-max-length": 3, "x-overflow": "reject-publish"}
    q = node.queue(args, T0)
    q.publish(CH, [published(i) for i in range(1, 4)], now_ms=T0)
    node.restart(crash)
    q = node.queue(args, T0)
    effects = q.publish(CH, [published(4)])
    assert Send(CH, Rejected([4])) in effects and q.message_count == 3


def test_a_take_that_reads_expired_messages_back_from_disk_dead_letters_them(node):
    args = {"x-dead-letter-exchange": "dlx"}
    q = node.queue(args, T0)
    q.publish(CH, [published(i) for i in range(1, 4)]
              + [published(i, expiration="500") for i in range(4, 11)] + [published(11)], now_ms=T0)
    node.restart(crash=True)
    q = node.queue(args, T0 + 1000)
    assert dead_lettered(q.start(now_ms=T0 + 1000)) == []  # the head, message 1, has no TTL
    effects = q.consume(CH, "c", ack_required=False, credit=20, now_ms=T0 + 1000)
    (deliver,) = [e.msg for e in effects if isinstance(getattr(e, "msg", None), Deliver)]
    assert [m[5] for m in deliver.messages] == [b"m1", b"m2", b"m3", b"m11"]
    assert dead_lettered(effects) == [(b"m%d" % i, "expired") for i in range(4, 11)]
    assert q.message_count == 0 and not q._expiry
