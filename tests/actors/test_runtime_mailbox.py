"""The Runtime's mailboxes: local hand-over, one frame per batch, order, credit, crash isolation."""
from __future__ import annotations

import asyncio
import multiprocessing
from pathlib import Path

import pytest

from actors.runtime import envelope
from actors.runtime.address import Address
from actors.runtime.mailbox import Runtime
from tests.actors.messages import Note
from tests.waiting import async_until

deadline_s = 10.0


class Recorder:
    """Records what it receives; resolves `done` after `expect` messages."""

    def __init__(self, expect: int = 1) -> None:
        self.got: list[tuple[Address, str, object]] = []
        self.expect = expect
        self.done = asyncio.get_running_loop().create_future()

    def receive(self, sender: Address, msg: Note) -> None:
        self.got.append((sender, msg.kind, msg.body))
        if len(self.got) >= self.expect and not self.done.done():
            self.done.set_result(None)


class Crasher:
    def receive(self, sender, msg) -> None:
        raise ValueError("boom")


def directory(tmp_path: Path, *hosts: str) -> dict[str, str]:
    return {h: f"ipc://{tmp_path}/{h}" for h in hosts}


async def pair(tmp_path: Path, **credit) -> tuple[Runtime, Runtime]:
    d = directory(tmp_path, "a", "b")
    a, b = Runtime("a", d, **credit), Runtime("b", d, **credit)
    await a.start()
    await b.start()
    return a, b


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, deadline_s))


def test_address_round_trips_through_text() -> None:
    address = Address("queue0", "q:/:orders/x")
    assert str(address) == "queue0/q:/:orders/x"
    assert Address.parse(str(address)) == address
    with pytest.raises(ValueError):
        Address.parse("no-slash")


def test_envelope_round_trip_turns_lists_into_tuples() -> None:
    items = [("s", "t", Note("kind", [1, b"\x00raw", {"k": [2]}]), 3), ("s", "u", Note("k2", None), 0)]
    source, decoded = envelope.decode(envelope.encode("h", items))
    assert source == "h"
    assert decoded == [("s", "t", Note("kind", (1, b"\x00raw", {"k": (2,)})), 3), ("s", "u", Note("k2", None), 0)]


def test_typed_records_come_back_typed() -> None:
    """Per-message records (NamedTuples) and nested records (an Address, an AmqpError) decode as
    their own types, not as the plain tuples msgpack hands back."""
    from actors.messages.calls import Reply
    from actors.messages.channel_queue import Publish, Published
    from wire.errors import AmqpError
    publish = Publish([Published(1, "", "q", b"h", b"body")])
    reply = Reply(7, Note("x", Address("queue0", "q:/:a")), AmqpError(404, "no queue"))
    _, decoded = envelope.decode(envelope.encode("h", [("s", "t", publish, 1), ("s", "t", reply, 0)]))
    (_, _, got_publish, _), (_, _, got_reply, _) = decoded
    assert got_publish == publish and type(got_publish.messages[0]) is Published
    assert got_reply == reply and type(got_reply.value.body) is Address


def test_envelope_bodies_are_copies_that_outlive_the_frame() -> None:
    """Receivers decode straight out of ZeroMQ's buffer and then let it go: nothing decoded may
    point into it. Large bodies (16 KiB publishes) come out whole and in item order."""
    big = bytes(range(256)) * 64
    from actors.messages.channel_queue import Publish, Published, Settle
    items = [("ch:1", "q:/:q", Publish([Published(1, "", "q", b"h", big), Published(2, "", "q", b"h", big[::-1])]), 2),
             ("ch:1", "q:/:r", Settle([], [], []), 0)]
    frame = bytearray(envelope.encode("conn0", items))
    source, decoded = envelope.decode(frame)
    frame[:] = b"\x00" * len(frame)
    assert source == "conn0"
    assert decoded[0][2].messages[0].body == big and decoded[0][2].messages[1].body == big[::-1]
    assert decoded == [items[0], ("ch:1", "q:/:r", Settle((), (), ()), 0)]  # lists arrive as tuples


