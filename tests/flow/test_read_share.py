"""The read budget of a connection host (flow/read_share.py): small reads only while another
connection has sent data within the window; a connection alone reads about a fixed number of the
commands it sends, within the shared and the solo size."""
from __future__ import annotations

from hypothesis import given, strategies as st

from flow.read_share import ReadBudget, ReadShare

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


def test_a_connection_alone_reads_what_its_budget_allows_and_shares_all_the_same():
    s = share()
    s.read("pub", 0.0)
    assert s.size("pub", 0.5, alone=400) == 400
    s.read("con", 0.6)
    assert s.size("pub", 0.7, alone=400) == SHARED


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


def budget() -> ReadBudget:
    return ReadBudget(messages=100, min_bytes=5_000, max_bytes=50_000)


def test_a_new_connection_reads_whole_slices():
    assert budget().size() == 50_000


def test_the_budget_follows_the_size_of_the_commands_sent():
    b = budget()
    for _ in range(40):
        b.read(1_200, 10)  # small publishes, 120 bytes framed
    assert abs(b.size() - 12_000) < 100  # about 100 of them
    for _ in range(40):
        b.read(21_000, 1_000)  # a consumer's acks, 21 bytes each
    assert b.size() == 5_000  # never below the floor (100 acks: 2,100 bytes)
    for _ in range(40):
        b.read(165_000, 10)  # 16 KiB publishes: 100 would be 1.65 MB
    assert b.size() == 50_000  # never above the ceiling


def test_a_read_that_completes_no_command_leaves_the_budget_as_it_was():
    b = budget()
    for _ in range(40):
        b.read(1_200, 10)
    before = b.size()
    b.read(50_000, 0)  # part of a large body
    assert b.size() == before


@given(st.lists(st.tuples(st.integers(1, 300_000), st.integers(0, 500)), max_size=60))
def test_the_budget_stays_within_its_bounds(reads):
    b = budget()
    for nbytes, commands in reads:
        b.read(nbytes, commands)
        assert 5_000 <= b.size() <= 50_000
