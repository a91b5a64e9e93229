"""The WAL link's cores (actors/raft/wal_link.py): numbering and the window, which acks count,
fencing by epochs, what a WAL restart resends, and the rollover's round."""
from __future__ import annotations

from actors.messages.wal import WalAck, WalAppend, WalRoll, WalRolled
from actors.raft.wal_link import LinkCore, WalServerCore

HOSTS = ("n:quorum", "n:quorum1")


def test_batches_are_numbered_and_the_window_bounds_them() -> None:
    link = LinkCore("n:quorum1", host_epoch=7, wal_epoch=100, window=2)
    first = link.send(b"a", "p1")
    assert first == WalAppend("n:quorum1", 7, 100, 1, b"a")
    assert link.can_send()
    link.send(b"b", "p2")
    assert not link.can_send() and link.last_seq() == 2


def test_an_ack_makes_durable_every_batch_up_to_it_in_order() -> None:
    link = LinkCore("n:quorum1", 7, 100)
    for records in (b"a", b"b", b"c"):
        link.send(records, records)
    assert [s.payload for s in link.ack(WalAck(7, 100, 2))] == [b"a", b"b"]
    assert [s.payload for s in link.ack(WalAck(7, 100, 2))] == []  # again: nothing new
    assert list(link.inflight) == [3]


def test_acks_of_another_host_or_wal_incarnation_count_for_nothing() -> None:
    link = LinkCore("n:quorum1", 7, 100)
    link.send(b"a", None)
    assert link.ack(WalAck(6, 100, 1)) == []  # for this host's predecessor (its PUSH queue's leftovers)
    assert link.ack(WalAck(7, 99, 1)) == []  # from a WAL incarnation this link no longer sends to
    assert list(link.inflight) == [1]


def test_a_new_wal_gets_every_batch_in_flight_again_in_order() -> None:
    link = LinkCore("n:quorum1", 7, 100)
    link.send(b"a", None)
    link.send(b"b", None)
    link.ack(WalAck(7, 100, 1))
    assert link.wal_started(200) == [WalAppend("n:quorum1", 7, 200, 2, b"b")]
    assert link.wal_started(200) == []  # told twice (its fence answer and its WalStarted): once
    assert link.ack(WalAck(7, 100, 2)) == []  # the old WAL's late ack
    assert len(link.ack(WalAck(7, 200, 2))) == 1


def test_the_wal_takes_frames_of_its_epoch_from_the_registered_host_incarnation() -> None:
    wal = WalServerCore(100, HOSTS)
    assert wal.accept(WalAppend("n:quorum1", 7, 100, 1, b"a"))  # first heard: registered
    assert not wal.accept(WalAppend("n:quorum1", 8, 100, 1, b"a"))  # another incarnation
    assert not wal.accept(WalAppend("n:quorum1", 7, 99, 2, b"a"))  # meant for an old WAL
    assert not wal.accept(WalAppend("n:other", 7, 100, 1, b"a"))  # not a quorum host of this node


def test_a_fence_refuses_the_predecessors_frames_from_then_on() -> None:
    wal = WalServerCore(100, HOSTS)
    assert wal.accept(WalAppend("n:quorum", 7, 100, 5, b"x"))
    assert wal.fence("n:quorum", 8) == (100, 0)
    assert not wal.accept(WalAppend("n:quorum", 7, 100, 6, b"stale"))
    assert wal.accept(WalAppend("n:quorum", 8, 100, 1, b"new"))


def test_one_ack_per_host_incarnation_for_its_newest_frame() -> None:
    wal = WalServerCore(100, HOSTS)
    frames = [WalAppend("n:quorum", 7, 100, 1, b""), WalAppend("n:quorum1", 3, 100, 4, b""),
              WalAppend("n:quorum", 7, 100, 2, b"")]
    assert wal.written(frames) == [("n:quorum", WalAck(7, 100, 2)), ("n:quorum1", WalAck(3, 100, 4))]


def test_a_rollover_ends_once_every_host_has_rolled() -> None:
    wal = WalServerCore(100, HOSTS)
    wal.fence("n:quorum", 1)
    wal.fence("n:quorum1", 2)
    assert wal.start_roll(5) == [("n:quorum", WalRoll(100, 5)), ("n:quorum1", WalRoll(100, 5))]
    assert not wal.rolled(WalRolled("n:quorum", 1, 100, 5))
    assert not wal.rolled(WalRolled("n:quorum1", 9, 100, 5))  # a dead incarnation's answer
    assert not wal.rolled(WalRolled("n:quorum1", 2, 100, 4))  # another rollover's
    assert wal.fence("n:quorum1", 3) == (100, 5)  # restarted meanwhile: told to roll over
    assert wal.rolled(WalRolled("n:quorum1", 3, 100, 5))
    assert wal.rolling == 0 and wal.fence("n:quorum", 4) == (100, 0)


def test_a_batch_travels_as_a_raw_frame_its_records_read_in_place() -> None:
    from actors.messages.runtime import RAW_FRAME
    from actors.messages.wal import append_frame, read_append
    frame, start = append_frame("n:quorum1", 7, 100, 3, [b"rec", b"ords"])
    assert frame[0] == RAW_FRAME and frame[start:] == b"records"
    msg = read_append(frame)
    assert (msg.host, msg.host_epoch, msg.wal_epoch, msg.seq) == ("n:quorum1", 7, 100, 3)
    assert isinstance(msg.records, memoryview) and msg.records.obj is frame and bytes(msg.records) == b"records"
