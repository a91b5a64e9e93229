"""The stream queue core: an append-only log that every consumer reads from an offset of its own.

Theory of operation. A stream never removes a message because it was consumed: a publish batch
is appended to the log (persist/stream/log.py) as one chunk, each message stamped with its offset
(header.py), and every consumer has a reader of its own (its own file cursor) and its own credit.
A consumer starts where its x-stream-offset says (metadata/stream.py: first, last = the first
offset of the newest chunk, next, an offset, a timestamp) and is handed entries while it has
credit; a delivery's msg_id is its offset. Acks only give credit back, and that is the channel's
business (flow/qos.py sends `Grant`): a `Settle` changes nothing here. Consumers never wait for
each other: a consumer that falls behind reads older chunks from disk through its own reader, at
most its credit per call, while the others go on at the tail.

THE ORDERING RULE: confirms and deliveries both wait for the commit. `publish` appends into the
OS and records each batch's end offset with its channel's highest confirm seq; the shell flushes
the log and calls `sync_started()`, and calls `synced()` only after the fdatasync returned and
`log.commit` moved. A stream of one member commits there; a replicated one (replication.py)
commits once a majority of its members has the chunks on disk. Only below the commit do
confirms leave and readers see entries (`Replication.readable`), so nothing is delivered that a
crash could take back, as Osiris delivers only committed chunks.

Replicated, the stream has one such core per member node, each at the same address on its
node; the one that leads appends. A channel publishes to the member on its own node, which hands
the batch on to the leader and confirms it when the leader says it is committed (confirms.py:
also what is sent again when the leader changes). Consumers read from the member they consumed
at, below the commit it knows.

Retention runs after every sync that rolled a segment over and on the shell's retention timer
(`on_timer`, which also drops the log's decoded newest chunks while nobody consumes), with the limits of the arguments met with the policy (metadata/stream.py's
`retention`). Counters: `messages` is what the log holds (first to next offset), as RabbitMQ's
list_queues reports a stream; queue.declare-ok reports 0 messages, as 3.10 does. A replicated
stream's counts are its leader's alone (the shell's `reports`), as in 3.10: there
rabbit_osiris_metrics' tick (every 5 s) records queue_stats only on the node holding the
osiris_writer counters, and list_queues' emit_info_all runs rabbit_stream_queue:info on the node
the record's pid (the writer) is local to, whichever node the command goes through. While no
member leads (the leader's node down, no election won yet) 3.10 lists no row for the stream at
all (no running node is local to the dead writer's pid, and list_down takes only durable records
missing from rabbit_queue); warren lists it with zero counts and state `down`
(scripts/queue_columns.py), a difference kept so that the stream does not vanish from listings.

Left out here: single active consumer and consumer priorities on streams, x-stream-filter (3.13).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Hashable, Sequence

from actors.messages.calls import Reply
from actors.messages.channel_queue import (
    Cancel, ChannelDown, Consume, ConsumerCancelled, Deliver, Get, Grant, Publish, Published, Purge, Settle,
)
from actors.messages.node import ApplyPolicy, Dispose, QueueCounts, QueueStats, StreamMembers, StreamStatus
from actors.messages.runtime import Undelivered
from actors.messages.stream import (
    StreamAck, StreamAppend, StreamConfirmed, StreamForward, StreamHello, StreamVote, StreamVoteReply,
)
from actors.stream.confirms import Publishes
from actors.stats.counters import MessageCounters
from actors.stream.header import stamped_chunk
from actors.stream.replication import ELECTION_TIMER, Replication
from effects import Send, StartTimer
from metadata import stream as spec
from persist.stream.epochs import Epochs
from persist.stream.log import Reader, StreamLog
from wire.errors import NOT_ALLOWED, AmqpError

Effect = Any
RETENTION_TIMER = "retention"
RETENTION_CHECK_MS = 60_000  # how often the age limit is looked at without a roll-over
READ_BATCH_MAX = 1000  # entries one consumer is handed per call, whatever its credit
SOLE = "local"  # the member name of a stream of one member built without a Replication


@dataclass(slots=True)
class StreamConsumer:
    channel: Hashable
    tag: str
    reader: Reader
    credit: int


class StreamQueue:
    def __init__(self, vhost: str, name: str, log: StreamLog, arguments: dict[str, Any],
                 now_ms: int = 0, replication: Replication | None = None) -> None:
        self.vhost = vhost
        self.name = name
        self.log = log
        self.arguments = arguments
        self.retention = spec.retention(arguments)
        log.segment_bytes = self.retention.segment_bytes
        self._now = now_ms
        self.rep = replication or Replication(SOLE, (SOLE,), log, Epochs(), lambda _: None, lambda m: m)
        self._consumers: dict[tuple[Hashable, str], StreamConsumer] = {}
        self.publishes = Publishes(self.rep, self._append)
        self._appended = False  # appended since the last sync: the shell owes one
        self._rolled = False  # a segment rolled over since the last sync: retention is due
        self.deleted = False
        self.counters = MessageCounters()  # message_stats (actors/stats/counters.py), once per batch

    # -- counters -------------------------------------------------------------------------------

    @property
    def consumer_count(self) -> int:
        return len(self._consumers)

    @property
    def unsynced(self) -> bool:
        """The shell owes a sync: something was appended, or a replica owes its leader an ack."""
        return self._appended or self.rep.ack_due

    def stats(self) -> dict[str, Any]:
        log = self.log
        return {"name": self.name, "vhost": self.vhost, "type": spec.TYPE, "messages": log.entries,
                "messages_ready": log.entries, "messages_unacknowledged": 0, "consumers": len(self._consumers),
                "memory": log.recent_bytes, "message_bytes": log.bytes, "message_bytes_ready": log.bytes,
                "message_bytes_unacknowledged": 0, "exclusive_consumer_pid": None, "exclusive_consumer_tag": None,
                "first_offset": log.first_offset, "committed_offset": self.rep.readable - 1,
                "leader": self.rep.leader,
                "segments": len(log.segments), "readers": [
                    {"consumer_tag": c.tag, "channel": str(c.channel), "offset": c.reader.next_offset,
                     "lag": log.committed - c.reader.next_offset, "credit": c.credit}
                    for c in self._consumers.values()]}

    # -- inputs ---------------------------------------------------------------------------------

    def start(self, *, now_ms: int = 0) -> list[Effect]:
        self._now = max(self._now, now_ms)
        self._retain()
        return [StartTimer(RETENTION_TIMER, RETENTION_CHECK_MS), *self.rep.start(), *self._committed()]

    def handle(self, sender: Hashable, msg: Any, *, now_ms: int = 0) -> list[Effect]:
        if now_ms > self._now:
            self._now = now_ms
        return _HANDLERS[type(msg)](self, sender, msg)

    def on_timer(self, name: str, *, now_ms: int = 0) -> list[Effect]:
        self._now = max(self._now, now_ms)
        if name == ELECTION_TIMER:
            return [*self.rep.on_timer(), *self._committed()]
        assert name == RETENTION_TIMER, name
        if not self._consumers:  # nobody at the tail: an idle stream keeps no bodies in RAM
            self.log.forget_recent()
        self._retain()
        return [StartTimer(RETENTION_TIMER, RETENTION_CHECK_MS)]

    def publish(self, channel: Hashable, messages: Sequence[Published], origin: str | None = None) -> list[Effect]:
        """A channel's batch, from this node (`origin` None) or handed on by member `origin`."""
        if not messages:
            return []
        if origin is None:
            return [*self.publishes.from_channel(channel, messages), *self._committed()]
        return [*self.publishes.route(origin, channel, messages), *self._committed()]

    def _append(self, origin: str, channel: Hashable, messages: Sequence[Published]) -> list[Effect]:
        """The leader appends a batch as one chunk, each message stamped with its offset."""
        log = self.log
        segments = len(log.segments)
        data, entries = stamped_chunk(log.next_offset, self._now, messages)
        log.append_chunk(data, entries)
        self.counters.publish += len(messages)
        self._appended = True
        self._rolled = self._rolled or len(log.segments) != segments
        seq = messages[-1].seq
        if seq:
            self.publishes.pending.append((log.next_offset, origin, channel, seq))
        return self.rep.appended(data)

    def sync_started(self) -> None:
        """The shell flushed the log for a sync; what is appended from now on waits for the next."""
        self._appended = False

    def synced(self) -> list[Effect]:
        """The sync begun at `sync_started` is done (`log.commit` moved): a replica acks it, a
        leader commits what a majority has; confirm and hand out what is committed, and apply
        retention if a segment rolled over. What was appended since `sync_started` is still owed
        (`unsynced`): the shell syncs again at once, unprompted by any further publish."""
        effects = [*self.rep.synced(), *self._committed()]
        if self._rolled:
            self._rolled = False
            self._retain()
        return effects

    def _committed(self) -> list[Effect]:
        """After every input that may have moved the commit or the leader: the confirms the
        commit covers, the consumers' new entries, the batches owed to a new leader."""
        effects = [*self.publishes.committed(self.rep.commit), *self.publishes.follow()]
        for consumer in self._consumers.values():
            effects.extend(self._deliver(consumer))
        return effects

    def replicate(self, sender: Hashable, msg: Any) -> list[Effect]:
        """A message between the members (replication.py), then whatever the commit now allows."""
        return [*_REPLICATION[type(msg)](self.rep, msg), *self._committed()]

    def nodes_down(self, nodes: set[str]) -> list[Effect]:
        return [*self.rep.nodes_down(nodes), *self._committed()]

    def nodes_up(self, nodes: set[str]) -> list[Effect]:
        return self.rep.nodes_up(nodes)

    def set_members(self, members: Sequence[str]) -> list[Effect]:
        return [*self.rep.set_members(members), *self._committed()]

    # -- consumers ------------------------------------------------------------------------------

    def consume(self, channel: Hashable, msg: Consume) -> list[Effect]:
        # no_ack and a missing prefetch are refused by the channel, which knows the queue's type
        where = spec.offset_spec(msg.arguments, self._now, self.name, self.vhost)
        if isinstance(where, AmqpError):
            return [Send(channel, Reply(msg.rid, error=where))]
        key = (channel, msg.consumer_tag)
        if key in self._consumers:
            return [Send(channel, Reply(msg.rid, error=AmqpError(
                NOT_ALLOWED, f"attempt to reuse consumer tag '{msg.consumer_tag}'")))]
        consumer = StreamConsumer(channel, msg.consumer_tag, self.log.reader(self._start_offset(where)), msg.credit)
        self._consumers[key] = consumer
        return [Send(channel, Reply(msg.rid, spec.TYPE)), *self._deliver(consumer)]

    def _start_offset(self, where: spec.Offset) -> int:
        log = self.log
        if where.kind == spec.FIRST:
            return log.first_offset
        if where.kind == spec.LAST:
            return log.last_chunk if log.last_chunk >= log.first_offset else log.next_offset
        if where.kind == spec.NEXT:
            return log.next_offset
        if where.kind == "timestamp":
            return log.offset_at_time(where.value)
        return max(where.value, log.first_offset)

    def grant(self, channel: Hashable, msg: Grant) -> list[Effect]:
        consumer = self._consumers.get((channel, msg.consumer_tag))
        if consumer is None:
            return []
        consumer.credit += msg.credit
        return self._deliver(consumer)

    def _deliver(self, consumer: StreamConsumer) -> list[Effect]:
        readable = self.rep.readable
        if consumer.credit <= 0 or consumer.reader.next_offset >= readable:
            return []
        read = consumer.reader.read(min(consumer.credit, READ_BATCH_MAX), readable)
        if not read:
            return []
        consumer.credit -= len(read)
        self.counters.deliver += len(read)
        return [Send(consumer.channel, Deliver(consumer.tag, read))]  # a delivery's msg_id is its offset

    def more_to_read(self) -> bool:
        """A consumer with credit is behind the log's end (READ_BATCH_MAX cut its last call)."""
        readable = self.rep.readable
        return any(c.credit > 0 and c.reader.next_offset < readable for c in self._consumers.values())

    def read_more(self) -> list[Effect]:
        effects: list[Effect] = []
        for consumer in self._consumers.values():
            effects.extend(self._deliver(consumer))
        return effects

    def cancel(self, channel: Hashable, tag: str) -> None:
        consumer = self._consumers.pop((channel, tag), None)
        if consumer is not None:
            consumer.reader.close()

    def channels(self) -> set[Hashable]:
        return {c.channel for c in self._consumers.values()}

    def channel_down(self, channel: Hashable) -> None:
        for key in [k for k in self._consumers if k[0] == channel]:
            self.cancel(*key)
        self.publishes.channel_down(channel)

    def delete(self) -> list[Effect]:
        """Dispose: consumers are told, the log's files go (the shell syncs first: confirms owed leave)."""
        effects: list[Effect] = [Send(c.channel, ConsumerCancelled(c.tag)) for c in self._consumers.values()]
        for c in self._consumers.values():
            c.reader.close()
        self._consumers.clear()
        self.deleted = True
        return effects

    # -- retention ------------------------------------------------------------------------------

    def apply_policy(self, settings: dict[str, Any]) -> list[Effect]:
        self.retention = spec.retention(self.arguments, settings)
        self.log.segment_bytes = self.retention.segment_bytes
        self._retain()
        return []

    def _retain(self) -> None:
        r = self.retention
        if r.max_bytes is not None or r.max_age_ms is not None:
            self.log.retain(r.max_bytes, r.max_age_ms, self._now)


