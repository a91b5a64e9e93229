"""Benchmark: µs per message through a durable classic queue's shell, its store and their runtime:
what a queue host's loop spends on a publish -> confirm and a deliver -> ack, the queue's link to its
message store included. Not a test.

    .venv/bin/python -m bench.store_link_bench [--messages N] [--window W] [--sync fdatasync|none]

One host's Runtime in this process, its QueueManager (which holds the host's store), a durable
queue, a publishing channel and a consuming one, both actors of the same host. The publisher
keeps `--window` one-message publishes unconfirmed, as a confirming client does; the consumer
acks each delivery as it arrives. With `--sync none` the group commit's syncs cost nothing, so
the figures are the loop's time and CPU: the hot path the queue -> store link must not slow.
"""
from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from types import SimpleNamespace
from typing import Any

from actors.messages.channel_queue import Confirm, Consume, Deliver, Publish, Published, Settle
from actors.messages.node import CreateQueue
from actors.queue.manager import QueueManager
from actors.runtime.address import Address
from actors.runtime.mailbox import Runtime
from persist.classic.host_storage import HostStorage
from persist.disk import RealDisk
from wire.properties import BasicProperties, encode_content_header

HEADER = encode_content_header(60, 1024, BasicProperties(delivery_mode=2))
BODY = b"x" * 1024


class Publisher:
    def __init__(self, runtime: Runtime, queue: Address, total: int, window: int) -> None:
        self.runtime, self.queue, self.total, self.window = runtime, queue, total, window
        self.sent = self.confirmed = 0
        self.done = asyncio.get_running_loop().create_future()
        self.me = Address(runtime.host, "pub")

    def top_up(self) -> None:
        while self.sent < self.total and self.sent - self.confirmed < self.window:
            self.sent += 1
            self.runtime.send(self.queue, Publish([Published(self.sent, "", "q", HEADER, BODY)]), sender=self.me,
                              credit=1)

    def receive(self, sender: Address, msg: Any) -> None:
        if type(msg) is Confirm:
            self.confirmed = msg.upto
            if self.confirmed >= self.total and not self.done.done():
                self.done.set_result(None)
            self.top_up()


class Consumer:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.me = Address(runtime.host, "sub")

    def receive(self, sender: Address, msg: Any) -> None:
        if type(msg) is Deliver:
            tags = [m.msg_id for m in msg.messages]
            self.runtime.send(sender, Settle(tags, [], []), sender=self.me)


async def run(messages: int, window: int, sync: str, root: str) -> tuple[float, float]:
    storage = HostStorage(RealDisk(f"{root}/data", sync_method=sync), "queue0", embed_below=4096,
                          file_size_limit=16 << 20, placed_here=lambda v, n: True)
    storage.recover([])
    runtime = Runtime("queue0", {"queue0": f"ipc://{root}/queue0"})
    await runtime.start()
    manager = QueueManager(runtime, "qm", registry=SimpleNamespace(), storage=storage)
    runtime.spawn("qm", manager)
    consumer = Consumer(runtime)
    runtime.spawn("sub", consumer)
    manager.receive(consumer.me, CreateQueue(1, "/", "q", False, {}, True))  # its Reply is ignored
    queue = manager.queues["q:/:q"].address
    runtime.send(queue, Consume(1, "t", ack_required=True, credit=10**9, exclusive=False, arguments={}),
                 sender=consumer.me)
    publisher = Publisher(runtime, queue, messages, window)
    runtime.spawn("pub", publisher)
    await asyncio.sleep(0.01)  # the consume is in before the clock starts
    start, cpu = time.perf_counter(), time.process_time()
    publisher.top_up()
    await publisher.done
    took, cpu = time.perf_counter() - start, time.process_time() - cpu
    await runtime.close()
    return took / messages * 1e6, cpu / messages * 1e6


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--messages", type=int, default=50_000)
    p.add_argument("--window", type=int, default=200)
    p.add_argument("--sync", default="none", choices=("fdatasync", "none"))
    a = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="warren-store-link-") as root:
        us, cpu_us = asyncio.run(run(a.messages, a.window, a.sync, root))
    # CPU time is what the other load of a shared machine disturbs least
    print(f"durable queue + store, 1 KiB persistent, window {a.window}, sync {a.sync}: "
          f"{us:.2f} us/message ({1e6 / us:,.0f} msg/s), CPU {cpu_us:.2f} us/message", flush=True)


if __name__ == "__main__":
    main()
