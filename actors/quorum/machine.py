"""The quorum queue state machine: rabbit_fifo's `apply(meta, command, state)` for warren.

Theory of operation: a quorum queue is a Raft group whose log holds `commands.encode(...)` bytes;
every member applies each committed entry with `QuorumMachine.apply(meta, data, state)` and gets
(state, reply, effects). Messages are Raft indexes plus a small header (ready.py); their bodies stay
in the log and the leader's shell reads them back for `effects.Deliver`. Every command follows the
same path as in rabbit_fifo: do what the command says, then `_finish` - hand ready messages to
consumers (expiring TTL'd messages at the head first), hand held messages to the at-least-once
dead-letter worker, enforce the length limits, and ask for the timers the queue now needs.

Choices, against the 4.0 guide and rabbit_fifo (4.1 sources):
- A returned message (reject/nack with requeue, a consumer's channel going down) goes back near
  the head, into the returns that are served before everything else, when a delivery limit is set
  (the default, 20). With an unlimited limit (-1) the guide says it goes to the back: rabbit_fifo
  does that by re-appending the message to the log, and so does warren - the shell asks
  `requeue_plan`, reads the messages and proposes `commands.Requeue`, which puts them at the back
  of the normal priority level (as rabbit_fifo does) under their new index, so the old entry can be
  compacted away. A `Return` applied while unlimited still goes near the head.
- A message's delivery count goes up each time it comes back; once it exceeds the delivery limit
  it is dead-lettered with reason `delivery_limit` (dropped without a dead-letter exchange).
- x-overflow reject-publish: an enqueue is refused (Reply.REJECTED) while the queue is "blocked":
  it blocks once it is over a limit after an enqueue (so it overshoots by one, as the guide
  warns) and unblocks only below 80% of every limit, as rabbit_fifo's publishers do.
- Message TTL: expiry is stamped at enqueue (now + the lower of x-message-ttl and expiration; a
  TTL of 0 gives the message until the next millisecond) and only the head is ever expired.
- x-expires: the queue expires `expires` ms after its last use (a basic.get, a consumer leaving;
  creation counts) while it has no consumers; the machine then asks for `DeleteQueue` once.
- No-ack consumers and basic.get without ack are settled as the message leaves.
- Delivery msg ids are unique over the queue's life (rabbit_fifo numbers them per consumer and
  keys consumers by the Raft index of their checkout): a consumer here is (channel, tag), which a
  channel may reuse after a cancel, so a resent Settle can never hit a newer consumer's delivery.
  A channel finds deliveries it missed (after a leader change) by `Deliver.delivered_before`.
- A consumer re-consuming its tag after a cancel, while it still has unacked messages, keeps them
  (rabbit_fifo merges the same way, but lets a single active consumer taking over overwrite them).
Versions (raft/versions.py; rabbit_fifo's version/0 and which_module/1): the log says which
version each entry is applied by (`meta.machine_version`), and `_BY_VERSION` holds each version's
handlers, so a member applies an entry by the rules of the version the log runs there, whatever
its code's newest. A member runs the versions up to `runs` (its node's
`quorum_queue.machine_version`, at most `MACHINE_VERSION`); the group switches once every member
runs the new one.
- Version 1: the machine as RabbitMQ 4.0 behaves (the default).
- Version 2: the delivery limit dead-letters a message only when a consumer gives it back (a
  reject or nack with requeue), never because its consumer's channel went down (ChannelDown,
  ConsumersDown): that message comes back to the queue whatever its count, a channel closing
  with unacked deliveries not being a failure of those deliveries (RabbitMQ 4.3 likewise stops
  counting such returns against the limit). The count still goes up on every return, so the
  redelivered flag and x-delivery-count say what happened in both versions; the next give-back
  past the limit dead-letters it. The state is the same in both versions: the switch converts
  nothing.
Left out: rabbit_fifo's suspected-down handling of consumers on a disconnected node (a channel is
either up or reported down), AMQP 1.0 credit/modify semantics, consumer timeouts (the channel's).
"""
from __future__ import annotations

from typing import Any, Callable, Iterator, Protocol

from actors.quorum import commands as c
from actors.quorum.config import AT_LEAST_ONCE, DROP_HEAD, QueueConfig
from actors.quorum.consumers import (CANCELLED, CREDIT_UNLIMITED, QUIESCING, UP, Consumer, Key,
                                     waiting_order)