def test_a_remembered_header_is_the_one_capnp_builds_and_says_the_same(monkeypatch) -> None:
    """Small frames reuse the header of an earlier frame with the same actors, kinds and credit
    (and its reading); other values, or another credit, still come back as sent; the memos are
    bounded."""
    import msgpack
    monkeypatch.setattr(envelope, "_built", {})
    monkeypatch.setattr(envelope, "_read", {})
    monkeypatch.setattr(envelope, "memo_entries_max", 2)
    first = envelope.encode("h", [("s", "t", Note("a", 1), 1)])
    again = envelope.encode("h", [("s", "t", Note("b", 2), 1)])
    assert msgpack.unpackb(first)[0] == msgpack.unpackb(again)[0] == envelope._header("h", [("s", "t", Note("b", 2), 1)])[0]
    assert envelope.decode(first) == ("h", [("s", "t", Note("a", 1), 1)])
    assert envelope.decode(again) == ("h", [("s", "t", Note("b", 2), 1)])
    assert envelope.decode(envelope.encode("h", [("s", "t", Note("c", 3), 5)])) == ("h", [("s", "t", Note("c", 3), 5)])
    envelope.encode("h", [("s", "u", Note("d", 4), 0)])
    assert len(envelope._built) <= 2 and len(envelope._read) <= 2
    many = [("s", "t", Note("e", i), 0) for i in range(envelope.memo_items_max + 1)]
    assert envelope.decode(envelope.encode("h", many)) == ("h", many)  # built and read every time
    assert len(envelope._built) <= 2 and len(envelope._read) <= 2


def test_one_off_headers_are_not_remembered_and_repeated_ones_are(monkeypatch) -> None:
    """A churned channel's headers (its name in them) come a few times: the memos stay empty after
    thousands of them (they filled up in every host of a soak before), while a steady flow's
    header is remembered from its `memo_admit_after`th frame, encoded and read."""
    monkeypatch.setattr(envelope, "_built", {})
    monkeypatch.setattr(envelope, "_read", {})
    monkeypatch.setattr(envelope, "_sightings", {})
    for i in range(2000):
        items = [(f"ch:{i}", "q:/:a", Note("m", i), 1)]
        assert envelope.decode(envelope.encode("h", items)) == ("h", items)
    assert envelope._built == {} and envelope._read == {}
    for i in range(envelope.memo_admit_after):
        steady = [("ch:steady", "q:/:a", Note("m", i), 1)]
        assert envelope.decode(envelope.encode("h", steady)) == ("h", steady)
    assert len(envelope._built) == 1 and len(envelope._read) == 1
    assert len(envelope._sightings) <= envelope.memo_entries_max


def test_a_full_memo_forgets_its_oldest_header_and_keeps_the_newer(monkeypatch) -> None:
    """Full, a memo makes room for a new header by forgetting the one it took first, rather than
    forgetting everything (which let it grow to its bound, then emptied it, in every host)."""
    monkeypatch.setattr(envelope, "_built", {})
    monkeypatch.setattr(envelope, "_read", {})
    monkeypatch.setattr(envelope, "_sightings", {})
    monkeypatch.setattr(envelope, "memo_entries_max", 3)
    for target in ("a", "b", "c", "d"):
        for i in range(envelope.memo_admit_after):
            items = [("ch:1", f"q:/:{target}", Note("m", i), 1)]
            assert envelope.decode(envelope.encode("h", items)) == ("h", items)
    assert [heads[0][0][1] for heads in (key[1:] for key in envelope._built)] == ["q:/:b", "q:/:c", "q:/:d"]
    assert [heads[0][1] for _source, heads in envelope._read.values()] == ["q:/:b", "q:/:c", "q:/:d"]


@pytest.mark.parametrize("frame", [
    b"", b"\x92", b"\xc4\x00", b"\x92\xc4\x00\x90",  # empty, truncated, not a pair, empty header
    bytes(envelope.encode("h", [("s", "t", Note("k", b"x" * 100), 0), ("s", "t", Note("k", b"y"), 0)]))[:-1],
])
def test_a_malformed_envelope_is_an_error_not_a_partial_batch(frame: bytes) -> None:
    with pytest.raises(Exception):  # ValueError from msgpack or this module, capnp's own error
        envelope.decode(frame)


