"""A stream member's election state on disk: the epoch it promised, its vote, its log's epochs.

Theory of operation. Beside a stream's segments, the `EPOCHS` file holds what a replicated
stream's member must not forget across a crash (actors/stream/replication.py): the highest epoch
it has heard of (`epoch`), whom it voted for in it (`voted`), and its log's epoch history, one
(epoch, first offset) pair per leader whose chunks the log holds, oldest first, as Kafka's
leader-epoch checkpoint. It changes only at elections and when a replica first takes a new
leader's chunks, never per chunk, so it is written whole: a temporary file, fsync, rename,
fsync of the directory; a crash leaves the old file or the new one. A missing file is a member
that never took part in an election (epoch 0, no history).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

FILE = "EPOCHS"


@dataclass
class Epochs:
    epoch: int = 0
    voted: str | None = None
    history: list[tuple[int, int]] = field(default_factory=list)  # (epoch, first offset), oldest first


def load(directory: Path) -> Epochs:
    try:
        raw = json.loads((directory / FILE).read_text())
    except FileNotFoundError:
        return Epochs()
    return Epochs(raw["epoch"], raw["voted"], [(e, o) for e, o in raw["history"]])


def save(directory: Path, state: Epochs) -> None:
    """Durable when it returns (the caller answers a vote or acks chunks only after)."""
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / (FILE + ".tmp")
    with open(tmp, "w") as f:
        json.dump({"epoch": state.epoch, "voted": state.voted, "history": state.history}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, directory / FILE)
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
