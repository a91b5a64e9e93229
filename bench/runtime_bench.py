"""Runtime micro-benchmarks: envelope cost per message and per MB (typed messages: a channel's
Publish batch of Published records, the common case), and a stream between two Runtimes over
ZeroMQ ipc:// (both in this process).
Prints figures; it is not a test.  python -m bench.runtime_bench"""
from __future__ import annotations

import asyncio
import tempfile
import time

import msgpack

from actors.messages.channel_queue import Publish, Published
from actors.runtime import envelope
from actors.runtime.mailbox import Runtime

repeats = 2000


def _timed(fn, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n


def envelope_costs() -> None:
    for items_per_env, body_bytes in ((1, 100), (10, 100), (100, 100), (4, 64 * 1024), (2, 1 << 20)):
        # one Publish of `items_per_env` records: what one channel sends one queue per loop turn
        records = [Published(i, "", "orders", b"h" * 40, b"x" * body_bytes) for i in range(items_per_env)]
        items = [("ch:1", "q:/:orders", Publish(records), items_per_env)]
        n = max(20, repeats // max(1, items_per_env * body_bytes // 65536))
        frame = envelope.encode("conn0", items)
        enc = _timed(lambda: envelope.encode("conn0", items), n)
        dec = _timed(lambda: envelope.decode(frame), n)
        mp = _timed(lambda: msgpack.packb([tuple(r) for r in records], use_bin_type=True), n)
        mb = len(frame) / 1e6
        print(f"{items_per_env:4d} items x {body_bytes:8d} B: encode {enc / items_per_env * 1e6:7.2f} us/item"
              f" ({enc / mb * 1e3:6.2f} ms/MB), decode {dec / items_per_env * 1e6:7.2f} us/item"
              f" ({dec / mb * 1e3:6.2f} ms/MB); msgpack alone {mp / items_per_env * 1e6:6.2f} us/item")


async def ipc_round(messages: int = 200_000, per_iteration: int = 100, body: bytes = b"x" * 100) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        d = {"a": f"ipc://{tmp}/a", "b": f"ipc://{tmp}/b"}
        a, b = Runtime("a", d), Runtime("b", d)
        await a.start()
        await b.start()
        done = asyncio.get_running_loop().create_future()
        count = 0

        class Sink:
            def receive(self, sender, msg):
                nonlocal count
                count += 1
                if count == messages:
                    done.set_result(None)
        to = b.spawn("sink", Sink())
        me = a.spawn("src", Sink())
        start = time.perf_counter()
        sent = 0
        publish = Publish([Published(0, "", "sink", b"h" * 20, body)])
        while sent < messages:
            if a.blocked(me):
                await asyncio.sleep(0)
                continue
            for _ in range(per_iteration):
                a.send(to, publish, sender=me, credit=1)
            sent += per_iteration
            await asyncio.sleep(0)
        await done
        took = time.perf_counter() - start
        print(f"ipc a->b with credit, {per_iteration}/iteration, {len(body)} B: {messages / took:,.0f} msg/s,"
              f" {took / messages * 1e6:.2f} us/msg, {a.frames_sent} frames")
        await a.close()
        await b.close()


def main() -> None:
    envelope_costs()
    asyncio.run(ipc_round())
    asyncio.run(ipc_round(messages=20_000, per_iteration=10, body=b"x" * 65536))


if __name__ == "__main__":
    main()