def test_an_envelope_whose_items_and_bodies_disagree_is_refused() -> None:
    import msgpack
    header, bodies = msgpack.unpackb(envelope.encode("h", [("s", "t", Note("k", 1), 0)]), use_list=False)
    with pytest.raises(ValueError, match="1 envelope items but 2 bodies"):
        envelope.decode(msgpack.packb((header, bodies + (("k", 2),))))


def test_an_unknown_message_tag_is_refused() -> None:
    import msgpack
    header, bodies = msgpack.unpackb(envelope.encode("h", [("s", "t", Note("k", 1), 0)]), use_list=False)
    with pytest.raises(ValueError, match="does not decode to a message"):
        envelope.decode(msgpack.packb((header.replace(b"Note", b"Nope"), bodies)))


def test_local_delivery_hands_over_the_same_object_later_and_in_order(tmp_path: Path) -> None:
    async def main():
        rt = Runtime("a", directory(tmp_path, "a"))
        await rt.start()
        rec = Recorder(expect=3)
        to = rt.spawn("rec", rec)
        me = Address("a", "me")
        body = {"big": [1, 2, 3]}
        rt.send(to, Note("k1", body), sender=me)
        rt.send(to, Note("k2", 2), sender=me)
        rt.send(to, Note("k3", 3), sender=me)
        assert rec.got == []  # never delivered inside send
        await rec.done
        assert [k for _, k, _ in rec.got] == ["k1", "k2", "k3"]
        assert rec.got[0][2] is body and rec.got[0][0] == me
        assert rt.frames_sent == 0  # local messages never touch a socket
        await rt.close()
    run(main())


class Relay:
    """Passes each note on to `to` (and to `remote`, if set), and tries a nested hand-over."""

    def __init__(self, runtime: Runtime, me: Address, to: Address, remote: Address | None = None) -> None:
        self.runtime, self.me, self.to, self.remote = runtime, me, to, remote

    def receive(self, sender: Address, msg: Note) -> None:
        self.runtime.send(self.to, Note(msg.kind + ">", msg.body), sender=self.me)
        if self.remote is not None:
            self.runtime.send(self.remote, msg, sender=self.me)
        self.runtime.dispatch_local()  # from inside a receive: must do nothing


def test_dispatch_local_runs_a_chain_of_local_hand_overs_now_in_order_and_leaves_remote_sends_to_the_flush(
        tmp_path: Path) -> None:
    async def main():
        a, b = await pair(tmp_path)
        far = Recorder(expect=2)
        far_at = b.spawn("far", far)
        end = Recorder(expect=2)
        end_at = a.spawn("end", end)
        middle_at = Address("a", "middle")
        a.spawn("middle", Relay(a, middle_at, end_at))
        first_at = Address("a", "first")
        a.spawn("first", Relay(a, first_at, middle_at, remote=far_at))
        me = Address("a", "me")
        a.send(first_at, Note("m1", 1), sender=me)
        a.send(first_at, Note("m2", 2), sender=me)
        a.send(end_at, Note("direct", 0), sender=me)
        a.dispatch_local()  # as a reader does once it has acted on a read
        # two relays deep in this one call, each link in send order
        assert [k for _, k, _ in end.got] == ["direct", "m1>>", "m2>>"]
        assert far.got == [] and a.frames_sent == 0  # the other host's notes wait for the turn's flush
        await far.done
        assert [k for _, k, _ in far.got] == ["m1", "m2"] and a.frames_sent == 1
        await a.close()
        await b.close()
    run(main())


