"""Progress lines for long comparison runs: at most one a second, on stderr, so a person watching
sees the run move and the figures on stdout stay clean."""
from __future__ import annotations

import sys
import time

interval_s = 1.0


class Progress:
    def __init__(self, label: str, total: float, unit: str = "msg", rate: bool = True) -> None:
        self.label, self.total, self.unit, self.rate = label, total, unit, rate
        self.started = self.shown = time.monotonic()

    def update(self, done: float, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.shown < interval_s:
            return
        self.shown = now
        elapsed = max(now - self.started, 1e-9)
        share = f" {100 * done / self.total:5.1f}%" if self.total else ""
        rate = f", {done / elapsed:,.0f} {self.unit}/s, {elapsed:.0f} s" if self.rate else ""
        print(f"  {self.label}: {done:,.0f}/{self.total:,.0f} {self.unit}{share}{rate}", file=sys.stderr, flush=True)

    def done(self, done: float) -> None:
        self.update(done, force=True)
