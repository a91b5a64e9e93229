"""Users, their permissions per vhost, and the access checks RabbitMQ's internal backend makes.

Theory of operation: `AccessControl` is plain state (users by name, permissions by (user, vhost))
changed only by applying change records, so the node's copy and every connection host's replica
agree after the same records:
  ("user", name, password_hash, tags)  ("user_deleted", name)
  ("permission", user, vhost, configure, write, read)  ("permission_cleared", user, vhost)
A permission is three regular expressions, matched as rabbit_auth_backend_internal does: an
unanchored search (re:run), "" meaning "^$" (nothing), and the default exchange checked under the
name "amq.default". Compiled patterns are cached per string. Password checks compare salted hashes
(passwords.py); plain passwords are never stored here.
Deliberately left out: topic permissions, user tags beyond listing them, other auth backends.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from metadata import passwords
from wire.errors import ACCESS_REFUSED, NOT_ALLOWED, AmqpError

PERMS = ("configure", "write", "read")
KINDS = ("queue", "exchange")
DEFAULT_EXCHANGE_ALIAS = "amq.default"
pattern_cache_entries_max = 4096


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


def compile_pattern(pattern: str) -> re.Pattern | str:
    """The compiled regex, or the error text when it is invalid."""
    try:
        return re.compile(pattern or "^$")
    except re.error as e:
        return f"{e.msg} at position {e.pos}"


class AccessControl:
    def __init__(self) -> None:
        self.users: dict[str, User] = {}
        self.permissions: dict[tuple[str, str], Permission] = {}
        self._patterns: dict[str, re.Pattern] = {}

    # ---------------------------------------------------------------- change records
    def apply_one(self, change: tuple) -> None:
        op = change[0]
        if op == "user":
            _, name, password_hash, tags = change
            self.users[name] = User(name, password_hash, tuple(tags))
        elif op == "user_deleted":
            self.users.pop(change[1], None)
        elif op == "permission":
            _, user, vhost, configure, write, read = change
            self.permissions[(user, vhost)] = Permission(user, vhost, configure, write, read)
        elif op == "permission_cleared":
            self.permissions.pop((change[1], change[2]), None)
        else:
            raise AssertionError(f"not an access record: {op!r}")

    def reset(self) -> None:
        self.users.clear()
        self.permissions.clear()

    def snapshot(self) -> list[tuple]:
        out: list[tuple] = [user_change(u) for _, u in sorted(self.users.items())]
        out += [permission_change(p) for _, p in sorted(self.permissions.items())]
        return out

    # ---------------------------------------------------------------- queries
    def check_login(self, user: str, password: str) -> bool:
        u = self.users.get(user)
        return u is not None and passwords.check_password(password, u.password_hash)

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

    def _pattern(self, pattern: str) -> re.Pattern:
        compiled = self._patterns.get(pattern)
        if compiled is None:
            got = compile_pattern(pattern)
            # set_permissions validates, so an invalid pattern here came from an edited file: deny all
            compiled = got if isinstance(got, re.Pattern) else re.compile(r"(?!)")
            if len(self._patterns) >= pattern_cache_entries_max:
                self._patterns.clear()
            self._patterns[pattern] = compiled
        return compiled

    def permissions_of_vhost(self, vhost: str) -> list[Permission]:
        return [p for (_, v), p in sorted(self.permissions.items()) if v == vhost]

    def permissions_of_user(self, user: str) -> list[Permission]:
        return [p for (u, _), p in sorted(self.permissions.items()) if u == user]


def user_change(u: User) -> tuple:
    return ("user", u.name, u.password_hash, list(u.tags))


def permission_change(p: Permission) -> tuple:
    return ("permission", p.user, p.vhost, p.configure, p.write, p.read)


def cleared_permissions(perms: Iterable[Permission]) -> list[tuple]:
    return [("permission_cleared", p.user, p.vhost) for p in perms]