def _settle(q: StreamQueue, sender: Hashable, msg: Settle) -> list[Effect]:
    return []  # acks give credit back through the channel's Grant; nothing is removed


def _cancel(q: StreamQueue, sender: Hashable, msg: Cancel) -> list[Effect]:
    q.cancel(sender, msg.consumer_tag)
    return [Send(sender, Reply(msg.rid))]


def _channel_down(q: StreamQueue, sender: Hashable, msg: Any) -> list[Effect]:
    q.channel_down(sender)
    return []


def _refused(error: Callable[[str, str], AmqpError]) -> Callable[[StreamQueue, Hashable, Any], list[Effect]]:
    """Get and Purge reach a stream only past the channel's check (a stale record): the same refusal."""
    return lambda q, sender, msg: [Send(sender, Reply(msg.rid, error=error(q.name, q.vhost)))]


def _stats(q: StreamQueue, sender: Hashable, msg: QueueStats) -> list[Effect]:
    return [Send(sender, Reply(msg.rid, QueueCounts(0, q.consumer_count)))]  # 3.10 reports 0 messages


def _status(q: StreamQueue, sender: Hashable, msg: StreamStatus) -> list[Effect]:
    log, rep = q.log, q.rep
    return [Send(sender, Reply(msg.rid, {"role": rep.role, "offset": log.next_offset - 1,
                                         "committed_offset": rep.readable - 1, "first_offset": log.first_offset,
                                         "readers": q.consumer_count, "segments": len(log.segments),
                                         "epoch": rep.epoch}))]


