"""Run the simulator: `python -m tests.sim.run --seed N --steps M` replays one seed;
`python -m tests.sim.run --sweep 1000` runs seeds 0..999 and prints every failing one."""
from __future__ import annotations

import argparse
import sys

from tests.sim.simulator import SimOptions, Simulation


def replay_command(seed: int, steps: int, nodes: int) -> str:
    return f"python -m tests.sim.run --seed {seed} --steps {steps} --nodes {nodes}"


def run_seed(seed: int, steps: int, nodes: int = 3, core_class=None) -> list[str]:
    options = SimOptions(nodes=nodes, steps=steps)
    sim = Simulation(seed, options, core_class) if core_class else Simulation(seed, options)
    return sim.run()


def report(seed: int, steps: int, nodes: int, violations: list[str]) -> str:
    lines = [f"seed {seed}: {len(violations)} violation(s)"] + violations[:10]
    lines.append("replay: " + replay_command(seed, steps, nodes))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=SimOptions.steps)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--sweep", type=int, default=0, help="run seeds 0..N-1")
    args = parser.parse_args(argv)
    seeds = range(args.sweep) if args.sweep else [args.seed]
    failed = 0
    for seed in seeds:
        nodes = args.nodes if not args.sweep else (3 if seed % 2 == 0 else 5)
        violations = run_seed(seed, args.steps, nodes)
        if violations:
            failed += 1
            print(report(seed, args.steps, nodes, violations), flush=True)
    print(f"{len(seeds) - failed}/{len(seeds)} seeds passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
