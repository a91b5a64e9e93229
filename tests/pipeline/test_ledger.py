"""The stream reader's ledger: offsets, batches and the acks a commit allows (no Spark, no broker)."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from pipeline.ledger import Ledger, Offset


def filled(n: int, session: str = "s") -> Ledger:
    ledger = Ledger(session)
    for seq in range(1, n + 1):
        ledger.receive(delivery_tag=10 + seq, row=f"m{seq}")
    return ledger


def test_no_new_data_returns_the_start_offset_itself():
    ledger = filled(0)
    start = ledger.initial()
    assert ledger.latest(start, rows_max=100) is start


def test_a_batch_is_capped_by_rows_max_and_holds_its_rows():
    ledger = filled(5)
    end = ledger.latest(ledger.initial(), rows_max=3)
    assert end == Offset("s", 3)
    assert ledger.rows(ledger.initial(), end) == ["m1", "m2", "m3"]
    assert ledger.latest(end, rows_max=None) == Offset("s", 5)
    assert ledger.rows(end, Offset("s", 5)) == ["m4", "m5"]


def test_commit_acks_up_to_the_end_delivery_tag_once():
    ledger = filled(5)
    assert ledger.commit(Offset("s", 3)) == 13  # basic.ack(13, multiple=true)
    assert ledger.committed == 3 and ledger.pending == 2
    assert ledger.commit(Offset("s", 3)) is None  # Spark calls commit after latestOffset settled it
    assert ledger.commit(Offset("s", 2)) is None
    assert ledger.commit(Offset("s", 5)) == 15


def test_offsets_of_an_earlier_session_plan_nothing_here():
    """A restarted query replays its uncommitted batch with the old session's offsets: the broker
    redelivered those messages to the new session, so that batch is empty and nothing is acked."""
    ledger = filled(4, session="new")
    old_end = Offset("old", 7)
    assert ledger.rows(ledger.initial(), old_end) == []
    assert ledger.commit(old_end) is None
    end = ledger.latest(old_end, rows_max=None)
    assert end == Offset("new", 4)
    assert ledger.rows(old_end, end) == ["m1", "m2", "m3", "m4"]
    assert ledger.latest(Offset("old", 7), rows_max=None) == end
    empty = Ledger("new")
    assert empty.latest(old_end, rows_max=None) is old_end


def test_delivery_tags_must_increase():
    ledger = filled(2)
    with pytest.raises(AssertionError):
        ledger.receive(delivery_tag=5, row="late")


def test_an_end_past_what_was_received_is_refused():
    ledger = filled(2)
    with pytest.raises(AssertionError):
        ledger.rows(ledger.initial(), Offset("s", 3))
    with pytest.raises(AssertionError):
        ledger.commit(Offset("s", 3))


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(1, 4)), max_size=30))
def test_every_delivery_is_planned_once_and_acked_in_order(steps):
    """Spark's loop: deliveries arrive, a batch of at most rows_max is planned, then committed.
    Every row comes out exactly once, in order, and acks never go backwards."""
    ledger = Ledger("s")
    start, tag, seen, acked = ledger.initial(), 0, [], 0
    for arrivals, rows_max in steps:
        for _ in range(arrivals):
            tag += 1
            ledger.receive(tag, tag)
        end = ledger.latest(start, rows_max)
        if end == start:
            continue
        batch = ledger.rows(start, end)
        assert 0 < len(batch) <= rows_max
        seen += batch
        ack = ledger.commit(end)
        assert ack is not None and ack > acked
        acked, start = ack, end
    assert seen == list(range(1, len(seen) + 1))
    assert ledger.committed == len(seen) and ledger.received == tag


def test_source_options_default_prefetch_to_twice_the_batch_within_amqp_limits():
    from pipeline.options import SourceOptions
    base = {"url": "amqp://localhost", "queue": "q"}
    assert SourceOptions.parse({**base, "maxMessagesPerBatch": "300"}).prefetch == 600
    assert SourceOptions.parse({**base, "maxMessagesPerBatch": "50000"}).prefetch == 65_535
    with pytest.raises(ValueError, match="prefetch must be at most 65535"):
        SourceOptions.parse({**base, "prefetch": "70000"})
    with pytest.raises(ValueError, match="needs option 'queue'"):
        SourceOptions.parse({"url": "amqp://localhost"})
