"""Which permission each channel operation needs, and the one place that asks the registry.

Theory of operation: RabbitMQ checks configure/write/read regexes per (user, vhost, resource) in
rabbit_channel before it touches the resource, so a refused operation fails with 403 ACCESS_REFUSED
even when the resource does not exist. The registry answers one question,
``check_permission(user, vhost, perm, kind, name) -> AmqpError | None``; `check` is the only caller.
The default exchange is named "amq.default" in permission checks, as RabbitMQ names it.

basic.publish is the hot path, so `PublishPermissions` keeps the answer per exchange until the
registry replica changes (the shell calls `clear` then): one dict lookup per publish.

Deliberately left out: topic permissions (check_write_permitted_on_topic) and the impersonator tag.
"""
from __future__ import annotations

from typing import Any

from wire.errors import AmqpError

CONFIGURE, WRITE, READ = "configure", "write", "read"
QUEUE, EXCHANGE = "queue", "exchange"
DEFAULT_EXCHANGE_RESOURCE = "amq.default"
publish_cache_entries_max = 1024


def check(router: Any, user: str, vhost: str, perm: str, kind: str, name: str) -> AmqpError | None:
    """None when `user` holds `perm` on the resource, else the 403 to close the channel with."""
    ask = getattr(router, "check_permission", None)
    if ask is None:  # a registry without permissions (only the built-in guest, who may do anything)
        return None
    if kind == EXCHANGE and name == "":
        name = DEFAULT_EXCHANGE_RESOURCE
    return ask(user, vhost, perm, kind, name)


class PublishPermissions:
    """Write permission per exchange, cached until the registry changes."""

    __slots__ = ("_router", "_user", "_vhost", "_known")

    def __init__(self, router: Any, user: str, vhost: str) -> None:
        self._router = router
        self._user = user
        self._vhost = vhost
        self._known: dict[str, AmqpError | None] = {}

    def check(self, exchange: str) -> AmqpError | None:
        known = self._known
        try:
            return known[exchange]
        except KeyError:
            pass
        if len(known) >= publish_cache_entries_max:
            known.clear()
        answer = known[exchange] = check(self._router, self._user, self._vhost, WRITE, EXCHANGE, exchange)
        return answer

    def clear(self) -> None:
        self._known.clear()
