"""Intake pacing (flow/intake.py): a queue holds its publishers' credit only while it is long and
its consumers keep up, never longer than hold_max_ms at a time; a slow consumer, or none, never
holds a publisher."""
from __future__ import annotations

from flow.intake import IntakePace


def pace(**kw) -> IntakePace:
    return IntakePace(**{"backlog_max": 10, "keeping_up_share": 0.5, "window_ms": 100, "hold_max_ms": 50, **kw})


def test_a_long_queue_whose_consumers_keep_up_holds_until_it_is_short_again():
    p = pace()
    p.count(0, taken=100, delivered=60)
    assert p.hold(0, backlog=40)
    assert p.hold(20, backlog=11) and p.held_since == 0  # one hold, from its start
    assert not p.hold(30, backlog=10)  # short again: everything held goes
    assert p.held_since is None


def test_no_hold_while_short_or_with_nobody_delivering():
    p = pace()
    p.count(0, taken=100, delivered=100)
    assert not p.hold(0, backlog=10)
    q = pace()
    q.count(0, taken=1000, delivered=0)  # no consumer: the queue is a buffer, as RabbitMQ's
    assert not q.hold(0, backlog=1000)


def test_a_slow_consumer_never_holds_the_publisher():
    p = pace()
    p.count(0, taken=1000, delivered=10)
    assert not p.keeping_up() and not p.hold(0, backlog=990)
    p.count(10, taken=0, delivered=489)
    assert not p.hold(10, backlog=501)  # 499 of 1000: just under half
    p.count(11, taken=0, delivered=1)
    assert p.hold(11, backlog=500)


def test_a_hold_lasts_at_most_hold_max_ms_and_the_next_one_starts_afresh():
    p = pace()
    p.count(0, taken=100, delivered=100)
    assert p.hold(0, backlog=50)
    assert p.hold(49, backlog=50)
    assert not p.hold(50, backlog=50)  # let go, so the next burst shows whether consumers keep up
    assert p.hold(51, backlog=50) and p.held_since == 51


def test_the_rates_are_those_of_the_last_one_to_two_windows():
    p = pace()
    p.count(0, taken=100, delivered=100)
    p.count(100, taken=1000, delivered=0)  # a new window: the one before still counts
    assert p.keeping_up() is False  # 100 of 1100
    p.count(200, taken=0, delivered=0)  # the first window is gone
    assert not p.keeping_up()  # 0 of 1000
    p.count(250, taken=0, delivered=600)
    assert p.keeping_up()  # 600 of 1000
    p.count(500, taken=10, delivered=10)  # more than a window after the last: nothing before counts
    assert p.keeping_up()
    p.count(501, taken=30, delivered=0)
    assert not p.keeping_up()  # 10 of 40
