"""The API's changes (PUT, DELETE, POST) as the node's admin operations, and their answers.

Theory of operation: a change request becomes one admin operation of the node core
(actors/node/admin.py `ADMIN`), the same operations warrenctl runs, so it takes its turn in the
node's serial order and is answered once every registry replica applied it. `plan` decides from
the request and the registry as it stands: an `Admin` operation to run (with the status its
success answers: 201 for a new object, 204 for an existing one, as RabbitMQ's PUT does), or at once
an `Answer` (a refusal, a 404, a malformed body). `outcome` turns the node's answer into the HTTP
one: an AMQP error code 404 stays 404, every other failure is RabbitMQ's 400 `bad_request` with the
node's text as `reason`. Who may do what is auth.py's.

Left out: runtime parameters other than vhost limits, federation and shovel objects.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mgmt import auth
from mgmt.shapes import properties_key

NOT_FOUND = {"error": "Object Not Found", "reason": "Not Found"}
ACCESS = {"error": "not_authorised", "reason": "User not authorised to access object"}


@dataclass(frozen=True, slots=True)
class Admin:
    op: str
    args: dict[str, Any]
    status: int = 204
    location: str | None = None  # a Location header (POST of a binding)


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: Any = None


def bad_request(reason: str) -> Answer:
    return Answer(400, {"error": "bad_request", "reason": reason})


def _bool(value: Any, default: bool) -> bool:
    if value is None:
        return default
    if isinstance(value, str):
        return value.lower() == "true"
    return bool(value)


def _tags(tags: Any) -> list[str]:
    if isinstance(tags, str):
        return [t.strip() for t in tags.split(",") if t.strip()]
    return list(tags or [])


def plan(reg: Any, caller: auth.Caller, route: str, args: dict[str, str], method: str, body: Any,
         query: dict[str, str]) -> Admin | Answer:
    """What the change request means: the admin operation to run, or the answer now."""
    if not isinstance(body, dict):
        return bad_request("Request body must be a JSON object")
    vhost = args.get("vhost")
    if route in ("vhost", "user", "permission", "definitions", "definitions_vhost", "topic_permission", "vhost_limit",
                 "user_limit"):
        refused = caller.refusal(auth.ADMINISTRATOR)
        if refused is not None:
            return Answer(refused.status, refused.body)
    elif route == "policy":
        refused = caller.refusal(auth.POLICYMAKER)
        if refused is not None or not auth.may_manage_vhost(reg, caller, vhost):
            return Answer(401, ACCESS)
    elif vhost is not None and not auth.may_manage_vhost(reg, caller, vhost):
        return Answer(401, ACCESS)
    if vhost is not None and route not in ("vhost", "permission", "topic_permission") and not reg.vhost_exists(vhost):
        return Answer(404, {"error": "not_found", "reason": "vhost_not_found"}) if method == "PUT" else Answer(404, NOT_FOUND)
    handler = _PLANS.get((route, method))
    if handler is None:
        return Answer(405, {"error": "Method Not Allowed", "reason": "Method Not Allowed"})
    return handler(reg, args, body, query)


def _put_vhost(reg: Any, a: dict, body: dict, q: dict) -> Admin:
    return Admin("add_vhost", {"name": a["vhost"]}, 204 if reg.vhost_exists(a["vhost"]) else 201)


def _delete_vhost(reg: Any, a: dict, body: dict, q: dict) -> Admin | Answer:
    return Admin("delete_vhost", {"name": a["vhost"]}) if reg.vhost_exists(a["vhost"]) else Answer(404, NOT_FOUND)


def _user_exists(reg: Any, name: str) -> bool:
    return any(u.name == name for u in reg.users())


def _put_user(reg: Any, a: dict, body: dict, q: dict) -> Admin | Answer:
    if "tags" not in body:
        return bad_request("[{key_missing,tags}]")
    args = {"name": a["user"], "tags": _tags(body["tags"])}
    if body.get("password") is not None:
        args["password"] = str(body["password"])
    elif body.get("password_hash") is not None:
        args["password_hash"] = str(body["password_hash"])
    return Admin("put_user", args, 204 if _user_exists(reg, a["user"]) else 201)


def _delete_user(reg: Any, a: dict, body: dict, q: dict) -> Admin | Answer:
    return Admin("delete_user", {"name": a["user"]}) if _user_exists(reg, a["user"]) else Answer(404, NOT_FOUND)


def _put_permission(reg: Any, a: dict, body: dict, q: dict) -> Admin | Answer:
    if not reg.vhost_exists(a["vhost"]) or not _user_exists(reg, a["user"]):
        return bad_request("vhost_or_user_not_found")
    missing = [k for k in ("configure", "write", "read") if k not in body]
    if missing:
        return bad_request("[" + ",".join(f"{{key_missing,{k}}}" for k in missing) + "]")
    existed = bool(reg.permissions(vhost=a["vhost"], user=a["user"]))
    return Admin("set_permissions", {"user": a["user"], "vhost": a["vhost"], "configure": body["configure"],
                                     "write": body["write"], "read": body["read"]}, 204 if existed else 201)


def _delete_permission(reg: Any, a: dict, body: dict, q: dict) -> Admin | Answer:
    if not reg.permissions(vhost=a["vhost"], user=a["user"]):
        return Answer(404, NOT_FOUND)
    return Admin("clear_permissions", {"user": a["user"], "vhost": a["vhost"]})


def _missing(body: dict, *keys: str) -> Answer | None:
    missing = [k for k in keys if k not in body]
    return bad_request("[" + ",".join(f"{{key_missing,{k}}}" for k in missing) + "]") if missing else None


def _put_topic_permission(reg: Any, a: dict, body: dict, q: dict) -> Admin | Answer:
    if not reg.vhost_exists(a["vhost"]) or not _user_exists(reg, a["user"]):
        return bad_request("vhost_or_user_not_found")
    refused = _missing(body, "exchange", "write", "read")
    if refused is not None:
        return refused
    existed = any(t.exchange == body["exchange"] for t in reg.topic_permissions(vhost=a["vhost"], user=a["user"]))
    return Admin("set_topic_permissions", {"user": a["user"], "vhost": a["vhost"], "exchange": str(body["exchange"]),
                                           "write": str(body["write"]), "read": str(body["read"])},
                 204 if existed else 201)


def _delete_topic_permission(reg: Any, a: dict, body: dict, q: dict) -> Admin | Answer:
    exchange = q.get("exchange")
    held = [t for t in reg.topic_permissions(vhost=a["vhost"], user=a["user"])
            if exchange is None or t.exchange == exchange]
    if not held:
        return Answer(404, NOT_FOUND)
    return Admin("clear_topic_permissions", {"user": a["user"], "vhost": a["vhost"], "exchange": exchange})


def _put_vhost_limit(reg: Any, a: dict, body: dict, q: dict) -> Admin | Answer:
    refused = _missing(body, "value")
    if refused is not None:
        return refused
    return Admin("set_vhost_limits", {"vhost": a["vhost"], "limits": {a["name"]: body["value"]}, "merge": True})


def _delete_vhost_limit(reg: Any, a: dict, body: dict, q: dict) -> Admin:
    return Admin("clear_vhost_limits", {"vhost": a["vhost"], "name": a["name"]})


def _put_user_limit(reg: Any, a: dict, body: dict, q: dict) -> Admin | Answer:
    if not _user_exists(reg, a["user"]):
        return Answer(400, {"error": "bad_request", "reason": ["no_such_user", a["user"]]})
    refused = _missing(body, "value")
    if refused is not None:
        return refused
    return Admin("set_user_limits", {"user": a["user"], "limits": {a["name"]: body["value"]}})


def _delete_user_limit(reg: Any, a: dict, body: dict, q: dict) -> Admin | Answer:
    if not _user_exists(reg, a["user"]):
        return Answer(404, NOT_FOUND)
    return Admin("clear_user_limits", {"user": a["user"], "name": a["name"]})


def _policy_exists(reg: Any, vhost: str, name: str) -> bool:
    return any(p.name == name for p in reg.policies(vhost, operator=False))


def _put_policy(reg: Any, a: dict, body: dict, q: dict) -> Admin | Answer:
    missing = [k for k in ("pattern", "definition") if k not in body]
    if missing:
        return bad_request("[" + ",".join(f"{{key_missing,{k}}}" for k in missing) + "]")
    return Admin("set_policy", {"vhost": a["vhost"], "name": a["name"], "pattern": body["pattern"],
                                "definition": body["definition"], "priority": int(body.get("priority") or 0),
                                "apply_to": body.get("apply-to") or "all"},
                 204 if _policy_exists(reg, a["vhost"], a["name"]) else 201)


def _delete_policy(reg: Any, a: dict, body: dict, q: dict) -> Admin | Answer:
    if not _policy_exists(reg, a["vhost"], a["name"]):
        return Answer(404, NOT_FOUND)
    return Admin("clear_policy", {"vhost": a["vhost"], "name": a["name"]})


def _exchange_exists(reg: Any, vhost: str, name: str) -> bool:
    return any(x.name == name for x in reg.exchanges(vhost))


def _put_exchange(reg: Any, a: dict, body: dict, q: dict) -> Admin | Answer:
    if "type" not in body:
        return bad_request("[{key_missing,type}]")
    return Admin("declare_exchange", {
        "vhost": a["vhost"], "name": a["name"], "type": body["type"], "durable": _bool(body.get("durable"), True),
        "auto_delete": _bool(body.get("auto_delete"), False), "internal": _bool(body.get("internal"), False),
        "arguments": body.get("arguments") or {}}, 204 if _exchange_exists(reg, a["vhost"], a["name"]) else 201)


def _delete_exchange(reg: Any, a: dict, body: dict, q: dict) -> Admin | Answer:
    if not _exchange_exists(reg, a["vhost"], a["name"]):
        return Answer(404, NOT_FOUND)
    return Admin("delete_exchange", {"vhost": a["vhost"], "name": a["name"],
                                     "if_unused": _bool(q.get("if-unused"), False)})


def _queue_exists(reg: Any, vhost: str, name: str) -> bool:
    return any(x.name == name for x in reg.queues(vhost))


def _put_queue(reg: Any, a: dict, body: dict, q: dict) -> Admin:
    return Admin("declare_queue", {
        "vhost": a["vhost"], "name": a["name"], "durable": _bool(body.get("durable"), True),
        "auto_delete": _bool(body.get("auto_delete"), False), "arguments": body.get("arguments") or {}},
        204 if _queue_exists(reg, a["vhost"], a["name"]) else 201)


def _delete_queue(reg: Any, a: dict, body: dict, q: dict) -> Admin | Answer:
    if not _queue_exists(reg, a["vhost"], a["name"]):
        return Answer(404, NOT_FOUND)
    return Admin("delete_queue", {"vhost": a["vhost"], "name": a["name"], "if_unused": _bool(q.get("if-unused"), False),
                                  "if_empty": _bool(q.get("if-empty"), False)})


def _purge_queue(reg: Any, a: dict, body: dict, q: dict) -> Admin | Answer:
    if not _queue_exists(reg, a["vhost"], a["name"]):
        return Answer(404, NOT_FOUND)
    return Admin("purge_queue", {"vhost": a["vhost"], "name": a["name"]})


_KINDS = {"q": "queue", "e": "exchange"}


def _post_binding(reg: Any, a: dict, body: dict, q: dict) -> Admin | Answer:
    kind = _KINDS.get(a["kind"])
    if kind is None:
        return Answer(404, NOT_FOUND)
    exists = _queue_exists if kind == "queue" else _exchange_exists
    if not _exchange_exists(reg, a["vhost"], a["source"]) or not exists(reg, a["vhost"], a["destination"]):
        return Answer(404, NOT_FOUND)
    rk, arguments = str(body.get("routing_key") or ""), body.get("arguments") or {}
    return Admin("bind", {"vhost": a["vhost"], "source": a["source"], "destination": a["destination"],
                          "destination_kind": kind, "routing_key": rk, "arguments": arguments}, 201,
                 location=properties_key(rk, arguments))


def _delete_binding(reg: Any, a: dict, body: dict, q: dict) -> Admin | Answer:
    kind = _KINDS.get(a["kind"])
    found = [b for b in reg.bindings(a["vhost"]) if kind is not None and b.source == a["source"]
             and b.destination == a["destination"] and b.destination_kind == kind
             and properties_key(b.routing_key, b.arguments) == a["props"]]
    if not found:
        return Answer(404, NOT_FOUND)
    b = found[0]
    return Admin("unbind", {"vhost": b.vhost, "source": b.source, "destination": b.destination,
                            "destination_kind": b.destination_kind, "routing_key": b.routing_key,
                            "arguments": b.arguments})


def _import(reg: Any, a: dict, body: dict, q: dict) -> Admin:
    if "vhost" in a:  # a vhost's definitions: every object goes to that vhost
        body = {k: [dict(o, vhost=a["vhost"]) for o in v] if isinstance(v, list) else v for k, v in body.items()}
    return Admin("import_definitions", {"definitions": body}, 204)


_PLANS = {
    ("vhost", "PUT"): _put_vhost, ("vhost", "DELETE"): _delete_vhost,
    ("user", "PUT"): _put_user, ("user", "DELETE"): _delete_user,
    ("permission", "PUT"): _put_permission, ("permission", "DELETE"): _delete_permission,
    ("policy", "PUT"): _put_policy, ("policy", "DELETE"): _delete_policy,
    ("exchange", "PUT"): _put_exchange, ("exchange", "DELETE"): _delete_exchange,
    ("queue", "PUT"): _put_queue, ("queue", "DELETE"): _delete_queue, ("queue_contents", "DELETE"): _purge_queue,
    ("bindings_between", "POST"): _post_binding, ("binding", "DELETE"): _delete_binding,
    ("definitions", "POST"): _import, ("definitions_vhost", "POST"): _import,
    ("topic_permission", "PUT"): _put_topic_permission, ("topic_permission", "DELETE"): _delete_topic_permission,
    ("vhost_limit", "PUT"): _put_vhost_limit, ("vhost_limit", "DELETE"): _delete_vhost_limit,
    ("user_limit", "PUT"): _put_user_limit, ("user_limit", "DELETE"): _delete_user_limit,
}
CHANGE_ROUTES = frozenset(route for route, _ in _PLANS)


def outcome(admin: Admin, answer: Any) -> Answer:
    """The HTTP answer for the node's answer to `admin`."""
    if isinstance(answer, dict) and "error" in answer:
        if answer.get("code") == 404:
            return Answer(404, {"error": "not_found", "reason": answer["error"]})
        return bad_request(answer["error"])
    return Answer(admin.status)