from actors.quorum.deadletter import DeadLetterHold
from actors.quorum.effects import (DELIVERY_LIMIT, EXPIRE_MSGS, EXPIRED, MAXLEN, QUEUE_EXPIRY,
                                   REJECTED, ConsumerInfo, DeadLetter, DeadLetterDeliver, Deliver,
                                   DeleteQueue, GetOk, OutOfSequence, Purged, Release, Reply,
                                   StartDeadLetterWorker, StopDeadLetterWorker, Timer)
from actors.quorum.ready import NO_EXPIRY, Entry
from actors.quorum.state import QueueState
from actors.quorum.traits import traits
from wire.errors import RESOURCE_LOCKED, AmqpError

MACHINE_VERSION = 2  # the newest version this code runs
SOFT_LIMIT_RATIO = 0.8  # reject-publish unblocks below this share of each limit
RELEASE_INTERVAL_ENTRIES = 4096  # how often a busy queue recomputes its release cursor
BASIC_GET = (60, 70)    # class and method id of basic.get, for its channel error


class Meta(Protocol):
    index: int
    term: int
    machine_version: int


def _expire_head(s: QueueState) -> list[Entry]:
    """Take the expired messages at the head of the queue (rabbit_fifo:expire_msgs/4)."""
    expired = []
    ready, now = s.ready, s.now_ms
    while True:
        expiry = ready.next_expiry()
        if expiry is None or expiry == NO_EXPIRY or now < expiry:
            return expired
        expired.append(ready.take())


def _dead_letter(s: QueueState, reason: str, entries: list[Entry], out: list) -> None:
    """Messages leave the queue for `reason`: held (at-least-once), published (at-most-once) or
    dropped (no dead-letter exchange). They must be tracked when they arrive here."""
    if not entries:
        return
    settings = s.config.settings
    handler = settings.dead_letter_handler
    if handler == AT_LEAST_ONCE and reason != MAXLEN:
        for entry in entries:
            s.dlx.hold(reason, entry)
        return
    tracked = s.tracked
    for entry in entries:
        tracked.discard(entry[0])
    if handler is not None:
        out.append(DeadLetter(reason, settings.dead_letter_exchange, settings.dead_letter_routing_key,
                              tuple((e[0], e[3]) for e in entries)))


def _deliver(s: QueueState, out: list) -> None:
    """Hand ready messages to consumers with credit (rabbit_fifo:checkout0/checkout_one)."""
    ready, consumers, service, tracked = s.ready, s.consumers, s.service, s.tracked
    batches: dict[Key, list] | None = None
    expired: list[Entry] = []
    now = s.now_ms
    while ready.count:
        if ready.expiring:
            expiry = ready.next_expiry()
            if expiry != NO_EXPIRY and now >= expiry:
                expired.append(ready.take())
                continue
        key = service.pop()
        if key is None:
            break
        con = consumers.get(key)
        if con is None or con.credit <= 0 or con.status is not UP:
            continue  # a stale service queue entry
        entry = ready.take()
        msg_id = s.next_msg_id
        s.next_msg_id = msg_id + 1
        con.credit -= 1
        if con.ack:
            con.checked[msg_id] = entry
            s.unacked += 1
            s.unacked_bytes += entry[1]
        else:
            tracked.discard(entry[0])
        if batches is None:
            batches = {}
        batch = batches.get(key)
        if batch is None:
            batches[key] = batch = [con.delivered]
        batch.append((msg_id, entry[0], entry[3]))
        con.delivered += 1
        if con.credit > 0:
            service.push(key, con.priority)
    _dead_letter(s, EXPIRED, expired, out)
    if batches is not None:
        for (channel, tag), batch in batches.items():
            out.append(Deliver(channel, tag, batch[0], tuple(batch[1:])))


def _over_limit(s: QueueState) -> bool:
    settings = s.config.settings
    max_length, max_bytes = settings.max_length, settings.max_length_bytes
    return ((max_length is not None and len(s.ready) + len(s.dlx) > max_length)
            or (max_bytes is not None and s.ready.bytes + s.dlx.bytes > max_bytes))


def _below_soft_limit(s: QueueState) -> bool:
    settings = s.config.settings
    max_length, max_bytes = settings.max_length, settings.max_length_bytes
    return ((max_length is None or len(s.ready) + len(s.dlx) <= int(max_length * SOFT_LIMIT_RATIO))
            and (max_bytes is None or s.ready.bytes + s.dlx.bytes <= int(max_bytes * SOFT_LIMIT_RATIO)))