def test_one_frame_per_destination_host_per_iteration_in_order(tmp_path: Path) -> None:
    async def main():
        a, b = await pair(tmp_path)
        r1, r2 = Recorder(expect=300), Recorder(expect=300)
        t1, t2 = b.spawn("r1", r1), b.spawn("r2", r2)
        s1, s2 = Address("a", "s1"), Address("a", "s2")
        for i in range(300):  # two senders, two receivers, one loop iteration
            a.send(t1, Note("m", i), sender=s1)
            a.send(t2, Note("m", [i, "x"]), sender=s2)
        await asyncio.gather(r1.done, r2.done)
        assert a.frames_sent == 1 and b.frames_received == 1
        assert [body for _, _, body in r1.got] == list(range(300))
        assert [body for _, _, body in r2.got] == [(i, "x") for i in range(300)]
        assert r1.got[0][0] == s1
        for i in range(3):  # three iterations -> three frames
            a.send(t1, Note("m", i), sender=s1)
            await asyncio.sleep(0)  # yields one loop iteration (not a timing wait)
        r1.expect, r1.done = 303, asyncio.get_running_loop().create_future()
        await r1.done
        assert a.frames_sent == 4
        await a.close()
        await b.close()
    run(main())


def test_what_a_callback_sends_once_its_host_stopped_goes_nowhere(tmp_path: Path) -> None:
    """A WAL flush scheduled before the host stopped runs after it and sends what its members
    queued (send_queued) ahead of its write: that goes nowhere, as the turn's flush does, rather
    than failing on the closed links (an AssertionError in every node's log at shutdown)."""
    async def main():
        a, b = await pair(tmp_path)
        to = b.spawn("r", Recorder())
        await a.close()
        a.send(to, Note("m", 1), sender=Address("a", "s"))
        a.send_queued()
        assert a.frames_sent == 0
        await b.close()
    run(main())


class ManualSink:
    """Acks credit only when told to (manual_credit)."""

    manual_credit = True

    def __init__(self) -> None:
        self.got: list[tuple[Address, object]] = []

    def receive(self, sender, msg) -> None:
        self.got.append((sender, msg.body))


class Source:
    def __init__(self) -> None:
        self.unblocked = asyncio.get_running_loop().create_future()

    def receive(self, sender, msg) -> None:
        pass

    def on_unblocked(self) -> None:
        self.unblocked.set_result(None)


settle_iterations = 50


async def _settle() -> None:
    """Give frames and credit in flight many loop iterations to arrive (used before asserting
    that something did NOT happen)."""
    for _ in range(settle_iterations):
        await asyncio.sleep(0)


def test_credit_blocks_sender_after_initial_and_unblocks_after_processed(tmp_path: Path) -> None:
    async def main():
        a, b = await pair(tmp_path)
        sink = ManualSink()
        to = b.spawn("sink", sink)
        source = Source()
        me = a.spawn("src", source)
        for i in range(399):
            a.send(to, Note("m", i), sender=me, credit=1)
        assert not a.blocked(me)
        a.send(to, Note("m", 399), sender=me, credit=1)
        assert a.blocked(me)
        assert a.flow_states()["src"]["state"] == "flow"
        assert a.flow_states()["src"]["blocked_on"] == ["b/sink"]
        # the receiver got everything but grants nothing until it says it processed
        await async_until(lambda: len(sink.got) >= 400, "400 notes at the sink", deadline_s, every_s=0)
        await _settle()
        assert a.blocked(me) and not source.unblocked.done()
        b.processed(to, me, 199)
        await _settle()
        assert a.blocked(me)  # grants leave in units of more_after (200)
        b.processed(to, me, 1)
        await source.unblocked
        assert not a.blocked(me)
        assert a.flow_states()["src"]["state"] == "flow"  # blocked within the last second
        await a.close()
        await b.close()
    run(main())


def test_processed_all_grants_everything_a_manual_actor_received_from_each_sender(tmp_path: Path) -> None:
    async def main():
        a, b = await pair(tmp_path)
        sink = ManualSink()
        to = b.spawn("sink", sink)
        source, other = Source(), Source()
        me, me2 = a.spawn("src", source), a.spawn("src2", other)
        for i in range(400):
            a.send(to, Note("m", i), sender=me, credit=1)
            a.send(to, Note("m", i), sender=me2, credit=1)
        assert a.blocked(me) and a.blocked(me2)
        await async_until(lambda: len(sink.got) >= 800, "800 notes at the sink", deadline_s, every_s=0)
        b.processed_all(to)
        await source.unblocked
        await other.unblocked
        b.processed_all(to)  # nothing left to grant
        await _settle()
        assert a.flow_states()["src"]["credit"] == {"b/sink": 400}
        await a.close()
        await b.close()
    run(main())


