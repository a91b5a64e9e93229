"""Benchmark: the quorum queue machine alone (actors/quorum/machine.py), as a Raft member applies it.

Not a test. Run: .venv/bin/python -m bench.quorum_machine_bench [--messages N] [--batch B] [--body BYTES]
Prints:
- µs per Enqueue applied (decode included; the commands are encoded beforehand, as they arrive
  from the log), into a queue with no consumer, growing to N messages;
- bytes of machine state per ready message for that N-message backlog (tracemalloc, a separate
  run), plain and with x-message-ttl (which adds an expiry column);
- µs per delivered message when a consumer's credit is topped up B at a time (checkout);
- µs per settled message with B delivery ids per Settle (basic.ack multiple), and with 1;
- µs per message through a whole cycle (enqueue, deliver, settle one by one, prefetch 1);
- the snapshot of the N-message backlog: ms to take and encode it, its size, ms to decode and
  restore it, and ms to walk `live_indexes` (what persist/raft does at each snapshot).
"""
from __future__ import annotations

import argparse
import gc

import msgpack
import time
import tracemalloc
from typing import Callable, NamedTuple

from actors.quorum import commands as c
from actors.quorum.config import queue_config
from actors.quorum.machine import QuorumMachine
from actors.quorum.queries import stats
from actors.quorum.state import QueueState
from wire.properties import BasicProperties, encode_content_header

CHUNK = 50_000  # commands encoded ahead of timing at a time (bounded memory)


class Meta(NamedTuple):
    index: int
    term: int
    machine_version: int = 1


class Member:
    """A machine and its log position; `apply_all` times only the apply calls."""

    def __init__(self, arguments: dict) -> None:
        self.machine = QuorumMachine(queue_config("bench", "/", arguments, created_ms=0))
        self.state: QueueState = self.machine.init()
        self.index = 0
        self.seconds = 0.0

    def apply_all(self, encoded: list[bytes]) -> list:
        apply, state, index, effects = self.machine.apply, self.state, self.index, []
        start = time.perf_counter()
        for data in encoded:
            index += 1
            state, _reply, out = apply(Meta(index, 1), data, state)
            if out:
                effects.append(out)
        self.seconds += time.perf_counter() - start
        self.state, self.index = state, index
        return effects


def enqueue(member: Member, messages: int, body: bytes, seq: int = 0) -> int:
    header = encode_content_header(60, len(body), BasicProperties(delivery_mode=2))
    for start in range(0, messages, CHUNK):
        count = min(CHUNK, messages - start)
        member.apply_all([c.encode(c.Enqueue(1, "p", seq + i + 1, "amq.direct", "bench", header, body))
                          for i in range(count)])
        seq += count
    return seq


def bytes_per_ready(messages: int, body: bytes, arguments: dict) -> float:
    gc.collect()
    tracemalloc.start()
    member = Member(arguments)
    before = tracemalloc.get_traced_memory()[0]
    enqueue(member, messages, body)
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert stats(member.state)["messages_ready"] == messages
    return held / messages


def snapshot(member: Member) -> None:
    machine = member.machine
    start = time.perf_counter()
    data = msgpack.packb(machine.snapshot(member.state), use_bin_type=True)
    taken = time.perf_counter()
    restored = machine.restore(msgpack.unpackb(data, raw=False, strict_map_key=False))
    back = time.perf_counter()
    lowest = min(machine.live_indexes(member.state), default=None)
    walked = time.perf_counter()
    assert stats(restored) == stats(member.state) and lowest == 1
    print(f"snapshot: {(taken - start) * 1e3:.0f} ms to take and encode, {len(data) / 1e6:.1f} MB, "
          f"{(back - taken) * 1e3:.0f} ms to decode and restore, {(walked - back) * 1e3:.0f} ms to walk "
          f"live_indexes ({stats(member.state)['messages_ready']} ready)")


def timed(member: Member, commands: Callable[[], list[bytes]]) -> float:
    member.seconds = 0.0
    member.apply_all(commands())
    return member.seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=100, help="credit top-up and settle batch")
    parser.add_argument("--body", type=int, default=1024, help="body bytes")
    parser.add_argument("--consumed", type=int, default=200_000, help="messages delivered and settled")
    args = parser.parse_args()
    body, n, batch, consumed = b"x" * args.body, args.messages, args.batch, min(args.consumed, args.messages)

    member = Member({})
    enqueue(member, n, body)
    print(f"enqueue: {member.seconds / n * 1e6:.2f} µs per message ({n} messages, {args.body} B bodies, no consumer)")
    snapshot(member)

    timed(member, lambda: [c.encode(c.Checkout(2, "ch", "t", batch, True))])
    seconds = timed(member, lambda: [c.encode(c.Credit(2, "ch", "t", batch)) for _ in range(consumed // batch - 1)])
    print(f"checkout: {seconds / (consumed - batch) * 1e6:.2f} µs per delivered message (credit {batch} at a time)")

    timed(member, lambda: [c.encode(c.Cancel(3, "ch", "t"))])  # settles now deliver nothing more
    half = consumed // 2
    seconds = timed(member, lambda: [c.encode(c.Settle(3, "ch", "t", tuple(range(i, min(i + batch, half)))))
                                     for i in range(0, half, batch)])
    print(f"settle: {seconds / half * 1e6:.2f} µs per message ({batch} ids per settle)")
    seconds = timed(member, lambda: [c.encode(c.Settle(3, "ch", "t", (i,))) for i in range(half, consumed)])
    print(f"settle: {seconds / (consumed - half) * 1e6:.2f} µs per message (1 id per settle)")

    cycle = Member({})
    header = encode_content_header(60, len(body), BasicProperties(delivery_mode=2))
    timed(cycle, lambda: [c.encode(c.Checkout(1, "ch", "t", 1, True))])
    cycles = min(consumed, 100_000)
    seconds = timed(cycle, lambda: [data for i in range(cycles) for data in (
        c.encode(c.Enqueue(1, "p", i + 1, "amq.direct", "bench", header, body)),
        c.encode(c.Settle(1, "ch", "t", (i,))))])
    print(f"cycle: {seconds / cycles * 1e6:.2f} µs per message (enqueue + deliver + settle, prefetch 1)")

    plain = bytes_per_ready(n, body, {})
    ttl = bytes_per_ready(n, body, {"x-message-ttl": 3_600_000})
    print(f"memory: {plain:.1f} bytes per ready message, {ttl:.1f} with x-message-ttl ({n} ready)")


if __name__ == "__main__":
    main()
