"""Dead-lettering: the x-death rewrite of a message and where the dead-lettered copy goes.

Theory of operation (rabbit_dead_letter.erl, RabbitMQ 3.10, checked against the oracle): a message
dead-lettered from queue Q for reason R (rejected | expired | maxlen) is republished to the queue's
dead-letter exchange with its content header rewritten - the one place the broker re-encodes a
header:
- `x-death` (an array of tables, newest first) gains an entry {count, reason, queue, time, exchange,
  routing-keys[, original-expiration]}; if an entry for the same queue AND reason exists, only its
  count goes up (time, exchange, routing-keys stay as first recorded) and it moves to the front.
  A first entry keeps RabbitMQ's field order (count, reason, queue, time, exchange, routing-keys,
  original-expiration); later new or updated entries have their keys sorted, as rabbit_misc does.
  Older headers with several entries for one queue+reason are grouped first (keeping the first).
- the first time, `x-first-death-exchange/-queue/-reason` are added; the headers table ends sorted by
  key; `expiration` is removed (kept as original-expiration, so the copy does not expire again).
- routing keys: x-dead-letter-routing-key if set (and the CC header is then dropped), else the
  message's own routing key plus its CC/BCC header keys. x-death's routing-keys are always the
  original key plus CC/BCC.
- cycles: for a reason other than `rejected`, a target queue that already appears in x-death is
  skipped when no entry up to and including its own says `rejected` (a "fully automatic" cycle).
Delivery is at-most-once, as classic queues in 3.10: the copies are published without confirms; an
unknown dead-letter exchange or no matching binding drops the message.

Left out: BCC keys the channel already stripped cannot be recovered here, so a message published with
BCC and dead-lettered without x-dead-letter-routing-key is routed by its routing key and CC only.
"""
from __future__ import annotations

from typing import Any, Callable, Hashable, Protocol

from actors.messages.channel_queue import Publish, Published
from effects import Send
from persist.classic.message import BODY, EXCHANGE, HEADER, ROUTING_KEY, Message
from wire.codec import Timestamp
from wire.field_types import Int64
from wire.properties import HEADER_PROPS_OFFSET, BasicProperties, encode_content_header, parse_content_header

REJECTED = "rejected"
EXPIRED = "expired"
MAXLEN = "maxlen"
ROUTING_HEADERS = ("CC", "BCC")



class Router(Protocol):
    def route(self, vhost: str, exchange: str, routing_key: str, headers: Any = None) -> list[str]: ...


def _text(value: Any) -> Any:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value


def _key(entry: Any, name: str) -> Any:
    """An x-death entry's longstr field, or None (x_death_event_key)."""
    if not isinstance(entry, dict):
        return None
    value = entry.get(name)
    return _text(value) if isinstance(value, (str, bytes)) else None


def header_routes(headers: dict[str, Any]) -> list[str]:
    """The CC and BCC keys of a headers table (rabbit_basic:header_routes), ignoring non-arrays."""
    keys: list[str] = []
    for name in ROUTING_HEADERS:
        value = headers.get(name)
        if isinstance(value, (list, tuple)):
            keys.extend(_text(k) for k in value if isinstance(k, (str, bytes)))
    return keys


def _sorted(table: dict[str, Any]) -> dict[str, Any]:
    # Erlang sorts field tables by the key's bytes; UTF-8 byte order is code point order.
    return dict(sorted(table.items()))


def _grouped(deaths: list[Any]) -> list[Any]:
    """group_by_queue_and_reason: one entry per queue+reason, the first seen, counted if uncounted."""
    if len(deaths) <= 1:
        return list(deaths)
    seen: set[tuple] = set()
    out: list[Any] = []
    for entry in deaths:
        if not isinstance(entry, dict):
            out.append(entry)
            continue
        key = (_key(entry, "queue"), _key(entry, "reason"))
        if key in seen:
            continue
        seen.add(key)
        if "count" not in entry:
            same = sum(1 for e in deaths if isinstance(e, dict) and (_key(e, "queue"), _key(e, "reason")) == key)
            entry = {"count": Int64(same), **entry}
        out.append(entry)
    return out


