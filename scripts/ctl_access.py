"""warrenctl's topic permission and limit commands, as rabbitmqctl 3.10 gives them:
`set_topic_permissions`, `clear_topic_permissions`, `list_topic_permissions`,
`list_user_topic_permissions`, `set_vhost_limits`, `clear_vhost_limits`, `list_vhost_limits`,
`set_user_limits`, `clear_user_limits`, `list_user_limits`.

The node host runs each change as an admin operation (actors/node/access_admin.py) and answers a
listing from its registry (actors/node/listings.py); this module parses, and prints what
rabbitmqctl prints: a tab-separated table (or a JSON list), a limits value as compact JSON. A
limits argument that is not JSON is refused as rabbitmqctl refuses it ("JSON decoding error").
Failures print "Error: <reason>" and exit with rabbitmqctl's code.
"""
from __future__ import annotations

import argparse
import json
from typing import Any, Callable, Protocol

EX_UNAVAILABLE = 69
COMMANDS = ("set_topic_permissions", "clear_topic_permissions", "list_topic_permissions",
            "list_user_topic_permissions", "set_vhost_limits", "clear_vhost_limits", "list_vhost_limits",
            "set_user_limits", "clear_user_limits", "list_user_limits")


class Node(Protocol):
    def ask(self, host: str, op: str, args: dict | None = None) -> Any: ...


Render = Callable[[list[dict], list[str], str], str]


def add_parsers(cmd: Callable[..., argparse.ArgumentParser]) -> None:
    """The commands' arguments, on warrenctl's parser (`cmd(name, vhost=...)` adds one)."""
    sp = cmd("set_topic_permissions", vhost=True, help="a user's write and read regexes for a topic exchange's keys")
    for arg in ("user", "exchange", "write", "read"):
        sp.add_argument(arg)
    sp = cmd("clear_topic_permissions", vhost=True, help="a user's topic permissions (one exchange's, or all)")
    sp.add_argument("user")
    sp.add_argument("exchange", nargs="?")
    cmd("list_topic_permissions", vhost=True, help="the vhost's topic permissions")
    cmd("list_user_topic_permissions", help="a user's topic permissions in every vhost").add_argument("user")
    sp = cmd("set_vhost_limits", vhost=True, help='a vhost\'s limits, as JSON: {"max-connections": N, "max-queues": N}')
    sp.add_argument("definition")
    cmd("clear_vhost_limits", vhost=True, help="a vhost's limits")
    cmd("list_vhost_limits", vhost=True, help="a vhost's limits, or every vhost's with --global").add_argument(
        "--global", dest="all", action="store_true")
    sp = cmd("set_user_limits", help='a user\'s limits, as JSON: {"max-connections": N, "max-channels": N}')
    sp.add_argument("user")
    sp.add_argument("definition")
    sp = cmd("clear_user_limits", help="one of a user's limits, or all")
    sp.add_argument("user")
    sp.add_argument("limit")
    sp = cmd("list_user_limits", help="a user's limits (default guest), or every user's with --global")
    sp.add_argument("--user", default="guest")
    sp.add_argument("--global", dest="all", action="store_true")


def _limits(text: str, failure: Callable[..., Exception]) -> dict:
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise failure("JSON decoding error. Reason: badarg", EX_UNAVAILABLE)
    return value


def run(node: Node, a: argparse.Namespace, render: Render, failure: Callable[..., Exception]) -> str:
    c, f = a.command, a.formatter
    vh = getattr(a, "vhost", None) or "/"
    if c == "set_topic_permissions":
        node.ask("node", c, {"user": a.user, "vhost": vh, "exchange": a.exchange, "write": a.write, "read": a.read})
        return _done(f, f'Set topic permissions on "{a.exchange}" for user "{a.user}" in vhost "{vh}"')
    if c == "clear_topic_permissions":
        node.ask("node", c, {"user": a.user, "vhost": vh, "exchange": a.exchange})
        return _done(f, f'Cleared topic permissions for user "{a.user}" in vhost "{vh}"')
    if c == "list_topic_permissions":
        return render(node.ask("node", c, {"vhost": vh}), ["user", "exchange", "write", "read"], f)
    if c == "list_user_topic_permissions":
        return render(node.ask("node", "list_topic_permissions", {"user": a.user}),
                      ["vhost", "exchange", "write", "read"], f)
    if c == "set_vhost_limits":
        node.ask("node", c, {"vhost": vh, "limits": _limits(a.definition, failure)})
        return _done(f, f'Set vhost limits to "{a.definition}" for vhost "{vh}"')
    if c == "clear_vhost_limits":
        node.ask("node", c, {"vhost": vh})
        return _done(f, f'Cleared vhost "{vh}" limits')
    if c == "set_user_limits":
        node.ask("node", c, {"user": a.user, "limits": _limits(a.definition, failure)})
        return _done(f, f'Set user limits to "{a.definition}" for user "{a.user}"')
    if c == "clear_user_limits":
        node.ask("node", c, {"user": a.user, "name": a.limit})
        return _done(f, f'Cleared "{a.limit}" limit for user "{a.user}"' if a.limit != "all"
                     else f'Cleared all limits for user "{a.user}"')
    if c == "list_vhost_limits":
        rows = node.ask("node", c, {} if a.all else {"vhost": vh})
        return render(rows, ["vhost", "limits"], f) if a.all or f == "json" else "\n".join(r["limits"] for r in rows)
    if c == "list_user_limits":
        rows = node.ask("node", c, {} if a.all else {"user": a.user})
        return render(rows, ["user", "limits"], f) if a.all or f == "json" else "\n".join(r["limits"] for r in rows)
    raise AssertionError(c)


def _done(formatter: str, text: str) -> str:
    return json.dumps({"ok": True}) if formatter == "json" else text
