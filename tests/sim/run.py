"""Run the simulator: `python -m tests.sim.run --seed N --steps M --log wal` replays one seed;
`python -m tests.sim.run --sweep 1000 [--first K]` runs seeds K..K+999 (3 nodes for even seeds,
5 for odd) and prints every failing one with the command that replays it. `--quorum` runs a
quorum queue on the nodes instead of the key-value machine (tests/sim/quorum.py), `--metadata` the
cluster's metadata group with nodes joining and leaving it (tests/sim/metadata.py), `--quiet` groups
that go quiet when idle, with node liveness instead of heartbeats (tests/sim/quiet.py)."""
from __future__ import annotations

import argparse
import logging
import sys

import structlog

from tests.sim.metadata import MetadataSimulation
from tests.sim.quiet import QuietSimulation
from tests.sim.quorum import QuorumSimulation
from tests.sim.simulator import SimOptions, Simulation
from tests.sim.storage import LOG_MODES


MACHINES = {"kv": Simulation, "quorum": QuorumSimulation, "metadata": MetadataSimulation,
            "quiet": QuietSimulation}


def replay_command(seed: int, steps: int, nodes: int, log: str = "wal",
                   defer_snapshots: bool = True, machine: str = "kv") -> str:
    extra = ("" if defer_snapshots else " --no-defer-snapshots") + ("" if machine == "kv" else f" --{machine}")
    return f"python -m tests.sim.run --seed {seed} --steps {steps} --nodes {nodes} --log {log}" \
           + extra


def run_seed(seed: int, steps: int, nodes: int = 3, core_class=None, log: str = "wal",
             machine: str = "kv", **options) -> list[str]:
    sim_options = SimOptions(nodes=nodes, steps=steps, log=log, **options)
    if core_class is not None:
        return Simulation(seed, sim_options, core_class).run()
    return MACHINES[machine](seed, sim_options).run()


def report(seed: int, steps: int, nodes: int, violations: list[str], log: str = "wal",
           defer_snapshots: bool = True, machine: str = "kv") -> str:
    lines = [f"seed {seed}: {len(violations)} violation(s)"] + violations[:10]
    lines.append("replay: " + replay_command(seed, steps, nodes, log, defer_snapshots, machine))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=SimOptions.steps)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--log", choices=LOG_MODES, default="wal")
    parser.add_argument("--no-defer-snapshots", dest="defer_snapshots", action="store_false",
                        help="write snapshots at once, even above the WAL's written index")
    parser.add_argument("--sweep", type=int, default=0, help="run seeds FIRST..FIRST+N-1")
    parser.add_argument("--first", type=int, default=0, help="the sweep's first seed")
    parser.add_argument("--verbose", action="store_true", help="show the storage's logs")
    parser.add_argument("--quorum", dest="machine", action="store_const", const="quorum", default="kv",
                        help="run a quorum queue (members, channels) instead of the key-value machine")
    parser.add_argument("--metadata", dest="machine", action="store_const", const="metadata",
                        help="run the metadata group (the registry) with nodes joining and leaving it")
    parser.add_argument("--quiet", dest="machine", action="store_const", const="quiet",
                        help="the key-value machine in groups that go quiet when idle (tests/sim/quiet.py)")
    args = parser.parse_args(argv)
    if not args.verbose:  # rollovers and torn-tail cuts are routine here, not news
        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    seeds = range(args.first, args.first + args.sweep) if args.sweep else [args.seed]
    failed = 0
    for seed in seeds:
        nodes = args.nodes if not args.sweep else (3 if seed % 2 == 0 else 5)
        violations = run_seed(seed, args.steps, nodes, log=args.log,
                              defer_snapshots=args.defer_snapshots, machine=args.machine)
        if violations:
            failed += 1
            print(report(seed, args.steps, nodes, violations, args.log, args.defer_snapshots,
                         args.machine), flush=True)
    print(f"{len(seeds) - failed}/{len(seeds)} seeds passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
