"""CPU per publish through the channel core (routing, confirm bookkeeping, batching per queue), in
confirm mode, 100 publishes per flush, each batch confirmed by its queue. Prints; not a test.

    .venv/bin/python -m bench.channel_core_bench
"""
from __future__ import annotations

import random
import time

from actors.channel.core import ChannelCore
from actors.messages.channel_queue import Confirm
from metadata.registry import Registry
from wire import methods as m
from wire.inbound import Command
from wire.properties import BasicProperties, encode_content_header

batches = 2000
batch_size = 100


def main() -> None:
    registry = Registry(random.Random(1))
    registry.declare_queue("/", "q", passive=False, durable=False, exclusive=False, auto_delete=False,
                           arguments={}, owner=None)
    registry.add_user("guest", "unused-hash", ["administrator"])  # permissions are checked per publish
    registry.set_permissions("guest", "/", ".*", ".*", ".*")
    queue = ("q", "/", "q")
    core = ChannelCore(1, vhost="/", owner="o", router=registry, place=lambda vhost, name: queue, node="node",
                       frame_max=131072, capabilities={}, rng=random.Random(1))
    core.command(Command(1, m.ConfirmSelect(), None, None))
    core.flush()
    body = b"x" * 1024
    publish = Command(1, m.BasicPublish(exchange="", routing_key="q"),
                      encode_content_header(60, len(body), BasicProperties()), body)
    start = time.process_time()
    for _ in range(batches):
        for _ in range(batch_size):
            core.command(publish)
        core.flush()
        core.receive(queue, Confirm(core.confirm.next_seq - 1))
        core.flush()
    per = (time.process_time() - start) / (batches * batch_size) * 1e6
    print(f"channel core, confirm mode, {batch_size} publishes per flush: {per:.2f} µs CPU per confirmed publish")


if __name__ == "__main__":
    main()
