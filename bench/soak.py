"""A soak: a 3-node cluster under a mixed load for `--minutes`, sampled every `--sample` seconds;
writes a report (soak.txt, soak.json) and plots (soak_pss.png, soak_fds.png, soak_latency.png)
under `--out`, and exits 1 if a confirmed message was lost.

    .venv/bin/python -m bench.soak [--minutes 60] [--sample 60] [--warmup 10] [--restart-every 10]
        [--rate 20] [--nodes 3] [--churn-pause 0.5] [--churn-channels 3] [--queue-every 4] [--probe]
        [--out bench/out/soak] [--dir DIR]

A harsher, shorter run that shows what grows (bench/soak_probe.py): e.g. `--nodes 1 --minutes 15
--sample 60 --warmup 3 --churn-pause 0.1 --probe`, with `WARREN_TRACEMALLOC=1` for allocation sites.

The load, all of it at once for the whole run:
- steady publishers with confirms (one per queue, `--rate` msg/s each, every publish awaited) and
  consumers with manual acks (tests/faults/workload.py, which reconnects to the next node after any
  error) on three durable classic queues (one homed on each node) and three quorum queues;
- churn: connections opened with a few channels and closed, and queues declared (classic and
  quorum in turn), published to with a confirm, read back and deleted, round-robin over the nodes;
- every `--restart-every` minutes node n3 is stopped and started again on its data dir (always n3:
  the memory of n1 and n2 then tells growth under a peer's restarts, n3's restarts reset its own).

Each sample holds, per node process (named as `warrenctl status` names it), the PSS (psutil's
memory_full_info, which counts the pages forked processes share once) and the open descriptors,
and the p50/p99 of the publish-to-confirm and publish-to-delivery latencies of the messages
delivered since the previous sample. At the end the publishers stop, the consumers empty the
queues, the rest is drained, and tests/faults/checker.py counts `lost` (confirmed, never consumed).
"""
from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pika
import psutil

from bench import soak_probe
from scripts.local_cluster import Cluster
from tests.faults.campaign import drain, settle
from tests.faults.checker import Result, check
from tests.faults.workload import History, Workload
from tests.integration.nodes import serving_processes

MIB = 1 << 20
NODES = ("n1", "n2", "n3")
RESTARTED = "n3"
QUORUM = [f"soak.quorum.{i}" for i in range(1, 4)]
churn_pause_s = 0.5   # between two churn steps (each opens a connection)
churn_channels = 3
queue_every = 4       # churn steps per queue declared and deleted


def classic_queues(nodes: tuple[str, ...]) -> dict[str, str]:
    """queue -> the node it is declared on (its home)"""
    return {f"soak.classic.{n}": n for n in nodes}


@dataclass
class Settings:
    duration_s: float
    sample_s: float
    warmup_s: float
    restart_every_s: float
    rate: float
    nodes: int = 3                     # 1-3; only a third node is ever restarted
    churn_pause_s: float = churn_pause_s
    churn_channels: int = churn_channels
    queue_every: int = queue_every
    probe: bool = False                # ask every host for its tables (control op `memory`) each sample

    @property
    def names(self) -> tuple[str, ...]:
        return NODES[:self.nodes]


@dataclass
class Sample:
    t_s: float
    pss: dict[str, dict[str, int]]     # node -> process name -> bytes
    fds: dict[str, dict[str, int]]     # node -> process name -> open descriptors
    confirm_ms: dict[str, float]       # p50, p99 (ms) of the messages delivered since the last sample
    deliver_ms: dict[str, float]
    delivered: int
    confirmed: int                     # so far
    probe: dict = field(default_factory=dict)  # node -> host -> the `memory` op's answer (--probe)
    # node -> process name -> bytes private to the process (psutil's uss): unlike PSS it does not
    # rise when a forked host writes to pages it shared with the main process (copy-on-write
    # takes them away from the sharing, and the main process's share of them grows)
    uss: dict[str, dict[str, int]] = field(default_factory=dict)
    # and the resident set: what a process holds, shared or not (a page that only changes hands
    # between sharing and private does not move it)
    rss: dict[str, dict[str, int]] = field(default_factory=dict)


@dataclass
class Churn:
    connections: int = 0
    channels: int = 0
    queues_declared: int = 0
    queues_deleted: int = 0
    errors: int = 0
    last_error: str = ""


