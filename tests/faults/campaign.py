"""A fault campaign, end to end: `scripts/faults --nodes 3 --time 180 --nemesis partition,kill,pause`.

Starts the cluster (in network namespaces when it can, else on loopback with the fault-injecting
transport, and says which), declares the workload's durable queues (each on its own node: a classic
queue's home, a quorum queue's first member and so its first leader; `--queue-type
quorum,quorum,classic` gives each queue in turn the next type of the list; `stream` too), runs the
publishers and consumers while the nemesis carries out the seeded schedule, then heals
everything, stops the publishers, lets the consumers empty the queues, drains what is left with
basic.get (a stream, which keeps everything, is read back whole from "first" instead), and checks
the history (tests/faults/checker.py). The run's directory
(`--out`, default var/faults/<time>-seed<seed>) gets report.txt, confirms.png, schedule.json (replay
it with `--schedule`) and, when the check fails or `--keep` is given, every node's data dir with its
logs. The exit status is 0 when nothing confirmed was lost and nothing unexpected consumed.
"""
from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pika
import pika.exceptions

from scripts.local_cluster import REPO
from tests.faults import report
from tests.faults.checker import Result, check
from tests.faults.cluster import FaultCluster
from tests.faults.nemesis import Nemesis
from tests.faults.network import netns_unavailable
from tests.faults.schedule import NEMESES, Schedule, make_schedule
from tests.faults.workload import History, Workload
from tests.waiting import until

settle_timeout_s = 120.0   # consumers emptying the queues once the publishers stopped
drain_timeout_s = 120.0
stream_idle_s = 2.0  # reading a stream back: no delivery for this long is its end
poll_s = 0.5


@dataclass
class Options:
    nodes: int = 3
    time_s: float = 180.0
    nemeses: tuple[str, ...] = ("partition", "kill", "pause", "kill-host")
    seed: int | None = None
    rounds: int | None = None
    fault_s: tuple[float, float] = (10.0, 30.0)
    recovery_s: tuple[float, float] = (10.0, 20.0)
    queue_type: str = "quorum,quorum,classic"  # comma-separated: the queues take the types in turn
    queues: int = 3
    publishers: int = 4
    consumers: int = 4
    rate: float = 50.0
    out: Path | None = None
    schedule_file: Path | None = None
    transport: bool = False   # the fault-injecting transport even where namespaces work
    keep: bool = False
    conf: str = ""            # extra warren.conf lines


@dataclass
class Outcome:
    result: Result
    schedule: Schedule
    out: Path
    report: str
    ok: bool  # nothing confirmed lost, nothing unexpected, every queue drained


def _say(line: str) -> None:
    print(line, flush=True)