def _evaluate_limit(s: QueueState, out: list) -> None:
    """x-max-length / x-max-length-bytes (rabbit_fifo:evaluate_limit/5)."""
    if not s.config.settings.limited:
        s.blocked = False
        return
    if _over_limit(s):
        if s.config.settings.overflow == DROP_HEAD:
            dropped = []
            while _over_limit(s):
                entry = s.ready.take()
                if entry is None:
                    break
                dropped.append(entry)
            _dead_letter(s, MAXLEN, dropped, out)
        else:
            s.blocked = True
    elif s.blocked and _below_soft_limit(s):
        s.blocked = False


def _arm_timers(s: QueueState, out: list) -> None:
    """Ask for a Tick when the head message expires and when the queue would expire. A timer
    already asked for is replaced only by an earlier one: a late Tick finds nothing to do and
    asks again, which costs less than an effect per delivery in a TTL queue."""
    expiry = s.ready.next_expiry() if s.ready.expiring else None
    if expiry is not None and expiry != NO_EXPIRY and (s.msg_timer_at is None or expiry < s.msg_timer_at):
        s.msg_timer_at = expiry
        out.append(Timer(EXPIRE_MSGS, expiry))
    expires = s.config.settings.expires_ms
    if expires is not None and not s.consumers and not s.delete_requested:  # asked once is enough
        due = s.last_active + expires + 1  # expired only once strictly past it
        if s.queue_timer_at is None or due < s.queue_timer_at:
            s.queue_timer_at = due
            out.append(Timer(QUEUE_EXPIRY, due))


def _release(index: int, s: QueueState, out: list) -> None:
    """RabbitMQ's release cursor: say how much of the log the state no longer needs, at once when
    the queue just let go of its last message, else every RELEASE_INTERVAL_ENTRIES entries (a
    walk of the held messages) if the lowest live index moved."""
    if not s.tracked and not s.ready.count:
        if s.released_upto < s.last_message_index:
            s.released_upto = index
            out.append(Release(index))
    elif index - s.release_checked >= RELEASE_INTERVAL_ENTRIES:
        s.release_checked = index
        upto = lowest_live_index(s) - 1
        if upto > s.released_upto:
            s.released_upto = upto
            out.append(Release(upto))


def _finish(index: int, s: QueueState, out: list) -> list:
    """What every command ends with (rabbit_fifo:checkout/4 and the aux release cursor)."""
    _deliver(s, out)
    dlx = s.dlx
    if dlx.worker is not None and dlx.discards and s.config.settings.dead_letter_handler == AT_LEAST_ONCE:
        out.append(DeadLetterDeliver(dlx.worker, tuple(dlx.checkout())))
    _evaluate_limit(s, out)
    _arm_timers(s, out)
    _release(index, s, out)
    return out


# -- consumers ------------------------------------------------------------------------------------

def _active(s: QueueState) -> tuple[Key, Consumer] | None:
    for key, con in s.consumers.items():
        if con.status is UP or con.status is QUIESCING:
            return key, con
    return None


def _add_waiting(s: QueueState, key: Key, con: Consumer) -> None:
    s.waiting = [item for item in s.waiting if item[0] != key]
    s.waiting.append((key, con))
    s.waiting.sort(key=waiting_order)


def _update_or_remove(s: QueueState, key: Key, con: Consumer) -> None:
    """After a consumer's credit or unacked changed (rabbit_fifo:update_or_remove_con/4)."""
    if con.once and con.credit == 0:
        if not con.checked:
            s.consumers.pop(key, None)
            s.last_active = s.now_ms
    elif con.status is QUIESCING and not con.checked:
        con.status = UP
        del s.consumers[key]
        _add_waiting(s, key, con)
    elif con.credit > 0 and con.status is UP:
        s.service.push(key, con.priority)


def _promote(s: QueueState) -> None:
    """The first waiting consumer becomes the active one. Its key may still name a cancelled
    consumer holding unacked messages (the same tag, re-consumed): then that one takes the new
    settings and keeps its unacked messages."""
    key, con = s.waiting.pop(0)
    existing = s.consumers.get(key)
    if existing is not None:
        existing.reconfigure(con.priority, con.ack, con.prefetch, con.exclusive)
        con = existing
    s.consumers[key] = con
    if con.credit > 0:
        s.service.push(key, con.priority)


