"""Confirm holding in the classic queue core (THE ORDERING RULE of durable queues): a queue made
with `hold_confirms` returns no Confirm while it takes publishes; `sync_started()` sets aside what
the group commit's syncs will cover and `flushed()`, which the shell calls after those syncs,
returns it, the highest seq per channel. Exact effects."""
from __future__ import annotations

from actors.messages.calls import Reply
from actors.messages.channel_queue import Confirm, ConsumerCancelled, Deliver, Rejected
from actors.messages.node import Dispose
from actors.queue.core import ClassicQueue
from effects import Send
from tests.queue.test_core import msg, pub


def durable(**arguments) -> ClassicQueue:
    return ClassicQueue("/", "q", arguments=arguments, hold_confirms=True)


def test_publishes_are_not_confirmed_until_flushed_then_once_per_channel_at_the_highest_seq():
    q = durable()
    assert q.publish("P", [pub(b"a", 1), pub(b"b", 2)]) == []
    assert q.publish("R", [pub(b"c", 7)]) == []
    assert q.publish("P", [pub(b"d", 3)]) == []
    assert q.flushed() == []  # no sync was started: nothing is covered
    q.sync_started()
    assert q.flushed() == [Send("P", Confirm(3)), Send("R", Confirm(7))]
    assert q.flushed() == []  # released once


def test_publishes_taken_while_a_sync_runs_wait_for_the_next_one():
    q = durable()
    q.publish("P", [pub(b"a", 1)])
    q.sync_started()
    q.publish("P", [pub(b"b", 2)])  # written after the sync was asked for: not covered by it
    q.publish("R", [pub(b"c", 5)])
    assert q.flushed() == [Send("P", Confirm(1))]
    q.sync_started()
    assert q.flushed() == [Send("P", Confirm(2)), Send("R", Confirm(5))]


def test_a_queue_without_hold_confirms_confirms_at_once_and_has_nothing_held():
    q = ClassicQueue("/", "q")
    assert q.publish("P", [pub(b"a", 1)]) == [Send("P", Confirm(1))]
    assert q.flushed() == []


def test_deliveries_are_not_held_only_the_confirm_is():
    q = durable()
    assert q.consume("C", "t", ack_required=True, credit=10) == []
    assert q.publish("P", [pub(b"a", 1)]) == [Send("C", Deliver("t", [msg(1, b"a")]))]
    q.sync_started()
    assert q.flushed() == [Send("P", Confirm(1))]


def test_a_refused_publish_is_nacked_at_once_and_the_confirm_covering_it_is_held():
    q = durable(**{"x-max-length": 1, "x-overflow": "reject-publish"})
    # Rejected is never held: a refused message was never written; the held range covers seq 2
    # too, and the channel's tracker nacks it because Rejected came first
    assert q.publish("P", [pub(b"a", 1), pub(b"b", 2)]) == [Send("P", Rejected([2]))]
    q.sync_started()
    assert q.flushed() == [Send("P", Confirm(2))]


def test_publishes_without_a_seq_hold_nothing():
    q = durable()
    assert q.publish("P", [pub(b"a")]) == []
    q.sync_started()
    assert q.flushed() == []


def test_dispose_releases_what_is_held_after_the_cancels_and_before_the_reply():
    """The shell flushed the storage before it runs a Dispose's effects, so the held confirms are
    true by then; the node's reply comes last."""
    q = durable()
    q.consume("C", "t", ack_required=True, credit=0)
    assert q.publish("P", [pub(b"a", 4)]) == []
    assert q.handle("node", Dispose(9, False, False)) == [
        Send("C", ConsumerCancelled("t")), Send("P", Confirm(4)), Send("node", Reply(9, 1))]
    assert q.deleted