@dataclass
class Outcome:
    settings: Settings
    samples: list[Sample] = field(default_factory=list)
    restarts: list[float] = field(default_factory=list)    # when n3 was stopped (history time)
    churn: Churn = field(default_factory=Churn)
    failures: list[str] = field(default_factory=list)
    result: Result | None = None

    @property
    def ok(self) -> bool:
        return self.result is not None and self.result.ok and not self.failures


def percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {"p50": float("nan"), "p99": float("nan")}
    ordered = sorted(values)
    at = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return {"p50": round(at(0.50) * 1000, 2), "p99": round(at(0.99) * 1000, 2)}


class Sampler:
    """Reads the node processes and the latencies of what was delivered since the last call."""

    def __init__(self, cluster: Cluster, history: History, settings: Settings) -> None:
        self.cluster = cluster
        self.history = history
        self.settings = settings
        self._seen = 0  # consumed entries already counted
        self._baseline_taken = False  # the allocation diffs are against the first sample after the warm-up

    def sample(self) -> Sample:
        h = self.history
        upto = len(h.consumed)
        confirm, deliver = [], []
        for mid, at in h.consumed[self._seen:upto]:
            sent = h.sent.get(mid)
            if sent is None:
                continue
            deliver.append(at - sent)
            if mid in h.confirmed:
                confirm.append(h.confirmed[mid] - sent)
        self._seen = upto
        pss: dict[str, dict[str, int]] = {}
        uss: dict[str, dict[str, int]] = {}
        rss: dict[str, dict[str, int]] = {}
        fds: dict[str, dict[str, int]] = {}
        for name, node in self.cluster.nodes.items():
            named = {p["pid"]: p["name"] for p in (serving_processes(node) or {}).values()}
            pss[name], fds[name], uss[name], rss[name] = {}, {}, {}, {}
            for process in node.processes():
                try:
                    label = named.get(process.pid, f"pid{process.pid}")
                    memory = process.memory_full_info()
                    pss[name][label], uss[name][label], rss[name][label] = memory.pss, memory.uss, memory.rss
                    fds[name][label] = process.num_fds()
                except psutil.Error:
                    pass  # exited meanwhile (n3 restarting)
        probed = {}
        if self.settings.probe:
            rebase = not self._baseline_taken and h.now() >= self.settings.warmup_s
            self._baseline_taken |= rebase
            probed = soak_probe.ask_all(self.cluster, keep=not rebase)
        return Sample(round(h.now(), 1), pss, fds, percentiles(confirm), percentiles(deliver),
                      len(deliver), len(h.confirmed), probed, uss, rss)


class Churner:
    """Connections, channels and queues that come and go, round-robin over the nodes, in a thread."""

    def __init__(self, cluster: Cluster, churn: Churn, settings: Settings) -> None:
        self.cluster = cluster
        self.churn = churn
        self.settings = settings
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="churn", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(60)

    def _run(self) -> None:
        step = 0
        while not self._stop.is_set():
            step += 1
            node = self.settings.names[step % self.settings.nodes]
            try:
                self._step(node, step)
            except (pika.exceptions.AMQPError, OSError) as e:  # a node restarting: counted, not fatal
                self.churn.errors += 1
                self.churn.last_error = f"{node}: {type(e).__name__}: {e}"[:300]
            self._stop.wait(self.settings.churn_pause_s)  # the churn's pace, not a synchronisation

    def _step(self, node: str, step: int) -> None:
        c = self.churn
        with pika.BlockingConnection(pika.URLParameters(self.cluster.url(node))) as conn:
            c.connections += 1
            channels = [conn.channel() for _ in range(self.settings.churn_channels)]
            c.channels += len(channels)
            every = self.settings.queue_every
            if step % every == 0:  # a queue every other second (by default)
                ch = channels[0]
                name = f"soak.churn.{step}"
                kind = "quorum" if step % (2 * every) == 0 else "classic"
                ch.queue_declare(name, durable=True, arguments={"x-queue-type": kind})
                c.queues_declared += 1
                ch.confirm_delivery()
                ch.basic_publish("", name, b"churn", pika.BasicProperties(delivery_mode=2), mandatory=True)
                ch.basic_get(name, auto_ack=True)
                ch.queue_delete(name)
                c.queues_deleted += 1
            for ch in channels:
                ch.close()


