"""Turning the workers' counters into per-second samples and a run summary.

Theory of operation: every worker sends, about once a second, its cumulative counters (published,
confirmed, nacked, returned, consumed) and the deltas since its last report of its two latency
histograms: publish -> consume (consumers) and publish -> confirm (producers with confirms).  The
parent keeps the latest counters per worker, so a late or lost report only shifts counts between
seconds and never loses them.  `sample(elapsed_s)` closes the interval since the previous sample:
rates are counter differences over the interval, latency percentiles come from the deltas that
arrived in it (`Latencies` keeps each kind's second, measured part and whole run).  The summary's
average rates and latency percentiles cover the samples that start at or after the warm-up; if the
run is too short to have any, they cover the whole run and say so.
Time is passed in (seconds as floats from the caller's clock); nothing here reads a clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bench.perf.histogram import Histogram

COUNTERS = ("published", "confirmed", "nacked", "returned", "consumed")
# Gauges are current states, summed over workers but never turned into rates.
GAUGES = ("blocked",)
PERCENTILES = (("p50", 0.50), ("p95", 0.95), ("p99", 0.99))


def latency_ms(hist: Histogram) -> dict[str, float | None]:
    """p50/p95/p99 (and max) in milliseconds; None when nothing was measured."""
    out: dict[str, float | None] = {}
    for name, q in PERCENTILES + (("max", 1.0),):
        value = hist.percentile(q)
        out[name] = None if value is None else round(value / 1000, 3)
    return out


@dataclass
class Latencies:
    """One kind of latency: the deltas of the current second, of the seconds after the warm-up, of all."""
    second: Histogram = field(default_factory=Histogram)
    measured: Histogram = field(default_factory=Histogram)
    whole: Histogram = field(default_factory=Histogram)

    def close_second(self, measured: bool) -> dict[str, float | None]:
        """The second's percentiles; its counts move to the measured part (if `measured`) and the whole."""
        percentiles = latency_ms(self.second)
        if measured:
            self.measured.merge(self.second.buckets)
        self.whole.merge(self.second.take())
        return percentiles

    def over(self, warmup_excluded: bool) -> Histogram:
        return self.measured if warmup_excluded else self.whole


@dataclass
class Aggregator:
    warmup_s: float
    latest: dict[str, dict[str, int]] = field(default_factory=dict)
    samples: list[dict] = field(default_factory=list)
    _consume: Latencies = field(default_factory=Latencies)
    _confirm: Latencies = field(default_factory=Latencies)
    _previous: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    _previous_s: float = 0.0
    _at_warmup: tuple[float, dict[str, int]] | None = None

    def __post_init__(self) -> None:
        if self.warmup_s <= 0:
            self._at_warmup = (0.0, dict.fromkeys(COUNTERS, 0))

    def update(self, worker: str, counters: dict[str, int], hist_delta: dict[int, int],
               confirm_delta: dict[int, int] | None = None) -> None:
        self.latest[worker] = {k: counters.get(k, 0) for k in COUNTERS + GAUGES}
        self._consume.second.merge(hist_delta)
        self._confirm.second.merge(confirm_delta or {})

    def totals(self) -> dict[str, int]:
        return {k: sum(w[k] for w in self.latest.values()) for k in COUNTERS + GAUGES}

    def sample(self, elapsed_s: float) -> dict:
        totals = self.totals()
        interval_s = max(elapsed_s - self._previous_s, 1e-9)
        sample = {"elapsed_s": round(elapsed_s, 3)}
        for k in COUNTERS:
            sample[f"{k}_rate"] = round((totals[k] - self._previous[k]) / interval_s, 1)
        sample["blocked_producers"] = totals["blocked"]
        measured = self._previous_s >= self.warmup_s
        sample["latency_ms"] = self._consume.close_second(measured)
        sample["confirm_latency_ms"] = self._confirm.close_second(measured)
        if not measured and elapsed_s >= self.warmup_s and self._at_warmup is None:
            self._at_warmup = (elapsed_s, totals)
        self._previous, self._previous_s = totals, elapsed_s
        self.samples.append(sample)
        return sample

    def summary(self) -> dict:
        """Totals for the whole run (drain included) and rates/latency after the warm-up."""
        totals = self.totals()
        end_s, end = self._previous_s, self._previous
        start_s, start = self._at_warmup or (0.0, dict.fromkeys(COUNTERS, 0))
        warmup_excluded = self._at_warmup is not None and end_s > start_s
        if not warmup_excluded:
            start_s, start = 0.0, dict.fromkeys(COUNTERS, 0)
        span_s = max(end_s - start_s, 1e-9)
        summary: dict = {k: totals[k] for k in COUNTERS}
        for k in COUNTERS:
            summary[f"{k}_rate"] = round((end[k] - start[k]) / span_s, 1)
        summary["latency_ms"] = latency_ms(self._consume.over(warmup_excluded))
        summary["latency_samples"] = self._consume.over(warmup_excluded).count
        summary["confirm_latency_ms"] = latency_ms(self._confirm.over(warmup_excluded))
        summary["confirm_latency_samples"] = self._confirm.over(warmup_excluded).count
        summary["measured_s"] = round(span_s, 3)
        summary["warmup_excluded"] = warmup_excluded
        return summary


def format_ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def format_sample(sample: dict) -> str:
    lat = sample["latency_ms"]
    return (f"time {sample['elapsed_s']:6.1f}s, sent {sample['published_rate']:9.0f} msg/s, "
            f"confirmed {sample['confirmed_rate']:9.0f} msg/s, "
            f"nacked {sample['nacked_rate']:.0f} msg/s, returned {sample['returned_rate']:.0f} msg/s, "
            f"received {sample['consumed_rate']:9.0f} msg/s, latency p50/p95/p99 "
            f"{format_ms(lat['p50'])}/{format_ms(lat['p95'])}/{format_ms(lat['p99'])} ms"
            + (f", {sample['blocked_producers']} producer(s) blocked"
               if sample.get("blocked_producers") else ""))


def format_summary(summary: dict) -> str:
    lat, conf = summary["latency_ms"], summary["confirm_latency_ms"]
    window = "after warm-up" if summary["warmup_excluded"] else "whole run, too short for warm-up"
    return "\n".join([
        f"summary ({window}, {summary['measured_s']:.1f}s measured):",
        f"  sending rate avg: {summary['published_rate']:.0f} msg/s, "
        f"confirm rate avg: {summary['confirmed_rate']:.0f} msg/s, "
        f"receiving rate avg: {summary['consumed_rate']:.0f} msg/s",
        f"  latency p50/p95/p99/max: {format_ms(lat['p50'])}/{format_ms(lat['p95'])}/"
        f"{format_ms(lat['p99'])}/{format_ms(lat['max'])} ms ({summary['latency_samples']} samples)",
        *([f"  confirm latency p50/p95/p99/max: {format_ms(conf['p50'])}/{format_ms(conf['p95'])}/"
           f"{format_ms(conf['p99'])}/{format_ms(conf['max'])} ms ({summary['confirm_latency_samples']} samples)"]
          if summary["confirm_latency_samples"] else []),
        f"  totals: published {summary['published']}, confirmed {summary['confirmed']}, "
        f"nacked {summary['nacked']}, returned {summary['returned']}, consumed {summary['consumed']}",
    ])
