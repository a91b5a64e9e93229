"""The API's reads (GET): which rows a caller sees, in which shape, filtered, sorted and paged.

Theory of operation: `answer(view, caller, route, args, query)` is the whole decision for a GET:
the tag a route needs (auth.py), the vhosts the caller sees (a `management` user its own, a
`monitoring` or `administrator` user all), 404 for an object or vhost that does not exist (or
that the caller may not see, as RabbitMQ answers), then the rows in their shapes (shapes.py), and
RabbitMQ's query options (listing.py): `columns`, `sort` and `sort_reverse`, and for the listings
RabbitMQ pages (queues, exchanges, vhosts, connections, channels) `page`, `page_size`, `name` and
`use_regex`. A listing of connections, channels or consumers shows the caller's own to a
`management` user and all of them to `monitoring`. Queue and exchange rows come from the view's
memo (memo.py) when it has one; `prepare` makes them ahead, a slice at a time, for the shell.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator

from mgmt import auth, listing, shapes
from mgmt.changes import NOT_FOUND, Answer
from mgmt.shapes import View
from flow.bottleneck import Link, find

Read = Callable[[View, auth.Caller, dict[str, str], set[str]], Any]


def answer(view: View, caller: auth.Caller, route: str, args: dict[str, str], query: dict[str, str],
           listeners: list[dict] | None = None) -> Answer:
    need = _NEEDS.get(route, auth.MANAGEMENT)
    refused = caller.refusal(need)
    if refused is not None:
        return Answer(refused.status, refused.body)
    vhosts = auth.visible_vhosts(view.registry, caller)
    if "vhost" in args and args["vhost"] not in vhosts:
        return Answer(404, NOT_FOUND)
    if route == "overview":
        return Answer(200, shapes.overview(view, vhosts, listeners or []))
    read = _READS.get(route)
    if read is None:
        return Answer(405, {"error": "Method Not Allowed", "reason": "Method Not Allowed"})
    if view.memo is not None:
        view.memo.begin(view.registry)
    body = read(view, caller, args, vhosts)
    if body is None:
        return Answer(404, NOT_FOUND)
    if isinstance(body, list):
        return listing.answer(body, query, _LISTINGS.get(route, _UNPAGED))
    columns = [c for c in query.get("columns", "").split(",") if c]
    return Answer(200, listing.pick(body, columns) if columns else body)


def prepare(view: View, route: str, args: dict[str, str], slice_rows: int = 256) -> Iterator[None]:
    """Make the memo's rows of a queue or exchange listing, yielding after every `slice_rows`
    (the shell lets its loop run in between); nothing for other routes or without a memo."""
    memo = view.memo
    if memo is None or route not in _MEMO_ROUTES:
        return
    memo.begin(view.registry)
    queues, exchanges = view.registry.queues(), view.registry.exchanges()
    memo.prune(queues, exchanges)
    records = queues if route.startswith("queues") else exchanges
    if "vhost" in args:
        records = [rec for rec in records if rec.vhost == args["vhost"]]
    make = memo.queue if route.startswith("queues") else memo.exchange
    for i in range(0, len(records), slice_rows):
        for rec in records[i:i + slice_rows]:
            make(view, rec)
        yield


def _mine(caller: auth.Caller, row: dict) -> bool:
    return caller.may(auth.MONITORING) or row.get("user") == caller.name


def _queues(view: View, caller: auth.Caller, a: dict, vhosts: set[str]) -> list:
    want = {a["vhost"]} if "vhost" in a else vhosts
    row = view.memo.queue if view.memo is not None else shapes.queue
    return [row(view, q) for q in view.registry.queues(a.get("vhost")) if q.vhost in want]


def _queue(view: View, caller: auth.Caller, a: dict, vhosts: set[str]) -> dict | None:
    rec = view.registry.queue(a["vhost"], a["name"])
    return None if rec is None else shapes.queue(view, rec, detail=True)


def _exchanges(view: View, caller: auth.Caller, a: dict, vhosts: set[str]) -> list:
    want = {a["vhost"]} if "vhost" in a else vhosts
    row = view.memo.exchange if view.memo is not None else shapes.exchange
    return [row(view, x) for x in view.registry.exchanges(a.get("vhost")) if x.vhost in want]


def _exchange(view: View, caller: auth.Caller, a: dict, vhosts: set[str]) -> dict | None:
    name = "" if a["name"] == "amq.default" else a["name"]  # RabbitMQ's name of the default exchange in URLs
    x = next((x for x in view.registry.exchanges(a["vhost"]) if x.name == name), None)
    return None if x is None else shapes.exchange(view, x, detail=True)


def _bindings(view: View, caller: auth.Caller, a: dict, vhosts: set[str]) -> list:
    return shapes.bindings(view, {a["vhost"]} if "vhost" in a else vhosts)


def _bindings_between(view: View, caller: auth.Caller, a: dict, vhosts: set[str]) -> list | None:
    kind = {"q": "queue", "e": "exchange"}.get(a["kind"])
    rows = [b for b in shapes.bindings(view, {a["vhost"]}) if b["source"] == a["source"]
            and b["destination"] == a["destination"] and b["destination_type"] == kind]
    if "props" in a:
        return next((b for b in rows if b["properties_key"] == a["props"]), None)
    return rows


def _object_bindings(side: str) -> Read:
    def read(view: View, caller: auth.Caller, a: dict, vhosts: set[str]) -> list:
        return [b for b in shapes.bindings(view, {a["vhost"]}) if b[side] == a["name"]
                and (side == "source" or b["destination_type"] == ("exchange" if side == "destination" else "queue"))]
    return read


def _queue_bindings(view: View, caller: auth.Caller, a: dict, vhosts: set[str]) -> list:
    return [b for b in shapes.bindings(view, {a["vhost"]}) if b["destination"] == a["name"]
            and b["destination_type"] == "queue"]


def _vhosts(view: View, caller: auth.Caller, a: dict, vhosts: set[str]) -> list:
    return [shapes.vhost(view, v) for v in view.registry.vhosts() if v in vhosts]


def _vhost(view: View, caller: auth.Caller, a: dict, vhosts: set[str]) -> dict:
    return shapes.vhost(view, a["vhost"])


def _user_rows(view: View, caller: auth.Caller, a: dict, vhosts: set[str]) -> list:
    return [shapes.user(u, view.registry.user_limits(u.name)) for u in view.registry.users()]


def _user(view: View, caller: auth.Caller, a: dict, vhosts: set[str]) -> dict | None:
    u = next((u for u in view.registry.users() if u.name == a["user"]), None)
    return None if u is None else shapes.user(u, view.registry.user_limits(u.name))


def _user_exists(view: View, name: str) -> bool:
    return any(u.name == name for u in view.registry.users())


def _topic_permissions(view: View, caller: auth.Caller, a: dict, vhosts: set[str]) -> list | None:
    if "user" in a and not _user_exists(view, a["user"]):
        return None
    return [shapes.topic_permission(t) for t in view.registry.topic_permissions(vhost=a.get("vhost"),
                                                                               user=a.get("user"))]


def _vhost_limits(view: View, caller: auth.Caller, a: dict, vhosts: set[str]) -> list:
    """Every visible vhost's limits; one vhost's only when it has some (RabbitMQ's two answers)."""
    if "vhost" in a:
        limits = view.registry.vhost_limits().get(a["vhost"])
        return [shapes.vhost_limits(a["vhost"], limits)] if limits else []
    return [shapes.vhost_limits(v, limits) for v, limits in view.registry.vhost_limits().items() if v in vhosts]


def _user_limits(view: View, caller: auth.Caller, a: dict, vhosts: set[str]) -> list | None:
    if "user" in a and not _user_exists(view, a["user"]):
        return None
    users = [a["user"]] if "user" in a else [u.name for u in view.registry.users()]
    return [{"user": u, "value": view.registry.user_limits(u)} for u in users if view.registry.user_limits(u)]


def _permissions(view: View, caller: auth.Caller, a: dict, vhosts: set[str]) -> list:
    return [shapes.permission(p) for p in view.registry.permissions(vhost=a.get("vhost"), user=a.get("user"))]


def _permission(view: View, caller: auth.Caller, a: dict, vhosts: set[str]) -> dict | None:
    rows = view.registry.permissions(vhost=a["vhost"], user=a["user"])
    return shapes.permission(rows[0]) if rows else None


def _policies(operator: bool) -> Read:
    def read(view: View, caller: auth.Caller, a: dict, vhosts: set[str]) -> list:
        want = {a["vhost"]} if "vhost" in a else vhosts
        return [shapes.policy(p) for p in view.registry.policies(operator=operator) if p.vhost in want]
    return read


def _policy(view: View, caller: auth.Caller, a: dict, vhosts: set[str]) -> dict | None:
    p = next((p for p in view.registry.policies(a["vhost"], operator=False) if p.name == a["name"]), None)
    return None if p is None else shapes.policy(p)


def _connections(view: View, caller: auth.Caller, a: dict, vhosts: set[str]) -> list:
    # Only opened connections, as RabbitMQ's listing (rabbit_reader emits connection_created
    # at connection.open): one still in its handshake has no user or vhost yet.
    return [shapes.connection(view, c) for c in view.sample.connections
            if _mine(caller, c) and c["vhost"] in ({a["vhost"]} if "vhost" in a else vhosts)]


def _connection(view: View, caller: auth.Caller, a: dict, vhosts: set[str]) -> dict | None:
    c = next((c for c in view.sample.connections if c["name"] == a["name"] and c["vhost"] and _mine(caller, c)),
             None)
    return None if c is None else shapes.connection(view, c)


def _channels(view: View, caller: auth.Caller, a: dict, vhosts: set[str]) -> list:
    conns = {c["name"]: c for c in view.sample.connections}
    return [shapes.channel(view, ch, conns) for ch in view.sample.channels if _mine(caller, ch)
            and ch["vhost"] in ({a["vhost"]} if "vhost" in a else vhosts)
            and ("name" not in a or ch["connection"] == a["name"])]


def _channel(view: View, caller: auth.Caller, a: dict, vhosts: set[str]) -> dict | None:
    conns = {c["name"]: c for c in view.sample.connections}
    ch = next((ch for ch in view.sample.channels if ch["name"] == a["name"] and _mine(caller, ch)), None)
    return None if ch is None else shapes.channel(view, ch, conns)


def _consumers(view: View, caller: auth.Caller, a: dict, vhosts: set[str]) -> list:
    want = {a["vhost"]} if "vhost" in a else vhosts
    return [shapes.consumer(view, c) for c in view.sample.consumers if c["vhost"] in want]


def _definitions(view: View, caller: auth.Caller, a: dict, vhosts: set[str]) -> dict:
    return shapes.definitions(view, {a["vhost"]} if "vhost" in a else None)


def _whoami(view: View, caller: auth.Caller, a: dict, vhosts: set[str]) -> dict:
    return {"name": caller.name, "tags": list(caller.tags)}


def _node(view: View, caller: auth.Caller, a: dict, vhosts: set[str]) -> dict | None:
    return shapes.node(view, a["node"]) if a["node"] in view.cluster() else None


def _flow(view: View, caller: auth.Caller, a: dict, vhosts: set[str]) -> dict:

    links = [Link(r["kind"], r["name"], r["state"], tuple(r.get("downstream", ())), tuple(r.get("blocked_on", ())),
                  float(r.get("flow_share", 0.0))) for r in view.sample.flow]
    found = find(links)
    return {"links": view.sample.flow, "bottleneck": None if found is None else {
        "kind": found.kind, "name": found.name, "why": found.why, "line": found.line()}}


_READS: dict[str, Read] = {
    "queues": _queues, "queues_vhost": _queues, "queue": _queue,
    "exchanges": _exchanges, "exchanges_vhost": _exchanges, "exchange": _exchange,
    "exchange_bindings_source": _object_bindings("source"),
    "exchange_bindings_destination": _object_bindings("destination"),
    "queue_bindings": _queue_bindings,
    "bindings": _bindings, "bindings_vhost": _bindings, "bindings_between": _bindings_between,
    "binding": _bindings_between,
    "vhosts": _vhosts, "vhost": _vhost, "users": _user_rows, "user": _user,
    "permissions": _permissions, "permission": _permission, "vhost_permissions": _permissions,
    "user_permissions": _permissions,
    "policies": _policies(False), "policies_vhost": _policies(False), "policy": _policy,
    "operator_policies": _policies(True), "operator_policies_vhost": _policies(True),
    "connections": _connections, "vhost_connections": _connections, "connection": _connection,
    "channels": _channels, "vhost_channels": _channels, "channel": _channel, "connection_channels": _channels,
    "consumers": _consumers, "consumers_vhost": _consumers,
    "definitions": _definitions, "definitions_vhost": _definitions, "whoami": _whoami,
    "nodes": lambda view, caller, a, vhosts: shapes.nodes(view), "node": _node,
    "cluster_name": lambda view, caller, a, vhosts: {"name": view.node},
    "extensions": lambda view, caller, a, vhosts: [],
    "parameters": lambda view, caller, a, vhosts: [], "global_parameters": lambda view, caller, a, vhosts: [],
    "vhost_limits": _vhost_limits, "vhost_limits_vhost": _vhost_limits,
    "user_limits": _user_limits, "user_limits_user": _user_limits,
    "topic_permissions": _topic_permissions, "topic_permission": _topic_permissions,
    "vhost_topic_permissions": _topic_permissions, "user_topic_permissions": _topic_permissions,
    "aliveness": lambda view, caller, a, vhosts: {"status": "ok"},
    "flow": _flow,
}
_UNPAGED = listing.Options()
_REGISTRY_PAGED = listing.Options(listing.BY_NAME, presorted=True, paginated=True)  # listed by vhost, then name
_CONNECTIONS_PAGED = listing.Options(listing.BY_NAME, paginated=True, counts_first=True)
_LISTINGS = {"queues": _REGISTRY_PAGED, "queues_vhost": _REGISTRY_PAGED, "exchanges": _REGISTRY_PAGED,
             "exchanges_vhost": _REGISTRY_PAGED, "vhosts": _REGISTRY_PAGED, "connections": _CONNECTIONS_PAGED,
             "channels": _CONNECTIONS_PAGED}
_MEMO_ROUTES = {"queues", "queues_vhost", "exchanges", "exchanges_vhost"}
_NEEDS = {"users": auth.ADMINISTRATOR, "user": auth.ADMINISTRATOR, "permissions": auth.ADMINISTRATOR,
          "permission": auth.ADMINISTRATOR, "vhost_permissions": auth.ADMINISTRATOR,
          "user_permissions": auth.ADMINISTRATOR, "definitions": auth.ADMINISTRATOR,
          "definitions_vhost": auth.ADMINISTRATOR, "nodes": auth.MONITORING, "node": auth.MONITORING,
          "global_parameters": auth.ADMINISTRATOR, "topic_permissions": auth.ADMINISTRATOR,
          "topic_permission": auth.ADMINISTRATOR, "vhost_topic_permissions": auth.ADMINISTRATOR,
          "user_topic_permissions": auth.ADMINISTRATOR, "vhost_limits": auth.MONITORING,
          "vhost_limits_vhost": auth.MONITORING, "user_limits": auth.MONITORING, "user_limits_user": auth.MONITORING}
