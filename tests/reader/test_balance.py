"""Which connection host serves a new connection (actors/reader/balance.py)."""
from __future__ import annotations

from actors.reader.balance import destination


def test_a_host_keeps_a_connection_unless_another_serves_fewer():
    assert destination(0, [0, 0]) == 0
    assert destination(1, [3, 3]) == 1
    assert destination(0, [1, 0]) == 1
    assert destination(1, [0, 1]) == 0


def test_the_connection_goes_to_the_host_serving_fewest_the_lowest_index_among_equals():
    assert destination(0, [4, 2, 1, 1]) == 2
    assert destination(3, [2, 2, 2, 3]) == 0
