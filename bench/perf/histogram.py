"""A mergeable log-linear latency histogram (HdrHistogram's idea, in a few lines).

Theory of operation: below 2**SUB_BUCKET_BITS µs every value has its own bucket; above, a value
falls in bucket (s, m) where s is how far it must be shifted right to keep SUB_BUCKET_BITS + 1
bits and m is the SUB_BUCKET_BITS bits after its leading one.  Reporting a bucket's midpoint keeps
the relative error within 1/2**(SUB_BUCKET_BITS + 1), under 1 %.
Buckets are stored sparsely as {index: count}, so a worker can ship the delta of one second to the
parent as a small dict, and the parent merges deltas by adding counts.
Invariant: `count` equals the sum of the bucket counts.  Negative latencies (clock steps between
processes) are recorded as 0.  Left out: coordinated-omission correction.
"""

from __future__ import annotations

SUB_BUCKET_BITS = 6
SUB_BUCKET_COUNT = 1 << SUB_BUCKET_BITS


def bucket_index(value_us: int) -> int:
    if value_us < SUB_BUCKET_COUNT:
        return max(value_us, 0)
    shift = value_us.bit_length() - SUB_BUCKET_BITS - 1
    return ((shift + 1) << SUB_BUCKET_BITS) + ((value_us >> shift) - SUB_BUCKET_COUNT)


def bucket_value(index: int) -> int:
    """The midpoint (µs) of the values that fall in bucket `index`."""
    if index < SUB_BUCKET_COUNT:
        return index
    shift = (index >> SUB_BUCKET_BITS) - 1
    low = (SUB_BUCKET_COUNT + (index & (SUB_BUCKET_COUNT - 1))) << shift
    return low + ((1 << shift) >> 1)


class Histogram:
    """Latency counts by bucket; `record` is on the consumer's hot path."""

    __slots__ = ("buckets", "count")

    def __init__(self, buckets: dict[int, int] | None = None) -> None:
        self.buckets: dict[int, int] = dict(buckets or {})
        self.count = sum(self.buckets.values())

    def record(self, value_us: int, n: int = 1) -> None:
        """`n` values of `value_us`."""
        index = bucket_index(value_us)
        self.buckets[index] = self.buckets.get(index, 0) + n
        self.count += n

    def merge(self, other: dict[int, int]) -> None:
        for index, n in other.items():
            self.buckets[index] = self.buckets.get(index, 0) + n
            self.count += n

    def percentile(self, q: float) -> int | None:
        """The value (µs) at quantile q in [0, 1], or None when empty."""
        assert 0.0 <= q <= 1.0, q
        if not self.count:
            return None
        rank = max(1, round(q * self.count))
        seen = 0
        for index in sorted(self.buckets):
            seen += self.buckets[index]
            if seen >= rank:
                return bucket_value(index)
        raise AssertionError("count does not match buckets")

    def take(self) -> dict[int, int]:
        """Hand over the buckets recorded so far and start again empty (a per-second delta)."""
        buckets, self.buckets, self.count = self.buckets, {}, 0
        return buckets
