"""Command-line entry point: `python -m bench.perf` / `warren-perf`."""

from __future__ import annotations

from bench.perf.config import parse_args
from bench.perf.runner import run


def main(argv: list[str] | None = None) -> int:
    return run(parse_args(argv))
