"""When a member snapshots (actors/quorum/release.py): only states nothing below is live in, at a
cost amortised over the messages held."""
from __future__ import annotations

from actors.quorum.release import QueueView, ReleaseCursor


class Captures:
    """capture_snapshot stand-in: the state at `applied`, encoded as its index."""

    def __init__(self) -> None:
        self.applied = 0
        self.taken: list[int] = []

    def __call__(self) -> tuple[int, int, bytes]:
        self.taken.append(self.applied)
        return self.applied, 1, b"%d" % self.applied


def view(applied: int, released: int, messages: int = 10, drained: bool = False) -> QueueView:
    return QueueView(applied, drained, released, messages)


def test_a_stash_is_written_once_the_release_cursor_passes_it():
    cursor, capture = ReleaseCursor(interval_min_entries=100), Captures()
    capture.applied = 100
    assert cursor.after_apply(view(100, 50), capture) is None  # stashed at 100, 51..100 still live
    assert capture.taken == [100]
    capture.applied = 150
    assert cursor.after_apply(view(150, 99), capture) is None
    assert cursor.after_apply(view(160, 100), capture) == (100, 1, b"100")
    assert cursor.snapshot_index == 100 and not cursor.stashes


def test_stashes_are_spaced_by_the_messages_held_and_bounded():
    cursor, capture = ReleaseCursor(interval_min_entries=10, stash_max=2), Captures()
    for applied in range(10, 200, 10):
        capture.applied = applied
        cursor.after_apply(view(applied, 0, messages=50), capture)
    assert capture.taken == [50, 100]  # every max(10, 50) entries, two at most while none is valid


def test_a_drained_queue_snapshots_at_once_past_the_minimum_and_on_idle_ticks_below_it():
    cursor, capture = ReleaseCursor(drained_min_entries=64), Captures()
    capture.applied = 30
    assert cursor.after_apply(view(30, 30, 0, drained=True), capture) is None
    assert cursor.on_tick(view(30, 30, 0, drained=True), capture) is None  # 30 applied since the last tick
    assert cursor.on_tick(view(30, 30, 0, drained=True), capture) == (30, 1, b"30")  # a tick with nothing new
    assert cursor.on_tick(view(30, 30, 0, drained=True), capture) is None  # nothing new
    capture.applied = 100
    assert cursor.after_apply(view(100, 100, 0, drained=True), capture) == (100, 1, b"100")


def test_an_idle_queue_whose_log_holds_a_few_entries_is_not_worth_a_snapshot():
    cursor, capture = ReleaseCursor(idle_min_entries=16), Captures()
    capture.applied = 2  # a new queue: its leader's no-op and little else
    for _ in range(3):
        assert cursor.on_tick(view(2, 2, 0, drained=True), capture) is None
    capture.applied = 16
    assert cursor.on_tick(view(16, 16, 0, drained=True), capture) is None  # applied since the tick before
    assert cursor.on_tick(view(16, 16, 0, drained=True), capture) == (16, 1, b"16")


def test_an_installed_snapshot_makes_older_stashes_useless():
    cursor, capture = ReleaseCursor(interval_min_entries=10), Captures()
    capture.applied = 10
    cursor.after_apply(view(10, 0), capture)
    cursor.restored(500)
    assert cursor.after_apply(view(510, 20), capture) is None and cursor.snapshot_index == 500