def declare(cluster: Cluster, nodes: tuple[str, ...]) -> None:
    for queue, home in classic_queues(nodes).items():
        with pika.BlockingConnection(pika.URLParameters(cluster.url(home))) as conn:
            conn.channel().queue_declare(queue, durable=True)
    with pika.BlockingConnection(pika.URLParameters(cluster.url(NODES[0]))) as conn:
        for queue in QUORUM:
            conn.channel().queue_declare(queue, durable=True, arguments={"x-queue-type": "quorum"})


def run(root: Path, settings: Settings, say=print) -> Outcome:
    out = Outcome(settings)
    names = settings.names
    cluster = Cluster(root, len(names)).start()
    queues = [*classic_queues(names), *QUORUM]
    history = History()
    workload = Workload({n: cluster.url(n) for n in names}, queues, history, publishers=len(queues),
                        consumers=len(queues), rate=settings.rate)
    churner = Churner(cluster, out.churn, settings)
    sampler = Sampler(cluster, history, settings)
    end_s = None
    try:
        declare(cluster, names)
        workload.start()
        churner.start()
        began = time.monotonic()
        next_sample = began + settings.sample_s
        next_restart = began + settings.restart_every_s if RESTARTED in names else float("inf")
        end = began + settings.duration_s
        while (now := time.monotonic()) < end:
            if now >= next_restart:
                out.restarts.append(round(history.now(), 1))
                cluster.nodes[RESTARTED].stop()
                cluster.restart(RESTARTED)
                say(f"{history.now():7.0f} s  restarted {RESTARTED} (took {time.monotonic() - now:.1f} s)")
                next_restart += settings.restart_every_s
            elif now >= next_sample:
                s = sampler.sample()
                out.samples.append(s)
                say(f"{s.t_s:7.0f} s  " + line(s))
                next_sample += settings.sample_s
            time.sleep(max(0.0, min(next_sample, next_restart, end) - time.monotonic()))  # the run's clock
        churner.stop()
        workload.stop_publishers()
        end_s = history.now()
        out.failures += settle(cluster, queues)
        workload.stop_consumers()
        out.samples.append(sampler.sample())
        workload.close()
        out.failures += drain(cluster, queues, history)
        out.result = check(history, [], end_s)
    finally:
        if end_s is None:  # it broke off: the threads may still run
            churner.stop()
            workload.close()
        cluster.stop()
    return out


def line(s: Sample) -> str:
    pss = " ".join(f"{n} {sum(p.values()) / MIB:6.1f}" for n, p in s.pss.items())
    fds = " ".join(f"{n} {sum(p.values())}" for n, p in s.fds.items())
    return (f"PSS MiB {pss} | fds {fds} | confirm p50/p99 {s.confirm_ms['p50']}/{s.confirm_ms['p99']} ms"
            f" | deliver p50/p99 {s.deliver_ms['p50']}/{s.deliver_ms['p99']} ms | {s.delivered} delivered")


