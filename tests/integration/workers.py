"""What the Celery and Dramatiq tests share: marks, the way a task or an actor run in a worker
subprocess tells the test that it ran (and when, in which process, how often), unique keys to
name them, and a world (brokers plus a worker) running for the length of a test module.

A mark is a file named for it in the marks directory, which the worker's environment names; each
run appends one line. The test reads the lines back, or waits until there are as many as it
expects: a worker reports nothing else the test could wait on."""
from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Protocol, TypeVar

from tests.waiting import until


class Marks:
    def __init__(self, root: Path) -> None:
        self.root = root

    def add(self, name: str, text: str = "") -> int:
        """Append a line to mark `name` (the worker's side); how many lines it has now."""
        path = self.root / name
        with open(path, "a") as f:
            f.write(text + "\n")
        return len(path.read_text().splitlines())

    def lines(self, name: str) -> list[str]:
        path = self.root / name
        return path.read_text().splitlines() if path.exists() else []

    def wait(self, name: str, lines: int, deadline_s: float, context: Callable[[], str] = lambda: "") -> list[str]:
        """The mark's lines once it has `lines` of them; `context` adds to the time-out's report
        (the worker's log, say)."""
        until(lambda: len(self.lines(name)) >= lines,
              lambda: f"mark {name} to have {lines} lines: it has {self.lines(name)}{context()}", deadline_s)
        return self.lines(name)


def key() -> str:
    """A name for one test's marks, unique across the module's runs of the worker."""
    return uuid.uuid4().hex[:12]


class World(Protocol):
    def start_worker(self) -> object: ...

    def stop(self) -> None: ...


W = TypeVar("W", bound=World)


@contextmanager
def running(world: W) -> Iterator[W]:
    """`world` with its worker started; stopped whole afterwards, also when the start fails."""
    try:
        world.start_worker()
        yield world
    finally:
        world.stop()