def _activate_next(s: QueueState) -> None:
    """Single active consumer: promote the first waiting consumer when none is active, or when
    it outranks the active one (at once if that one has nothing unacked, else once it has
    settled everything: it quiesces)."""
    if not s.config.single_active or not s.waiting:
        return
    active = _active(s)
    if active is None:
        _promote(s)
        return
    active_key, active_con = active
    if s.waiting[0][1].priority <= active_con.priority:
        return
    if active_con.checked:
        active_con.status = QUIESCING
        return
    del s.consumers[active_key]
    _promote(s)
    active_con.status = UP
    _add_waiting(s, active_key, active_con)


def _return_one(s: QueueState, con: Consumer, entry: Entry, dead: list[Entry], limited: bool = True) -> None:
    """A checked-out message comes back (already removed from `con.checked`); `limited`: the
    delivery limit applies to it (version 2 exempts a channel going down)."""
    index, size, expiry, count = entry
    s.unacked -= 1
    s.unacked_bytes -= size
    con.refill(1)
    entry = (index, size, expiry, count + 1)
    limit = s.config.settings.delivery_limit
    if limited and limit is not None and count + 1 > limit:
        dead.append(entry)
    else:
        s.ready.give_back(entry)


def _after_consumer_change(index: int, s: QueueState, key: Key, con: Consumer, out: list) -> list:
    _update_or_remove(s, key, con)
    _activate_next(s)
    return _finish(index, s, out)


# -- command handlers: (raft index, command, state) -> (state, reply, effects) ----------------------

Result = tuple[QueueState, Any, list]


def _enqueue(index: int, cmd: c.Enqueue, s: QueueState) -> Result:
    publisher = cmd.publisher
    if publisher is not None:
        expected = s.enqueuers.get(publisher, 1)
        if cmd.seq != expected:
            return s, (Reply.DUPLICATE if cmd.seq < expected else OutOfSequence(expected)), []
        s.enqueuers[publisher] = expected + 1
    if s.blocked:
        return s, Reply.REJECTED, []
    high, ttl = traits(cmd.header, s.config.settings.message_ttl_ms)
    expiry = NO_EXPIRY if ttl is None else s.now_ms + (ttl or 1)
    s.ready.enqueue(index, len(cmd.body), expiry, 0, high)
    s.last_message_index = index
    return s, Reply.OK, _finish(index, s, [])


def _checkout(index: int, cmd: c.Checkout, s: QueueState) -> Result:
    key = (cmd.channel, cmd.tag)
    prefetch = cmd.prefetch if cmd.prefetch > 0 else CREDIT_UNLIMITED
    existing = s.consumers.get(key)
    active = _active(s) if s.config.single_active else None
    if existing is not None and existing.status is QUIESCING:
        pass  # the active consumer, giving way, checked out again: channels refuse a tag in use
    elif existing is not None and (not s.config.single_active or active is None or active[0] == key):
        existing.reconfigure(cmd.priority, cmd.ack, prefetch, cmd.exclusive)
        _update_or_remove(s, key, existing)
    else:
        con = Consumer(cmd.priority, cmd.ack, prefetch, prefetch, attached=index,
                       exclusive=cmd.exclusive)
        if s.config.single_active:
            _add_waiting(s, key, con)
        else:
            s.consumers[key] = con
            _update_or_remove(s, key, con)
    _activate_next(s)
    out = _finish(index, s, [])
    active = _active(s) if s.config.single_active else None
    return s, ConsumerInfo(active is None or active[0] == key), out


def _credit(index: int, cmd: c.Credit, s: QueueState) -> Result:
    key = (cmd.channel, cmd.tag)
    con = s.consumers.get(key)
    if con is not None and not con.once:  # not a basic.get's or a cancelled consumer
        con.credit += max(0, cmd.credit)
        _update_or_remove(s, key, con)
        return s, Reply.OK, _finish(index, s, [])
    for waiting_key, waiting in s.waiting:
        if waiting_key == key:
            waiting.credit += max(0, cmd.credit)
            s.waiting.sort(key=waiting_order)
    return s, Reply.OK, []