class DoneAtOnce:
    """A manual_credit actor that says it is done with everything from inside `receive`."""

    manual_credit = True

    def __init__(self, runtime: Runtime, me: Address) -> None:
        self.runtime, self.me = runtime, me

    def receive(self, sender, msg) -> None:
        self.runtime.processed_all(self.me)


def test_processed_all_inside_receive_covers_the_message_being_received(tmp_path: Path) -> None:
    async def main():
        a, b = await pair(tmp_path)
        to = Address(b.host, "sink")
        b.spawn("sink", DoneAtOnce(b, to))
        source = Source()
        me = a.spawn("src", source)
        a.send(to, Note("m", 0), sender=me, credit=400)  # all the credit in one message
        assert a.blocked(me)
        await source.unblocked  # its own credit came back: none stays pending with nothing to follow
        await a.close()
        await b.close()
    run(main())


def test_automatic_credit_keeps_a_long_stream_flowing(tmp_path: Path) -> None:
    async def main():
        a, b = await pair(tmp_path, credit_initial=40, credit_more_after=20)
        rec = Recorder(expect=1000)
        to = b.spawn("rec", rec)
        me = a.spawn("src", Source())
        sent = 0
        while sent < 1000:
            if a.blocked(me):
                await asyncio.sleep(0)
                continue
            a.send(to, Note("m", sent), sender=me, credit=1)
            sent += 1
        await rec.done
        assert [body for _, _, body in rec.got] == list(range(1000))
        await a.close()
        await b.close()
    run(main())


def test_credit_to_an_unknown_or_crashing_actor_comes_back(tmp_path: Path) -> None:
    async def main():
        a, b = await pair(tmp_path)
        b.spawn("crasher", Crasher())
        rec = Recorder()
        b.spawn("rec", rec)
        source = Source()
        me = a.spawn("src", source)
        a.send(Address("b", "nobody"), Note("m", 1), sender=me, credit=400)
        assert a.blocked(me)
        await source.unblocked
        source.unblocked = asyncio.get_running_loop().create_future()
        a.send(Address("b", "crasher"), Note("m", 1), sender=me, credit=400)
        a.send(Address("b", "rec"), Note("after", 2), sender=me)
        await source.unblocked
        await rec.done
        assert b.actor("crasher") is None  # crashed and removed, the host keeps running
        assert rec.got == [(me, "after", 2)]
        await a.close()
        await b.close()
    run(main())


def test_removing_an_actor_returns_the_credit_it_held(tmp_path: Path) -> None:
    async def main():
        a, b = await pair(tmp_path)
        sink = ManualSink()
        b.spawn("sink", sink)
        source = Source()
        me = a.spawn("src", source)
        a.send(Address("b", "sink"), Note("m", 1), sender=me, credit=400)
        await async_until(lambda: sink.got, "a note at the sink", deadline_s, every_s=0)
        b.remove("sink")
        await source.unblocked
        assert not a.blocked(me)
        await a.close()
        await b.close()
    run(main())


class Collector:
    """Collects every message; `arrived` resolves when `expect` have come."""

    def __init__(self, expect: int) -> None:
        self.got: list[object] = []
        self.expect = expect
        self.arrived = asyncio.get_running_loop().create_future()

    def receive(self, sender, msg) -> None:
        self.got.append(msg)
        if len(self.got) == self.expect:
            self.arrived.set_result(None)


