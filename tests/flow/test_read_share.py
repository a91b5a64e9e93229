"""The read budget of a connection host (flow/read_share.py): small reads only while another
connection has sent data within the window, full reads for a connection alone."""
from __future__ import annotations

from hypothesis import given, strategies as st

from flow.read_share import ReadShare

SOLO, SHARED, WINDOW = 1000, 100, 1.0


def share() -> ReadShare:
    return ReadShare(SOLO, SHARED, WINDOW)


def test_a_connection_alone_reads_its_full_size_however_often_it_reads():
    s = share()
    for t in range(10):
        assert s.size("pub", t * 0.01) == SOLO
        s.read("pub", t * 0.01)


def test_two_connections_sending_share_until_the_other_falls_silent_for_the_window():
    s = share()
    s.read("pub", 0.0)
    s.read("con", 0.1)  # the consumer acks
    assert s.size("pub", 0.2) == SHARED
    assert s.size("con", 0.2) == SHARED  # the publisher read at 0.0, within the window
    s.read("pub", 0.5)
    assert s.size("pub", 1.05) == SHARED  # the consumer's last read was 0.95 s ago
    assert s.size("pub", 1.1) == SOLO  # and now it is a whole window ago
    assert s.size("con", 1.1) == SHARED  # the publisher read 0.6 s ago


def test_a_third_connection_counts_as_another():
    s = share()
    s.read("a", 0.0)
    s.read("b", 0.5)
    s.read("b", 1.2)
    assert s.size("b", 1.3) == SOLO  # a's read is 1.3 s old
    s.read("c", 1.4)
    assert s.size("a", 1.5) == SHARED and s.size("b", 1.5) == SHARED and s.size("c", 1.5) == SHARED


@given(st.lists(st.tuples(st.sampled_from("abc"), st.floats(0, 0.5)), max_size=40), st.sampled_from("abcd"))
def test_the_size_is_shared_exactly_when_another_reader_read_within_the_window(reads, asker):
    s = share()
    now = 0.0
    log = []
    for reader, gap in reads:
        now += gap
        s.read(reader, now)
        log.append((reader, now))
    now += 0.25
    others = [t for r, t in log if r != asker]
    expected = SHARED if others and now - max(others) < WINDOW else SOLO
    assert s.size(asker, now) == expected
