"""A crash campaign against one node (issue 33): kill -9 of each kind of its processes - the main
process, Thespian's admin and logger, the supervisor, the node host, the quorum host, each
connection host - one at a time and two at once, while publishers confirm into a durable classic
queue and a quorum queue and consumers ack (tests/faults/workload.py).

After each kill: every host runs again (a new process for each killed one, the node serving)
within `back_s`; when the main process was killed, nothing of that run is left within `back_s`
and the node is started again at once, on the same ports and data dir, and must serve within
`restart_slack_s` of its first start. Between kills the workload must confirm again. At the end
the publishers stop, the consumers empty the queues, the rest is drained with basic.get, and the
checker (tests/faults/checker.py) says whether anything confirmed was lost; then the node stops
and no process of it may be left.

`rounds(seed, n)` draws a long campaign (the slow test, its kills `gap_s` apart); `SHORT` is the suite's.
"""
from __future__ import annotations

import os
import random
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pika
import psutil

from scripts.local_cluster import Node, start_node
from tests.faults.campaign import drain, settle
from tests.faults.checker import Result, check
from tests.faults.workload import History, Workload
from tests.integration.nodes import serving_processes
from tests.waiting import until

HOSTS = ("node", "quorum", "conn0", "conn1")
KINDS = ("main", "admin", "logger", "supervisor", *HOSTS)
SHORT: list[tuple[str, ...]] = [(k,) for k in KINDS] + [
    ("conn0", "conn1"), ("node", "quorum"), ("supervisor", "conn1"), ("logger", "quorum"), ("main", "conn0")]
QUEUES = {"crash.classic": "classic", "crash.quorum": "quorum"}
back_s = 10.0           # every host running again, or everything of a killed main process gone
restart_slack_s = 10.0  # a restart after kill -9 of the main process serves within its first start + this
progress_s = 60.0       # the workload confirms again after a kill within this
progress_confirms = 20


def rounds(seed: int, n: int) -> list[tuple[str, ...]]:
    """`n` kills drawn from `seed`: one kind, or two at once, each time."""
    rng = random.Random(seed)
    return [tuple(rng.sample(KINDS, rng.choice((1, 2)))) for _ in range(n)]


@dataclass
class Outcome:
    result: Result
    first_start_s: float
    back: list[tuple[tuple[str, ...], float]] = field(default_factory=list)      # kill -> every host again
    restarts: list[float] = field(default_factory=list)                        # main killed -> serving
    failures: list[str] = field(default_factory=list)
    left: list[int] = field(default_factory=list)                              # pids left after the stop

    @property
    def ok(self) -> bool:
        return self.result.ok and not self.failures and not self.left


class _OneNode:
    """What tests/faults/campaign.py's settle and drain need of a cluster, for one node."""

    names = ["n1"]

    def __init__(self, node: Node) -> None:
        self.node = node

    def url(self, name: str) -> str:
        return self.node.url


def processes(node: Node) -> dict[str, int] | None:
    """pid by process name while the node serves; None while it does not, or cannot say."""
    rows = serving_processes(node)
    return {name: row["pid"] for name, row in rows.items()} if rows else None


def _alive(pids: list[int]) -> list[int]:
    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            pass
    return out


def run(root: Path, kills: list[tuple[str, ...]], *, rate: float = 50.0, gap_s: float = 0.0,
        say: Callable[[str], None] = print) -> Outcome:
    """`gap_s`: at least this long between two kills (a long campaign stays below the restart
    intensities, 5 restarts of a host in 30 s and 10 of the control plane in 60 s: past them the
    node stops, as it should)."""
    began = time.monotonic()
    node = start_node(root / "data")
    out = Outcome(Result(0, 0, 0, 0, 0, 0, 0, [], [], 0), time.monotonic() - began)
    one = _OneNode(node)
    with pika.BlockingConnection(pika.URLParameters(node.url)) as conn:
        for queue, kind in QUEUES.items():
            conn.channel().queue_declare(queue, durable=True, arguments={"x-queue-type": kind})
    history = History()
    workload = Workload({"n1": node.url}, list(QUEUES), history, publishers=2, consumers=2, rate=rate)
    workload.start()
    struck = 0.0
    try:
        for victims in kills:
            confirmed = len(history.confirmed)
            time.sleep(max(0.0, struck + gap_s - time.monotonic()))  # the campaign's pace, not a synchronisation
            if not until(lambda: len(history.confirmed) >= confirmed + progress_confirms, "confirms", progress_s,
                         raises=False):
                out.failures.append(f"no confirms for {progress_s:.0f} s before killing {'+'.join(victims)}")
                break
            pids = until(lambda: processes(one.node), "the node serving", back_s, raises=False)
            if not pids:
                out.failures.append(f"the node was not serving before killing {'+'.join(victims)}")
                break
            struck = time.monotonic()
            for victim in victims:
                os.kill(pids[victim], signal.SIGKILL)
            if "main" in victims:
                one.node.proc.wait()
                one.node = start_node(one.node.data_dir, port=one.node.port, cluster_port=one.node.cluster_port)
                out.restarts.append(time.monotonic() - struck)
                left = until(lambda: not _alive(list(pids.values())), "the old run to end", back_s, raises=False)
                if not left:
                    out.failures.append(f"processes of the killed run left {back_s:.0f} s on: {_alive(list(pids.values()))}")
                say(f"killed {'+'.join(victims)}: serving again after {out.restarts[-1]:.1f} s")
                continue
            replaced = set(victims) if set(victims) <= set(HOSTS) else set(HOSTS)  # the control plane: all
            again = until(lambda: (lambda now: now if now and all(now.get(h) not in (None, pids[h])
                                                                for h in replaced) else None)(processes(one.node)),
                          "the killed hosts replaced", back_s, raises=False)
            took = time.monotonic() - struck
            out.back.append((victims, took))
            if not again:
                out.failures.append(f"after killing {'+'.join(victims)} not every host ran again within {back_s:.0f} s")
                break
            say(f"killed {'+'.join(victims)}: every host running again after {took:.1f} s")
        workload.stop_publishers()
        end_s = history.now()
        out.failures += settle(one, list(QUEUES))
        workload.stop_consumers()
    finally:
        workload.close()
    out.failures += drain(one, list(QUEUES), history)
    out.result = check(history, [], end_s)
    pids = [p.pid for p in one.node.processes()]
    one.node.stop()
    until(lambda: not _alive(pids), "the stopped node's processes to end", back_s, raises=False)
    out.left = _alive(pids) + [p.pid for p in one.node.processes()]
    return out


def report(out: Outcome) -> str:
    r = out.result
    lines = [f"confirmed {r.confirmed}, consumed {r.consumed} distinct ({r.duplicates} duplicates), "
             f"lost {len(r.lost)} {r.lost[:5]}, unexpected {len(r.unexpected)}",
             f"first start {out.first_start_s:.1f} s; serving again after kill -9 of main: "
             + ", ".join(f"{s:.1f} s" for s in out.restarts),
             "every host running again: " + ", ".join(f"{'+'.join(v)} {s:.1f} s" for v, s in out.back),
             *out.failures]
    if out.left:
        lines.append(f"left after the stop: {out.left}")
    return "\n".join(lines)
