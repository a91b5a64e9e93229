"""Users, their permissions and topic permissions per vhost, and the access decisions RabbitMQ's
internal backend makes: logins, vhost access, resource and topic permissions, impersonation.

Theory of operation: `AccessControl` is plain state (users by name, permissions by (user, vhost),
topic permissions by (user, vhost) then exchange) changed only by applying change records
(`UserSet`, `UserDeleted`, `PermissionSet`, `PermissionCleared`, `TopicPermissionSet`,
`TopicPermissionCleared`, changes.py), so the node's copy and every connection host's replica agree
after the same records. Its commands (`AddUser`, `RemoveUser`, `ChangePassword`, `SetUserTags`,
`SetPermissions`, `ClearPermissions`, `SetTopicPermissions`, `ClearTopicPermissions`, commands.py)
validate as rabbitmqctl 3.10 does, answer `AdminError` values with its texts, and emit the records
through the registry (which applies each one as it is emitted). Deleting a user clears its
permissions and topic permissions first, as rabbit_auth_backend_internal:delete_user does.

Every allow-or-deny about who may connect and touch what is a query here, a pure function of this
state and the facts of the request (the shells gather the facts - the password, the certificate's
name, the peer - and carry out the answer):
- `login(user, password)`: the salted hash compared in constant time (passwords.py); a user that
  does not exist is checked against a dummy hash, so the answer takes the same work either way
  (RabbitMQ answers a missing user at once); `login_external(user)`: the EXTERNAL mechanism's
  passwordless login (rabbit_auth_backend_internal with no password in the auth props);
- `vhost_access_error`: connection.open to a vhost without permissions there (530);
- `check_permission`: a configure/write/read regex, matched as rabbit_auth_backend_internal does:
  an unanchored search (re:run), "" meaning "^$", the default exchange named "amq.default";
- `check_topic_permission`: the write or read regex of the user's topic permission for that
  exchange, with `{username}` and `{vhost}` (and whatever else the variable map holds: MQTT's
  `{client_id}`, never AMQP 0-9-1's) replaced in the regex first, as rabbit_misc:
  expand_topic_permission does (plain text replacement, no escaping), then matched against the
  routing key; no topic permission for the exchange allows everything;
- `may_impersonate(tags)`: the `impersonator` tag lets a user publish with another user-id.
Compiled patterns are cached per string. Plain passwords are never stored here.
Deliberately left out: other auth backends, and PCRE's dialect (patterns are Python's `re`).
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from metadata import passwords
from metadata.admin_errors import EX_NOUSER, EX_SOFTWARE, AdminError, no_user
from metadata.changes import (Change, Emit, PermissionCleared, PermissionSet, TopicPermissionCleared,
                              TopicPermissionSet, UserDeleted, UserSet)
from metadata.commands import (AddUser, ChangePassword, ClearPermissions, ClearTopicPermissions, RemoveUser,
                               SetPermissions, SetTopicPermissions, SetUserTags)
from wire.errors import ACCESS_REFUSED, NOT_ALLOWED, AmqpError

PERMS = ("configure", "write", "read")
TOPIC_PERMS = ("write", "read")
KINDS = ("queue", "exchange")
DEFAULT_EXCHANGE_ALIAS = "amq.default"
IMPERSONATOR = "impersonator"
pattern_cache_entries_max = 4096
# what a login for a user that does not exist is checked against: same length and work as a real one
_ABSENT_USER_HASH = passwords.hash_password("", b"\x00" * passwords.salt_bytes)


@dataclass(frozen=True, slots=True)
class User:
    name: str
    password_hash: str
    tags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Permission:
    user: str
    vhost: str
    configure: str
    write: str
    read: str


@dataclass(frozen=True, slots=True)
class TopicPermission:
    user: str
    vhost: str
    exchange: str
    write: str
    read: str


def compile_pattern(pattern: str) -> re.Pattern | str:
    """The compiled regex, or the error text when it is invalid."""
    try:
        return re.compile(pattern or "^$")
    except re.error as e:
        return f"{e.msg} at position {e.pos}"


def expand_topic_pattern(pattern: str, variables: Mapping[str, str]) -> str:
    """rabbit_misc:expand_topic_permission: every `{name}` of the map replaced by its value."""
    for name, value in variables.items():
        pattern = pattern.replace("{" + name + "}", value)
    return pattern


def may_impersonate(tags: tuple[str, ...] | frozenset[str]) -> bool:
    """Whether a user with these tags may publish with a user-id that is not its own."""
    return IMPERSONATOR in tags


class AccessControl:
    def __init__(self, vhost_exists: Callable[[str], bool]) -> None:
        self.users: dict[str, User] = {}
        self.permissions: dict[tuple[str, str], Permission] = {}
        self.topic_permissions: dict[tuple[str, str], dict[str, TopicPermission]] = {}
        self._patterns: dict[str, re.Pattern] = {}
        self._vhost_exists = vhost_exists

    # ---------------------------------------------------------------- change records
    def user_set(self, c: UserSet) -> None:
        self.users[c.name] = User(c.name, c.password_hash, tuple(c.tags))

    def user_deleted(self, c: UserDeleted) -> None:
        self.users.pop(c.name, None)

    def permission_set(self, c: PermissionSet) -> None:
        self.permissions[(c.user, c.vhost)] = Permission(c.user, c.vhost, c.configure, c.write, c.read)

    def permission_cleared(self, c: PermissionCleared) -> None:
        self.permissions.pop((c.user, c.vhost), None)

    def topic_permission_set(self, c: TopicPermissionSet) -> None:
        self.topic_permissions.setdefault((c.user, c.vhost), {})[c.exchange] = TopicPermission(
            c.user, c.vhost, c.exchange, c.write, c.read)

    def topic_permission_cleared(self, c: TopicPermissionCleared) -> None:
        by_exchange = self.topic_permissions.get((c.user, c.vhost))
        if by_exchange is not None:
            by_exchange.pop(c.exchange, None)
            if not by_exchange:
                del self.topic_permissions[(c.user, c.vhost)]

    def reset(self) -> None:
        self.users.clear()
        self.permissions.clear()
        self.topic_permissions.clear()

    def snapshot(self) -> list[Change]:
        out: list[Change] = [UserSet(u.name, u.password_hash, u.tags) for _, u in sorted(self.users.items())]
        out += [PermissionSet(p.user, p.vhost, p.configure, p.write, p.read)
                for _, p in sorted(self.permissions.items())]
        out += [TopicPermissionSet(t.user, t.vhost, t.exchange, t.write, t.read) for t in self.topic_permission_list()]
        return out

    # ---------------------------------------------------------------- commands
    def add_user(self, cmd: AddUser, emit: Emit) -> AdminError | None:
        if cmd.name in self.users:
            return AdminError(f'User "{cmd.name}" already exists', EX_SOFTWARE)
        emit(UserSet(cmd.name, cmd.password_hash, tuple(cmd.tags)))
        return None

    def remove_user(self, cmd: RemoveUser, emit: Emit) -> AdminError | None:
        if cmd.name not in self.users:
            return no_user(cmd.name)
        for p in self.permissions_of_user(cmd.name):
            emit(PermissionCleared(p.user, p.vhost))
        for t in self.topic_permission_list(user=cmd.name):
            emit(TopicPermissionCleared(t.user, t.vhost, t.exchange))
        emit(UserDeleted(cmd.name))
        return None

    def change_password(self, cmd: ChangePassword, emit: Emit) -> AdminError | None:
        u = self.users.get(cmd.name)
        if u is None:
            return no_user(cmd.name)
        emit(UserSet(u.name, cmd.password_hash, u.tags))
        return None

    def set_user_tags(self, cmd: SetUserTags, emit: Emit) -> AdminError | None:
        u = self.users.get(cmd.name)
        if u is None:
            return no_user(cmd.name)
        emit(UserSet(u.name, u.password_hash, tuple(cmd.tags)))
        return None

    def set_permissions(self, cmd: SetPermissions, emit: Emit) -> AdminError | None:
        """rabbit_auth_backend_internal:set_permissions: regexes first, then the user, then the vhost."""
        error = self._patterns_error((cmd.configure, cmd.write, cmd.read)) or self._user_and_vhost_error(
            cmd.user, cmd.vhost)
        if error is not None:
            return error
        emit(PermissionSet(cmd.user, cmd.vhost, cmd.configure, cmd.write, cmd.read))
        return None

    def clear_permissions(self, cmd: ClearPermissions, emit: Emit) -> AdminError | None:
        error = self._user_and_vhost_error(cmd.user, cmd.vhost)
        if error is not None:
            return error
        if (cmd.user, cmd.vhost) in self.permissions:
            emit(PermissionCleared(cmd.user, cmd.vhost))
        return None

    def set_topic_permissions(self, cmd: SetTopicPermissions, emit: Emit) -> AdminError | None:
        """set_topic_permissions: the regexes, then the user, then the vhost (its checks' order)."""
        error = self._patterns_error((cmd.write, cmd.read)) or self._user_and_vhost_error(cmd.user, cmd.vhost)
        if error is not None:
            return error
        emit(TopicPermissionSet(cmd.user, cmd.vhost, cmd.exchange, cmd.write, cmd.read))
        return None

    def clear_topic_permissions(self, cmd: ClearTopicPermissions, emit: Emit) -> AdminError | None:
        error = self._user_and_vhost_error(cmd.user, cmd.vhost)
        if error is not None:
            return error
        for t in self.topic_permission_list(vhost=cmd.vhost, user=cmd.user):
            if cmd.exchange is None or t.exchange == cmd.exchange:
                emit(TopicPermissionCleared(t.user, t.vhost, t.exchange))
        return None

    def _patterns_error(self, patterns: tuple[str, ...]) -> AdminError | None:
        for pattern in patterns:
            compiled = compile_pattern(pattern)
            if isinstance(compiled, str):
                return AdminError(f"invalid regular expression '{pattern}': {compiled}")
        return None

    def _user_and_vhost_error(self, user: str, vhost: str) -> AdminError | None:
        if user not in self.users:
            return AdminError(f"User {user} does not exist", EX_NOUSER)
        if not self._vhost_exists(vhost):
            return AdminError(f"Virtual host {vhost} does not exist")
        return None

    def vhost_deleted(self, vhost: str) -> list[Change]:
        """The records that clear a vhost's permissions and topic permissions before it goes."""
        out: list[Change] = [PermissionCleared(p.user, p.vhost) for p in self.permissions_of_vhost(vhost)]
        out += [TopicPermissionCleared(t.user, t.vhost, t.exchange) for t in self.topic_permission_list(vhost=vhost)]
        return out

    # ---------------------------------------------------------------- decisions
    def login(self, user: str, password: str) -> bool:
        """PLAIN/AMQPLAIN: the password against the user's hash, in the same work whether the user
        exists or not (a missing user is checked against a hash no password matches, then refused)."""
        u = self.users.get(user)
        matched = passwords.check_password(password, u.password_hash if u is not None else _ABSENT_USER_HASH)
        return matched and u is not None

    def login_external(self, user: str) -> bool:
        """EXTERNAL: the certificate's name is the user, who must exist (no password is checked)."""
        return user in self.users

    def tags_of(self, user: str) -> tuple[str, ...]:
        u = self.users.get(user)
        return u.tags if u is not None else ()

    def can_access_vhost(self, user: str, vhost: str) -> bool:
        return (user, vhost) in self.permissions

    def vhost_access_error(self, user: str, vhost: str) -> AmqpError | None:
        """connection.open to a vhost the user has no permissions on: 530, as RabbitMQ 3.10."""
        if self.can_access_vhost(user, vhost):
            return None
        return AmqpError(NOT_ALLOWED, f"access to vhost '{vhost}' refused for user '{user}'", 10, 40)

    def check_permission(self, user: str, vhost: str, perm: str, kind: str, name: str) -> AmqpError | None:
        assert perm in PERMS and kind in KINDS, (perm, kind)
        if kind == "exchange" and name == "":
            name = DEFAULT_EXCHANGE_ALIAS
        p = self.permissions.get((user, vhost))
        if p is not None and self._pattern(getattr(p, perm)).search(name) is not None:
            return None
        return AmqpError(ACCESS_REFUSED, f"access to {kind} '{name}' in vhost '{vhost}' refused for user '{user}'")

    def check_topic_permission(self, user: str, vhost: str, exchange: str, perm: str, routing_key: str,
                               variables: Mapping[str, str]) -> AmqpError | None:
        """rabbit_auth_backend_internal:check_topic_access for a topic exchange; `variables` is the
        channel's variable map (username and vhost for AMQP 0-9-1)."""
        assert perm in TOPIC_PERMS, perm
        t = self.topic_permissions.get((user, vhost), {}).get(exchange)
        if t is None:
            return None
        pattern = expand_topic_pattern(getattr(t, perm) or "^$", variables)
        if self._pattern(pattern).search(routing_key) is not None:
            return None
        return AmqpError(ACCESS_REFUSED, f"access to topic '{routing_key}' in exchange '{exchange}' in vhost "
                                         f"'{vhost}' refused for user '{user}'")

    def _pattern(self, pattern: str) -> re.Pattern:
        compiled = self._patterns.get(pattern)
        if compiled is None:
            got = compile_pattern(pattern)
            # the commands validate, so an invalid pattern here came from an edited file or from a
            # variable's value: deny all
            compiled = got if isinstance(got, re.Pattern) else re.compile(r"(?!)")
            if len(self._patterns) >= pattern_cache_entries_max:
                self._patterns.clear()
            self._patterns[pattern] = compiled
        return compiled

    # ---------------------------------------------------------------- listings
    def permissions_of_vhost(self, vhost: str) -> list[Permission]:
        return [p for (_, v), p in sorted(self.permissions.items()) if v == vhost]

    def permissions_of_user(self, user: str) -> list[Permission]:
        return [p for (u, _), p in sorted(self.permissions.items()) if u == user]

    def topic_permission_list(self, vhost: str | None = None, user: str | None = None) -> list[TopicPermission]:
        """By user, then vhost, then exchange."""
        return [t for (u, v), by_exchange in sorted(self.topic_permissions.items())
                if (vhost is None or v == vhost) and (user is None or u == user)
                for _, t in sorted(by_exchange.items())]
