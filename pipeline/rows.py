"""Rows <-> AMQP messages: the source's schema, a delivery as a row, a DataFrame row as a publish.

A delivery becomes (body, routing_key, exchange, redelivered, properties), `properties` being a
struct of the basic properties with `headers` as a map of strings (a header that is not a string is
written as its text: numbers, booleans, bytes as UTF-8, tables and arrays as JSON). The writer reads
`body` (string or binary), an optional `routing_key` column, an optional `properties` struct (any
subset of the fields below) and an optional `headers` map, which is laid over properties.headers.
"""
from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Mapping

import pika

PROPERTY_FIELDS = ("content_type", "content_encoding", "delivery_mode", "priority", "correlation_id",
                   "reply_to", "expiration", "message_id", "timestamp", "type", "user_id", "app_id")
PROPERTIES_DDL = ("struct<content_type: string, content_encoding: string, delivery_mode: int, priority: int, "
                  "correlation_id: string, reply_to: string, expiration: string, message_id: string, "
                  "timestamp: timestamp, type: string, user_id: string, app_id: string, "
                  "headers: map<string, string>>")
SCHEMA_DDL = (f"body binary, routing_key string, exchange string, redelivered boolean, "
              f"properties {PROPERTIES_DDL}")


def header_text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, Decimal)):
        return str(value)
    if isinstance(value, dt.datetime):
        return value.isoformat()
    return json.dumps(value, default=str)


def delivery_row(method: Any, props: pika.BasicProperties, body: bytes) -> tuple:
    """A basic.deliver (method), its content header (props) and body as a row of SCHEMA_DDL."""
    stamp = None
    if props.timestamp is not None:
        stamp = dt.datetime.fromtimestamp(props.timestamp, tz=dt.timezone.utc)
    headers = None if props.headers is None else {str(k): header_text(v) for k, v in props.headers.items()}
    properties = {f: getattr(props, f) for f in PROPERTY_FIELDS}
    properties["timestamp"] = stamp
    properties["headers"] = headers
    return (bytes(body), method.routing_key, method.exchange, bool(method.redelivered), properties)


@dataclass(frozen=True)
class Outgoing:
    routing_key: str
    properties: pika.BasicProperties
    body: bytes


def outgoing(row: Mapping[str, Any], default_routing_key: str) -> Outgoing:
    """A DataFrame row (as a dict) as the message to publish."""
    body = row["body"]
    if body is None:
        raise ValueError("a row to publish has a null body")
    body = body.encode() if isinstance(body, str) else bytes(body)
    routing_key = row.get("routing_key")
    fields: dict[str, Any] = {}
    given = row.get("properties")
    if given:
        given = given.asDict() if hasattr(given, "asDict") else dict(given)
        fields = {k: v for k, v in given.items() if k in PROPERTY_FIELDS + ("headers",) and v is not None}
    if isinstance(fields.get("timestamp"), dt.datetime):
        fields["timestamp"] = int(fields["timestamp"].timestamp())
    headers = dict(fields.get("headers") or {})
    headers.update(row.get("headers") or {})
    if headers:
        fields["headers"] = headers
    return Outgoing(default_routing_key if routing_key is None else routing_key,
                    pika.BasicProperties(**fields), body)
