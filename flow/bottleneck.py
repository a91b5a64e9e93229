"""Naming the bottleneck of the publish path from the flow states of its actors, by the seed's rule.

Theory of operation
-------------------
Credit flow makes a slow actor visible upstream: when it cannot keep up, every actor before it on
the chain reader -> channel -> queue -> persistence (message store, WAL, Raft followers) runs out
of credit and is shown in `flow`, while it and what is after it are not. So, for a connection in
flow (the seed, 9.3.1):
- none of its channels in flow: a channel is the bottleneck (routing, CPU);
- channels in flow, none of their queues in flow: a queue is (enqueueing, or writing its index);
- queues in flow too: persistence is (the store, the WAL, or a Raft follower).
`find` walks that table from every connection in flow, level by level, through the actors in flow,
and names the actor on the first level where none is in flow: the one an actor above it is
blocked on (`blocked_on`, from the credit ledger), else the one with the largest share of time in
flow, else the first by name. Of several connections' verdicts it reports the deepest (a slow
disk puts every connection in flow and explains the others), then the one whose actor in flow
above it spent the most time in flow.

The input is a snapshot: one `Link` per actor with its kind, state, the actors it sends to with
credit (`downstream`) and those it is out of credit with. It is pure and knows nothing of how the
snapshot was gathered (warrenctl asks every host for its actors' flow states).

Left out: connections blocked by an alarm (not flow: the alarm is the reason, `warrenctl
list_connections` shows it), and bottlenecks on the delivery side (consumers are not on a credit
chain back to the publisher).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

# below a connection, in order, with the kinds of actor on each level
LEVELS = (("channel", ("channel",)), ("queue", ("queue",)), ("persistence", ("store", "wal", "follower")))


@dataclass(frozen=True, slots=True)
class Link:
    """One actor of the publish chain, as its host reports it."""

    kind: str  # "connection", "channel", "queue", "store", "wal" or "follower"
    name: str
    state: str = "running"  # running / flow / blocked (flow/state.py)
    downstream: tuple[str, ...] = ()
    blocked_on: tuple[str, ...] = ()
    flow_share: float = 0.0


@dataclass(frozen=True, slots=True)
class Bottleneck:
    kind: str
    name: str
    why: str
    depth: int  # index in LEVELS: deeper explains more
    evidence_share: float  # the flow share of the actor in flow that points at it

    def line(self) -> str:
        return f"bottleneck: {self.kind} {self.name} ({self.why})"


def line(bottleneck: Bottleneck | None) -> str:
    """The last line of `warrenctl flow`."""
    return "bottleneck: none" if bottleneck is None else bottleneck.line()


def find(links: Iterable[Link]) -> Bottleneck | None:
    """The bottleneck the snapshot points at, or None when no connection is in flow."""
    snapshot = sorted(links, key=lambda link: link.name)
    by_name = {link.name: link for link in snapshot}
    verdicts = [_walk(link, by_name) for link in snapshot if link.kind == "connection" and link.state == "flow"]
    if not verdicts:
        return None
    return max(verdicts, key=lambda v: (v.depth, v.evidence_share))  # max keeps the first of equals


def _walk(connection: Link, by_name: dict[str, Link]) -> Bottleneck:
    above = [connection]
    for depth in range(len(LEVELS) - 1):
        below = _below(depth, above, by_name)
        flowing = [link for link in below if link.state == "flow"]
        if not flowing:
            return _culprit(depth, above, below)
        above = flowing
    depth = len(LEVELS) - 1  # queues in flow: persistence, whatever its own state
    return _culprit(depth, above, _below(depth, above, by_name))


def _below(depth: int, above: list[Link], by_name: dict[str, Link]) -> list[Link]:
    """The actors of level `depth` that those of `above` send to, by name."""
    kinds = LEVELS[depth][1]
    names = sorted({name for up in above for name in up.downstream})
    return [by_name[name] for name in names if name in by_name and by_name[name].kind in kinds]


def _culprit(depth: int, above: list[Link], below: list[Link]) -> Bottleneck:
    """The actor of `below` that `above` (in flow) waits on: see the module docstring."""
    level = LEVELS[depth][0]
    waited_on = [link for link in below if any(link.name in up.blocked_on for up in above)]
    candidates = waited_on or below
    if not candidates:
        witness = max(above, key=lambda link: link.flow_share)
        return Bottleneck(level, "(unknown)", f"{witness.kind} {witness.name} in flow, its {level} not reported",
                          depth, witness.flow_share)
    culprit = max(candidates, key=lambda link: link.flow_share)
    witness = max((up for up in above if culprit.name in up.downstream), key=lambda link: link.flow_share)
    if level == "persistence":
        why = f"{witness.kind} {witness.name} in flow, waiting on it"
    else:
        why = f"{witness.kind} {witness.name} in flow, none of its {level}s in flow"
    return Bottleneck(culprit.kind, culprit.name, why, depth, witness.flow_share)