def run(opts: Options, say: Callable[[str], None] = _say) -> Outcome:
    seed = opts.seed if opts.seed is not None else random.SystemRandom().randrange(2 ** 31)
    out = opts.out or REPO / "var" / "faults" / f"{time.strftime('%Y%m%d-%H%M%S')}-seed{seed}"
    out.mkdir(parents=True, exist_ok=True)
    why_not = None if opts.transport else netns_unavailable()
    notes: list[str] = []
    failures: list[str] = []  # what went wrong besides the checker's verdict
    if why_not:
        notes.append(f"network namespaces unavailable ({why_not}): partitions by the fault-injecting transport")
        say(notes[-1])
    netns = not opts.transport and why_not is None
    names = [f"n{i + 1}" for i in range(opts.nodes)]
    queues = [f"jepsen.{k}" for k in range(opts.queues)]
    home = {q: names[k % len(names)] for k, q in enumerate(queues)}
    types = queue_types(opts.queue_type, queues)
    if opts.schedule_file:
        schedule = Schedule.from_json(opts.schedule_file.read_text())
        seed = schedule.seed
    else:
        schedule = make_schedule(seed, names, list(opts.nemeses), opts.time_s, queues, fault_s=opts.fault_s,
                                 recovery_s=opts.recovery_s, rounds=opts.rounds)
    (out / "schedule.json").write_text(schedule.to_json())
    replay = (f"scripts/faults --nodes {opts.nodes} --queue-type {opts.queue_type} --schedule {out / 'schedule.json'}"
              f"  (or: --seed {seed} --time {opts.time_s:g} --nemesis {','.join(schedule.nemeses)}"
              + (f" --rounds {opts.rounds}" if opts.rounds else "")
              + f" --fault {opts.fault_s[0]:g}:{opts.fault_s[1]:g} --recovery {opts.recovery_s[0]:g}:{opts.recovery_s[1]:g})")
    say(f"seed {seed}: {len(schedule.windows)} windows over {schedule.time_s:.0f} s; writing to {out}")
    began = time.monotonic()
    cluster = FaultCluster(out / "nodes", opts.nodes, netns=netns, conf=opts.conf)
    ok = False
    try:
        cluster.start()
        say(f"cluster of {opts.nodes} up ({cluster.mode}) in {time.monotonic() - began:.1f} s")
        declare(cluster, home, types)
        history = History()
        streams = frozenset(q for q, t in types.items() if t == "stream")
        workload = Workload({n: cluster.url(n) for n in names}, queues, history, publishers=opts.publishers,
                            consumers=opts.consumers, rate=opts.rate, streams=streams)
        nemesis = Nemesis(cluster, history, home, lambda q: queue_leader(cluster, q), say)
        workload.start()
        try:
            ran = nemesis.run(schedule)
            try:
                nemesis.heal_all()
            except TimeoutError as e:
                failures.append(str(e))
            workload.stop_publishers()
            end_s = history.now()
            failures += settle(cluster, [q for q in queues if q not in streams])
            workload.stop_consumers()
        finally:
            workload.close()
        failures += drain(cluster, [q for q in queues if q not in streams], history)
        nemesis.event(f"drained: {len(history.drained)} messages by basic.get")
        for queue in sorted(streams):
            failures += read_stream(cluster, queue, history)
        if streams:
            nemesis.event(f"read back from first: {len(history.drained)} messages in all")
        notes += queue_states(cluster, types)
        result = check(history, ran, end_s)
        ok = result.ok and not failures
        notes += _client_errors(history)
        text = report.text(result, schedule, mode=cluster.mode,
                           queues=", ".join(f"{q} {t}" for q, t in types.items()), replay=replay,
                           took_s=time.monotonic() - began, events=nemesis.events, notes=notes,
                           failures=failures)
        (out / "report.txt").write_text(text)
        report.plot(out / "confirms.png", sorted(history.confirmed.values()), result,
                    f"{opts.nodes} nodes, {opts.queue_type} queues, seed {seed}")
        (out / "history.json").write_text(json.dumps({
            "lost": {m: history.confirmed[m] for m in result.lost}, "unexpected": result.unexpected,
            "windows": [vars(w) for w in ran], "errors": history.errors,
            "confirmed": history.confirmed, "consumed": history.consumed, "drained": history.drained}))
        return Outcome(result, schedule, out, text, ok)
    finally:
        cluster.stop()
        if ok and not opts.keep:
            shutil.rmtree(out / "nodes", ignore_errors=True)


def queue_types(spec: str, queues: list[str]) -> dict[str, str]:
    """Each queue's type: `spec`'s comma-separated types taken in turn ("quorum,classic": q0 quorum,
    q1 classic, q2 quorum ...)."""
    types = [t for t in spec.split(",") if t]
    unknown = set(types) - {"classic", "quorum", "stream"}
    if not types or unknown:
        raise ValueError(f"queue types are classic, quorum or stream, not {spec!r}")
    return {q: types[k % len(types)] for k, q in enumerate(queues)}


def declare(cluster: FaultCluster, home: dict[str, str], types: dict[str, str]) -> None:
    """Each queue declared durable on its home node (a classic queue lives where it was declared, a
    quorum queue's members start with the declaring node's, x-queue-leader-locator client-local)."""
    for queue, node in home.items():
        conn = pika.BlockingConnection(pika.URLParameters(cluster.url(node)))
        try:
            conn.channel().queue_declare(queue, durable=True, arguments={"x-queue-type": types[queue]})
        finally:
            conn.close()


def queue_leader(cluster: FaultCluster, queue: str) -> str | None:
    """The node leading quorum queue `queue`, as the reachable members report it (the member of the
    highest term that names a leader); None when none does (a classic queue's is its home)."""
    best: tuple[int, str] | None = None
    for name in cluster.names:
        if name in cluster.paused or not cluster.running(name):
            continue
        try:
            members = cluster.control(name, "quorum", "status", {"queue": queue})
        except (RuntimeError, ConnectionError, TimeoutError, OSError):
            continue
        for status in members.values():
            if status.get("leader") and (best is None or status["term"] > best[0]):
                best = (status["term"], str(status["leader"]).split("@")[0])  # "n1@host:quorum/..."
    return None if best is None else best[1]


