"""The move policy (actors/reader/moves.py): where a running connection should go, if anywhere."""
from __future__ import annotations

from actors.reader.moves import HostLoad, busy_in, busy_out, for_consumer, for_publisher, slow_bytes, slow_msgs

IDLE = HostLoad(1, 0.05)


def test_a_consumer_goes_to_its_queues_host_when_that_one_is_idle():
    assert for_consumer(0, 1, [IDLE, IDLE]) == 1


def test_a_consumer_already_on_its_queues_host_or_with_a_queue_elsewhere_stays():
    assert for_consumer(1, 1, [IDLE, IDLE]) is None
    assert for_consumer(0, 2, [IDLE, IDLE]) is None  # not a connection host of this node


def test_a_consumer_does_not_go_to_a_busy_host_or_one_serving_more_connections():
    assert for_consumer(0, 1, [IDLE, HostLoad(1, busy_in)]) is None
    assert for_consumer(0, 1, [HostLoad(1, 0.0), HostLoad(2, 0.0)]) is None
    assert for_consumer(0, 1, [HostLoad(2, 0.0), HostLoad(2, 0.0)]) == 1


def test_a_slow_publisher_goes_to_the_one_host_its_queues_are_on():
    assert for_publisher(0, {1}, 1_000, 1_000_000, [IDLE, IDLE]) == 1


def test_a_slow_publisher_stays_when_its_queues_are_spread_here_or_the_host_is_busy():
    assert for_publisher(0, {0, 1}, 1_000, 1_000_000, [IDLE, IDLE]) is None
    assert for_publisher(0, {0}, 1_000, 1_000_000, [IDLE, IDLE]) is None
    assert for_publisher(0, {1}, 1_000, 1_000_000, [IDLE, HostLoad(1, 0.6)]) is None
    assert for_publisher(0, set(), 1_000, 1_000_000, [IDLE, IDLE]) is None


def test_an_idle_connection_does_not_move():
    assert for_publisher(0, {1}, 0, 0, [IDLE, IDLE]) is None


def test_a_fast_publisher_never_moves_in():
    assert for_publisher(0, {1}, slow_msgs, 1_000_000, [IDLE, IDLE]) is None
    assert for_publisher(0, {1}, 100, slow_bytes, [IDLE, IDLE]) is None


def test_a_fast_publisher_on_a_busy_host_goes_to_the_calmest_other_host():
    hosts = [HostLoad(2, busy_out + 0.1), HostLoad(0, 0.3), HostLoad(0, 0.1)]
    assert for_publisher(0, {0}, 20_000, 20_000_000, hosts) == 2


def test_a_fast_publisher_stays_when_its_host_copes_or_no_other_host_has_room():
    assert for_publisher(0, {0}, 20_000, 20_000_000, [HostLoad(2, busy_out), IDLE]) is None
    assert for_publisher(0, {0}, 20_000, 20_000_000, [HostLoad(2, 1.0), HostLoad(1, busy_in)]) is None
    assert for_publisher(0, {0}, 20_000, 20_000_000, [HostLoad(2, 1.0)]) is None
