"""The nemesis schedule: which faults strike when, drawn from one seed (pure: the seed is the schedule).

Theory of operation: a campaign is a warm-up, then windows of one or more faults (10-30 s each by
default, as RabbitMQ's Jepsen test) separated by recovery windows with every fault undone. The
nemeses of a campaign take turns in a shuffled round-robin, so each gets its share of rounds
whatever the duration. Everything random (the order, the durations, which nodes, which halves) is
drawn here from `random.Random(seed)`, so `make_schedule(seed, ...)` returns the same schedule every
time and a failed run replays from its seed (or from the schedule's JSON, which the run keeps).
What depends on the running cluster is named, not drawn: "isolate the metadata leader" and
"isolate a queue's leader" are resolved by the runner when the window opens, and recorded then.

Faults (`Fault.kind` / `variant`):
- partition: `halves` (a random split into two halves), `majority` (one random node alone, the
  rest together), `bridge` (two sides that cannot see each other and one node that sees both),
  `ring` (five nodes or more: each sees its two neighbours only, so every node has a majority
  that no other node shares), `leader` (the metadata leader alone), `queue-leader` (the node that
  leads one of the workload's queues alone);
- kill: kill -9 of every process of a node, started again when the window ends;
- pause: SIGSTOP of every process of a node, SIGCONT when the window ends;
- kill-host: kill -9 of one host process of a node (`variant` the host: node, quorum, conn0 ...),
  which the node's supervisor restarts;
- combined: two faults of different kinds at once, on different nodes (a partition with a kill
  or a pause, or a kill with a pause).
"""
from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, field

NEMESES = ("partition", "kill", "pause", "kill-host", "combined")
PARTITIONS = ("halves", "majority", "bridge", "ring", "leader", "queue-leader")
HOSTS = ("node", "quorum", "conn0", "conn1")  # the classic queues run in the connection hosts
warmup_s = 5.0


@dataclass(frozen=True)
class Fault:
    kind: str                      # one of NEMESES but "combined"
    variant: str = ""              # the partition's shape, or the host killed
    node: str = ""                 # kill / pause / kill-host: the node
    grudge: dict[str, list[str]] = field(default_factory=dict)  # partition: node -> nodes it cannot reach
    queue: str = ""                # partition "queue-leader": whose leader is isolated

    def describe(self) -> str:
        if self.kind == "partition":
            if self.variant in ("leader", "queue-leader"):
                return f"partition {self.variant}" + (f" of {self.queue}" if self.queue else "")
            return f"partition {self.variant} {sides(self.grudge)}"
        if self.kind == "kill-host":
            return f"kill-host {self.node}/{self.variant}"
        return f"{self.kind} {self.node}"


@dataclass(frozen=True)
class Window:
    nemesis: str                   # what drew it: one of NEMESES
    start_s: float
    duration_s: float
    faults: tuple[Fault, ...]

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s


@dataclass(frozen=True)
class Schedule:
    seed: int
    nodes: tuple[str, ...]
    nemeses: tuple[str, ...]
    time_s: float
    windows: tuple[Window, ...]

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @staticmethod
    def from_json(text: str) -> Schedule:
        doc = json.loads(text)
        windows = tuple(Window(w["nemesis"], w["start_s"], w["duration_s"], tuple(Fault(**f) for f in w["faults"]))
                        for w in doc["windows"])
        return Schedule(doc["seed"], tuple(doc["nodes"]), tuple(doc["nemeses"]), doc["time_s"], windows)

    def rounds(self) -> dict[str, int]:
        return {n: sum(1 for w in self.windows if w.nemesis == n) for n in self.nemeses}


def sides(grudge: dict[str, list[str]]) -> str:
    """A partition as the groups of nodes that see each other: 'n1 n2 | n3'."""
    groups: list[list[str]] = []
    for node in sorted(grudge):
        reach = sorted(n for n in grudge if n not in grudge[node])
        if reach not in groups:
            groups.append(reach)
    return " | ".join(" ".join(g) for g in groups)


