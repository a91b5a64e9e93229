"""The bodies of the API's publish and get, as RabbitMQ's management plugin reads and writes them.

Theory of operation: publish takes `routing_key`, `payload`, `payload_encoding` ("string" or
"base64") and `properties` (basic properties by their AMQP names) and answers `{"routed": bool}`;
get takes `count`, `ackmode` (ack_requeue_true, ack_requeue_false, reject_requeue_true,
reject_requeue_false) and `encoding` ("auto": text when the payload is UTF-8, else base64; or
"base64"), optionally `truncate`, and answers one row per message. A missing key is RabbitMQ's
400 with its Erlang-shaped reason (`[{key_missing,ackmode}]`). The AMQP round trip is the
shell's (amqp_client.py).
"""
from __future__ import annotations

import base64
import binascii
from typing import Any

from mgmt.changes import Answer, bad_request
from mgmt.shapes import printable

ACKMODES = ("ack_requeue_true", "ack_requeue_false", "reject_requeue_true", "reject_requeue_false")


def _missing(body: dict, keys: tuple[str, ...]) -> Answer | None:
    missing = [k for k in keys if k not in body]
    return bad_request("[" + ",".join(f"{{key_missing,{k}}}" for k in missing) + "]") if missing else None


def parse_publish(body: Any) -> tuple[str, dict, bytes] | Answer:
    """(routing_key, properties, payload bytes) or the 400."""
    if not isinstance(body, dict):
        return bad_request("Request body must be a JSON object")
    missing = _missing(body, ("routing_key", "payload", "payload_encoding", "properties"))
    if missing is not None:
        return missing
    encoding = body["payload_encoding"]
    if encoding == "string":
        payload = str(body["payload"]).encode("utf-8")
    elif encoding == "base64":
        try:
            payload = base64.b64decode(str(body["payload"]), validate=True)
        except binascii.Error:
            return bad_request("not_base64")
    else:
        return bad_request(f"payload_encoding must be string or base64, got {encoding!r}")
    props = body["properties"] if isinstance(body["properties"], dict) else {}
    return str(body["routing_key"]), props, payload


def parse_get(body: Any) -> tuple[int, str, str, int | None] | Answer:
    """(count, ackmode, encoding, truncate) or the 400."""
    if not isinstance(body, dict):
        return bad_request("Request body must be a JSON object")
    missing = _missing(body, ("ackmode", "encoding"))
    if missing is not None:
        return missing
    if body["ackmode"] not in ACKMODES:
        return bad_request(f"Unknown ackmode: {body['ackmode']}")
    try:
        count = int(body.get("count", 1))
        truncate = int(body["truncate"]) if body.get("truncate") not in (None, "") else None
    except (TypeError, ValueError):
        return bad_request("count and truncate must be integers")
    return count, body["ackmode"], str(body["encoding"]), truncate


def get_row(exchange: str, routing_key: str, redelivered: bool, message_count: int, props: dict, body: bytes,
            encoding: str, truncate: int | None) -> dict:
    """One message of a get's answer."""
    shown = body if truncate is None else body[:truncate]
    text = None
    if encoding == "auto":
        try:
            text = shown.decode("utf-8")
        except UnicodeDecodeError:
            text = None
    payload, how = (text, "string") if text is not None else (base64.b64encode(shown).decode(), "base64")
    return {"payload_bytes": len(body), "redelivered": redelivered, "exchange": exchange,
            "routing_key": routing_key, "message_count": message_count,
            "properties": printable(props) if props else [], "payload": payload, "payload_encoding": how}
