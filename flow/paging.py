"""When a queue host pages message bodies out of RAM under memory pressure, how far, and when it stops.

Theory of operation (RabbitMQ's vm_memory_high_watermark_paging_ratio, with hysteresis). The shell
samples the node's memory use (once a second) and hands it to `observe` with the paging threshold,
paging_ratio x watermark x RAM (below the memory alarm, so paging gets a chance to avoid it):
- above the threshold, every pageable queue (each priority level on its own) gets a RAM target of
  its bodies in RAM x threshold / used x `headroom`: all give up the same fraction, the one that
  would bring use under the threshold with room to spare, so a growing backlog goes to disk instead
  of raising the alarm. The cut is repeated at every sample above the threshold, so targets shrink
  geometrically while use stays high;
- paging stops, every target lifted, only once use falls below `release_ratio` x threshold; between
  the two lines nothing changes, so a node hovering at the threshold does not flap between paging
  out and reading back in.
The policy decides and the shell applies: `observe` returns `CutRamTargets` (whose `target(n)` is
one queue's new target), `LiftRamTargets`, and a `Log` when paging starts or stops, in that order.
It knows no queue and does no IO.

Invariants: `paging` is True from the first cut until the lift after it; a lift comes only while
paging and a `Log` only on a change; a cut target never exceeds the bodies in RAM it was computed
from (headroom <= 1 and threshold < used).

Left out: byte targets and RabbitMQ's per-queue ingress/egress rates (every queue gives up the same
fraction of what it holds), and the memory alarm itself (it blocks publishers; the node raises it).
The variable queue that carries a target out is persist/classic/paging.py.
"""
from __future__ import annotations

from effects import CutRamTargets, LiftRamTargets, Log

RAM_TARGET_HEADROOM = 0.8  # a cut aims this far below the threshold
RAM_RELEASE_RATIO = 0.7  # paging stops below this fraction of the threshold


PagingEffect = CutRamTargets | LiftRamTargets | Log


class PagingPolicy:
    """The paging state of one queue host (see the module docstring)."""

    __slots__ = ("headroom", "release_ratio", "paging")

    def __init__(self, *, headroom: float = RAM_TARGET_HEADROOM, release_ratio: float = RAM_RELEASE_RATIO) -> None:
        assert 0 < headroom <= 1 and 0 < release_ratio <= 1, (headroom, release_ratio)
        self.headroom = headroom
        self.release_ratio = release_ratio
        self.paging = False

    def observe(self, used_bytes: int, threshold_bytes: int) -> list[PagingEffect]:
        """One memory sample: what the shell must do now (often nothing)."""
        assert used_bytes >= 0 and threshold_bytes >= 0, (used_bytes, threshold_bytes)
        fields = (("used", used_bytes), ("threshold", threshold_bytes))
        if used_bytes > threshold_bytes:
            out: list[PagingEffect] = [CutRamTargets(threshold_bytes / used_bytes * self.headroom)]
            if not self.paging:
                self.paging = True
                out.append(Log("queue_storage.paging_started", fields=fields))
            return out
        if self.paging and used_bytes < threshold_bytes * self.release_ratio:
            self.paging = False
            return [LiftRamTargets(), Log("queue_storage.paging_stopped", fields=fields)]
        return []
