"""The nemesis schedule (tests/faults/schedule.py): one seed, one schedule; every nemesis gets its
rounds; the partitions have the shapes their names promise."""
from __future__ import annotations

import random

import pytest

from tests.faults.schedule import NEMESES, Schedule, grudge_of, make_schedule, partition, sides

NODES3 = ["n1", "n2", "n3"]
NODES5 = ["n1", "n2", "n3", "n4", "n5"]
QUEUES = ["q0", "q1"]


def test_a_seed_is_a_schedule_and_its_json_replays_it():
    a = make_schedule(7, NODES5, list(NEMESES), 600, QUEUES)
    assert a == make_schedule(7, NODES5, list(NEMESES), 600, QUEUES)
    assert a != make_schedule(8, NODES5, list(NEMESES), 600, QUEUES)
    assert Schedule.from_json(a.to_json()) == a


def test_windows_last_their_range_do_not_overlap_and_end_within_the_time():
    s = make_schedule(3, NODES3, ["partition", "kill", "pause"], 600, QUEUES)
    assert s.windows and all(10 <= w.duration_s <= 30 for w in s.windows)
    assert all(b.start_s - a.end_s >= 10 for a, b in zip(s.windows, s.windows[1:]))  # a recovery between
    assert s.windows[-1].end_s <= 600


def test_nemeses_take_turns_so_each_gets_its_rounds():
    s = make_schedule(11, NODES3, list(NEMESES), 900, QUEUES)
    rounds = s.rounds()
    assert max(rounds.values()) - min(rounds.values()) <= 1 and min(rounds.values()) >= 3
    assert make_schedule(1, NODES3, list(NEMESES), 0, QUEUES, rounds=1).rounds() == dict.fromkeys(NEMESES, 1)


def test_an_unknown_nemesis_is_refused():
    with pytest.raises(ValueError, match="unknown nemesis"):
        make_schedule(1, NODES3, ["partition", "flood"], 60, QUEUES)


def test_combined_windows_strike_two_kinds_on_different_nodes():
    s = make_schedule(5, NODES5, ["combined"], 0, QUEUES, rounds=20)
    for w in s.windows:
        a, b = w.faults
        assert a.kind != b.kind
        assert not (a.node and b.node and a.node == b.node and a.kind != "partition")


def reach(grudge: dict[str, list[str]], node: str) -> set[str]:
    return {n for n in grudge if n not in grudge[node]}


def test_partition_shapes():
    rng = random.Random(2)
    halves = partition(rng, NODES5, "halves", QUEUES).grudge
    assert sorted(len(reach(halves, n)) for n in NODES5) in ([2, 2, 3, 3, 3], [2, 2, 2, 3, 3])
    minority = partition(rng, NODES5, "majority", QUEUES).grudge
    assert sorted(len(reach(minority, n)) for n in NODES5) == [1, 4, 4, 4, 4]
    bridge = partition(rng, NODES5, "bridge", QUEUES)
    assert reach(bridge.grudge, bridge.node) == set(NODES5)  # the bridge sees everyone
    assert sorted(len(reach(bridge.grudge, n)) for n in NODES5) == [3, 3, 3, 3, 5]
    ring = partition(rng, NODES5, "ring", QUEUES).grudge
    assert all(len(reach(ring, n)) == 3 for n in NODES5)  # itself and two neighbours: a majority each
    assert len({frozenset(reach(ring, n)) for n in NODES5}) == 5  # no two share it
    for grudge in (halves, minority, bridge.grudge, ring):  # a partition cuts both ways
        assert all(m not in grudge[n] or n in grudge[m] for n in grudge for m in grudge)


def test_sides_names_the_groups():
    assert sides(grudge_of(["n1", "n2"], ["n3"])) == "n1 n2 | n3"
    assert sides(grudge_of(["n1", "n2"], ["n2", "n3"])) == "n1 n2 | n1 n2 n3 | n2 n3"
