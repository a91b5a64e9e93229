"""The share of time in flow (flow/state.py): worked cases, then the bucketed record against an exact
model of blocked periods over any sequence of observations."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from flow.state import FLOW_WINDOW_BUCKETS, FLOW_WINDOW_S, FlowState, waiting_state

TPS = 1000  # ticks are milliseconds, as in the runtime's mailbox
BUCKET = TPS * FLOW_WINDOW_S // FLOW_WINDOW_BUCKETS  # 250 ms


def test_never_blocked_is_no_share():
    s = FlowState(TPS, changed_at=0)
    assert s.flow_share(0) == 0.0 and s.flow_share(10_000) == 0.0


def test_blocked_all_its_life_is_all_of_it_even_before_a_whole_window():
    s = FlowState(TPS, changed_at=1000).observe(True, 1000)
    assert s.flow_share(1500) == 1.0
    assert s.as_dict(1500)["flow_share"] == 1.0


def test_half_of_each_second_blocked_counts_what_falls_inside_the_window():
    s = FlowState(TPS, changed_at=0)
    for second in range(10):
        s = s.observe(True, second * TPS).observe(False, second * TPS + 500)
    # the window at 10 s is [5.25 s, 10 s): 250 ms of the block at 5 s, then 500 ms of each later one
    assert s.flow_share(10 * TPS) == pytest.approx((250 + 4 * 500) / 4750)
    assert len(s.history) <= FLOW_WINDOW_BUCKETS  # the record stays small


def test_a_blocked_period_ages_out_of_the_window():
    s = FlowState(TPS, changed_at=0).observe(True, 0).observe(False, 1000)
    assert s.flow_share(2000) == 0.5
    assert s.flow_share(4000) == 0.25
    # at 6 s the window is [1.25 s, 6 s): the period [0, 1 s) has left it
    assert s.flow_share(6000) == 0.0
    assert s.state(6000) == "running"


def test_an_alarm_is_not_flow():
    s = FlowState(TPS, changed_at=0).alarm(True, 0)
    assert s.state(3000) == "blocked" and s.flow_share(3000) == 0.0


def test_a_long_block_counts_only_inside_the_window():
    s = FlowState(TPS, changed_at=0).observe(True, 0)
    assert s.flow_share(60_000) == 1.0
    s = s.observe(False, 60_000)
    assert len(s.history) < FLOW_WINDOW_BUCKETS  # an hour or a minute: the same few counts
    assert s.flow_share(61_000) == pytest.approx(3750 / 4750)  # window [56.25 s, 61 s)


def window_start(now: int, started_at: int) -> int:
    """The spec's window: the bucket `now` is in and the whole buckets before it, not before the record."""
    return max((now // BUCKET - (FLOW_WINDOW_BUCKETS - 1)) * BUCKET, started_at)


@given(st.integers(0, 10_000), st.lists(st.tuples(st.integers(0, 3000), st.booleans()), max_size=60))
def test_the_share_is_the_exact_overlap_of_blocked_periods_with_the_window(start, steps):
    s = FlowState(TPS, changed_at=start)
    periods: list[list[int | None]] = []  # [begin, end or None while blocked]
    now = start
    for gap, blocked in steps:
        now += gap
        s = s.observe(blocked, now)
        if blocked and (not periods or periods[-1][1] is not None):
            periods.append([now, None])
        elif not blocked and periods and periods[-1][1] is None:
            periods[-1][1] = now
        for probe in (now, now + 1, now + BUCKET * 7 + 3):
            lo = window_start(probe, start)
            overlap = sum(max(0, min(end if end is not None else probe, probe) - max(begin, lo))
                          for begin, end in periods)
            expected = overlap / (probe - lo) if probe > lo else 0.0
            assert s.flow_share(probe) == pytest.approx(expected)
        assert len(s.history) <= FLOW_WINDOW_BUCKETS


def test_waiting_is_flow_only_while_it_takes_at_least_half_of_the_window():
    """A queue that waits 40 ms of every 100 ms for its store's sync is busy, not held up by it; one
    that waits 60 ms of every 100 ms is."""
    fast, slow = FlowState(TPS, changed_at=0), FlowState(TPS, changed_at=0)
    for ms in range(0, 5000, 100):
        fast = fast.observe(True, ms).observe(False, ms + 40)
        slow = slow.observe(True, ms).observe(False, ms + 60)
    assert fast.state(5000) == "flow" and waiting_state(fast, 5000) == "running"
    assert waiting_state(slow, 5000) == "flow"
    assert waiting_state(slow, 12_000) == "running"  # it stopped waiting: it ages out