def _update_x_death(headers: dict[str, Any], info: dict[str, Any]) -> dict[str, Any]:
    """update_x_death_header: the headers with this death recorded (not yet sorted)."""
    queue, reason = info["queue"], info["reason"]
    deaths = headers.get("x-death")
    if deaths is None:
        headers["x-first-death-exchange"] = info["exchange"]
        headers["x-first-death-reason"] = reason
        headers["x-first-death-queue"] = queue
        headers["x-death"] = [{"count": Int64(1), **info}]
        return headers
    if not isinstance(deaths, (list, tuple)):
        headers["x-death"] = [{"count": Int64(1), **info}]  # RabbitMQ logs and replaces an invalid x-death
        return headers
    grouped = _grouped(list(deaths))
    match = next((e for e in grouped if _key(e, "queue") == queue and _key(e, "reason") == reason), None)
    if match is None:
        entry = {"count": Int64(1), **info}
        others = grouped
    else:
        count = match.get("count")
        entry = {**match, "count": Int64(count + 1)} if isinstance(count, int) and not isinstance(count, bool) \
            else {"count": Int64(1), **match}
        others = [e for e in grouped if e is not match]
    headers["x-death"] = [_sorted(entry)] + others
    return headers


def rewrite(message: Message, reason: str, queue: str, dead_letter_routing_key: str | None,
            now_ms: int) -> tuple[list[str], bytes, dict[str, Any]]:
    """The dead-lettered copy: (routing keys to route with, new content header, its headers)."""
    header = message[HEADER]
    class_id, _, _ = parse_content_header(header)
    props = BasicProperties.decode(header, HEADER_PROPS_OFFSET)
    headers = dict(props.headers or {})
    routing_key = message[ROUTING_KEY]
    death_keys = [routing_key] + header_routes(headers)
    info: dict[str, Any] = {"reason": reason, "queue": queue, "time": Timestamp(now_ms // 1000),
                            "exchange": message[EXCHANGE], "routing-keys": death_keys}
    if props.expiration is not None:
        info["original-expiration"] = props.expiration
    headers = _update_x_death(headers, info)
    if dead_letter_routing_key is None:
        keys = death_keys
    else:
        keys = [dead_letter_routing_key]
        headers.pop("CC", None)
    props.headers = _sorted(headers)
    props.expiration = None
    return keys, encode_content_header(class_id, len(message[BODY]), props), props.headers


def is_cycle(queue: str, deaths: list[Any]) -> bool:
    """Whether dead-lettering to `queue` closes a cycle with no rejection in it (rabbit_dead_letter)."""
    for entry in deaths:
        if not isinstance(entry, dict):
            return False  # something a client put there: not a fully automatic cycle
        if _key(entry, "reason") == REJECTED:
            return False
        if _key(entry, "queue") == queue:
            return True
    return False


def dead_letter(router: Router, place: Callable[[str, str], Hashable], vhost: str, queue: str,
                messages: list[Message], reason: str, exchange: str, routing_key: str | None,
                now_ms: int) -> list[Send]:
    """One `Send(queue_address, Publish(batch))` per target queue for the dead-lettered copies
    (seq 0: nobody waits for a confirm, at-most-once as RabbitMQ 3.10's classic queues)."""
    batches: dict[Hashable, list[Published]] = {}
    for message in messages:
        record, targets = copy_and_targets(router, vhost, queue, message, reason, exchange, routing_key, now_ms)
        for name in targets:
            batches.setdefault(place(vhost, name), []).append(record)
    return [Send(to, Publish(batch)) for to, batch in batches.items()]


def copy_and_targets(router: Router, vhost: str, queue: str, message: Message, reason: str, exchange: str,
                     routing_key: str | None, now_ms: int) -> tuple[Published, list[str]]:
    """One message's dead-lettered copy (seq 0) and the names of the queues it goes to, cycles left out."""
    keys, header, headers = rewrite(message, reason, queue, routing_key, now_ms)
    deaths = headers["x-death"]
    targets: dict[str, None] = {}
    for key in keys:
        targets.update(dict.fromkeys(router.route(vhost, exchange, key, headers)))
    record = Published(0, exchange, keys[0], header, message[BODY])
    return record, [name for name in targets if reason == REJECTED or not is_cycle(name, deaths)]
