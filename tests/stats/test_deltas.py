"""The management sampling as changes (actors/stats/deltas.py, sample.py's HostTables, rates.py's
`update`): a collector gets every row once, then only the rows of the objects touched since (or
settling, or unsettled) and the keys dropped since; the node's tables and rates follow, and an idle
object costs nothing and shows rate 0."""
from __future__ import annotations

from types import SimpleNamespace

from actors.stats.deltas import Changes
from actors.stats.rates import Rates
from actors.stats.sample import HostTables, merge, rate_values

A, B, C = ("/", "a"), ("/", "b"), ("/", "c")


def changes(**kw) -> Changes:
    c = Changes("e1", settle_ms=1000, **kw)
    for key in (A, B, C):
        c.touch(key, 0)
    return c


def test_a_first_ask_or_another_epoch_gets_everything_then_only_what_changed():
    c = changes()
    assert c.since("", -1, 0) == (True, [], [])
    assert c.since("e0", 3, 0) == (True, [], [])  # the host restarted since
    version = c.version
    c.touch(B, 5000)
    assert c.since("e1", version, 5000) == (False, [B], [])
    assert c.since("e1", c.version, 5000) == (False, [B], [])  # settling: reported again for settle_ms
    assert c.since("e1", c.version, 6001) == (False, [], [])  # idle: nothing


def test_an_unsettled_row_is_reported_until_the_reporter_says_it_settled():
    c = changes()
    c.unsettled(C, True)
    assert c.since("e1", c.version, 9000) == (False, [C], [])
    c.unsettled(C, False)
    assert c.since("e1", c.version, 9000) == (False, [], [])


def test_dropped_keys_are_reported_once_and_a_collector_too_far_behind_gets_everything():
    c = changes(drops_max=2)
    version = c.version
    c.drop(A)
    assert c.since("e1", version, 5000) == (False, [], [A])
    assert c.since("e1", c.version, 5000) == (False, [], [])
    c.drop(B)
    c.drop(C)  # the drop of A is forgotten: a collector that has not seen it must start over
    assert c.since("e1", version, 5000) == (True, [], [])
    assert c.recent(5000) == []


def answer(host, queues, *, full=False, gone=(), epoch="e1", version=1):
    return SimpleNamespace(host=host, queues=queues, raft=[], full=full, gone=list(gone), raft_gone=[],
                           epoch=epoch, version=version, connections=[], channels=[], consumers=[], flow=[],
                           totals={}, exchanges=[], wal={}, node={})


def row(key, messages, publish):
    return {"vhost": key[0], "name": key[1], "messages": messages, "message_stats": {"publish": publish}}


def test_the_node_keeps_each_hosts_rows_and_rates_only_what_changed():
    tables, rates = HostTables(), Rates()

    def round_(at_ms, answers):
        changed, gone = {}, set()
        for a in answers:
            tables.apply(a, changed, gone)
        sample = merge(at_ms, answers, tables)
        rates.update(at_ms, rate_values(sample, changed), {("queue", *k) for k in gone})
        return sample, changed, gone

    sample, changed, _ = round_(0, [answer("h", [row(A, 1, 10), row(B, 0, 0)], full=True)])
    assert set(sample.queues) == {A, B} and set(changed) == {A, B}
    assert tables.since("h") == ("e1", 1)
    sample, changed, _ = round_(5000, [answer("h", [row(A, 3, 20)], version=2)])
    assert sample.queues[B] == row(B, 0, 0) and set(changed) == {A}  # b idle: kept, not sent
    assert rates.rates(("queue", "/", "a"))["publish"] == 2.0
    assert rates.still(("queue", "/", "b")) and rates.rates(("queue", "/", "b"))["publish"] == 0.0
    sample, _, gone = round_(10000, [answer("h", [], gone=[B], version=3)])
    assert set(sample.queues) == {A} and gone == {B}
    assert rates.rates(("queue", "/", "b")) == {} and rates.rates(("queue", "/", "a"))["publish"] == 0.0
    sample, _, _ = round_(15000, [answer("h", [row(C, 7, 1)], full=True, epoch="e2", version=1)])  # restarted
    assert set(sample.queues) == {C} and tables.since("h") == ("e2", 1)
    assert rates.rates(("vhost", "/"))["messages"] == 0.8  # the sums over every queue: 3 -> 7 in 5 s


def test_dropped_keys_are_forgotten_once_older_than_every_collector_needs():
    """A host that deletes queues for an hour keeps only the last `drops_keep_ms` of their keys (the
    soak: every key ever deleted, up to 65,536, stayed); a collector that asks in time sees each
    drop once, one that was away longer starts over."""
    c = changes(drops_keep_ms=60_000)
    behind = c.version
    for n in range(1000):
        at = (n + 2) * 1000  # a deletion a second, once A, B and C have settled
        c.drop(("/", f"gone{n}"), at)
        assert c.since("e1", c.version - 1, at) == (False, [], [("/", f"gone{n}")])
    assert len(c._drops) <= 61
    assert c.since("e1", behind, 1_000_000)[0] is True  # away for 1000 s: everything
    assert c.since("e1", c.version, 1_000_000) == (False, [], [])
