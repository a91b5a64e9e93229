"""A connection host's part in moving running connections to the host of their queues.

Theory of operation: moves.py decides where a connection should be; this shell measures what it
needs, waits for a quiet point and moves. It measures, once per tick, this host's busy share (the
process's CPU time over the last second, on the acceptor's load board for the other hosts to
read) and each reader's publishes and read bytes over the last second (`Motion`). It moves at two
moments:
- before a connection's first basic.consume is acted on (`before_consume`): the consume and what
  was read after it travel as bytes, and the new host acts on them as if it had read them;
- at a tick, for a publisher (`tick_reader`): its reader stops reading so that a quiet point
  comes, and every write to its socket (a confirm going out is what a publisher with confirms
  waits for) tries again, for `hold_s` at most (`shed_hold_s` for a fast one leaving a busy host:
  under constant load its confirms come with the group commit's interval of 50 ms); then reading
  resumes, and the next try waits twice as long as the last (from one second up to
  `retry_max_s`), so a publisher that is never quiet loses little of its reading time to the
  tries.
The quiet point: the connection is open and not held by credit or an alarm, nothing waits to be
written to its socket, what its parser holds is short (a publish part-way in travels as its frames), it owns no
exclusive queue (those are tied to its name on this host), and none of its channels is busy
(actors/channel/handover.py). A move sends the socket's descriptor and the connection's state to
the target's hand-off socket (actors/reader/acceptor.py); once that is sent, the old host lets its
channels go as a closed connection's would (their queues hear channel_down) without telling the
node (the connection lives on, under a new name on the other host) and drops its descriptor. A
connection moves again only after `settle_ticks`, and one that moved starts no consumer move.
"""
from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import TYPE_CHECKING, Callable

import structlog

from actors.channel import handover
from actors.placement import kind_of, node_of
from actors.reader import moves
from actors.reader.acceptor import Acceptor
from actors.reader.core import OPEN
from actors.reader.handover import MovedConnection, encodable, encode_again
from wire.inbound import Command, Event

if TYPE_CHECKING:
    from actors.reader.shell import Reader

log = structlog.get_logger("warren.reader.mover")

leftover_max = 64 * 1024  # unparsed bytes a move takes along (acceptor.moved_bytes_max leaves room)
settle_s = 5.0            # a connection stays this long where it was put, or moved to, before moving
hold_s = 0.02             # how long a publisher's reading stops while a move waits for its quiet point
shed_hold_s = 0.12        # the same for a fast publisher leaving a busy host
retry_max_s = 60.0        # the longest wait between two tries to move a connection that was never quiet
CONN_KIND = "conn"


class Motion:
    """What the mover keeps about one reader: its counts at each of the last ticks, and a move
    waiting for its quiet point."""

    __slots__ = ("published", "read", "ticks", "moved", "target", "next_try", "backoff")

    def __init__(self, window: int, moved: bool) -> None:
        self.published: deque[int] = deque(maxlen=window + 1)
        self.read: deque[int] = deque(maxlen=window + 1)
        self.ticks = 0          # since it opened here
        self.moved = moved      # it came here by a move
        self.target: int | None = None  # a move waiting for its quiet point
        self.next_try = 0       # the tick of the next try after one found no quiet point
        self.backoff = window   # ticks to wait after the next try that finds none


