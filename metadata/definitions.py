"""The definitions file: vhosts, users, permissions, policies and the durable topology (exchanges,
queues, bindings) as one checksummed JSON document.

Theory of operation: the node keeps what an operator defined (not what clients declared) in
`<data_dir>/definitions.json`, rewritten whole after every admin change (the shell writes a
temporary file, fsyncs it, renames it over the old one and fsyncs the directory, so a crash
leaves either the old or the new file). The document is RabbitMQ's definitions export shape
(users with password_hash, hashing_algorithm and limits, vhosts, permissions, topic_permissions,
policies, and vhost limits as `vhost-limits` parameters) plus `operator_policies` and a `checksum` field: sha256 over the canonical JSON of everything else. A
file whose checksum, JSON or shape is wrong is refused with a DefinitionsError value, never
half-loaded: losing users silently would lock operators out or, worse, let the default user back in.
The records it encodes and decodes are the registry's change records (changes.py), so loading is
`apply`; the JSON is the same as before the records were typed, so a node upgraded in place keeps its
users and durable topology (tests/metadata/data holds a file written by the earlier code).

Durable topology follows RabbitMQ: durable exchanges (not the predeclared ones, which every vhost
gets anew), durable queues that are not exclusive, and the bindings whose source and destination are
both durable. Field-table arguments keep their bytes and decimals through JSON with a tagged form.
"""
from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from metadata.changes import (Bound, Change, ExchangeCreated, PermissionSet, PolicySet, QueueCreated,
                              TopicPermissionSet, UserLimitsSet, UserSet, VhostCreated, VhostLimitsSet)

HASHING_ALGORITHM = "rabbit_password_hashing_sha256"
FORMAT_VERSION = 1
PREDECLARED_PREFIXES = ("amq.",)
LIMITS_COMPONENT = "vhost-limits"  # RabbitMQ's runtime parameter that holds a vhost's limits


def _to_json(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"$bytes": base64.b64encode(value).decode()}
    if isinstance(value, Decimal):
        return {"$decimal": str(value)}
    if isinstance(value, dict):
        return {k: _to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_json(v) for v in value]
    return value


def _from_json(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"$bytes"}:
            return base64.b64decode(value["$bytes"])
        if set(value) == {"$decimal"}:
            return Decimal(value["$decimal"])
        return {k: _from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_json(v) for v in value]
    return value


def _durable_topology(records: list[Change]) -> dict[str, list]:
    exchanges = [r for r in records if isinstance(r, ExchangeCreated) and r.durable and r.name
                 and not r.name.startswith(PREDECLARED_PREFIXES)]
    queues = [r for r in records if isinstance(r, QueueCreated) and r.durable and r.exclusive_owner is None]
    durable_x = {(r.vhost, r.name) for r in records if isinstance(r, ExchangeCreated) and r.durable}
    durable_q = {(r.vhost, r.name) for r in queues}
    bindings = [r for r in records if isinstance(r, Bound) and (r.vhost, r.source) in durable_x
                and (r.vhost, r.destination) in (durable_q if r.destination_kind == "queue" else durable_x)]
    return {
        "exchanges": [{"vhost": r.vhost, "name": r.name, "type": r.type, "auto_delete": r.auto_delete,
                       "internal": r.internal, "arguments": _to_json(r.arguments)} for r in exchanges],
        "queues": [{"vhost": r.vhost, "name": r.name, "auto_delete": r.auto_delete, "arguments": _to_json(r.arguments)}
                   for r in queues],
        "bindings": [{"vhost": r.vhost, "source": r.source, "destination_type": r.destination_kind,
                      "destination": r.destination, "routing_key": r.routing_key,
                      "arguments": _to_json(r.arguments)} for r in bindings],
    }


@dataclass(frozen=True, slots=True)
class DefinitionsError:
    reason: str


