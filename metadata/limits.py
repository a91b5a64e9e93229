"""Vhost and user limits, and the refusals they make: RabbitMQ 3.10's rabbit_vhost_limit and the
limits of rabbit_auth_backend_internal's users.

Theory of operation: `LimitTable` is plain state - each vhost's limits value (RabbitMQ keeps it as
the runtime parameter `vhost-limits`/`limits`; `{}` is a value, distinct from none) and each
user's limits - changed only by the records `VhostLimitsSet`, `VhostLimitsCleared` and
`UserLimitsSet` (changes.py); a vhost's limits go with the vhost, a user's with the user. Its
commands validate as RabbitMQ does and answer its texts: a vhost's value replaces the old one
(`set_vhost_limits`) or, from the HTTP API, one limit is merged in; a user's values are always
merged in (internal_user:update_limits). Validation is rabbit_parameter_validation:proplist's: the
keys not known are reported first ("Unrecognised terms [...] in limits"), then each known key whose
value is not an integer, printed as Erlang's `~p` prints the JSON term.

The refusals are pure functions of the limits and the counts the caller brings (a connection
host counts the connections and channels of the whole cluster, actors/reader/tracking.py; a vhost's
queues are the registry's own): a limit below 0 means none, 0 refuses everything, N refuses once N
are there - RabbitMQ's is_over_connection_limit / is_over_channel_limit / is_over_queue_limit.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from metadata.admin_errors import AdminError
from metadata.changes import Change, Emit, UserLimitsSet, VhostLimitsCleared, VhostLimitsSet
from metadata.commands import ClearUserLimits, ClearVhostLimits, SetUserLimits, SetVhostLimits
from wire.errors import NOT_ALLOWED, PRECONDITION_FAILED, AmqpError

MAX_CONNECTIONS, MAX_QUEUES, MAX_CHANNELS = "max-connections", "max-queues", "max-channels"
VHOST_LIMITS = (MAX_CONNECTIONS, MAX_QUEUES)
USER_LIMITS = (MAX_CONNECTIONS, MAX_CHANNELS)
ALL = "all"


def erlang_term(value: Any) -> str:
    """A JSON value as Erlang's ~p prints what RabbitMQ's JSON decoder made of it."""
    if value is True or value is False or value is None:
        return "null" if value is None else str(value).lower()
    if isinstance(value, str):
        return '<<"' + value.replace("\\", "\\\\").replace('"', '\\"') + '">>'
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _erlang_float(value)
    if isinstance(value, list):
        return "[" + ",".join(erlang_term(v) for v in value) + "]"
    if isinstance(value, dict):
        return "#{" + ",".join(f"{erlang_term(k)} => {erlang_term(v)}" for k, v in sorted(value.items())) + "}"
    return repr(value)


def _erlang_float(value: float) -> str:
    """~p of a float: shortest round-trip digits, always with a point, exponent without "+" (1.0e20)."""
    mantissa, _, exponent = repr(value).partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    return f"{mantissa}e{int(exponent)}" if exponent else mantissa


def validation_errors(limits: Mapping[str, Any], known: tuple[str, ...], name: str) -> list[str]:
    """rabbit_parameter_validation:proplist with rabbit_parameter_validation:integer for each key."""
    errors = []
    unknown = sorted((k, v) for k, v in limits.items() if k not in known)
    if unknown:
        terms = ",".join(f"{{{erlang_term(k)},{erlang_term(v)}}}" for k, v in unknown)
        errors.append(f"Unrecognised terms [{terms}] in {name}")
    for key in reversed(known):  # the fold prepends each constraint's result
        if key in limits and (type(limits[key]) is not int):
            errors.append(f"{key} should be a number, actually was {erlang_term(limits[key])}")
    return errors


def limit_of(limits: Mapping[str, Any] | None, key: str) -> int | None:
    """rabbit_vhost_limit:get_limit: the limit in force, None for none (missing or negative)."""
    value = (limits or {}).get(key)
    if type(value) is not int or value < 0:
        return None
    return value


def as_json(limits: Mapping[str, Any]) -> str:
    """The limits as rabbitmqctl prints them (keys sorted, no spaces)."""
    return json.dumps(dict(sorted(limits.items())), separators=(",", ":"))


class LimitTable:
    def __init__(self, vhost_exists: Callable[[str], bool], user_exists: Callable[[str], bool]) -> None:
        self.vhosts: dict[str, dict[str, Any]] = {}
        self.users: dict[str, dict[str, Any]] = {}
        self._vhost_exists = vhost_exists
        self._user_exists = user_exists

    # ---------------------------------------------------------------- change records
    def vhost_limits_set(self, c: VhostLimitsSet) -> None:
        self.vhosts[c.vhost] = dict(c.limits)

    def vhost_limits_cleared(self, c: VhostLimitsCleared) -> None:
        self.vhosts.pop(c.vhost, None)

    def user_limits_set(self, c: UserLimitsSet) -> None:
        if c.limits:
            self.users[c.user] = dict(c.limits)
        else:
            self.users.pop(c.user, None)

    def vhost_deleted(self, vhost: str) -> None:
        self.vhosts.pop(vhost, None)

    def user_deleted(self, user: str) -> None:
        self.users.pop(user, None)

    def reset(self) -> None:
        self.vhosts.clear()
        self.users.clear()

    def snapshot(self) -> list[Change]:
        return ([VhostLimitsSet(v, dict(limits)) for v, limits in sorted(self.vhosts.items())]
                + [UserLimitsSet(u, dict(limits)) for u, limits in sorted(self.users.items())])

    # ---------------------------------------------------------------- commands
    def set_vhost(self, cmd: SetVhostLimits, emit: Emit) -> AdminError | None:
        if not self._vhost_exists(cmd.vhost):
            return AdminError(f"Virtual host '{cmd.vhost}' does not exist", 65)
        errors = validation_errors(cmd.limits, VHOST_LIMITS, "limits")
        if errors:
            return AdminError("Validation failed\n\n" + "".join(e + "\n" for e in errors))
        limits = {**self.vhosts.get(cmd.vhost, {}), **cmd.limits} if cmd.merge else dict(cmd.limits)
        emit(VhostLimitsSet(cmd.vhost, limits))
        return None

    def clear_vhost(self, cmd: ClearVhostLimits, emit: Emit) -> AdminError | None:
        if cmd.name is not None:  # the HTTP API's DELETE of one limit: the rest stays, as a value
            if self._vhost_exists(cmd.vhost):
                emit(VhostLimitsSet(cmd.vhost, {k: v for k, v in self.vhosts.get(cmd.vhost, {}).items()
                                                if k != cmd.name}))
            return None
        if cmd.vhost not in self.vhosts:
            return AdminError("Parameter does not exist")
        emit(VhostLimitsCleared(cmd.vhost))
        return None

    def set_user(self, cmd: SetUserLimits, emit: Emit) -> AdminError | None:
        if not self._user_exists(cmd.user):
            return AdminError(f'{{:no_such_user, "{cmd.user}"}}')
        errors = validation_errors(cmd.limits, USER_LIMITS, "user-limits")
        if errors:
            return AdminError(errors[0])
        emit(UserLimitsSet(cmd.user, {**self.users.get(cmd.user, {}), **cmd.limits}))
        return None

    def clear_user(self, cmd: ClearUserLimits, emit: Emit) -> AdminError | None:
        if not self._user_exists(cmd.user):
            return AdminError(f'{{:no_such_user, "{cmd.user}"}}')
        have = self.users.get(cmd.user, {})
        emit(UserLimitsSet(cmd.user, {} if cmd.name == ALL else {k: v for k, v in have.items() if k != cmd.name}))
        return None

    # ---------------------------------------------------------------- decisions
    def vhost_limit(self, vhost: str, key: str) -> int | None:
        return limit_of(self.vhosts.get(vhost), key)

    def user_limit(self, user: str, key: str) -> int | None:
        return limit_of(self.users.get(user), key)

    def connection_refusal(self, user: str, vhost: str, vhost_connections: int,
                           user_connections: int) -> AmqpError | None:
        """connection.open: the vhost's limit, then the user's (rabbit_reader's order), with the
        connections the cluster has open now."""
        limit = self.vhost_limit(vhost, MAX_CONNECTIONS)
        if limit is not None and vhost_connections >= limit:
            return AmqpError(NOT_ALLOWED, f"access to vhost '{vhost}' refused for user '{user}': "
                                          f"connection limit ({limit}) is reached", 10, 40)
        limit = self.user_limit(user, MAX_CONNECTIONS)
        if limit is not None and user_connections >= limit:
            return AmqpError(NOT_ALLOWED, f"connection refused for user '{user}': "
                                          f"user connection limit ({limit}) is reached", 10, 40)
        return None

    def channel_refusal(self, user: str, user_channels: int) -> AmqpError | None:
        """channel.open: a connection error (530, class and method 0, as rabbit_reader's 'none')."""
        limit = self.user_limit(user, MAX_CHANNELS)
        if limit is not None and user_channels >= limit:
            return AmqpError(NOT_ALLOWED, f"number of channels opened for user '{user}' has reached the "
                                          f"maximum allowed user limit of ({limit})", connection=True)
        return None

    def queue_refusal(self, vhost: str, name: str, queues: int) -> AmqpError | None:
        """queue.declare of a new queue while the vhost holds `queues` (406, the channel closes)."""
        limit = self.vhost_limit(vhost, MAX_QUEUES)
        if limit is not None and queues >= limit:
            return AmqpError(PRECONDITION_FAILED,
                             f"cannot declare queue '{name}': queue limit in vhost '{vhost}' ({limit}) is reached")
        return None

    def tracked_vhosts(self) -> frozenset[str]:
        """The vhosts whose connections the cluster must count (they have a connection limit)."""
        return frozenset(v for v in self.vhosts if self.vhost_limit(v, MAX_CONNECTIONS) is not None)

    def tracked_users(self) -> frozenset[str]:
        return frozenset(u for u in self.users if self.user_limit(u, MAX_CONNECTIONS) is not None
                         or self.user_limit(u, MAX_CHANNELS) is not None)
