"""WalClient: a quorum host's members' WAL when the node's WAL has a process of its own.

To the members it is the WalActor they know (actors/raft/wal.py: `kick`, `at_turn_end`,
`after_flush`, `written` notifications), and it keeps the same ordering rules: a member hears
`written` only once the WAL process has acknowledged the batch that carries the entries (synced),
and `after_flush` callbacks run then, before any `written`. The flush of a loop turn sends what
the members queued as ONE `WalAppend` (a raw frame: the records joined once after its header, the
one copy of the bodies on the way) instead of writing it: the protocol, its epochs and its
rollover are actors/raft/wal_link.py's, this is its shell. It is also the actor `wal-link` that
the WAL process answers (`WalAck`, `WalStarted`, `WalRoll`).

A rollover's segment writing runs here, in the members' process, a slice per loop turn as in
persist/wal/writer.py; the WAL deletes the old files once every host said `WalRolled`.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any, Callable

import msgpack
import structlog
import zmq

from actors.messages.wal import WalAck, WalRoll, WalRolled, WalStarted, append_frame
from actors.raft.wal import WalActor
from actors.raft.wal_link import LinkCore, Sent
from actors.runtime.address import Address
from persist.wal.writer import WalWriter

log = structlog.get_logger("warren.raft.wal_client")


class WalClient(WalActor):
    def __init__(self, writer: WalWriter, loop: asyncio.AbstractEventLoop, runtime: Any, me: Address,
                 wal: Address, link: LinkCore) -> None:
        super().__init__(writer, loop, runtime.send_queued)
        self.runtime = runtime
        self.me = me
        self.wal_address = wal
        self.link = link
        self._unsent_after: list[Callable[[], None]] = []  # for the next batch sent
        self._roll: tuple[int, int] | None = None  # (wal epoch, file seq) being rolled over
        self._roll_hard_seq = 0  # the batch that carries the hard states of the rollover
        self._rolls_queued: list[tuple[int, int]] = []
        self.batches_sent = 0

    # -- the members' side -------------------------------------------------------------------
    def flush(self) -> None:
        self._scheduled = False
        turn_end, self._turn_end = self._turn_end, []
        for callback in turn_end:
            callback()
        self._unsent_after += self._after
        self._after = []
        if self.writer.core.pending_bytes():
            if self.link.can_send():
                self._send_batch()
        elif self._unsent_after:
            self._after_last_sent()
        if self._roll is not None:
            self._roll_step()
        self._send_queued()

    def _send_batch(self) -> int:
        """Send everything queued as one batch (the window is the caller's concern); its seq."""
        batch = self.writer.take_batch()
        assert batch is not None
        after, self._unsent_after = self._unsent_after, []
        link = self.link
        frame, start = append_frame(link.host, link.host_epoch, link.wal_epoch, link.next_seq, batch.parts)
        msg = link.send(memoryview(frame)[start:], (batch, after))
        self.runtime.send_raw(self.wal_address.host, frame)
        self.batches_sent += 1
        self._observe()
        return msg.seq

    def _after_last_sent(self) -> None:
        """Nothing queued: the callbacks wait for the newest batch in flight, or for nothing."""
        after, self._unsent_after = self._unsent_after, []
        last = self.link.inflight.get(self.link.last_seq())
        if last is None:
            for callback in after:
                callback()
        else:
            last.payload[1].extend(after)

    def _observe(self) -> None:
        now = int(time.monotonic() * 1000)
        self.syncing = self.syncing.observe(bool(self.link.inflight), max(now, self.syncing.changed_at))

    # -- the WAL process's side ----------------------------------------------------------------
    def receive(self, sender: Address, msg: Any) -> None:
        kind = type(msg)
        if kind is WalAck:
            self._acked(self.link.ack(msg))
        elif kind is WalStarted:
            resend = self.link.wal_started(msg.wal_epoch)
            if resend:
                log.info("wal.resending", host=self.link.host, batches=len(resend), wal_epoch=msg.wal_epoch)
            for m in resend:
                self.runtime.send_raw(self.wal_address.host, append_frame(m.host, m.host_epoch, m.wal_epoch, m.seq,
                                                                          [m.records])[0])
        elif kind is WalRoll:
            self.roll(msg.wal_epoch, msg.file_seq)
        else:
            log.warning("wal.link_unexpected", kind=kind.__name__, sender=str(sender))

    def _acked(self, done: list[Sent]) -> None:
        if not done:
            return
        self._observe()
        counters = self.writer.counters  # this host's share of the node's WAL (summed by the stats)
        for sent in done:
            batch, after = sent.payload
            for callback in after:
                callback()
            counters.batches += 1
            counters.writes += batch.records
            counters.bytes_written += batch.nbytes
            self._notify(self.writer.durable(batch))
        if self.writer.core.pending_bytes() or self._unsent_after or self._roll is not None:
            self.kick()  # what waited for the window goes now; a rollover may be done

    # -- rollover --------------------------------------------------------------------------------
    def roll(self, wal_epoch: int, file_seq: int) -> None:
        """The WAL asks this host to roll its members over the files before `file_seq`."""
        if wal_epoch != self.link.wal_epoch or (wal_epoch, file_seq) == self._roll:
            return
        if self._roll is not None:
            self._rolls_queued.append((wal_epoch, file_seq))
            return
        if self.writer.core.pending_bytes():
            self._send_batch()  # what the memtables hold so far goes out first, past the window
        self.writer.start_member_roll()
        core = self.writer.core
        for member, member_log in self.writer.logs.items():
            term, voted_for = member_log.hard_state()  # the newest: never older than one in flight
            if term:
                core.save_hard_state(member, term, voted_for)
        self._roll_hard_seq = self._send_batch() if core.pending_bytes() else 0
        self._roll = (wal_epoch, file_seq)
        log.info("wal.member_roll_started", host=self.link.host, file_seq=file_seq, members=len(self.writer.logs))
        self.kick()

    def _roll_step(self) -> None:
        assert self._roll is not None
        if not self.writer.rolling or self.writer.roll_step():
            if self._roll_hard_seq in self.link.inflight:
                return  # the hard states are not durable yet: their ack kicks again
            wal_epoch, file_seq = self._roll
            self.runtime.send(self.wal_address, WalRolled(self.link.host, self.link.host_epoch, wal_epoch, file_seq),
                              sender=self.me)
            log.info("wal.member_rolled", host=self.link.host, file_seq=file_seq)
            self._roll = None
            if self._rolls_queued:
                self.roll(*self._rolls_queued.pop(0))
        else:
            self.kick()  # the next turn writes the next slice

    def stats(self) -> dict:
        return {"flushes": self.flushes, "entries": self.entries_flushed, "batches_sent": self.batches_sent,
                "in_flight": len(self.link.inflight), "rollovers": self.writer.rollovers,
                **self.writer.counters.as_dict()}


fence_try_ms = 250  # one fence request's wait for the WAL process (it may be restarting: ask again soon)
fence_deadline_s = 60.0  # then the host fails to start, and its supervisor starts it again


def fence(endpoint: str, host: str, host_epoch: int) -> tuple[int, int]:
    """Fence the WAL for this host incarnation (actors/raft/wal_link.py), blocking: nothing of the
    host runs before the answer, (wal epoch, rollover to do or 0). A lost request is asked again
    on a new socket (a REQ socket that got no answer cannot ask again)."""
    ctx = zmq.Context.instance()
    deadline = time.monotonic() + fence_deadline_s
    while True:
        sock = ctx.socket(zmq.REQ)
        try:
            sock.connect(endpoint)
            sock.send(msgpack.packb([host, host_epoch]))
            if sock.poll(fence_try_ms, zmq.POLLIN):
                wal_epoch, rolling = msgpack.unpackb(sock.recv())
                return wal_epoch, rolling
        finally:
            sock.close(0)
        if time.monotonic() > deadline:
            raise TimeoutError(f"the node's WAL ({endpoint}) did not answer {host}'s fence")
        log.info("wal.fence_waiting", host=host, endpoint=endpoint)
