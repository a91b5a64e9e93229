"""SetQueueMembers: a quorum queue's record follows its Raft membership changes, and a change meant
for an earlier incarnation of the queue (deleted and declared again) changes nothing."""
from __future__ import annotations

import random

from metadata.changes import QueueMembersSet
from metadata.commands import PutQueue, RemoveQueue, SetQueueMembers
from metadata.registry import Registry

Q = {"x-queue-type": "quorum"}


def declared(home: str = "quorum!u1") -> Registry:
    reg = Registry(random.Random(1))
    rec, _ = reg.apply_command(PutQueue("/", "q", True, False, False, Q, home=home, members=("a", "b", "c"),
                                        created_ms=5))
    assert rec.members == ("a", "b", "c")
    return reg


def test_members_change_and_every_copy_follows() -> None:
    reg = declared()
    rec, changes = reg.apply_command(SetQueueMembers("/", "q", "quorum!u1", ("a", "b", "c", "d")))
    assert changes == [QueueMembersSet("/", "q", ("a", "b", "c", "d"))]
    assert rec.members == ("a", "b", "c", "d") and rec.home == "quorum!u1" and rec.created_ms == 5
    replica = Registry(random.Random(2))
    replica.apply(reg.snapshot())
    assert replica.queue("/", "q").members == ("a", "b", "c", "d")
    replica.apply([QueueMembersSet("/", "q", ("b", "d"))])
    assert replica.queue("/", "q").members == ("b", "d")


def test_no_change_no_record() -> None:
    reg = declared()
    rec, changes = reg.apply_command(SetQueueMembers("/", "q", "quorum!u1", ("a", "b", "c")))
    assert changes == [] and rec.members == ("a", "b", "c")


def test_another_incarnation_or_no_queue_is_left_alone() -> None:
    reg = declared()
    assert reg.apply_command(SetQueueMembers("/", "q", "quorum!old", ("a",))) == (None, [])
    assert reg.apply_command(SetQueueMembers("/", "nope", "quorum!u1", ("a",))) == (None, [])
    assert reg.apply_command(SetQueueMembers("/nope", "q", "quorum!u1", ("a",))) == (None, [])
    assert reg.apply_command(SetQueueMembers("/", "q", "quorum!u1", ())) == (None, [])
    reg.apply_command(RemoveQueue("/", "q"))
    assert reg.apply_command(SetQueueMembers("/", "q", "quorum!u1", ("a",))) == (None, [])
    assert reg.queue("/", "q") is None


def test_a_classic_queue_has_no_members_to_set() -> None:
    reg = Registry(random.Random(1))
    reg.apply_command(PutQueue("/", "c", True, False, False, {}, home="n1:queue0"))
    assert reg.apply_command(SetQueueMembers("/", "c", "n1:queue0", ("a",))) == (None, [])