def _cancel(index: int, cmd: c.Cancel, s: QueueState) -> Result:
    key = (cmd.channel, cmd.tag)
    con = s.consumers.get(key)
    if con is not None:
        con.once, con.credit, con.status = True, 0, CANCELLED
        return s, Reply.OK, _after_consumer_change(index, s, key, con, [])
    if not any(k == key for k, _ in s.waiting):
        return s, Reply.NOT_FOUND, []
    s.waiting = [item for item in s.waiting if item[0] != key]
    return s, Reply.OK, _finish(index, s, [])


def holders(s: QueueState, channel: str, tag: str,
             msg_ids: tuple[int, ...]) -> list[tuple[Key, Consumer, tuple[int, ...]]]:
    """The consumers a settlement names, each with its msg ids. An empty `tag` means whichever
    consumer of `channel` holds each id (msg ids are unique over the queue's life): the classic
    Settle message a channel sends names no consumer."""
    if tag:
        key = (channel, tag)
        con = s.consumers.get(key)
        return [] if con is None else [(key, con, msg_ids)]
    mine = [(key, con) for key, con in s.consumers.items() if key[0] == channel]
    found: dict[Key, list[int]] = {}
    for msg_id in msg_ids:
        for key, con in mine:
            if msg_id in con.checked:
                found.setdefault(key, []).append(msg_id)
                break
    return [(key, con, tuple(found[key])) for key, con in mine if key in found]


def _after_settlements(index: int, s: QueueState, held: list[tuple[Key, Consumer, tuple]],
                       out: list) -> list:
    for key, con, _ids in held:
        _update_or_remove(s, key, con)
    _activate_next(s)
    return _finish(index, s, out)


def _settle(index: int, cmd: c.Settle, s: QueueState) -> Result:
    held = holders(s, cmd.channel, cmd.tag, cmd.msg_ids)
    if not held:
        return s, Reply.OK, []
    tracked = s.tracked
    for _key, con, msg_ids in held:
        checked = con.checked
        settled = settled_bytes = 0
        for msg_id in msg_ids:
            entry = checked.pop(msg_id, None)
            if entry is not None:
                tracked.discard(entry[0])
                settled += 1
                settled_bytes += entry[1]
        s.unacked -= settled
        s.unacked_bytes -= settled_bytes
        con.refill(settled)
    return s, Reply.OK, _after_settlements(index, s, held, [])


def _take_checked(con: Consumer, msg_ids: tuple[int, ...]) -> list[Entry]:
    return [entry for entry in (con.checked.pop(i, None) for i in msg_ids) if entry is not None]


def _return(index: int, cmd: c.Return, s: QueueState) -> Result:
    held = holders(s, cmd.channel, cmd.tag, cmd.msg_ids)
    if not held:
        return s, Reply.OK, []
    dead: list[Entry] = []
    for _key, con, msg_ids in held:
        for entry in _take_checked(con, msg_ids):
            _return_one(s, con, entry, dead)
    out: list = []
    _dead_letter(s, DELIVERY_LIMIT, dead, out)
    return s, Reply.OK, _after_settlements(index, s, held, out)


def _discard(index: int, cmd: c.Discard, s: QueueState) -> Result:
    held = holders(s, cmd.channel, cmd.tag, cmd.msg_ids)
    if not held:
        return s, Reply.OK, []
    taken: list[Entry] = []
    for _key, con, msg_ids in held:
        mine = _take_checked(con, msg_ids)
        con.refill(len(mine))
        taken += mine
    s.unacked -= len(taken)
    s.unacked_bytes -= sum(e[1] for e in taken)
    out: list = []
    _dead_letter(s, REJECTED, [(e[0], e[1], e[2], e[3] + 1) for e in taken], out)
    return s, Reply.OK, _after_settlements(index, s, held, out)


def _requeue(index: int, cmd: c.Requeue, s: QueueState) -> Result:
    held = holders(s, cmd.channel, cmd.tag, (cmd.msg_id,))
    entry = held[0][1].checked.get(cmd.msg_id) if held else None
    if entry is None or entry[0] != cmd.index:
        return s, Reply.OK, []  # settled, returned or its channel went down meanwhile
    key, con, _ids = held[0]
    del con.checked[cmd.msg_id]
    s.unacked -= 1
    s.unacked_bytes -= entry[1]
    s.tracked.discard(entry[0])
    con.refill(1)
    s.ready.enqueue(index, entry[1], entry[2], entry[3] + 1, False)
    s.last_message_index = index
    return s, Reply.OK, _after_consumer_change(index, s, key, con, [])