class Mover:
    def __init__(self, acceptor: Acceptor, host: str, ticks_per_second: int,
                 cpu: Callable[[], float] = time.process_time, clock: Callable[[], float] = time.monotonic) -> None:
        assert acceptor.board is not None, "moves need two connection hosts or more"
        self._acceptor = acceptor
        self._board = acceptor.board
        self.me = acceptor.me
        self._node = node_of(host)
        self._tps = ticks_per_second
        self._settle_ticks = round(settle_s * ticks_per_second)
        self._cpu, self._clock = cpu, clock
        self._samples: deque[tuple[float, float]] = deque(maxlen=ticks_per_second + 1)

    # ------------------------------------------------------------------ measuring
    def tick(self) -> None:
        """Once per tick: this host's busy share over the last second, for every host to read."""
        self._samples.append((self._clock(), self._cpu()))
        (t0, c0), (t1, c1) = self._samples[0], self._samples[-1]
        if t1 > t0:
            self._board.set_busy(self.me, (c1 - c0) / (t1 - t0))

    def loads(self) -> list[moves.HostLoad]:
        return [moves.HostLoad(n, b) for n, b in zip(self._board.loads(), self._board.busy())]

    def motion(self, reader: Reader) -> Motion:
        if reader.motion is None:
            reader.motion = Motion(self._tps, moved=False)
        return reader.motion

    def host_index(self, host: str) -> int | None:
        """Which of this node's connection hosts `host` is, if it is one."""
        kind = kind_of(host)
        if node_of(host) != self._node or not kind.startswith(CONN_KIND) or not kind[len(CONN_KIND):].isdigit():
            return None
        return int(kind[len(CONN_KIND):])

    # ------------------------------------------------------------------ the two moments
    def before_consume(self, reader: Reader, rest: list[Event]) -> bool:
        """`rest[0]` is a basic.consume about to be acted on: True if the connection moved with
        it (the reader acts on nothing more)."""
        m = self.motion(reader)
        cmd = rest[0]
        assert type(cmd) is Command
        if m.moved or any(ch.core.consumers for ch in reader.channels.values()) or not encodable(rest):
            return False
        record = reader.host.registry.queue(reader.opened.vhost, cmd.method.queue) if cmd.method.queue else None
        where = self.host_index(record.home) if record is not None else None
        if where is None:
            return False
        target = moves.for_consumer(self.me, where, self.loads())
        if target is None:
            return False
        reader.flush_all()  # what the commands before it produced leaves first
        return self._move(reader, target, rest, "consumer")

    def tick_reader(self, reader: Reader) -> None:
        """Once per tick for an open connection: measure it, and start a move where moves.py says
        a publisher belongs."""
        m = self.motion(reader)
        m.ticks += 1
        m.published.append(sum(ch.core.counters.publish for ch in reader.channels.values()))
        m.read.append(reader.bytes_in)
        if m.target is not None or m.ticks < m.next_try or m.ticks <= (self._settle_ticks if m.moved else self._tps):
            return
        msgs, read = m.published[-1] - m.published[0], m.read[-1] - m.read[0]
        target = self._publisher_target(reader, msgs, read)
        if target is None:
            return
        m.target = target
        reader.hold(True)
        self.try_move(reader)
        if m.target is not None:
            held = hold_s if moves.is_slow(msgs, read) else shed_hold_s
            asyncio.get_running_loop().call_later(held, self._give_up, reader)

    def _give_up(self, reader: Reader) -> None:
        """No quiet point came in time: read again, and try again later."""
        m = reader.motion
        if m is None or m.target is None:
            return  # it moved
        log.debug("connection.move_deferred", owner=reader.owner, why=self._busy(reader), retry_s=m.backoff / self._tps)
        m.target = None
        m.next_try = m.ticks + m.backoff
        m.backoff = min(2 * m.backoff, round(retry_max_s * self._tps))
        reader.hold(False)

    def try_move(self, reader: Reader) -> None:
        """A waiting move's chance: after the reader stopped reading, and after each write."""
        m = reader.motion
        if m is not None and m.target is not None and not reader.closed:
            if self._move(reader, m.target, [], "publisher"):
                m.target = None

    # ------------------------------------------------------------------ internals
    def _publisher_target(self, reader: Reader, msgs: int, read: int) -> int | None:
        """moves.for_publisher's answer for `reader`, which published `msgs` and read `read` bytes
        over the last second."""
        destinations: set[int] = set()
        for ch in reader.channels.values():
            core = ch.core
            if core.consumers or core.reply_consumer is not None:
                return None
            if core.confirm is None:
                if core.counters.publish:
                    return None  # never movable (handover.busy): no need to ask
                continue
            for queue in core.confirm.queues():
                where = self.host_index(queue.host)
                if where is None:
                    return None
                destinations.add(where)
        return moves.for_publisher(self.me, destinations, msgs, read, self.loads())

    def _busy(self, reader: Reader) -> str | None:
        """Why `reader`'s connection cannot move now, or None at a quiet point."""
        transport = reader.transport
        if reader.closed or transport is None or reader.core is None or reader.core.state != OPEN:
            return "not open"
        if transport.get_write_buffer_size():
            return "writing"
        if reader.paused:
            return "held by credit"
        if reader.throttle is None or reader.throttle.blocked_by:
            return "alarm"
        unparsed = reader.parser.unparsed_size()
        if unparsed is None or unparsed > leftover_max:
            return "a long command part-way in"
        for ch in reader.channels.values():
            why = handover.busy(ch.core)
            if why is not None:
                return why
        if any(q.exclusive_owner == reader.owner for q in reader.host.registry.queues(reader.opened.vhost)):
            return "owns exclusive queues"
        return None

    def _move(self, reader: Reader, target: int, rest: list[Event], why: str) -> bool:
        if self._busy(reader) is not None:
            return False
        core = reader.core
        leftover = encode_again(rest, core.frame_max) + reader.parser.unparsed()
        if len(leftover) > leftover_max:
            return False
        moved = MovedConnection(reader.owner, core.user, core.vhost, core.frame_max, core.channel_max, core.heartbeat,
                                core.client_properties, reader.connected_at,
                                tuple(handover.take(ch.core) for _, ch in sorted(reader.channels.items())), leftover,
                                core.tags)
        waiting = reader.held
        reader.hold(True)  # out of this loop's selector before another process reads the socket
        if not self._acceptor.send_running(reader.transport.get_extra_info("socket").fileno(), moved, target):
            reader.hold(waiting)
            return False
        log.info("connection.moved", owner=reader.owner, to=f"{CONN_KIND}{target}", why=why)
        reader.moved_away()
        return True
