"""RabbitMQ's management URLs, parsed from the raw path.

Theory of operation: the API names objects by path segments, each percent-encoded on its own, and
the default vhost "/" travels as `%2F`. Decoding the whole path first (as most routers do) would
turn `/api/queues/%2F/q` into four segments; so the raw path is split on "/" and each segment is
decoded after, and a route is a tuple of literal segments and `{name}` placeholders matched against
them. `match(raw_path)` returns the route's name and its decoded arguments, or None (404). The
table is RabbitMQ's for what warren answers.
"""
from __future__ import annotations

from urllib.parse import unquote

ROUTES: list[tuple[str, str]] = [
    ("overview", "/api/overview"), ("cluster_name", "/api/cluster-name"), ("nodes", "/api/nodes"),
    ("node", "/api/nodes/{node}"), ("whoami", "/api/whoami"), ("extensions", "/api/extensions"),
    ("definitions", "/api/definitions"), ("definitions_vhost", "/api/definitions/{vhost}"),
    ("connections", "/api/connections"), ("connection", "/api/connections/{name}"),
    ("connection_channels", "/api/connections/{name}/channels"),
    ("vhost_connections", "/api/vhosts/{vhost}/connections"),
    ("channels", "/api/channels"), ("channel", "/api/channels/{name}"),
    ("vhost_channels", "/api/vhosts/{vhost}/channels"),
    ("consumers", "/api/consumers"), ("consumers_vhost", "/api/consumers/{vhost}"),
    ("exchanges", "/api/exchanges"), ("exchanges_vhost", "/api/exchanges/{vhost}"),
    ("exchange", "/api/exchanges/{vhost}/{name}"), ("exchange_publish", "/api/exchanges/{vhost}/{name}/publish"),
    ("exchange_bindings_source", "/api/exchanges/{vhost}/{name}/bindings/source"),
    ("exchange_bindings_destination", "/api/exchanges/{vhost}/{name}/bindings/destination"),
    ("queues", "/api/queues"), ("queues_vhost", "/api/queues/{vhost}"), ("queue", "/api/queues/{vhost}/{name}"),
    ("queue_bindings", "/api/queues/{vhost}/{name}/bindings"), ("queue_contents", "/api/queues/{vhost}/{name}/contents"),
    ("queue_get", "/api/queues/{vhost}/{name}/get"),
    ("bindings", "/api/bindings"), ("bindings_vhost", "/api/bindings/{vhost}"),
    ("bindings_between", "/api/bindings/{vhost}/e/{source}/{kind}/{destination}"),
    ("binding", "/api/bindings/{vhost}/e/{source}/{kind}/{destination}/{props}"),
    ("vhosts", "/api/vhosts"), ("vhost", "/api/vhosts/{vhost}"), ("vhost_permissions", "/api/vhosts/{vhost}/permissions"),
    ("vhost_topic_permissions", "/api/vhosts/{vhost}/topic-permissions"),
    ("users", "/api/users"), ("user", "/api/users/{user}"), ("user_permissions", "/api/users/{user}/permissions"),
    ("user_topic_permissions", "/api/users/{user}/topic-permissions"),
    ("topic_permissions", "/api/topic-permissions"), ("topic_permission", "/api/topic-permissions/{vhost}/{user}"),
    ("permissions", "/api/permissions"), ("permission", "/api/permissions/{vhost}/{user}"),
    ("policies", "/api/policies"), ("policies_vhost", "/api/policies/{vhost}"), ("policy", "/api/policies/{vhost}/{name}"),
    ("operator_policies", "/api/operator-policies"), ("operator_policies_vhost", "/api/operator-policies/{vhost}"),
    ("parameters", "/api/parameters"), ("global_parameters", "/api/global-parameters"),
    ("vhost_limits", "/api/vhost-limits"), ("vhost_limits_vhost", "/api/vhost-limits/{vhost}"),
    ("vhost_limit", "/api/vhost-limits/{vhost}/{name}"), ("user_limits", "/api/user-limits"),
    ("user_limits_user", "/api/user-limits/{user}"), ("user_limit", "/api/user-limits/{user}/{name}"),
    ("aliveness", "/api/aliveness-test/{vhost}"),
    ("flow", "/api/warren/flow"),
]
_SPLIT = [(name, tuple(pattern.strip("/").split("/"))) for name, pattern in ROUTES]


def match(raw_path: str) -> tuple[str, dict[str, str]] | None:
    """(route name, decoded arguments) for a raw (still percent-encoded) path, or None."""
    segments = raw_path.split("?", 1)[0].strip("/").split("/")
    for name, parts in _SPLIT:
        if len(parts) != len(segments):
            continue
        args: dict[str, str] = {}
        for part, seg in zip(parts, segments):
            if part.startswith("{"):
                if seg == "":
                    break
                args[part[1:-1]] = unquote(seg)
            elif part != seg:
                break
        else:
            return name, args
    return None