def _channel_down(index: int, cmd: c.ChannelDown, s: QueueState, limited: bool = True) -> Result:
    s.enqueuers.pop(cmd.channel, None)
    return _consumers_down(index, cmd, s, limited)


def _consumers_down(index: int, cmd: c.ConsumersDown | c.ChannelDown, s: QueueState,
                    limited: bool = True) -> Result:
    channel = cmd.channel
    s.waiting = [item for item in s.waiting if item[0][0] != channel]
    dead: list[Entry] = []
    for key in [k for k in s.consumers if k[0] == channel]:
        con = s.consumers.pop(key)
        for msg_id in sorted(con.checked):
            _return_one(s, con, con.checked[msg_id], dead, limited)
        con.checked.clear()
        s.last_active = s.now_ms
    out: list = []
    _dead_letter(s, DELIVERY_LIMIT, dead, out)
    _activate_next(s)
    return s, Reply.OK, _finish(index, s, out)


def _purge(index: int, cmd: c.Purge, s: QueueState) -> Result:
    return s, Purged(s.ready.purge()), _finish(index, s, [])


def _get(index: int, cmd: c.Get, s: QueueState) -> Result:
    config = s.config
    if config.single_active:
        return s, AmqpError(RESOURCE_LOCKED,
                            f"cannot obtain access to locked queue '{config.name}' in vhost "
                            f"'{config.vhost}'. basic.get operations are not supported by quorum "
                            "queues with single active consumer", *BASIC_GET), []
    s.last_active = s.now_ms
    key = (cmd.channel, cmd.tag)
    out: list = []
    if not len(s.ready) or key in s.consumers:
        return s, Reply.EMPTY, _finish(index, s, out)
    _dead_letter(s, EXPIRED, _expire_head(s), out)
    entry = s.ready.take()
    if entry is None:
        return s, Reply.EMPTY, _finish(index, s, out)
    msg_id = s.next_msg_id
    s.next_msg_id += 1
    if cmd.ack:
        con = Consumer(0, True, 1, 0, attached=index, once=True)
        con.checked[msg_id] = entry
        con.delivered = 1
        s.consumers[key] = con
        s.unacked += 1
        s.unacked_bytes += entry[1]
    else:
        s.tracked.discard(entry[0])
    return s, GetOk(msg_id, entry[0], entry[3], len(s.ready)), _finish(index, s, out)


def _update_settings(index: int, cmd: c.UpdateSettings, s: QueueState) -> Result:
    was = s.config.settings.dead_letter_handler
    s.config = s.config.with_settings(cmd.settings)
    now = s.config.settings.dead_letter_handler
    out: list = []
    if was == AT_LEAST_ONCE and now != AT_LEAST_ONCE:
        # switching away drops what is held, as RabbitMQ does (and logs)
        s.tracked.difference_update(s.dlx.indexes())
        s.dlx = DeadLetterHold()
        out.append(StopDeadLetterWorker())
    elif now == AT_LEAST_ONCE and was != AT_LEAST_ONCE:
        out.append(StartDeadLetterWorker())
    return s, Reply.OK, _finish(index, s, out)


def _tick(index: int, cmd: c.Tick, s: QueueState) -> Result:
    s.msg_timer_at = s.queue_timer_at = None  # they fired
    expires = s.config.settings.expires_ms
    delete = (expires is not None and not s.consumers and s.now_ms > s.last_active + expires
              and not s.delete_requested)
    s.delete_requested |= delete
    out = _finish(index, s, [])
    if delete:
        out.append(DeleteQueue())
    return s, Reply.OK, out


def _dead_letter_checkout(index: int, cmd: c.DeadLetterCheckout, s: QueueState) -> Result:
    if s.config.settings.dead_letter_handler != AT_LEAST_ONCE:
        return s, Reply.OK, []
    s.dlx.attach(cmd.worker, cmd.prefetch)
    return s, Reply.OK, _finish(index, s, [])


def _dead_letter_settle(index: int, cmd: c.DeadLetterSettle, s: QueueState) -> Result:
    if s.config.settings.dead_letter_handler != AT_LEAST_ONCE:
        return s, Reply.OK, []
    s.tracked.difference_update(s.dlx.settle(cmd.msg_ids))
    return s, Reply.OK, _finish(index, s, [])