def _confirmed(q: StreamQueue, sender: Hashable, msg: StreamConfirmed) -> list[Effect]:
    """The leader committed publishes that reached this member: their channels hear it from here."""
    return q.publishes.confirm(msg.confirms)


def _members(q: StreamQueue, sender: Hashable, msg: StreamMembers) -> list[Effect]:
    """The stream's committed member list changed (replication.py's `set_members`): a smaller
    majority may commit; publishes handed to a removed leader go again to the next one."""
    return [*q.set_members(msg.members), Send(sender, Reply(msg.rid))]


def _dispose(q: StreamQueue, sender: Hashable, msg: Dispose) -> list[Effect]:
    # the shell synced the whole log first: a stream of one member confirms all it holds
    sole = q.rep.members == (q.rep.me,)
    confirms = q.publishes.confirm(list(q.publishes.owed().items())) if sole else []
    if q.rep.me not in q.rep.members:  # removed by delete_replica: what it holds is not confirmed
        confirms = q.publishes.refuse_all()
    return [*confirms, *q.delete(), Send(sender, Reply(msg.rid, 0))]


_HANDLERS: dict[type, Callable[[StreamQueue, Hashable, Any], list[Effect]]] = {
    Publish: lambda q, s, m: q.publish(s, m.messages), Settle: _settle,
    StreamForward: lambda q, s, m: q.publish(m.channel, m.messages, m.origin), StreamConfirmed: _confirmed,
    Grant: lambda q, s, m: q.grant(s, m),
    Consume: lambda q, s, m: q.consume(s, m), Cancel: _cancel, ChannelDown: _channel_down,
    Undelivered: _channel_down, Get: _refused(spec.get_refused), Purge: _refused(spec.purge_refused),
    QueueStats: _stats, StreamStatus: _status, StreamMembers: _members,
    ApplyPolicy: lambda q, s, m: q.apply_policy(m.settings),
    Dispose: _dispose,
}

_REPLICATION: dict[type, Callable[[Replication, Any], list[Effect]]] = {
    StreamAppend: Replication.append, StreamAck: Replication.ack, StreamHello: Replication.hello,
    StreamVote: Replication.vote, StreamVoteReply: Replication.vote_reply,
}
_HANDLERS.update({kind: StreamQueue.replicate for kind in _REPLICATION})
