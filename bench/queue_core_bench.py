"""Benchmark: µs per message through the classic queue core (publish + deliver + ack, 1 consumer).

Not a test. Run: .venv/bin/python -m bench.queue_core_bench [--messages N] [--batch B] [--ready spill]
`--ready spill` runs the queue on the ready list a non-durable queue gets on a node with a data dir
(`persist/classic/spill.py` over a non-durable backing, not paging): its cost against the plain list.
The consumer's credit is re-granted after each batch, as the channel does when it writes to the
socket; acks are settled one batch at a time, as a multiple=true ack would be.
"""
from __future__ import annotations

import argparse
import tempfile
import time

from actors.messages.channel_queue import Deliver, Published
from actors.queue.core import ClassicQueue
from persist.classic.spill import SpillReady
from persist.classic.durable_queue import DurableBacking
from persist.classic.msg_store import MsgStore
from persist.disk import RealDisk


# A queue with issue 4's features switched on but never triggering (TTL far away, limit not reached).
FEATURE_ARGUMENTS = {"x-message-ttl": 3_600_000, "x-max-length": 1_000_000, "x-dead-letter-exchange": "dlx"}


def spill_ready(root: str) -> SpillReady:
    disk = RealDisk(root)
    stores = [MsgStore(disk, "p"), MsgStore(disk, "t", transient=True)]
    for store in stores:
        store.open()
    return SpillReady(DurableBacking(disk, "q", *stores, durable=False))


def run(messages: int, batch: int, ack_required: bool, arguments: dict | None = None,
        ready: SpillReady | None = None) -> float:
    """Return µs per message for publish+deliver(+ack) of `messages` in batches of `batch`."""
    queue = ClassicQueue("/", "bench", arguments=arguments, ready=ready)
    queue.consume("ch", "c1", ack_required=ack_required, credit=batch)
    header, body = b"\x00" * 20, b"x" * 100
    payload = [Published(0, "", "bench", header, body)] * batch
    delivered = 0
    start = time.perf_counter()
    for _ in range(messages // batch):
        for effect in queue.publish("ch", payload):
            if type(effect.msg) is Deliver:
                delivered += len(effect.msg.messages)
                if ack_required:
                    queue.settle("ch", acked=[m[0] for m in effect.msg.messages])
        queue.grant("ch", "c1", batch)
    elapsed = time.perf_counter() - start
    assert delivered == messages // batch * batch, delivered
    return elapsed / delivered * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--features", action="store_true", help="TTL + max-length + DLX configured")
    parser.add_argument("--ready", choices=("ram", "spill"), default="ram")
    args = parser.parse_args()
    arguments = FEATURE_ARGUMENTS if args.features else None
    with tempfile.TemporaryDirectory(prefix="queue_core_bench_") as root:
        for ack_required in (True, False):
            ready = spill_ready(f"{root}/{ack_required}") if args.ready == "spill" else None
            us = run(args.messages, args.batch, ack_required, arguments, ready)
            mode = "ack" if ack_required else "no-ack"
            print(f"{mode:6} batch={args.batch:<5} ready={args.ready:5} {us:6.3f} µs/message  ({1e6 / us:,.0f} msg/s)")


if __name__ == "__main__":
    main()
