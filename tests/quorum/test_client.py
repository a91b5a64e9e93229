"""The channel-side client of a quorum queue, message by message: what it sends the members and what
it hands up to the channel, exactly."""
from __future__ import annotations

from actors.messages.calls import Reply
from actors.messages.channel_queue import (
    Cancel, ChannelDown, Confirm, Consume, ConsumerCancelled, Deliver, Get, GetResult, Grant, Publish, Published,
    Rejected, Settle,
)
from actors.messages.quorum import ConsumerResync, FindLeader, NotQueueLeader, QueueLeader, ResendFrom
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
    assert out == [Send(B, ConsumerResync("t", [1], [0], [2], 2)), Send(B, Get(2, True)),
                   Send(B, Publish([published(1, b"a"), published(2, b"b")]), 2)]
    assert (q.target, q.term) == (B, 2)
    q.send(Publish([published(3, b"c")]))
    assert q.take()[0] == [Send(B, Publish([published(3, b"c")]), 1)]  # numbering goes on


def test_settlements_are_remembered_across_switches_up_to_a_bound():
    """A switch may go to a member that does not lead (a retry): it must not cost the memory."""
    q = client(settled_memory=2)
    q.send(Consume(1, "t", True, 10, False, {}))
    q.receive(A, Reply(1))
    q.receive(A, delivered(0, 1, 2))
    q.send(Settle([0, 1, 2], [], []))
    q.receive(B, QueueLeader(B, 1))
    q.receive(C, QueueLeader(C, 2))
    assert q.take()[0][-1] == Send(C, ConsumerResync("t", [], [1, 2], [], 2))


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


def test_without_a_word_from_the_target_the_client_asks_who_leads():
    q = client(retry_ticks=3)
    q.send(Publish([published(1, b"a")]))
    q.take()
    q.receive(A, NotQueueLeader(None, 1, None))  # an election runs
    q.tick()
    q.tick()
    assert q.take() == ([], [])
    q.tick()
    assert q.take() == ([Send(A, FindLeader()), Send(B, FindLeader()), Send(C, FindLeader())], [])
    q.receive(A, NotQueueLeader(None, 1, None))
    q.receive(B, QueueLeader(B, 2))
    assert q.take() == ([Send(B, Publish([published(1, b"a")]), 1)], [])


def test_a_slow_leader_that_still_leads_gets_nothing_twice():
    q = client(retry_ticks=1)
    q.receive(A, QueueLeader(A, 4))
    q.send(Publish([published(1, b"a")]))
    q.take()
    q.tick()
    q.take()
    q.receive(A, QueueLeader(A, 4))
    q.receive(B, NotQueueLeader(A, 4, None))
    assert q.take() == ([], []) and (q.term, q.switches) == (4, 0)  # the first news taught the term


def test_news_of_the_targets_term_resends_no_call_so_a_no_ack_get_is_applied_once():
    """A client starts at term 0 with its target right: the leader's probe, or a FindLeader answer
    while it is slow, names it in its term. A Get re-sent then was applied twice (a no-ack get
    dequeued a second message that nobody received)."""
    for news in (QueueLeader(A, 3), NotQueueLeader(A, 3, None)):
        q = client(retry_ticks=1)
        q.send(Get(1, False))
        q.send(Publish([published(1, b"a")]))
        q.take()
        q.receive(A if type(news) is QueueLeader else B, news)
        assert q.take() == ([], []) and (q.target, q.term, q.switches) == (A, 3, 0)
        q.receive(A, QueueLeader(A, 4))  # deposed and elected again, having refused nothing
        assert q.take() == ([], []) and q.term == 4


def test_a_target_whose_host_restarted_gets_what_it_lost_on_the_next_news():
    q = client(retry_ticks=1)
    q.send(Get(1, False))
    q.take()
    q.target_restarted()
    q.tick()
    assert q.take() == ([Send(A, FindLeader()), Send(B, FindLeader()), Send(C, FindLeader())], [])
    q.receive(A, QueueLeader(A, 2))  # elected again after its restart
    assert q.take() == ([Send(A, Get(1, False))], []) and q.switches == 1


def test_an_idle_client_never_retries():
    q = client(retry_ticks=1)
    for _ in range(5):
        q.tick()
    assert q.take() == ([], []) and q.target == A


