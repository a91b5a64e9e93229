"""bench.perf: a PerfTest-like load tool for any AMQP 0-9-1 broker (`python -m bench.perf --help`)."""

from bench.perf.cli import main

__all__ = ["main"]
