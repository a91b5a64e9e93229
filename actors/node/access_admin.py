"""The node's admin operations on users, permissions, topic permissions and limits, and the
import of a RabbitMQ definitions document: warrenctl's and the HTTP API's, one registry command
each (metadata/commands.py), run in the node core's serial order (admin.py's table `ADMIN` holds
them beside the node's other admin operations).

Passwords are hashed here with the core's salt source, so only hashes enter the commands. The
definitions document is applied in RabbitMQ's dependency order (vhosts, users with their limits,
permissions, topic permissions, vhost limits from the `vhost-limits` parameters, policies, then
the topology); the first error stops it.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from actors.node.steps import ADMIN_TIMEOUT, Op, admin_command, command
from metadata.admin_errors import AdminError
from metadata.commands import (AddUser, ChangePassword, ClearPermissions, ClearTopicPermissions,
                               ClearUserLimits, ClearVhostLimits, RemoveUser, SetPermissions, SetTopicPermissions,
                               SetUserLimits, SetUserTags, SetVhostLimits)
from metadata.definitions import LIMITS_COMPONENT
from wire.errors import AmqpError

if TYPE_CHECKING:
    from actors.node.core import NodeCore


def put_user(core: NodeCore, a: dict) -> Op:
    """Create or update a user from a password or a ready hash (definitions carry hashes)."""
    name, tags = a["name"], tuple(a.get("tags", ()))
    digest = a.get("password_hash")
    if digest is None:
        digest = core.hash_password(a["password"]) if a.get("password") is not None else ""
    if not any(u.name == name for u in core.registry.users()):
        return (yield from admin_command(AddUser(name, digest, tags)))
    if a.get("password") is not None or a.get("password_hash") is not None:
        yield from command(ChangePassword(name, digest), ADMIN_TIMEOUT)
    return (yield from admin_command(SetUserTags(name, tags)))


def _user_with_limits(core: NodeCore, a: dict) -> Op:
    result = yield from put_user(core, a)
    if isinstance(result, (AdminError, AmqpError)) or not a.get("limits"):
        return result
    return (yield from admin_command(SetUserLimits(a["name"], dict(a["limits"]))))


def import_definitions(core: NodeCore, a: dict) -> Op:
    """RabbitMQ's definitions document, applied in dependency order; the first error stops it."""
    d = a["definitions"]
    steps: list[tuple[Callable[[NodeCore, dict], Op], dict]] = []
    steps += [(_op("add_vhost"), {"name": v["name"]}) for v in d.get("vhosts", [])]
    steps += [(_user_with_limits, {"name": u["name"], "password_hash": u.get("password_hash", ""),
                                   "tags": tags(u.get("tags", "")), "limits": u.get("limits") or {}})
              for u in d.get("users", [])]
    steps += [(_op("set_permissions"), p) for p in d.get("permissions", [])]
    steps += [(_op("set_topic_permissions"), t) for t in d.get("topic_permissions", [])]
    steps += [(_op("set_vhost_limits"), {"vhost": p["vhost"], "limits": dict(p.get("value") or {})})
              for p in d.get("parameters", []) if p.get("component") == LIMITS_COMPONENT]
    steps += [(_op("set_policy"), {"vhost": p["vhost"], "name": p["name"], "pattern": p["pattern"],
                                   "definition": p["definition"], "priority": p.get("priority", 0),
                                   "apply_to": p.get("apply-to", "all")}) for p in d.get("policies", [])]
    steps += [(_op("declare_exchange"), x) for x in d.get("exchanges", [])]
    steps += [(_op("declare_queue"), q) for q in d.get("queues", [])]
    steps += [(_op("bind"), {**b, "destination_kind": b.get("destination_type", "queue")})
              for b in d.get("bindings", [])]
    for op, args in steps:
        result = yield from op(core, args)
        if isinstance(result, (AdminError, AmqpError)):
            return result
    return {"ok": True}


def _op(name: str) -> Callable[[NodeCore, dict], Op]:
    """One of the core's admin operations by name (the core's table holds this module's too)."""
    return lambda core, a: core.run_admin(name, a)


def tags(value: Any) -> tuple[str, ...]:
    """Tags as definitions carry them: a list, or RabbitMQ's comma-separated string."""
    if isinstance(value, str):
        return tuple(t.strip() for t in value.split(",") if t.strip())
    return tuple(value)


def _command(make: Callable[[NodeCore, dict], Any]) -> Callable[[NodeCore, dict], Op]:
    def run(core: NodeCore, a: dict) -> Op:
        return (yield from admin_command(make(core, a)))
    return run


ADMIN_OPS: dict[str, Callable[[NodeCore, dict], Op]] = {
    "add_user": _command(lambda core, a: AddUser(a["name"], core.hash_password(a["password"]),
                                                 tuple(a.get("tags", ())))),
    "delete_user": _command(lambda core, a: RemoveUser(a["name"])),
    "change_password": _command(lambda core, a: ChangePassword(a["name"], core.hash_password(a["password"]))),
    "set_user_tags": _command(lambda core, a: SetUserTags(a["name"], tuple(a.get("tags", ())))),
    "put_user": put_user,
    "set_permissions": _command(lambda core, a: SetPermissions(a["user"], a.get("vhost", "/"), a["configure"],
                                                               a["write"], a["read"])),
    "clear_permissions": _command(lambda core, a: ClearPermissions(a["user"], a.get("vhost", "/"))),
    "set_topic_permissions": _command(lambda core, a: SetTopicPermissions(a["user"], a.get("vhost", "/"),
                                                                          a["exchange"], a["write"], a["read"])),
    "clear_topic_permissions": _command(lambda core, a: ClearTopicPermissions(a["user"], a.get("vhost", "/"),
                                                                              a.get("exchange"))),
    "set_vhost_limits": _command(lambda core, a: SetVhostLimits(a.get("vhost", "/"), dict(a["limits"]),
                                                                bool(a.get("merge", False)))),
    "clear_vhost_limits": _command(lambda core, a: ClearVhostLimits(a.get("vhost", "/"), a.get("name"))),
    "set_user_limits": _command(lambda core, a: SetUserLimits(a["user"], dict(a["limits"]))),
    "clear_user_limits": _command(lambda core, a: ClearUserLimits(a["user"], a["name"])),
    "import_definitions": import_definitions,
}
