"""A removed actor's links close in its receivers' credit ledgers (mailbox.py `remove`, flow/credit.py
`sender_closed`): a long-lived receiver (a queue, the message store) keeps nothing for the
short-lived senders (channels, deleted queues) that once sent it something with credit.

Measured in a soak before the fix: the message store of a connection host kept one ledger entry
per classic queue ever deleted (bench/RESULTS.md, "what grew in the soak")."""
from __future__ import annotations

from pathlib import Path

from actors.runtime import memory_probe
from actors.runtime.mailbox import Runtime
from tests.actors.messages import Note
from tests.actors.test_runtime_mailbox import ManualSink, Source, deadline_s, directory, pair, run
from tests.waiting import async_until

senders_churned = 50


class Sink:
    def __init__(self) -> None:
        self.got = 0

    def receive(self, sender, msg) -> None:
        self.got += 1


def incoming(runtime: Runtime) -> int:
    """Entries the host's ledgers hold for their incoming links (what the probe shows)."""
    sizes = memory_probe.probe(runtime, {})["containers"]
    return sizes.get("CreditLedger._unacked", 0) + sizes.get("CreditLedger._deferred", 0)


def churn(a: Runtime, to, sink_got, n: int) -> None:
    for i in range(n):
        me = a.spawn(f"src{i}", Source())
        a.send(to, Note("m", i), sender=me, credit=3)  # 3 < more_after: nothing is granted back yet


def test_a_receiver_on_another_host_forgets_each_sender_that_was_removed(tmp_path: Path) -> None:
    async def main():
        a, b = await pair(tmp_path)
        sink = Sink()
        to = b.spawn("sink", sink)
        churn(a, to, sink, senders_churned)
        await async_until(lambda: sink.got == senders_churned, "every note at the sink", deadline_s, every_s=0)
        assert incoming(b) == senders_churned  # one entry per live sender, as before
        for i in range(senders_churned):
            a.remove(f"src{i}")
        await async_until(lambda: incoming(b) == 0, "the sink's ledger back to empty", deadline_s, every_s=0)
        await a.close()
        await b.close()
    run(main())


def test_a_receiver_on_the_same_host_forgets_each_sender_that_was_removed(tmp_path: Path) -> None:
    async def main():
        a = Runtime("a", directory(tmp_path, "a"))
        await a.start()
        sink = Sink()
        to = a.spawn("sink", sink)
        churn(a, to, sink, senders_churned)
        await async_until(lambda: sink.got == senders_churned, "every note at the sink", deadline_s, every_s=0)
        for i in range(senders_churned):
            a.remove(f"src{i}", gone=True)
        await async_until(lambda: incoming(a) == 0, "the sink's ledger back to empty", deadline_s, every_s=0)
        await a.close()
    run(main())


def test_a_manual_receiver_forgets_a_removed_sender_once_it_processed_what_it_took(tmp_path: Path) -> None:
    async def main():
        a, b = await pair(tmp_path)
        sink = ManualSink()
        to = b.spawn("sink", sink)
        me = a.spawn("src", Source())
        a.send(to, Note("m", 1), sender=me, credit=3)
        await async_until(lambda: sink.got, "a note at the sink", deadline_s, every_s=0)
        a.remove("src")
        await async_until(lambda: b._closing, "the link's closing noted", deadline_s, every_s=0)
        assert b._pending["sink"] == {me: 3}  # still its to process: the link stays till then
        b.processed(to, me, 3)
        assert incoming(b) == 0 and not b._closing
        await a.close()
        await b.close()
    run(main())


def test_a_sender_that_lives_on_keeps_its_link_and_its_credit(tmp_path: Path) -> None:
    """Closing is per sender: the others' progress towards their next grant is kept."""
    async def main():
        a, b = await pair(tmp_path)
        sink = Sink()
        to = b.spawn("sink", sink)
        stays, goes = a.spawn("stays", Source()), a.spawn("goes", Source())
        a.send(to, Note("m", 1), sender=stays, credit=150)
        a.send(to, Note("m", 2), sender=goes, credit=150)
        await async_until(lambda: sink.got == 2, "both notes", deadline_s, every_s=0)
        a.remove("goes")
        await async_until(lambda: incoming(b) == 1, "one link left", deadline_s, every_s=0)
        a.send(to, Note("m", 3), sender=stays, credit=50)  # 150 + 50: a grant of 200 comes back
        await async_until(lambda: a._ledgers["stays"].credit(to) == 400 - 200 + 200, "the grant", deadline_s,
                          every_s=0)
        await a.close()
        await b.close()
    run(main())
