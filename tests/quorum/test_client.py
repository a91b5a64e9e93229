"""The channel-side client of a quorum queue, message by message: what it sends the members and what
it hands up to the channel, exactly."""
from __future__ import annotations

from actors.messages.calls import Reply
from actors.messages.channel_queue import (
    Cancel, ChannelDown, Confirm, Consume, ConsumerCancelled, Deliver, Get, GetResult, Grant, Publish, Published,
    Rejected, Settle,
)
from actors.messages.quorum import ConsumerResync, NotQueueLeader, QueueLeader, ResendFrom
from actors.quorum.client import QuorumClient
from effects import Send
from persist.classic.message import Message

A, B, C = "n1:quorum/qq:u", "n2:quorum/qq:u", "n3:quorum/qq:u"


def published(seq: int, body: bytes) -> Published:
    return Published(seq, "x", "rk", b"h", body)


def delivered(*msg_ids: int) -> Deliver:
    return Deliver("t", [Message(i, False, "x", "rk", b"h", b"m%d" % i) for i in msg_ids])


def client(**kwargs) -> QuorumClient:
    return QuorumClient([A, B, C], **kwargs)


def test_publishes_are_numbered_per_queue_and_confirms_map_back_to_channel_seqs():
    q = client()
    # channel confirm seqs 5 and 9 (others went to other queues), and one without confirms (0)
    q.send(Publish([published(5, b"a"), published(0, b"b"), published(9, b"c")]))
    assert q.take() == ([Send(A, Publish([published(1, b"a"), published(2, b"b"), published(3, b"c")]), 3)], [])
    q.receive(A, Confirm(2))
    assert q.take() == ([], [Confirm(5)])
    q.receive(A, Rejected([3]))
    q.receive(A, Confirm(3))
    assert q.take() == ([], [Rejected([9])])  # nothing left to confirm: no Confirm up
    assert not q.outstanding()


def test_a_confirm_of_untracked_messages_only_frees_them():
    q = client()
    q.send(Publish([published(0, b"a")]))
    q.take()
    q.receive(A, Confirm(1))
    assert q.take() == ([], []) and not q.unconfirmed


def test_a_new_leader_gets_resyncs_the_call_in_progress_and_every_unconfirmed_message():
    q = client()
    q.send(Consume(1, "t", True, 10, False, {}))
    q.receive(A, Reply(1))
    q.receive(A, delivered(0, 1, 2))
    q.send(Settle([0], [], [2]))
    q.send(Publish([published(1, b"a"), published(2, b"b")]))
    q.send(Get(2, True))
    q.take()
    q.receive(B, QueueLeader(B, 2))
    out, up = q.take()
    assert up == []
    assert out == [Send(B, ConsumerResync("t", [1], [0], [2])), Send(B, Get(2, True)),
                   Send(B, Publish([published(1, b"a"), published(2, b"b")]), 2)]
    assert (q.target, q.term) == (B, 2)
    q.send(Publish([published(3, b"c")]))
    assert q.take()[0] == [Send(B, Publish([published(3, b"c")]), 1)]  # numbering goes on


def test_settlements_are_remembered_for_one_resync_only():
    q = client()
    q.send(Consume(1, "t", True, 10, False, {}))
    q.receive(A, Reply(1))
    q.receive(A, delivered(0, 1))
    q.send(Settle([0, 1], [], []))
    q.receive(B, QueueLeader(B, 1))
    q.receive(C, QueueLeader(C, 2))
    assert q.take()[0][-1] == Send(C, ConsumerResync("t", [], [], []))


def test_stale_leader_news_never_switches_back():
    q = client()
    q.receive(B, QueueLeader(B, 5))
    q.take()
    q.receive(A, QueueLeader(A, 4))
    q.receive(A, NotQueueLeader(A, 4, None))
    q.receive(B, QueueLeader(B, 5))  # the same news twice
    assert q.take() == ([], []) and (q.target, q.term, q.switches) == (B, 5, 1)


def test_a_redirect_switches_and_passes_on_what_was_refused():
    q = client()
    settle, grant = Settle([3], [], []), Grant("t", 2)
    q.receive(A, NotQueueLeader(B, 1, settle))
    assert q.take() == ([Send(B, settle)], [])
    q.receive(A, NotQueueLeader(B, 1, grant))  # the old leader refused more: straight on
    assert q.take() == ([Send(B, grant)], [])


def test_without_a_leader_the_client_waits_then_tries_the_next_member():
    q = client(retry_ticks=3)
    q.send(Publish([published(1, b"a")]))
    q.take()
    q.receive(A, NotQueueLeader(None, 1, None))  # an election runs
    q.tick()
    q.tick()
    assert q.take() == ([], [])
    q.tick()
    assert q.take() == ([Send(B, Publish([published(1, b"a")]), 1)], [])


def test_an_idle_client_never_retries():
    q = client(retry_ticks=1)
    for _ in range(5):
        q.tick()
    assert q.take() == ([], []) and q.target == A


def test_resend_from_a_gap_and_renumbering_when_the_queue_forgot_us():
    q = client()
    q.send(Publish([published(1, b"a"), published(2, b"b"), published(3, b"c")]))
    q.take()
    q.receive(A, ResendFrom(2))
    assert q.take() == ([Send(A, Publish([published(2, b"b"), published(3, b"c")]), 2)], [])
    q.receive(A, Confirm(1))
    q.receive(A, ResendFrom(1))  # the queue lost our sequence: number again from 1
    out, up = q.take()
    assert up == [Confirm(1)]
    assert out == [Send(A, Publish([published(1, b"b"), published(2, b"c")]), 2)]
    q.receive(A, Confirm(2))
    assert q.take() == ([], [Confirm(3)])


def test_deliveries_and_replies_go_up_unchanged():
    q = client()
    q.send(Consume(1, "t", True, 10, False, {}))
    reply = Reply(1)
    q.receive(A, reply)
    q.receive(A, delivered(4))
    q.receive(A, ConsumerCancelled("t"))
    assert q.take()[1] == [reply, delivered(4), ConsumerCancelled("t")]
    assert q.consumers == {}


def test_a_get_with_ack_is_held_for_the_resync_until_settled():
    q = client()
    q.send(Get(7, True))
    got = Reply(7, GetResult(Message(3, False, "x", "rk", b"h", b"m"), 0))
    q.receive(A, got)
    q.receive(B, QueueLeader(B, 1))
    assert q.take()[0][-1] == Send(B, ConsumerResync("get:7", [3], [], []))
    q.send(Settle([3], [], []))
    assert "get:7" not in q.consumers


def test_a_closing_channel_says_goodbye_to_every_new_leader():
    q = client()
    q.send(Cancel(1, "t"))
    q.send(ChannelDown())
    q.take()
    q.receive(A, NotQueueLeader(C, 3, ChannelDown()))
    assert q.take()[0] == [Send(C, Cancel(1, "t")), Send(C, ChannelDown())]
