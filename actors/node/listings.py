"""The node's read-only admin answers (warrenctl list_* and status), from the registry as it stands.

Theory of operation: a listing changes nothing, so it takes no turn in the node's serial order;
it reads the authoritative registry between two requests and shapes rows as rabbitmqctl prints
them (field names, `apply-to`, a policy definition as compact sorted JSON). Field-table arguments
become JSON-printable values (bytes as text). What a listing needs from outside the registry (the
connection hosts subscribed now, the node's own process) is passed in.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from actors.placement import node_of
from metadata import stream
from metadata.admin_errors import EX_DATAERR, EX_UNAVAILABLE
from metadata.arguments import queue_type
from metadata.limits import as_json
from metadata.policies import definition_json
from metadata.records import QueueRecord
from metadata.registry import Registry


def _vhosts(reg: Registry, args: dict) -> list[dict]:
    return [{"name": v} for v in reg.vhosts()]


def _users(reg: Registry, args: dict) -> list[dict]:
    return [{"user": u.name, "tags": list(u.tags)} for u in reg.users()]


def _permissions(reg: Registry, args: dict) -> list[dict]:
    return [{"user": p.user, "vhost": p.vhost, "configure": p.configure, "write": p.write, "read": p.read}
            for p in reg.permissions(vhost=args.get("vhost"), user=args.get("user"))]


def _topic_permissions(reg: Registry, args: dict) -> list[dict] | dict:
    """list_topic_permissions [-p vhost], or with `user`: list_user_topic_permissions."""
    if "user" in args and not any(u.name == args["user"] for u in reg.users()):
        return {"error": f'{{:no_such_user, "{args["user"]}"}}', "exit": EX_UNAVAILABLE}
    if "vhost" in args and not reg.vhost_exists(args["vhost"]):
        return {"error": f"Virtual host '{args['vhost']}' does not exist", "exit": EX_DATAERR}
    return [{"user": t.user, "vhost": t.vhost, "exchange": t.exchange, "write": t.write, "read": t.read}
            for t in reg.topic_permissions(vhost=args.get("vhost"), user=args.get("user"))]


def _vhost_limits(reg: Registry, args: dict) -> list[dict] | dict:
    """list_vhost_limits: one vhost's (its JSON, nothing without limits), or every vhost's with limits."""
    if "vhost" in args and not reg.vhost_exists(args["vhost"]):
        return {"error": f"Virtual host '{args['vhost']}' does not exist", "exit": EX_DATAERR}
    return [{"vhost": v, "limits": as_json(limits)} for v, limits in reg.vhost_limits().items()
            if args.get("vhost") in (None, v)]


def _user_limits(reg: Registry, args: dict) -> list[dict] | dict:
    """list_user_limits: one user's (its JSON, `{}` without limits), or every user's with limits."""
    if "user" in args:
        if not any(u.name == args["user"] for u in reg.users()):
            return {"error": f'{{:no_such_user, "{args["user"]}"}}', "exit": EX_UNAVAILABLE}
        return [{"user": args["user"], "limits": as_json(reg.user_limits(args["user"]))}]
    return [{"user": u.name, "limits": as_json(reg.user_limits(u.name))} for u in reg.users() if reg.user_limits(u.name)]


def _policies(operator: bool) -> Callable[[Registry, dict], list[dict]]:
    def rows(reg: Registry, args: dict) -> list[dict]:
        return [{"vhost": p.vhost, "name": p.name, "pattern": p.pattern, "apply-to": p.apply_to,
                 "definition": definition_json(p), "priority": p.priority}
                for p in reg.policies(args.get("vhost"), operator=operator)]
    return rows


def _exchanges(reg: Registry, args: dict) -> list[dict]:
    return [{"vhost": x.vhost, "name": x.name, "type": x.type, "durable": x.durable, "auto_delete": x.auto_delete,
             "internal": x.internal, "arguments": printable(x.arguments),
             "policy": reg.exchange_policy_name(x.vhost, x.name)} for x in reg.exchanges(args.get("vhost"))]


def _bindings(reg: Registry, args: dict) -> list[dict]:
    vhost = args.get("vhost")
    return [{"vhost": b.vhost, "source_name": b.source, "source_kind": "exchange", "destination_name": b.destination,
             "destination_kind": b.destination_kind, "routing_key": b.routing_key,
             "arguments": printable(b.arguments)} for b in reg.bindings(vhost)] + [
            {"vhost": q.vhost, "source_name": "", "source_kind": "exchange", "destination_name": q.name,
             "destination_kind": "queue", "routing_key": q.name, "arguments": {}} for q in reg.queues(vhost)]


def _queue_policies(reg: Registry, args: dict) -> list[dict]:
    out = []
    for q in reg.queues(args.get("vhost")):
        policy, operator, settings = reg.queue_policy(q)
        out.append({"vhost": q.vhost, "name": q.name, "policy": policy, "operator_policy": operator,
                    "effective_policy_definition": settings, "durable": q.durable, "auto_delete": q.auto_delete,
                    "exclusive": q.exclusive_owner is not None, "arguments": printable(q.arguments),
                    "type": queue_type(q.arguments), **_members(q),
                    "owner_pid": None if q.exclusive_owner is None else str(q.exclusive_owner)})
    return out


def _members(q: QueueRecord) -> dict:
    """A quorum queue's or a stream's member nodes (a stream on one node: its home's), as list_queues
    shows them; a classic queue has none."""
    if q.quorum:
        return {"members": list(q.members)}
    if stream.is_stream(q.arguments):
        return {"members": list(q.replicas) or [node_of(q.home)]}
    return {}


_LISTINGS: dict[str, Callable[[Registry, dict], list[dict]]] = {
    "list_vhosts": _vhosts, "list_users": _users, "list_permissions": _permissions,
    "list_policies": _policies(False), "list_operator_policies": _policies(True), "list_exchanges": _exchanges,
    "list_bindings": _bindings, "queue_policies": _queue_policies, "list_topic_permissions": _topic_permissions,
    "list_vhost_limits": _vhost_limits, "list_user_limits": _user_limits,
}
LISTING_OPS = frozenset(_LISTINGS) | {"status"}


def listing(reg: Registry, op: str, args: dict, *, queue_hosts: tuple[str, ...], connection_hosts: list[str],
            pid: int, quorum_hosts: tuple[str, ...] = ("quorum",)) -> Any:
    """The answer to listing `op` (one of LISTING_OPS)."""
    if op == "status":
        return {"vhosts": len(reg.vhosts()), "users": len(reg.users()), "queues": len(reg.queues()),
                "exchanges": len(reg.exchanges()), "queue_hosts": list(queue_hosts),
                "connection_hosts": sorted(connection_hosts), "quorum_hosts": list(quorum_hosts), "pid": pid}
    rows = _LISTINGS.get(op)
    return rows(reg, args) if rows is not None else {"error": f"unknown op {op!r}", "exit": 64}


def printable(args: dict) -> dict:
    """Field-table values as JSON can carry them (bytes as text)."""
    return {k: (v.decode("utf-8", "replace") if isinstance(v, bytes) else v if isinstance(v, (str, int, float, bool))
                or v is None else repr(v)) for k, v in args.items()}