def grudge_of(*groups: list[str]) -> dict[str, list[str]]:
    """Each node cannot reach the nodes outside its group(s) (a node may be in several groups: a bridge)."""
    everyone = sorted({n for g in groups for n in g})
    return {n: sorted(m for m in everyone if not any(n in g and m in g for g in groups)) for n in everyone}


def partition(rng: random.Random, nodes: list[str], variant: str, queues: list[str]) -> Fault:
    shuffled = rng.sample(nodes, len(nodes))
    if variant == "halves":
        cut = len(nodes) // 2 if rng.random() < 0.5 else (len(nodes) + 1) // 2
        return Fault("partition", variant, grudge=grudge_of(shuffled[:cut], shuffled[cut:]))
    if variant == "majority":
        return Fault("partition", variant, grudge=grudge_of(shuffled[:1], shuffled[1:]))
    if variant == "bridge":
        middle = len(nodes) // 2
        bridge = shuffled[middle]
        return Fault("partition", variant, grudge=grudge_of(shuffled[:middle + 1], shuffled[middle:]), node=bridge)
    if variant == "ring":
        n = len(shuffled)
        return Fault("partition", variant, grudge={
            node: sorted(m for j, m in enumerate(shuffled) if min((i - j) % n, (j - i) % n) > 1)
            for i, node in enumerate(shuffled)})
    if variant == "leader":
        return Fault("partition", variant)
    if variant == "queue-leader":
        return Fault("partition", variant, queue=rng.choice(queues))
    raise ValueError(f"unknown partition {variant!r}")


def fault(rng: random.Random, kind: str, nodes: list[str], queues: list[str]) -> Fault:
    if kind == "partition":
        variants = [v for v in PARTITIONS if v != "ring" or len(nodes) >= 5]
        return partition(rng, nodes, rng.choice(variants), queues)
    if kind == "kill-host":
        return Fault(kind, rng.choice(HOSTS), node=rng.choice(nodes))
    return Fault(kind, node=rng.choice(nodes))


def combined(rng: random.Random, nodes: list[str], queues: list[str]) -> tuple[Fault, ...]:
    """A partition with a kill or a pause of a node, or a kill and a pause of two nodes."""
    first, second = rng.choice([("partition", "kill"), ("partition", "pause"), ("kill", "pause")])
    a = fault(rng, first, nodes, queues)
    taken = {a.node} if a.node else set()
    b = fault(rng, second, [n for n in nodes if n not in taken], queues)
    return a, b


def make_schedule(seed: int, nodes: list[str], nemeses: list[str], time_s: float, queues: list[str], *,
                  fault_s: tuple[float, float] = (10.0, 30.0), recovery_s: tuple[float, float] = (10.0, 20.0),
                  rounds: int | None = None) -> Schedule:
    """Windows until `time_s` (or `rounds` rounds of each nemesis, whatever the time)."""
    unknown = set(nemeses) - set(NEMESES)
    if unknown:
        raise ValueError(f"unknown nemesis {sorted(unknown)}; choose from {', '.join(NEMESES)}")
    rng = random.Random(seed)
    windows: list[Window] = []
    t = warmup_s
    turn: list[str] = []
    while True:
        if not turn:
            if rounds is not None and len(windows) >= rounds * len(nemeses):
                break
            turn = rng.sample(list(nemeses), len(nemeses))
        nemesis = turn.pop(0)
        duration = round(rng.uniform(*fault_s), 1)
        if rounds is None and t + duration > time_s:
            break
        faults = combined(rng, nodes, queues) if nemesis == "combined" else (fault(rng, nemesis, nodes, queues),)
        windows.append(Window(nemesis, round(t, 1), duration, faults))
        t += duration + round(rng.uniform(*recovery_s), 1)
    return Schedule(seed, tuple(nodes), tuple(nemeses), round(max(time_s, t), 1), tuple(windows))
