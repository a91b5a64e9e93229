"""The stream queue core (actors/stream/core.py): the exact effects it returns.

Checks THE ORDERING RULE (nothing confirmed or delivered before `synced`), offsets as consumers
pick them, credit (acks change nothing here; Grant hands out more), every consumer reading the
same entries, the x-stream-offset header stamp, and the refusals that reach the core.
"""
from __future__ import annotations

from actors.messages.calls import Reply
from actors.messages.channel_queue import (
    Cancel, Confirm, Consume, ConsumerCancelled, Deliver, Get, Grant, Publish, Published, Settle,
)
from actors.messages.node import Dispose, QueueCounts, QueueStats
from actors.stream.core import StreamQueue
from actors.stream.header import stamp, stamped_chunk
from effects import Send
from persist.classic.message import Message
from persist.stream import chunk
from persist.stream.chunk import Entry
from persist.stream.log import StreamLog, make_durable
from wire.properties import HEADER_PROPS_OFFSET, BasicProperties, encode_content_header

A, B = "chA", "chB"


def header(**props) -> bytes:
    return encode_content_header(60, 1, BasicProperties(**props))


def published(seq: int, body: bytes = b"x") -> Published:
    return Published(seq, "", "s", header(), body)


def stream(tmp_path, **args) -> StreamQueue:
    return StreamQueue("/", "s", StreamLog.open(tmp_path, 1 << 20), {"x-queue-type": "stream", **args}, now_ms=1000)


def consume(q: StreamQueue, channel, tag: str, credit: int, offset=None, rid: int = 1) -> list:
    args = {} if offset is None else {"x-stream-offset": offset}
    return q.handle(channel, Consume(rid, tag, True, credit, False, args), now_ms=1000)


def synced(q: StreamQueue) -> list:
    """What the shell does around a sync: flush, sync_started, fdatasync, commit, synced."""
    target, fds = q.log.flush()
    q.sync_started()
    make_durable(fds)
    q.log.commit(target)
    return q.synced()


def offsets(effect) -> list[int]:
    assert type(effect) is Send and type(effect.msg) is Deliver
    return [m.msg_id for m in effect.msg.messages]


def test_confirms_and_deliveries_wait_for_the_sync(tmp_path):
    q = stream(tmp_path)
    assert consume(q, B, "c", 10, "first") == [Send(B, Reply(1, "stream"))]
    assert q.handle(A, Publish([published(1), published(2)]), now_ms=1000) == []
    assert q.unsynced
    effects = synced(q)
    assert effects[0] == Send(A, Confirm(2))
    assert offsets(effects[1]) == [0, 1] and effects[1].to == B
    assert not q.unsynced


def test_offsets_first_last_next_numeric(tmp_path):
    q = stream(tmp_path)
    for seq in (1, 2, 3):  # three chunks: offsets 0, 1, 2
        q.handle(A, Publish([published(seq)]))
    q.handle(A, Publish([published(4), published(5)]))  # one chunk: 3, 4
    synced(q)
    cases = {"first": [0, 1, 2, 3, 4], "last": [3, 4], "next": None, 2: [2, 3, 4], -5: [0, 1, 2, 3, 4], None: None}
    for i, (offset, want) in enumerate(cases.items()):
        effects = consume(q, B, f"c{i}", 100, offset, rid=i)
        assert effects[0] == Send(B, Reply(i, "stream"))
        assert (offsets(effects[1]) if len(effects) > 1 else None) == want, offset


def test_credit_and_acks(tmp_path):
    """Settle (an ack) changes nothing; Grant hands out the next entries; two consumers read the same."""
    q = stream(tmp_path)
    q.handle(A, Publish([published(0, bytes([i])) for i in range(5)]))
    synced(q)
    assert offsets(consume(q, B, "c", 2, "first")[1]) == [0, 1]
    assert offsets(consume(q, A, "d", 10, "first")[1]) == [0, 1, 2, 3, 4]
    assert q.handle(B, Settle([0, 1], [], [])) == []
    assert offsets(q.handle(B, Grant("c", 2))[0]) == [2, 3]
    assert q.handle(B, Cancel(7, "c")) == [Send(B, Reply(7))]
    assert q.handle(B, Grant("c", 2)) == []