def test_resend_from_a_gap_and_never_numbering_anew():
    q = client()
    q.send(Publish([published(1, b"a"), published(2, b"b"), published(3, b"c")]))
    q.take()
    q.receive(A, ResendFrom(2))
    assert q.take() == ([Send(A, Publish([published(2, b"b"), published(3, b"c")]), 2)], [])
    q.receive(A, Confirm(2))
    q.receive(A, ResendFrom(1))  # stale: the gap was filled meanwhile
    assert q.take() == ([Send(A, Publish([published(3, b"c")]), 1)], [Confirm(2)])


def test_what_the_target_refused_is_sent_again_when_it_leads_again_in_the_same_term():
    """A leader refuses during a leadership transfer that then times out: same member, same term."""
    q = client()
    q.receive(A, QueueLeader(A, 3))
    q.send(Publish([published(1, b"a")]))
    q.take()
    q.receive(A, NotQueueLeader(None, 3, None))
    q.receive(A, QueueLeader(A, 3))
    assert q.take() == ([Send(A, Publish([published(1, b"a")]), 1)], [])


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
    assert q.take()[0][-1] == Send(B, ConsumerResync("get:7", [3], [], [], 3))
    q.send(Settle([3], [], []))
    assert "get:7" not in q.consumers


def test_a_closing_channel_says_goodbye_to_every_new_leader():
    q = client()
    q.send(Cancel(1, "t"))
    q.send(ChannelDown())
    q.take()
    q.receive(A, NotQueueLeader(C, 3, ChannelDown()))
    assert q.take()[0] == [Send(C, Cancel(1, "t")), Send(C, ChannelDown())]


def test_a_consumer_being_added_is_not_resynced_and_a_cancel_of_a_cancelled_one_stays_quiet():
    q = client()
    q.send(Consume(1, "t", True, 10, False, {}))
    q.receive(A, Reply(1))
    q.send(Consume(2, "u", True, 10, False, {}))
    q.take()
    q.receive(B, QueueLeader(B, 2))
    sends, _ = q.take()
    assert sends[:2] == [Send(B, ConsumerResync("t", [], [], [], -1)), Send(B, Consume(2, "u", True, 10, False, {}))]
    q.receive(B, Reply(2))
    q.receive(B, delivered(0))
    q.send(Cancel(3, "t"))
    q.receive(B, Reply(3))
    q.take()
    q.receive(B, ConsumerCancelled("t"))  # the leader removed it while its channel was out of reach
    q.receive(B, ConsumerCancelled("u"))
    assert q.take() == ([], [ConsumerCancelled("u")]) and "t" not in q.consumers


def test_a_consumer_given_nothing_for_a_while_is_checked_and_one_the_leader_removed_is_cancelled():
    q = client(retry_ticks=1)
    q.send(Consume(1, "t", True, 10, False, {}))
    q.receive(A, Reply(1))
    q.send(Consume(2, "u", True, 10, False, {}))  # unanswered: not checked

    def checks() -> list:
        for _ in range(q.check_ticks):
            q.tick()
        return [s for s in q.take()[0] if type(s.msg) is ConsumerResync]
    q.tick()
    q.receive(A, delivered(0))  # given something: quiet again, and it holds it: in use
    assert checks() == []
    q.send(Settle([0], [], []))
    assert checks() == [Send(A, ConsumerResync("t", [], [], [], 0))]
    q.receive(A, ConsumerCancelled("t"))
    assert q.take() == ([], [ConsumerCancelled("t")])
    assert checks() == []


def test_a_delivery_repeated_by_a_new_leader_is_dropped():
    q = client()
    q.send(Consume(1, "t", True, 10, False, {}))
    q.receive(A, Reply(1))
    q.receive(A, delivered(4, 5))
    q.receive(B, QueueLeader(B, 1))
    q.take()
    q.receive(B, delivered(5, 6))  # B applied, as leader, an entry A had delivered
    q.receive(B, delivered(5))
    assert q.take()[1] == [delivered(6)] and q.duplicates == 2


def test_a_settle_refused_during_a_leadership_transfer_is_sent_once_the_target_leads_again():
    """The transfer times out: the same member leads on in the same term and announces nothing."""
    q = client(retry_ticks=2)
    q.receive(A, QueueLeader(A, 3))
    settle = Settle([7], [], [])
    q.receive(A, NotQueueLeader(None, 3, settle))
    q.take()
    q.tick()
    q.tick()
    assert q.take()[0] == [Send(A, FindLeader()), Send(B, FindLeader()), Send(C, FindLeader())]
    q.receive(A, QueueLeader(A, 3))
    assert q.take() == ([Send(A, settle)], [])
    assert not q.outstanding()