def slope_per_hour(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, value) points, per hour."""
    if len(points) < 2:
        return 0.0
    n = len(points)
    mx = sum(t for t, _ in points) / n
    my = sum(v for _, v in points) / n
    var = sum((t - mx) ** 2 for t, _ in points)
    return 0.0 if var == 0 else sum((t - mx) * (v - my) for t, v in points) / var * 3600


def growth_by_process(samples: list[Sample], node: str) -> dict[str, float]:
    """PSS growth (MiB) of each process of `node` from the first to the last of `samples` it is in
    both (a restarted host's new process is another pid, so it is left out), largest first."""
    first, last = samples[0].pss.get(node, {}), samples[-1].pss.get(node, {})
    grown = {name: (last[name] - first[name]) / MIB for name in first if name in last}
    return dict(sorted(((n, round(g, 1)) for n, g in grown.items()), key=lambda item: -item[1]))


def slopes_by_process(samples: list[Sample], node: str, attr: str = "pss") -> dict[str, float]:
    """Least-squares growth (MiB/h) of each process of `node` over `samples` (`attr`: "pss", "uss"
    or "rss"; series are by process name, so a restarted host's shows as a step), largest first."""
    series: dict[str, list[tuple[float, float]]] = {}
    for s in samples:
        for name, value in getattr(s, attr).get(node, {}).items():
            series.setdefault(name, []).append((s.t_s, value / MIB))
    return dict(sorted(((n, round(slope_per_hour(p), 1)) for n, p in series.items()), key=lambda item: -item[1]))


def summary(out: Outcome) -> dict:
    """The figures the report gives: per node PSS and descriptors after the warm-up (first, last,
    slope), latency drift (first and last post-warm-up sample), lost."""
    after = [s for s in out.samples if s.t_s >= out.settings.warmup_s] or out.samples
    nodes = {}
    for name in out.settings.names:
        pss = [(s.t_s, sum(s.pss.get(name, {}).values()) / MIB) for s in after if s.pss.get(name)]
        fds = [(s.t_s, sum(s.fds.get(name, {}).values())) for s in after if s.fds.get(name)]
        nodes[name] = {
            "pss_mib_first": round(pss[0][1], 1) if pss else None, "pss_mib_last": round(pss[-1][1], 1) if pss else None,
            "pss_mib_per_hour": round(slope_per_hour(pss), 1), "fds_first": fds[0][1] if fds else None,
            "fds_last": fds[-1][1] if fds else None, "fds_max": max((f for _, f in fds), default=None),
            "restarted": name == RESTARTED and bool(out.restarts),
            "pss_mib_growth_by_process": growth_by_process(after, name) if after else {},
            "pss_mib_per_hour_by_process": slopes_by_process(after, name, "pss"),
            "uss_mib_per_hour_by_process": slopes_by_process(after, name, "uss"),
            "rss_mib_per_hour_by_process": slopes_by_process(after, name, "rss")}
    timed = [s for s in after if s.delivered]
    r = out.result
    return {
        "nodes": nodes,
        "latency_ms": {"first": {"confirm": timed[0].confirm_ms, "deliver": timed[0].deliver_ms} if timed else None,
                       "last": {"confirm": timed[-1].confirm_ms, "deliver": timed[-1].deliver_ms} if timed else None,
                       "worst_p99_deliver": max((s.deliver_ms["p99"] for s in timed), default=None)},
        "messages": None if r is None else {
            "published": r.published, "confirmed": r.confirmed, "nacked": r.nacked,
            "indeterminate": r.indeterminate, "consumed": r.consumed, "duplicates": r.duplicates,
            "lost": len(r.lost), "unexpected": len(r.unexpected)},
        "churn": asdict(out.churn), "restarts": out.restarts, "failures": out.failures, "ok": out.ok,
    }


def report_text(out: Outcome, figures: dict) -> str:
    st = out.settings
    lines = [f"warren soak: {st.duration_s / 60:.0f} min, samples every {st.sample_s:.0f} s, warm-up "
             f"{st.warmup_s:.0f} s, {RESTARTED} restarted every {st.restart_every_s / 60:.1f} min, "
             f"{st.nodes + len(QUORUM)} publishers at {st.rate:g} msg/s each",
             "", "per sample:"]
    lines += [f"{s.t_s:7.0f} s  {line(s)}" for s in out.samples]
    lines += ["", "after the warm-up:"]
    for name, n in figures["nodes"].items():
        lines.append(f"  {name}: PSS {n['pss_mib_first']} -> {n['pss_mib_last']} MiB ({n['pss_mib_per_hour']:+.1f} MiB/h)"
                     f", fds {n['fds_first']} -> {n['fds_last']} (max {n['fds_max']})"
                     + ("  [restarted]" if n["restarted"] else ""))
        top = list(n["pss_mib_growth_by_process"].items())[:4]
        lines.append("      grown most: " + ", ".join(f"{p} {g:+.1f} MiB" for p, g in top))
        for attr in ("pss", "uss", "rss"):
            slopes = n[f"{attr}_mib_per_hour_by_process"]
            if slopes:
                lines.append(f"      {attr.upper()} slope MiB/h: " + ", ".join(f"{p} {g:+.1f}" for p, g in slopes.items()))
    lat = figures["latency_ms"]
    if lat["first"]:
        lines.append(f"  latency first/last sample: confirm p50 {lat['first']['confirm']['p50']} -> "
                     f"{lat['last']['confirm']['p50']} ms, p99 {lat['first']['confirm']['p99']} -> "
                     f"{lat['last']['confirm']['p99']} ms; deliver p50 {lat['first']['deliver']['p50']} -> "
                     f"{lat['last']['deliver']['p50']} ms, p99 {lat['first']['deliver']['p99']} -> "
                     f"{lat['last']['deliver']['p99']} ms (worst p99 {lat['worst_p99_deliver']} ms)")
    m = figures["messages"]
    if m:
        lines.append(f"  messages: {m['published']} published, {m['confirmed']} confirmed, {m['nacked']} nacked, "
                     f"{m['indeterminate']} indeterminate, {m['consumed']} consumed, {m['duplicates']} duplicates, "
                     f"lost {m['lost']}, unexpected {m['unexpected']}")
    c = figures["churn"]
    lines.append(f"  churn: {c['connections']} connections, {c['channels']} channels, {c['queues_declared']} queues "
                 f"declared, {c['queues_deleted']} deleted, {c['errors']} errors (last: {c['last_error'] or 'none'})")
    lines.append(f"  restarts of {RESTARTED} at (s): {out.restarts}")
    if st.probe:
        lines += soak_probe.report([s for s in out.samples if s.t_s >= st.warmup_s] or out.samples)
    lines += [f"  FAILURE: {f}" for f in out.failures]
    lines.append(f"  {'OK' if out.ok else 'FAILED'}")
    return "\n".join(lines) + "\n"


def plot(out: Outcome, directory: Path) -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    minutes = [s.t_s / 60 for s in out.samples]
    written = []

    def figure(name: str, title: str, ylabel: str, series: dict[str, list[float]]) -> None:
        fig, ax = plt.subplots(figsize=(8, 4))
        for label, values in series.items():
            ax.plot(minutes, values, marker=".", label=label)
        for r in out.restarts:
            ax.axvline(r / 60, color="grey", linestyle=":", linewidth=1)
        ax.axvline(out.settings.warmup_s / 60, color="red", linestyle="--", linewidth=1)
        ax.set(title=title + f" (dotted: {RESTARTED} restarted; dashed: end of warm-up)", xlabel="minutes",
               ylabel=ylabel)
        ax.title.set_fontsize(9)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = directory / name
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)

    figure("soak_pss.png", "PSS per node", "MiB",
           {n: [sum(s.pss.get(n, {}).values()) / MIB for s in out.samples] for n in out.settings.names})
    figure("soak_fds.png", "open descriptors per node", "descriptors",
           {n: [sum(s.fds.get(n, {}).values()) for s in out.samples] for n in out.settings.names})
    figure("soak_latency.png", "latency of the messages delivered in each sample", "ms",
           {f"{kind} {q}": [getattr(s, f"{kind}_ms")[q] for s in out.samples]
            for kind in ("confirm", "deliver") for q in ("p50", "p99")})
    return written