def test_every_delivery_carries_its_offset(tmp_path):
    q = stream(tmp_path)
    q.handle(A, Publish([Published(0, "ex", "rk", header(content_type="text/plain", headers={"i": 1}), b"a"),
                         Published(0, "", "s", header(), b"b")]))
    q.log.sync()
    delivered = consume(q, B, "c", 10, "first")[1].msg.messages
    props = [BasicProperties.decode(m.header, HEADER_PROPS_OFFSET) for m in delivered]
    assert [(p.content_type, p.headers) for p in props] == [
        ("text/plain", {"i": 1, "x-stream-offset": 0}), (None, {"x-stream-offset": 1})]
    assert [(m.exchange, m.routing_key, m.body, m.redelivered) for m in delivered] == [
        ("ex", "rk", b"a", False), ("", "s", b"b", False)]


def test_stamp_keeps_every_other_property():
    raw = header(content_type="a", content_encoding="b", headers={"k": "v"}, delivery_mode=2, priority=3,
                 correlation_id="c", expiration="100", timestamp=5)
    props = BasicProperties.decode(stamp(raw, 9), HEADER_PROPS_OFFSET)
    assert (props.content_type, props.content_encoding, props.headers, props.delivery_mode, props.priority,
            props.correlation_id, props.expiration, props.timestamp) == (
        "a", "b", {"k": "v", "x-stream-offset": 9}, 2, 3, "c", "100", 5)


def test_a_batch_is_one_chunk_of_stamped_entries():
    """stamped_chunk writes the bytes chunk.encode writes for the stamped entries, and hands out
    the same entries as deliveries (msg_id = offset), whatever the batch mixes."""
    batch = [Published(1, "", "s", header(), b"a"), Published(2, "ex", "rk", header(headers={"i": 1}), b"bb"),
             Published(3, "", "s", header(), b""), Published(4, "", "s", header(), b"a" * 300)]
    data, messages = stamped_chunk(70, 5, batch)
    entries = [Entry(p.exchange, p.routing_key, stamp(p.header, 70 + i), p.body) for i, p in enumerate(batch)]
    assert data == chunk.encode(70, 5, entries)
    assert messages == [Message(70 + i, False, *e) for i, e in enumerate(entries)]
    head = chunk.read_header(data)
    assert chunk.messages(head, data[chunk.HEADER_BYTES:]) == messages


def test_refusals_counts_and_delete(tmp_path):
    q = stream(tmp_path)
    error = q.handle(B, Get(3, True))[0].msg.error
    assert (error.code, error.hard) == (540, True)
    q.handle(A, Publish([published(1)]))
    assert q.handle(B, QueueStats(4)) == [Send(B, Reply(4, QueueCounts(0, 0)))]  # 3.10: 0 messages
    consume(q, B, "c", 1, "first")
    effects = q.handle(A, Dispose(5, False, False))
    assert effects == [Send(A, Confirm(1)), Send(B, ConsumerCancelled("c")), Send(A, Reply(5, 0))]
    assert q.deleted


def test_a_consumer_behind_reads_from_disk_and_holds_nobody_back(tmp_path):
    """No decoded tail kept (recent_bytes_max 0): the one behind reads the segment file through its
    own reader, at most its credit, while the one at the tail is served at every sync."""
    q = stream(tmp_path)
    q.log.recent_bytes_max = 0
    for seq in range(1, 4):
        q.handle(A, Publish([published(seq, bytes([seq]))]))
    synced(q)
    assert consume(q, B, "behind", 0, "first") == [Send(B, Reply(1, "stream"))]
    assert consume(q, B, "tail", 10, "next", rid=2) == [Send(B, Reply(2, "stream"))]
    assert offsets(consume(q, B, "t2", 10, "first", rid=3)[1]) == [0, 1, 2]
    q.handle(A, Publish([published(4, b"\x04")]))
    effects = synced(q)
    assert [e.msg.consumer_tag for e in effects if type(e.msg) is Deliver] == ["tail", "t2"]
    late = q.handle(B, Grant("behind", 2))[0].msg.messages
    assert [(m.msg_id, m.body) for m in late] == [(0, b"\x01"), (1, b"\x02")]


def test_an_idle_stream_keeps_no_bodies_in_ram(tmp_path):
    q = stream(tmp_path)
    q.handle(A, Publish([published(1, b"x" * 100)]))
    synced(q)
    assert q.log.recent_bytes > 0
    q.on_timer("retention", now_ms=2000)
    assert q.log.recent_bytes == 0
    assert offsets(consume(q, B, "c", 5, "first")[1]) == [0]  # read from the file instead
