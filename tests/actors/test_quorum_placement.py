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


UIDS = [f"{i:012x}" for i in range(4000)]
BY_SLOT = {quorum_slot(uid): uid for uid in UIDS}


@pytest.mark.parametrize("hosts", [1, 2, 3, 5])
def test_slots_are_dealt_to_the_hosts_in_turn(hosts: int) -> None:
    assert sorted(BY_SLOT) == list(range(QUORUM_SLOTS))
    for slot, uid in BY_SLOT.items():
        assert quorum_kind(uid, hosts) == quorum_kinds(hosts)[slot % hosts]


def test_one_host_holds_everything() -> None:
    assert {quorum_kind(uid, 1) for uid in UIDS} == {"quorum"}


def test_many_queues_spread_evenly() -> None:
    counts = Counter(quorum_kind(uuid.uuid4().hex[:12], 4) for _ in range(4000))  # as uids are made
    assert set(counts) == {"quorum", "quorum1", "quorum2", "quorum3"}
    assert min(counts.values()) > 800  # 1000 each expected


def test_member_and_manager_addresses_follow_the_configured_hosts() -> None:
    uid = BY_SLOT[1]
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


def test_a_data_dir_placed_over_n_hosts_refuses_another_n() -> None:
    from actors.quorum.host import check_layout
    from tests.sim.simdisk import SimDisk
    disk = SimDisk()
    check_layout(disk, 2, index=1)  # host 1 reads it, host 0 writes it
    assert not disk.exists("layout")
    check_layout(disk, 2, index=0)
    check_layout(disk, 2, index=1)
    with pytest.raises(RuntimeError, match="placed over 2 quorum hosts; quorum_hosts = 1"):
        check_layout(disk, 1, index=0)