def _counts(cluster: FaultCluster, queues: list[str]) -> dict[str, int] | None:
    """Ready messages per queue, asked of each node in turn; None if no node could answer for all."""
    for name in cluster.names:
        try:
            conn = pika.BlockingConnection(pika.URLParameters(cluster.url(name)))
        except pika.exceptions.AMQPError:
            continue
        try:
            counts = {}
            for q in queues:
                counts[q] = conn.channel().queue_declare(q, passive=True).method.message_count
            return counts
        except pika.exceptions.AMQPError:
            continue
        finally:
            if conn.is_open:
                conn.close()
    return None


def settle(cluster: FaultCluster, queues: list[str]) -> list[str]:
    """Let the consumers empty the queues (the drain by basic.get is one round trip a message); a
    queue they leave with messages ready is a failure: a consumer that believes it consumes and is
    given nothing (every consumer reconnects after an error or a cancel, so one that stays is stuck)."""
    last: list[dict[str, int] | None] = [None]  # the counts of the last poll, for the failure

    def emptied() -> bool:
        last[0] = _counts(cluster, queues)
        return last[0] is not None and not any(last[0].values())
    if until(emptied, "the queues to empty", settle_timeout_s, every_s=poll_s, raises=False):
        return []
    left = ", ".join(f"{q} {n}" for q, n in (last[0] or {}).items() if n) or "no node answered"
    return [f"the consumers did not empty the queues within {settle_timeout_s:.0f} s (stuck consumers?): "
            f"ready {left}"]


def drain(cluster: FaultCluster, queues: list[str], history: History) -> list[str]:
    """basic.get with acks until every queue is empty and says so (passive declare: 0 messages);
    returns what could not be drained in `drain_timeout_s`, with the last error seen."""
    deadline = time.monotonic() + drain_timeout_s
    left = list(queues)
    attempt = 0
    error = ""
    while left:
        if time.monotonic() > deadline:
            return [f"could not drain {', '.join(left)} within {drain_timeout_s:.0f} s; last error: {error or 'none'}"]
        name = cluster.names[attempt % len(cluster.names)]
        attempt += 1
        try:
            conn = pika.BlockingConnection(pika.URLParameters(cluster.url(name)))
            try:
                ch = conn.channel()
                while left:
                    method, _, body = ch.basic_get(left[0], auto_ack=False)
                    if method is not None:
                        history.drained.append(body.decode(errors="replace"))
                        ch.basic_ack(method.delivery_tag)
                    elif ch.queue_declare(left[0], passive=True).method.message_count == 0:
                        left.pop(0)
            finally:
                if conn.is_open:
                    conn.close()
        except pika.exceptions.AMQPError as e:
            error = f"{name}: {type(e).__name__}: {e}"
            time.sleep(poll_s)  # a queue not back yet (its node recovering): ask again shortly
    return []


def read_stream(cluster: FaultCluster, queue: str, history: History) -> list[str]:
    """A stream keeps what it delivered: read it whole from "first" through some node, until no
    delivery came for `stream_idle_s` (its end), into the drained ids; returns what went wrong."""
    deadline = time.monotonic() + drain_timeout_s
    attempt, error = 0, ""
    while time.monotonic() < deadline:
        name = cluster.names[attempt % len(cluster.names)]
        attempt += 1
        got: list[str] = []
        try:
            conn = pika.BlockingConnection(pika.URLParameters(cluster.url(name)))
            try:
                ch = conn.channel()
                ch.basic_qos(prefetch_count=500)
                ch.basic_consume(queue, lambda c, m, _p, body: (got.append(body.decode(errors="replace")),
                                                                c.basic_ack(m.delivery_tag)),
                                 arguments={"x-stream-offset": "first"})
                seen, quiet_since = -1, time.monotonic()
                while time.monotonic() - quiet_since < stream_idle_s:
                    conn.process_data_events(poll_s)
                    if len(got) != seen:
                        seen, quiet_since = len(got), time.monotonic()
            finally:
                if conn.is_open:
                    conn.close()
            history.drained.extend(got)
            return []
        except pika.exceptions.AMQPError as e:
            error = f"{name}: {type(e).__name__}: {e}"
            time.sleep(poll_s)  # the stream's node recovering: ask again shortly
    return [f"could not read stream {queue} within {drain_timeout_s:.0f} s; last error: {error or 'none'}"]


