"""The paging policy (flow/paging.py): the exact effects of each memory sample, and the hysteresis as
a property over any sequence of samples."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from effects import Log
from effects import CutRamTargets, LiftRamTargets
from flow.paging import PagingPolicy

T = 1000  # the paging threshold, bytes

STARTED = Log("queue_storage.paging_started", fields=(("used", 2000), ("threshold", T)))

# (paging before, used bytes) -> (effects, paging after)
CASES = [
    ((False, 0), ([], False)),
    ((False, T), ([], False)),  # at the threshold: not above it
    ((False, 2 * T), ([CutRamTargets(0.4), STARTED], True)),  # T / 2T x 0.8
    ((True, 2 * T), ([CutRamTargets(0.4)], True)),  # still above: cut again, no second log
    ((True, 4 * T), ([CutRamTargets(0.2)], True)),
    ((True, T), ([], True)),  # between the lines: targets stay
    ((True, 700), ([], True)),  # at release_ratio x T: not below it
    ((True, 699), ([LiftRamTargets(), Log("queue_storage.paging_stopped",
                                          fields=(("used", 699), ("threshold", T)))], False)),
    ((False, 699), ([], False)),  # nothing to lift
]


@pytest.mark.parametrize(("before", "after"), CASES, ids=[f"paging={b[0]},used={b[1]}" for b, _ in CASES])
def test_each_sample_returns_exactly_these_effects(before, after):
    paging, used = before
    policy = PagingPolicy()
    if paging:
        policy.observe(10 * T, T)
    assert policy.observe(used, T) == after[0]
    assert policy.paging is after[1]


@pytest.mark.parametrize(("ram", "factor", "target"), [(1000, 0.4, 400), (999, 0.4, 399), (3, 0.2, 0), (0, 0.4, 0)])
def test_a_cut_gives_each_queue_the_same_fraction_of_its_bodies_in_ram(ram, factor, target):
    assert CutRamTargets(factor).target(ram) == target


def test_a_zero_threshold_pages_everything_and_never_lifts():
    policy = PagingPolicy()
    (cut, _log) = policy.observe(1, 0)
    assert cut == CutRamTargets(0.0) and cut.target(10**6) == 0
    assert policy.observe(0, 0) == []


@given(st.lists(st.integers(0, 5 * T), max_size=40), st.floats(0.1, 1.0), st.floats(0.1, 1.0))
def test_hysteresis_over_any_run_of_samples(samples, headroom, release_ratio):
    """Against a two-line model: paging from the first sample above the threshold until one below
    release_ratio x threshold; a cut at every sample above it, smaller than what is in RAM, and a
    lift and a log exactly at each change."""
    policy = PagingPolicy(headroom=headroom, release_ratio=release_ratio)
    paging = False
    for used in samples:
        effects = policy.observe(used, T)
        was = paging
        paging = used > T or (paging and used >= T * release_ratio)
        assert policy.paging is paging
        cuts = [e for e in effects if type(e) is CutRamTargets]
        assert cuts == ([CutRamTargets(T / used * headroom)] if used > T else [])
        for cut in cuts:
            assert all(0 <= cut.target(n) < n for n in (1, 7, 10**6))
        lifts = [e for e in effects if type(e) is LiftRamTargets]
        assert lifts == ([LiftRamTargets()] if was and not paging else [])
        logs = [e.event for e in effects if type(e) is Log]
        assert logs == ([] if was == paging else
                        ["queue_storage.paging_started" if paging else "queue_storage.paging_stopped"])
        assert all(type(e) is Log for e in effects[len(effects) - len(logs):])  # the log comes last
