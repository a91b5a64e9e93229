"""The total-queue checker (tests/faults/checker.py) on histories made by hand: it must catch a
confirmed message never consumed and a consumed one never published, count duplicates without
failing on them, and measure confirms/s inside and outside the fault windows."""
from __future__ import annotations

from tests.faults.checker import Ran, check
from tests.faults.workload import History


def history(confirmed: dict[str, float], consumed: list[str], *, published: list[str] = (),
            nacked: set[str] = frozenset(), indeterminate: set[str] = frozenset(),
            drained: list[str] = ()) -> History:
    h = History()
    h.published = {m: "q" for m in [*confirmed, *published, *nacked, *indeterminate]}
    h.confirmed = dict(confirmed)
    h.nacked, h.indeterminate = set(nacked), set(indeterminate)
    h.consumed = [(m, 0.0) for m in consumed]
    h.drained = list(drained)
    return h


def test_every_confirmed_message_consumed_passes_and_duplicates_are_counted():
    h = history({"a": 1.0, "b": 2.0}, ["a", "b", "a"], indeterminate={"c"}, drained=["c", "b"])
    r = check(h, [], 10.0)
    assert r.ok
    assert (r.published, r.confirmed, r.consumed, r.deliveries, r.duplicates, r.unconfirmed_consumed) == \
        (3, 2, 3, 5, 2, 1)


def test_a_confirmed_message_never_consumed_is_lost():
    r = check(history({"a": 1.0, "b": 2.0}, ["a"], nacked={"n"}), [], 10.0)
    assert not r.ok and r.lost == ["b"] and r.nacked == 1


def test_a_message_consumed_but_never_published_is_unexpected():
    r = check(history({"a": 1.0}, ["a", "ghost"]), [], 10.0)
    assert not r.ok and r.unexpected == ["ghost"]


def test_availability_inside_and_outside_the_windows():
    confirmed = {f"m{i}": t for i, t in enumerate([0.5, 1.5, 2.5, 3.5, 10.5, 11.5, 12.5, 13.5, 14.5, 15.5])}
    ran = [Ran("kill", "kill n1", 10.0, 12.0), Ran("pause", "pause n2", 13.0, 15.0), Ran("kill", "kill n3", 4, 6)]
    r = check(history(confirmed, list(confirmed)), ran, 20.0)
    assert [w.confirms for w in r.windows] == [2, 2, 0]
    assert r.availability() == {"kill": 0.5, "pause": 1.0}
    assert r.baseline_rate == 6 / 14
