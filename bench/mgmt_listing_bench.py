"""CPU per `/api/queues` answer in the node host, without its HTTP: the registry of N queues joined
with a sample, shaped and encoded, every row made afresh (as before the memo) or kept by the memo
(mgmt/memo.py). Prints the least CPU time of a few runs per case; not a test.

    .venv/bin/python -m bench.mgmt_listing_bench [--queues 10000] [--runs 5]

Cases: every row made afresh; the memo's first listing (every row made); a listing from the same
sample; the first after a sample that changed nothing (idle queues: rows kept); the first after a
sample that changed every queue (rows made again); a page sorted by a sample field; columns. The
longest the loop is held is the answer itself, the rows being made ahead by `reads.prepare` a
slice at a time: its own figure is the largest slice.
"""
from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable

from mgmt import auth, reads, rows
from mgmt.memo import RowMemo
from actors.stats.rates import Rates
from actors.stats.sample import Sample, rate_values
from mgmt.shapes import View
from metadata.passwords import hash_password
from metadata.registry import Registry

GUEST = "Basic Z3Vlc3Q6Z3Vlc3Q="


def cpu_ms(work: Callable[[], object], runs: int, before: Callable[[], object] = lambda: None) -> float:
    best = float("inf")
    for _ in range(runs):
        before()
        t0 = time.process_time()
        work()
        best = min(best, time.process_time() - t0)
    return best * 1000


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--queues", type=int, default=10000)
    p.add_argument("--runs", type=int, default=5)
    a = p.parse_args()
    reg = Registry(random.Random(1))
    reg.add_user("guest", hash_password("guest", b"salt"), ["administrator"])
    reg.set_permissions("guest", "/", ".*", ".*", ".*")
    for i in range(a.queues):
        reg.declare_queue("/", f"bench-q-{i}", durable=True)
    caller = auth.login(reg, GUEST)
    rates = Rates()
    state = {"at": 0, "sample": Sample(0)}

    def new_sample(messages: int) -> None:
        state["at"] += 5000
        sample = Sample(state["at"], queues={(q.vhost, q.name): {
            "vhost": q.vhost, "name": q.name, "messages": messages, "messages_ready": messages,
            "messages_unacknowledged": 0, "consumers": 0, "memory": 2000, "state": "running", "flow": "running",
            "message_stats": {"publish": messages, "deliver": 0, "ack": 0}} for q in reg.queues()})
        rates.observe(state["at"], rate_values(sample))
        state["sample"] = sample

    def answer(memo: RowMemo | None, query: dict[str, str] | None = None) -> bytes:
        view = View(reg, state["sample"], rates, "warren@localhost", memo=memo)
        for _ in reads.prepare(view, "queues", {}):
            pass
        return rows.encode(reads.answer(view, caller, "queues", {}, query or {}).body)

    def largest_slice(memo: RowMemo) -> float:
        view = View(reg, state["sample"], rates, "warren@localhost", memo=memo)
        slices, t0 = [], time.process_time()
        for _ in reads.prepare(view, "queues", {}):
            slices.append(time.process_time() - t0)
            t0 = time.process_time()
        return max(slices) * 1000

    new_sample(0)
    new_sample(0)
    size = len(answer(None))
    print(f"/api/queues, {a.queues} queues, {size / 1e6:.1f} MB; least CPU ms of {a.runs} runs")
    print(f"  every row made afresh (before the memo):   {cpu_ms(lambda: answer(None), a.runs):7.0f}")
    memos: list[RowMemo] = []
    print(f"  memo, first listing (every row made):      "
          f"{cpu_ms(lambda: answer(memos[-1]), a.runs, lambda: memos.append(RowMemo())):7.0f}")
    memo = RowMemo()
    answer(memo)
    print(f"  memo, same sample:                         {cpu_ms(lambda: answer(memo), a.runs):7.0f}")
    print(f"  memo, after a sample of idle queues:       "
          f"{cpu_ms(lambda: answer(memo), a.runs, lambda: new_sample(0)):7.0f}")
    counter = iter(range(1, 1 << 30))
    print(f"  memo, after a sample that changed them all: "
          f"{cpu_ms(lambda: answer(memo), a.runs, lambda: new_sample(next(counter))):6.0f}")
    new_sample(next(counter))
    print(f"    its largest slice of prepare (256 rows):  {largest_slice(memo):6.0f}")
    page = {"page": "7", "page_size": "100", "sort": "messages"}
    print(f"  memo, ?page=7&page_size=100&sort=messages: {cpu_ms(lambda: answer(memo, page), a.runs):7.0f}")
    columns = {"columns": "name,messages"}
    print(f"  memo, ?columns=name,messages:              {cpu_ms(lambda: answer(memo, columns), a.runs):7.0f}")


if __name__ == "__main__":
    main()
