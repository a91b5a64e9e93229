"""Users, their permissions per vhost, and the access checks RabbitMQ's internal backend makes.

Theory of operation: `AccessControl` is plain state (users by name, permissions by (user, vhost))
changed only by applying change records (`UserSet`, `UserDeleted`, `PermissionSet`,
`PermissionCleared`, changes.py), so the node's copy and every connection host's replica agree
after the same records. Its commands (`AddUser`, `RemoveUser`, `ChangePassword`, `SetUserTags`,
`SetPermissions`, `ClearPermissions`, commands.py) validate as rabbitmqctl 3.10 does, answer
`AdminError` values with its texts, and emit the records through the registry (which applies each
one as it is emitted). A permission is three regular expressions, matched as rabbit_auth_backend_internal does: an
unanchored search (re:run), "" meaning "^$" (nothing), and the default exchange checked under the
name "amq.default". Compiled patterns are cached per string. Password checks compare salted hashes
(passwords.py); plain passwords are never stored here.
Deliberately left out: topic permissions, user tags beyond listing them, other auth backends.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from metadata import passwords
from metadata.admin_errors import EX_NOUSER, EX_SOFTWARE, AdminError, no_user
from metadata.changes import Change, Emit, PermissionCleared, PermissionSet, UserDeleted, UserSet
from metadata.commands import AddUser, ChangePassword, ClearPermissions, RemoveUser, SetPermissions, SetUserTags
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
    def __init__(self, vhost_exists: Callable[[str], bool]) -> None:
        self.users: dict[str, User] = {}
        self.permissions: dict[tuple[str, str], Permission] = {}
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

    def reset(self) -> None:
        self.users.clear()
        self.permissions.clear()

    def snapshot(self) -> list[Change]:
        out: list[Change] = [UserSet(u.name, u.password_hash, u.tags) for _, u in sorted(self.users.items())]
        out += [PermissionSet(p.user, p.vhost, p.configure, p.write, p.read)
                for _, p in sorted(self.permissions.items())]
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
        for pattern in (cmd.configure, cmd.write, cmd.read):
            compiled = compile_pattern(pattern)
            if isinstance(compiled, str):
                return AdminError(f"invalid regular expression '{pattern}': {compiled}")
        error = self._user_and_vhost_error(cmd.user, cmd.vhost)
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

    def _user_and_vhost_error(self, user: str, vhost: str) -> AdminError | None:
        if user not in self.users:
            return AdminError(f"User {user} does not exist", EX_NOUSER)
        if not self._vhost_exists(vhost):
            return AdminError(f"Virtual host {vhost} does not exist")
        return None

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