def _checksum(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def encode(records: list[Change]) -> bytes:
    """The file's bytes for the admin change records of a snapshot (other records are ignored)."""
    body: dict[str, Any] = {"warren_definitions": FORMAT_VERSION, "vhosts": [], "users": [], "permissions": [],
                            "policies": [], "operator_policies": []}
    extra: dict[str, list] = {"topic_permissions": [], "parameters": []}
    user_limits = {r.user: r.limits for r in records if isinstance(r, UserLimitsSet)}
    for r in records:
        if isinstance(r, VhostCreated):
            body["vhosts"].append({"name": r.vhost})
        elif isinstance(r, UserSet):
            user = {"name": r.name, "password_hash": r.password_hash, "hashing_algorithm": HASHING_ALGORITHM,
                    "tags": list(r.tags)}
            if user_limits.get(r.name):
                user["limits"] = dict(user_limits[r.name])
            body["users"].append(user)
        elif isinstance(r, PermissionSet):
            body["permissions"].append({"user": r.user, "vhost": r.vhost, "configure": r.configure, "write": r.write,
                                        "read": r.read})
        elif isinstance(r, TopicPermissionSet):
            extra["topic_permissions"].append({"user": r.user, "vhost": r.vhost, "exchange": r.exchange,
                                              "write": r.write, "read": r.read})
        elif isinstance(r, VhostLimitsSet):
            extra["parameters"].append({"vhost": r.vhost, "component": LIMITS_COMPONENT, "name": "limits",
                                       "value": dict(r.limits)})
        elif isinstance(r, PolicySet):
            body["operator_policies" if r.operator else "policies"].append(
                {"vhost": r.vhost, "name": r.name, "pattern": r.pattern, "apply-to": r.apply_to,
                 "definition": r.definition, "priority": r.priority})
    body.update(_durable_topology(records))
    body.update({key: rows for key, rows in extra.items() if rows})  # a file without them reads as before
    return json.dumps(dict(body, checksum=_checksum(body)), sort_keys=True, indent=1).encode() + b"\n"


def decode(data: bytes) -> list[Change] | DefinitionsError:
    """The change records that rebuild what `encode` saved, in an order `apply` accepts."""
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        return DefinitionsError(f"not JSON: {e}")
    if not isinstance(doc, dict) or "checksum" not in doc:
        return DefinitionsError("no checksum field")
    body = {k: v for k, v in doc.items() if k != "checksum"}
    if _checksum(body) != doc["checksum"]:
        return DefinitionsError("checksum mismatch (the file is corrupt or was edited by hand)")
    if body.get("warren_definitions") != FORMAT_VERSION:
        return DefinitionsError(f"unknown format version {body.get('warren_definitions')!r}")
    try:
        out: list[Change] = [VhostCreated(v["name"]) for v in body["vhosts"]]
        out += [UserSet(u["name"], u["password_hash"], tuple(u["tags"])) for u in body["users"]]
        out += [UserLimitsSet(u["name"], dict(u["limits"])) for u in body["users"] if u.get("limits")]
        out += [PermissionSet(p["user"], p["vhost"], p["configure"], p["write"], p["read"])
                for p in body["permissions"]]
        out += [TopicPermissionSet(t["user"], t["vhost"], t["exchange"], t["write"], t["read"])
                for t in body.get("topic_permissions", [])]
        out += [VhostLimitsSet(p["vhost"], dict(p["value"])) for p in body.get("parameters", [])
                if p.get("component") == LIMITS_COMPONENT]
        for key, operator in (("policies", False), ("operator_policies", True)):
            out += [PolicySet(p["vhost"], p["name"], p["pattern"], p["apply-to"], dict(p["definition"]),
                              int(p["priority"]), operator) for p in body[key]]
        out += [ExchangeCreated(x["vhost"], x["name"], x["type"], True, x["auto_delete"], x["internal"],
                                _from_json(x["arguments"])) for x in body.get("exchanges", [])]
        out += [QueueCreated(q["vhost"], q["name"], True, None, q["auto_delete"], _from_json(q["arguments"]))
                for q in body.get("queues", [])]
        out += [Bound(b["vhost"], b["source"], b["destination_type"], b["destination"], b["routing_key"],
                      _from_json(b["arguments"])) for b in body.get("bindings", [])]
    except (KeyError, TypeError, ValueError) as e:
        return DefinitionsError(f"malformed entry: {e!r}")
    return out