def queue_states(cluster: FaultCluster, types: dict[str, str]) -> list[str]:
    """Each queue's counts as the cluster reports them (after the drain: all should be 0); a quorum
    queue's from its leader, with each member's role, term and applied index."""
    columns = ("messages_ready", "messages_unacknowledged", "consumers")
    lines = []
    for name in cluster.names:
        try:
            rows = cluster.control(name, "node", "cluster_queue_stats")
        except (RuntimeError, ConnectionError, TimeoutError, OSError):
            continue
        lines += [f"queue {r.get('name')}: " + ", ".join(f"{c} {r.get(c)}" for c in columns)
                  for r in sorted(rows, key=lambda r: str(r.get("name"))) if types.get(str(r.get("name"))) != "quorum"]
        break
    else:
        lines.append("classic queue states: no node answered")
    for queue in (q for q, t in types.items() if t == "quorum"):
        members = []
        for name in cluster.names:
            try:
                members += cluster.control(name, "quorum", "status", {"queue": queue}).values()
            except (RuntimeError, ConnectionError, TimeoutError, OSError):
                members.append({"id": f"{name}:?", "role": "no answer"})
        leader = next((m for m in members if m.get("role") == "leader"), None)
        counts = ", ".join(f"{c} {leader.get(c)}" for c in columns) if leader else "no leader"
        roles = "; ".join(f"{str(m.get('id')).split('@')[0]} {m.get('role')} term {m.get('term')} "
                          f"applied {m.get('applied')}" for m in members)
        lines.append(f"queue {queue} (quorum): {counts} [{roles}]")
    return lines


def _client_errors(history: History) -> list[str]:
    kinds: dict[str, int] = {}
    for _, _, error in history.errors:
        kind = error.split(":")[0]
        kinds[kind] = kinds.get(kind, 0) + 1
    return ["client errors (reconnected after each): " + (", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
                                                          or "none")]


def _range(text: str) -> tuple[float, float]:
    low, _, high = text.partition(":")
    return float(low), float(high or low)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/faults", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, default=3, help="3 (default) or 5")
    p.add_argument("--time", type=float, default=180.0, help="seconds of the nemesis schedule (default 180)")
    p.add_argument("--nemesis", default="partition,kill,pause,kill-host",
                   help=f"comma-separated, of {', '.join(NEMESES)} (default partition,kill,pause,kill-host)")
    p.add_argument("--seed", type=int, help="the schedule's seed (default: a random one, printed)")
    p.add_argument("--rounds", type=int, help="this many windows of each nemesis, whatever --time says")
    p.add_argument("--fault", default="10:30", help="a fault window's length in seconds, MIN:MAX (default 10:30)")
    p.add_argument("--recovery", default="10:20", help="a recovery window's length, MIN:MAX (default 10:20)")
    p.add_argument("--queue-type", default="quorum,quorum,classic",
                   help="classic, quorum, stream, or a comma-separated list the queues take in turn (default "
                        "quorum,quorum,classic: two quorum queues and a durable classic one)")
    p.add_argument("--queues", type=int, default=3)
    p.add_argument("--publishers", type=int, default=4)
    p.add_argument("--consumers", type=int, default=4)
    p.add_argument("--rate", type=float, default=50.0, help="messages/s per publisher (0: as fast as confirms come)")
    p.add_argument("--schedule", type=Path, help="replay this schedule.json exactly")
    p.add_argument("--out", type=Path, help="the run's directory (default var/faults/<time>-seed<seed>)")
    p.add_argument("--transport", action="store_true",
                   help="partition with the fault-injecting transport even where namespaces work")
    p.add_argument("--keep", action="store_true", help="keep the nodes' data dirs and logs of a passing run too")
    a = p.parse_args(argv)
    opts = Options(nodes=a.nodes, time_s=a.time, nemeses=tuple(n for n in a.nemesis.split(",") if n),
                   seed=a.seed, rounds=a.rounds, fault_s=_range(a.fault), recovery_s=_range(a.recovery),
                   queue_type=a.queue_type, queues=a.queues, publishers=a.publishers, consumers=a.consumers,
                   rate=a.rate, out=a.out, schedule_file=a.schedule, transport=a.transport, keep=a.keep)
    outcome = run(opts)
    print(outcome.report)
    print(f"report: {outcome.out / 'report.txt'}, plot: {outcome.out / 'confirms.png'}")
    return 0 if outcome.ok else 1


if __name__ == "__main__":
    sys.exit(main())