_HANDLERS: dict[type, Callable[[int, Any, QueueState], Result]] = {
    c.Enqueue: _enqueue, c.Checkout: _checkout, c.Credit: _credit, c.Cancel: _cancel,
    c.Settle: _settle, c.Return: _return, c.Discard: _discard, c.Requeue: _requeue,
    c.ChannelDown: _channel_down, c.Purge: _purge, c.Get: _get, c.UpdateSettings: _update_settings,
    c.Tick: _tick, c.DeadLetterCheckout: _dead_letter_checkout,
    c.DeadLetterSettle: _dead_letter_settle, c.ConsumersDown: _consumers_down,
}
_BY_VERSION: dict[int, dict[type, Callable[[int, Any, QueueState], Result]]] = {
    1: _HANDLERS,
    2: {**_HANDLERS,  # a consumer's channel going down is not a failed delivery
        c.ChannelDown: lambda index, cmd, s: _channel_down(index, cmd, s, limited=False),
        c.ConsumersDown: lambda index, cmd, s: _consumers_down(index, cmd, s, limited=False)},
}
assert sorted(_BY_VERSION) == list(range(1, MACHINE_VERSION + 1))


class QuorumMachine:
    """The Raft machine of one quorum queue (persist/raft/machine.py's Machine protocol)."""

    def __init__(self, config: QueueConfig, runs: int = 1) -> None:
        assert 1 <= runs <= MACHINE_VERSION, runs
        self.config = config
        self.runs = runs  # the newest version this member may run (its node's configuration)

    def version(self) -> int:
        return self.runs

    def init(self) -> QueueState:
        return QueueState(self.config)

    def apply(self, meta: Meta, command: bytes, state: QueueState) -> Result:
        """Apply one committed command; mutates and returns `state`. Undecodable bytes (a
        proposer's bug) change nothing and get Reply.INVALID, on every member alike."""
        try:
            cmd = c.decode(command)
        except ValueError:
            return state, Reply.INVALID, []
        if cmd.now_ms > state.now_ms:
            state.now_ms = cmd.now_ms
        return _BY_VERSION[meta.machine_version][type(cmd)](meta.index, cmd, state)

    def snapshot(self, state: QueueState) -> dict[str, Any]:
        return state.to_value()

    def restore(self, value: dict[str, Any]) -> QueueState:
        return QueueState.from_value(value)

    def live_indexes(self, state: QueueState) -> Iterator[int]:
        """Every Raft index the state refers to (RabbitMQ's release cursor is below the lowest):
        none once the queue is drained, so the whole log can go."""
        yield from state.ready.indexes()
        yield from state.tracked

    def replayed_effects(self, effects: list) -> list:
        """The effects of an entry applied again after a restart: no dead-lettering, whose copies a
        leader before the restart may have published already (a TTL'd message expired again
        on replay would otherwise reach its dead-letter queue twice, and a Celery countdown task
        run twice). At-least-once loses nothing by it: a new leader's worker attaches again and
        is handed every message not yet settled; at-most-once may drop the copy of a message
        whose entry no leader had applied before the restart, which its contract allows."""
        return [e for e in effects if type(e) is not DeadLetter and type(e) is not DeadLetterDeliver]

    def on_leader(self, state: QueueState) -> list:
        """What a member that just became leader carries out before new effects: the timers
        asked for, the dead-letter worker, a pending deletion (rabbit_fifo:state_enter(leader))."""
        out: list = []
        if state.config.settings.dead_letter_handler == AT_LEAST_ONCE:
            out.append(StartDeadLetterWorker())
        if state.msg_timer_at is not None:
            out.append(Timer(EXPIRE_MSGS, state.msg_timer_at))
        expires = state.config.settings.expires_ms
        if state.queue_timer_at is not None:
            out.append(Timer(QUEUE_EXPIRY, state.queue_timer_at))
        elif expires is not None and not state.consumers and not state.delete_requested:
            # a queue nobody has used yet has applied no command that armed its timer: it expires
            # from its creation (x-expires counts from declaration)
            out.append(Timer(QUEUE_EXPIRY, state.last_active + expires + 1))
        if state.delete_requested:
            out.append(DeleteQueue())
        return out


# -- queries the machine makes itself (the shell's are in queries.py) -------------------------------

def lowest_live_index(state: QueueState) -> int | None:
    """min(live_indexes(state)) without walking the columns."""
    candidates = [i for i in (state.ready.lowest_index(), min(state.tracked, default=None))
                  if i is not None]
    return min(candidates) if candidates else None
