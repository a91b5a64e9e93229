"""Where a node's quorum members live (actors/placement.py, actors/quorum/names.py): hash slots of
the queue's uid dealt over the node's quorum hosts; host 0 keeps the name a node with one had."""
from __future__ import annotations

import uuid
import zlib
from collections import Counter

import pytest

from actors.placement import QUORUM_SLOTS, quorum_kind, quorum_kinds, quorum_slot
from actors.quorum import names


def test_kinds_keep_host_0_named_as_before() -> None:
    assert quorum_kinds(1) == ("quorum",)
    assert quorum_kinds(3) == ("quorum", "quorum1", "quorum2")


def test_the_slot_is_a_crc32_of_the_uid_the_same_in_every_process() -> None:
    uid = "1f3a9b2c4d5e"
    assert quorum_slot(uid) == zlib.crc32(uid.encode()) % QUORUM_SLOTS == quorum_slot(uid)


@pytest.mark.parametrize("hosts", [1, 2, 3, 5])
def test_slots_are_dealt_to_the_hosts_in_turn(hosts: int) -> None:
    for slot in range(QUORUM_SLOTS):
        uid = next(u for u in (uuid.uuid4().hex[:12] for _ in range(10_000)) if quorum_slot(u) == slot)
        assert quorum_kind(uid, hosts) == quorum_kinds(hosts)[slot % hosts]


def test_one_host_holds_everything() -> None:
    assert {quorum_kind(uuid.uuid4().hex[:12], 1) for _ in range(200)} == {"quorum"}


def test_many_queues_spread_evenly() -> None:
    counts = Counter(quorum_kind(uuid.uuid4().hex[:12], 4) for _ in range(4000))
    assert set(counts) == {"quorum", "quorum1", "quorum2", "quorum3"}
    assert min(counts.values()) > 800  # 1000 each expected


def test_member_and_manager_addresses_follow_the_configured_hosts() -> None:
    uid = next(u for u in (uuid.uuid4().hex[:12] for _ in range(10_000)) if quorum_slot(u) % 2 == 1)
    try:
        names.configure(2)
        assert names.member_id("n1@box", uid) == f"n1@box:quorum1/qq:{uid}"
        assert names.manager_id("n1@box", uid) == "n1@box:quorum1/members"
        assert names.host_names("n1@box") == ["n1@box:quorum", "n1@box:quorum1"]
        assert names.quorum_process_kinds() == ("quorum", "quorum1", "wal")
    finally:
        names.configure(1)
    assert names.member_id("n1@box", uid) == f"n1@box:quorum/qq:{uid}"
    assert names.quorum_process_kinds() == ("quorum",)
