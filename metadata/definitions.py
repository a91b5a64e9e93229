"""The definitions file: vhosts, users, permissions, policies and the durable topology (exchanges,
queues, bindings) as one checksummed JSON document.

Theory of operation: the node keeps what an operator defined (not what clients declared) in
`<data_dir>/definitions.json`, rewritten whole after every admin change (the shell writes a
temporary file, fsyncs it, renames it over the old one and fsyncs the directory, so a crash
leaves either the old or the new file). The document is RabbitMQ's definitions export shape
(users with password_hash and hashing_algorithm, vhosts, permissions, policies) plus
`operator_policies` and a `checksum` field: sha256 over the canonical JSON of everything else. A
file whose checksum, JSON or shape is wrong is refused with a DefinitionsError value, never
half-loaded: losing users silently would lock operators out or, worse, let the default user back in.
The records it encodes and decodes are the registry's change records, so loading is `apply`.

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

HASHING_ALGORITHM = "rabbit_password_hashing_sha256"
FORMAT_VERSION = 1
PREDECLARED_PREFIXES = ("amq.",)


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


def _durable_topology(records: list[tuple]) -> dict[str, list]:
    exchanges = [r for r in records if r[0] == "exchange" and r[4] and r[2] and not r[2].startswith(PREDECLARED_PREFIXES)]
    queues = [r for r in records if r[0] == "queue" and r[3] and r[4] is None]
    durable_x = {(r[1], r[2]) for r in records if r[0] == "exchange" and r[4]}
    durable_q = {(r[1], r[2]) for r in queues}
    bindings = [r for r in records if r[0] == "bound" and (r[1], r[2]) in durable_x
                and (r[1], r[4]) in (durable_q if r[3] == "queue" else durable_x)]
    return {
        "exchanges": [{"vhost": r[1], "name": r[2], "type": r[3], "auto_delete": r[5], "internal": r[6],
                       "arguments": _to_json(r[7])} for r in exchanges],
        "queues": [{"vhost": r[1], "name": r[2], "auto_delete": r[5], "arguments": _to_json(r[6])} for r in queues],
        "bindings": [{"vhost": r[1], "source": r[2], "destination_type": r[3], "destination": r[4],
                      "routing_key": r[5], "arguments": _to_json(r[6])} for r in bindings],
    }


@dataclass(frozen=True, slots=True)
class DefinitionsError:
    reason: str


def _checksum(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def encode(records: list[tuple]) -> bytes:
    """The file's bytes for the admin change records of a snapshot (other records are ignored)."""
    body: dict[str, Any] = {"warren_definitions": FORMAT_VERSION, "vhosts": [], "users": [], "permissions": [],
                            "policies": [], "operator_policies": []}
    for r in records:
        if r[0] == "vhost":
            body["vhosts"].append({"name": r[1]})
        elif r[0] == "user":
            body["users"].append({"name": r[1], "password_hash": r[2], "hashing_algorithm": HASHING_ALGORITHM,
                                  "tags": list(r[3])})
        elif r[0] == "permission":
            body["permissions"].append({"user": r[1], "vhost": r[2], "configure": r[3], "write": r[4],
                                        "read": r[5]})
        elif r[0] == "policy":
            key = "operator_policies" if r[7] else "policies"
            body[key].append({"vhost": r[1], "name": r[2], "pattern": r[3], "apply-to": r[4],
                              "definition": r[5], "priority": r[6]})
    body.update(_durable_topology(records))
    return json.dumps(dict(body, checksum=_checksum(body)), sort_keys=True, indent=1).encode() + b"\n"


def decode(data: bytes) -> list[tuple] | DefinitionsError:
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
        out: list[tuple] = [("vhost", v["name"]) for v in body["vhosts"]]
        out += [("user", u["name"], u["password_hash"], list(u["tags"])) for u in body["users"]]
        out += [("permission", p["user"], p["vhost"], p["configure"], p["write"], p["read"])
                for p in body["permissions"]]
        for key, operator in (("policies", False), ("operator_policies", True)):
            out += [("policy", p["vhost"], p["name"], p["pattern"], p["apply-to"], dict(p["definition"]),
                     int(p["priority"]), operator) for p in body[key]]
        out += [("exchange", x["vhost"], x["name"], x["type"], True, x["auto_delete"], x["internal"],
                 _from_json(x["arguments"])) for x in body.get("exchanges", [])]
        out += [("queue", q["vhost"], q["name"], True, None, q["auto_delete"], _from_json(q["arguments"]))
                for q in body.get("queues", [])]
        out += [("bound", b["vhost"], b["source"], b["destination_type"], b["destination"], b["routing_key"],
                 _from_json(b["arguments"])) for b in body.get("bindings", [])]
    except (KeyError, TypeError, ValueError) as e:
        return DefinitionsError(f"malformed entry: {e!r}")
    return out
