"""Who may use the management API, and what each user may see and do: RabbitMQ's user tags.

Theory of operation: every request carries HTTP basic credentials, checked against the broker's
users (the node's registry, the same hashes AMQP logins use). Then the user's tags decide, as
rabbit_mgmt_util does:
- no tag of the four (`management`, `policymaker`, `monitoring`, `administrator`): refused
  everywhere, "Not management user";
- `management`: its own vhosts (those it has any permission in) and the objects in them;
  overview, queues, exchanges, bindings, connections and channels of those vhosts; declare and
  delete there (the AMQP permissions are the broker's to check when they apply);
- `policymaker`: `management` plus policies in its vhosts;
- `monitoring`: `management` plus every vhost, connection and channel, and /api/nodes;
- `administrator`: everything, users, permissions, vhosts and definitions included.
A refusal is 401 with RabbitMQ's JSON body; a request without credentials gets 401 and the
`WWW-Authenticate` challenge with an empty body, as cowboy sends it.

Left out: the `impersonator` tag, OAuth tokens, `management.disable_basic_auth`.
"""
from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

MANAGEMENT, POLICYMAKER, MONITORING, ADMINISTRATOR = "management", "policymaker", "monitoring", "administrator"
REALM = 'Basic realm="RabbitMQ Management"'
# what each tag grants, beyond the tags below it
_IMPLIES = {MANAGEMENT: {MANAGEMENT}, POLICYMAKER: {MANAGEMENT, POLICYMAKER},
            MONITORING: {MANAGEMENT, MONITORING}, ADMINISTRATOR: {MANAGEMENT, POLICYMAKER, MONITORING, ADMINISTRATOR}}
LOGIN_FAILED = {"error": "not_authorized", "reason": "Login failed"}
_REFUSALS = {MANAGEMENT: "Not management user", MONITORING: "Not monitor user",
             ADMINISTRATOR: "Not administrator user", POLICYMAKER: "User not authorised to access object"}


@dataclass(frozen=True, slots=True)
class Refused:
    """An HTTP refusal: status and JSON body (None: an empty body and the basic-auth challenge)."""

    status: int
    body: dict[str, str] | None


@dataclass(frozen=True, slots=True)
class Caller:
    """The authenticated user of a request, with what its tags grant."""

    name: str
    password: str
    tags: tuple[str, ...]
    grants: frozenset[str]

    def may(self, level: str) -> bool:
        return level in self.grants

    def refusal(self, level: str) -> Refused | None:
        """None when the caller has `level`, else RabbitMQ's 401."""
        return None if level in self.grants else Refused(401, {"error": "not_authorised", "reason": _REFUSALS[level]})


def credentials(header: str | None) -> tuple[str, str] | None:
    """(user, password) from an `Authorization: Basic ...` header, or None."""
    if not header or not header.startswith("Basic "):
        return None
    try:
        user, sep, password = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8").partition(":")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    return (user, password) if sep else None


def login(registry: Any, header: str | None) -> Caller | Refused:
    """The caller of a request, or its refusal (checked against `registry`'s users)."""
    given = credentials(header)
    if given is None:
        return Refused(401, None)
    user, password = given
    if not registry.check_login(user, password):
        return Refused(401, LOGIN_FAILED)
    record = next((u for u in registry.users() if u.name == user), None)
    tags = tuple(record.tags) if record is not None else ()
    grants = frozenset().union(*(_IMPLIES.get(tag, set()) for tag in tags))
    caller = Caller(user, password, tags, grants)
    refused = caller.refusal(MANAGEMENT)
    return refused if refused is not None else caller


def visible_vhosts(registry: Any, caller: Caller) -> set[str]:
    """The vhosts whose objects `caller` sees: all for monitoring, else those it has permissions in."""
    if caller.may(MONITORING):
        return set(registry.vhosts())
    return {p.vhost for p in registry.permissions(user=caller.name)}


def may_manage_vhost(registry: Any, caller: Caller, vhost: str) -> bool:
    """Whether `caller` may declare, delete, publish or get in `vhost` (administrators always may)."""
    return caller.may(ADMINISTRATOR) or vhost in {p.vhost for p in registry.permissions(user=caller.name)}
