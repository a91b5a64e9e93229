"""Which permission each channel operation needs, and the channel's cache of what it was allowed.

Theory of operation: RabbitMQ checks configure/write/read regexes per (user, vhost, resource) in
rabbit_channel before it touches the resource, so a refused operation fails with 403 ACCESS_REFUSED
even when the resource does not exist. The decisions are the registry's (metadata/access.py:
`check_permission` and, for topic exchanges, `check_topic_permission`); this module is the one
place a channel asks them, through its `PermissionCache`, which behaves as rabbit_channel 3.10's
process-dictionary caches do, because that is what decides how revocation reaches an open channel:
- a check that is allowed is remembered (`permission_cache`: resource, permission; and
  `topic_permission_cache`: exchange, routing key, permission), at most 12 of each
  (?MAX_PERMISSION_CACHE_SIZE), the newest first, the oldest dropped - a hit does not move;
  a refusal closes the channel, so nothing refused is remembered;
- a remembered answer stands while the channel runs, whatever the registry says meanwhile: a
  channel that published to an exchange keeps publishing to it after clear_permissions, a new
  channel (or a resource not remembered) is checked again, against the registry as it is now;
- both caches are forgotten when the channel hibernates (handle_pre_hibernate), which an idle
  channel does after gen_server2's backoff timeout (hibernation.py): an idle channel is checked
  again when it wakes.
The variable map of a topic check is AMQP 0-9-1's: the user's name and the vhost.
Deliberately left out: nothing; the registry's answers are exact, only their caching is RabbitMQ's.
"""
from __future__ import annotations

from typing import Any

from wire.errors import AmqpError

CONFIGURE, WRITE, READ = "configure", "write", "read"
QUEUE, EXCHANGE = "queue", "exchange"
DEFAULT_EXCHANGE_RESOURCE = "amq.default"
cache_entries_max = 12  # rabbit_channel's ?MAX_PERMISSION_CACHE_SIZE, for each of the two caches


class PermissionCache:
    """The allowed checks of one channel (the user's, in its vhost), as rabbit_channel caches them."""

    __slots__ = ("_router", "_user", "_vhost", "_variables", "_allowed", "_topics")

    def __init__(self, router: Any, user: str, vhost: str) -> None:
        self._router = router
        self._user = user
        self._vhost = vhost
        self._variables = {"username": user, "vhost": vhost}  # build_topic_variable_map for AMQP 0-9-1
        self._allowed: dict[tuple[str, str, str], None] = {}  # insertion order: the oldest first
        self._topics: dict[tuple[str, str, str], None] = {}

    def check(self, perm: str, kind: str, name: str) -> AmqpError | None:
        """None when `user` holds `perm` on the resource, else the 403 to close the channel with."""
        if kind == EXCHANGE and name == "":
            name = DEFAULT_EXCHANGE_RESOURCE
        key = (perm, kind, name)
        if key in self._allowed:
            return None
        ask = getattr(self._router, "check_permission", None)
        refused = ask(self._user, self._vhost, perm, kind, name) if ask is not None else None
        if refused is None:
            _remember(self._allowed, key)
        return refused

    def check_topic(self, exchange: Any, perm: str, routing_key: str) -> AmqpError | None:
        """check_topic_authorisation: only a topic exchange has topic permissions to check."""
        if exchange.type != "topic":
            return None
        key = (exchange.name, routing_key, perm)
        if key in self._topics:
            return None
        ask = getattr(self._router, "check_topic_permission", None)
        refused = (ask(self._user, self._vhost, exchange.name, perm, routing_key, self._variables)
                   if ask is not None else None)
        if refused is None:
            _remember(self._topics, key)
        return refused

    def forget(self) -> None:
        """clear_permission_cache: the channel hibernated."""
        self._allowed.clear()
        self._topics.clear()

    def __len__(self) -> int:
        return len(self._allowed) + len(self._topics)


def _remember(cache: dict, key: tuple) -> None:
    if len(cache) >= cache_entries_max:
        del cache[next(iter(cache))]
    cache[key] = None