def write(out: Outcome, directory: Path) -> dict:
    directory.mkdir(parents=True, exist_ok=True)
    figures = summary(out)
    (directory / "soak.json").write_text(json.dumps(
        {"settings": asdict(out.settings), "summary": figures, "samples": [asdict(s) for s in out.samples]}, indent=1))
    (directory / "soak.txt").write_text(report_text(out, figures))
    plot(out, directory)
    return figures


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=60.0)
    p.add_argument("--sample", type=float, default=60.0, help="seconds between samples")
    p.add_argument("--warmup", type=float, default=10.0, help="minutes left out of the growth figures")
    p.add_argument("--restart-every", type=float, default=10.0, help="minutes between restarts of n3")
    p.add_argument("--rate", type=float, default=20.0, help="msg/s of each publisher")
    p.add_argument("--nodes", type=int, default=3, choices=(1, 2, 3), help="only a third node is restarted")
    p.add_argument("--churn-pause", type=float, default=churn_pause_s, help="seconds between churn steps")
    p.add_argument("--churn-channels", type=int, default=churn_channels, help="channels per churned connection")
    p.add_argument("--queue-every", type=int, default=queue_every, help="churn steps per queue declared+deleted")
    p.add_argument("--probe", action="store_true",
                   help="ask every host for its table sizes each sample (with WARREN_TRACEMALLOC=1 in the "
                        "environment also its allocation sites grown since the warm-up)")
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "out" / "soak")
    p.add_argument("--dir", type=Path, default=None, help="the nodes' data dirs (default: a temporary dir)")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("pika").setLevel(logging.CRITICAL)  # refused connects while n3 restarts are counted
    settings = Settings(a.minutes * 60, a.sample, a.warmup * 60, a.restart_every * 60, a.rate, a.nodes,
                        a.churn_pause, a.churn_channels, a.queue_every, a.probe)
    root = a.dir or Path(tempfile.mkdtemp(prefix="warren-soak-"))
    try:
        out = run(root, settings, say=lambda text: print(text, flush=True))
    finally:
        if a.dir is None:
            shutil.rmtree(root, ignore_errors=True)
    write(out, a.out)
    print((a.out / "soak.txt").read_text(), end="")
    return 0 if out.ok else 1


if __name__ == "__main__":
    sys.exit(main())