def test_undelivered_says_whether_the_actor_was_removed_for_good(tmp_path: Path) -> None:
    async def main():
        a, b = await pair(tmp_path)
        b.spawn("deleted", Recorder())
        b.remove("deleted", gone=True)
        b.spawn("crashed", Recorder())
        b.remove("crashed")
        b.spawn("again", Recorder())
        b.remove("again", gone=True)
        again = b.spawn("again", Recorder())  # declared anew: a later removal is news again
        b.remove(again.name)
        collector = Collector(expect=4)
        me = a.spawn("src", collector)
        for name in ("deleted", "crashed", "nobody", "again"):
            a.send(Address("b", name), Note("m", name), sender=me)
        await collector.arrived
        assert [(msg.msg.body, msg.gone) for msg in collector.got] == [
            ("deleted", True), ("crashed", False), ("nobody", False), ("again", False)]
        await a.close()
        await b.close()
    run(main())


def _echo_process(endpoints: dict[str, str], ready) -> None:
    async def main():
        rt = Runtime("far", endpoints)
        await rt.start()
        stop = asyncio.get_running_loop().create_future()

        class Echo:
            def receive(self, sender, msg):
                if msg.kind == "stop":
                    stop.set_result(None)
                rt.send(sender, msg, sender=Address("far", "echo"))
        rt.spawn("echo", Echo())
        ready.set()
        await stop
        await rt.close()
    asyncio.run(main())


def test_two_processes_exchange_batches_in_order(tmp_path: Path) -> None:
    endpoints = directory(tmp_path, "near", "far")
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    proc = ctx.Process(target=_echo_process, args=(endpoints, ready))
    proc.start()
    try:
        assert ready.wait(deadline_s)

        async def main():
            rt = Runtime("near", endpoints)
            await rt.start()
            rec = Recorder(expect=1001)
            me = rt.spawn("rec", rec)
            echo = Address("far", "echo")
            for batch in range(10):
                for i in range(100):
                    rt.send(echo, Note("m", [batch, i, b"x" * 1000]), sender=me)
                await asyncio.sleep(0)
            rt.send(echo, Note("stop", None), sender=me)
            await rec.done
            assert [body[:2] for _, _, body in rec.got[:-1]] == [(b, i) for b in range(10) for i in range(100)]
            assert rec.got[0][0] == echo and rec.got[0][2][2] == b"x" * 1000
            assert rt.frames_sent == 11
            await rt.close()
        run(main())
        proc.join(deadline_s)
        assert proc.exitcode == 0
    finally:
        if proc.is_alive():
            proc.kill()


def test_what_is_sent_to_a_host_not_known_yet_leaves_in_order_once_it_is_learned(tmp_path: Path) -> None:
    async def main():
        d = directory(tmp_path, "a", "b")
        a, b = Runtime("a", {"a": d["a"]}), Runtime("b", d)  # a has not learned b yet
        await a.start()
        await b.start()
        rec = Recorder(expect=60)
        to = b.spawn("rec", rec)
        me = Address("a", "src")
        for i in range(60):
            a.send(to, Note("m", i), sender=me)
            if i % 20 == 19:
                await asyncio.sleep(0)  # several flushes while b is unknown
        a.add_hosts({"b": d["b"]})
        await rec.done
        assert [body for _, _, body in rec.got] == list(range(60))
        await a.close()
        await b.close()
    run(main())


class UndeliveredSource(Collector):
    def __init__(self) -> None:
        super().__init__(expect=1)
        self.unblocked = asyncio.get_running_loop().create_future()

    def on_unblocked(self) -> None:
        if not self.unblocked.done():
            self.unblocked.set_result(None)


def test_what_waits_for_a_host_never_learned_comes_back_undelivered_with_its_credit(tmp_path, monkeypatch) -> None:
    from actors.messages.runtime import Undelivered
    from actors.runtime import mailbox
    monkeypatch.setattr(mailbox, "PARK_S", 0.2)

    async def main():
        a = Runtime("a", directory(tmp_path, "a"))
        await a.start()
        source = UndeliveredSource()
        me = a.spawn("src", source)
        a.send(Address("ghost", "q"), Note("m", 7), sender=me, credit=400)
        assert a.blocked(me)
        await source.arrived
        await source.unblocked
        assert [(type(m), m.msg.body, m.gone) for m in source.got] == [(Undelivered, 7, False)]
        assert not a.blocked(me)
        await a.close()
    run(main())
