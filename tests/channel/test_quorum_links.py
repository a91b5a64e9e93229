"""A channel's links to its quorum queues: a quorum host that restarted is the target's loss."""
from __future__ import annotations

from actors.messages.channel_queue import Get
from actors.messages.quorum import NotQueueLeader, QueueLeader, ResendFrom
from actors.placement import QUORUM_HOME_PREFIX
from actors.channel.quorum_links import QuorumLinks
from actors.quorum.names import member_id
from actors.runtime.address import Address
from effects import Send

QUEUE = Address(f"{QUORUM_HOME_PREFIX}u1", "q")
NODES = ("n1@h", "n2@h", "n3@h")


def test_a_call_to_a_member_whose_host_restarted_goes_again_once_it_leads_again():
    links = QuorumLinks(lambda home: NODES, retry_ticks=100)
    links.route([Send(QUEUE, Get(1, False))])
    leader = Address.parse(member_id(NODES[0], "u1"))
    assert links.receive(leader, QueueLeader(str(leader), 3))[2] == []  # news of its term only
    links.host_restarted(Address.parse(member_id(NODES[1], "u1")).host)  # another node's host
    assert links.receive(leader, QueueLeader(str(leader), 4))[2] == []
    links.host_restarted(leader.host)
    assert links.receive(leader, QueueLeader(str(leader), 5))[2] == [Send(leader, Get(1, False))]


def test_a_leader_heard_from_after_its_queue_was_deleted_says_nothing_to_the_channel():
    """A channel's FindLeader answered after the queue's deletion reached the channel (seen in
    3-node declare/delete churn): the channel once took the QueueLeader for a message of its own,
    did not know it and closed with 541."""
    links = QuorumLinks(lambda home: NODES, retry_ticks=100)
    links.route([Send(QUEUE, Get(1, False))])
    leader = Address.parse(member_id(NODES[0], "u1"))
    links.forget(QUEUE)
    assert links.receive(leader, QueueLeader(str(leader), 3)) == (leader, [], [])
    assert links.receive(leader, NotQueueLeader(None, 3, None)) == (leader, [], [])
    assert links.receive(leader, ResendFrom(7)) == (leader, [], [])
