"""Record the shapes of RabbitMQ 3.10's management API and Prometheus text into oracle_shapes.json.

Run by hand against an oracle with its management plugin (it makes objects, traffic and users there):
    ORACLE_MANAGEMENT_PORT=25672 scripts/rabbitmq_oracle start 25699 /tmp/oracle
    .venv/bin/python -m tests.mgmt.record_oracle 25672 25699
    scripts/rabbitmq_oracle stop /tmp/oracle
What is kept: per request the status, the body's key paths (of a list's first row), error bodies
whole, and the names of the rabbitmq_* metric families at /metrics and /metrics/per-object; for the
listing options (PAGES: sort, pagination, name filters, columns) the page's counts and key order
and the names of its items. The tests compare warren's answers with these, never values that
differ run to run.
"""
from __future__ import annotations

import base64
import json
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pika

OUT = Path(__file__).with_name("oracle_shapes.json")
OPAQUE = {"client_properties", "arguments", "effective_policy_definition", "definition", "cluster_state",
          "open_files", "garbage_collection", "backing_queue_status", "capabilities"}


def key_paths(body: object, prefix: str = "") -> list[str]:
    if isinstance(body, list):
        return key_paths(body[0], prefix) if body and isinstance(body[0], dict) else []
    if not isinstance(body, dict):
        return []
    out = []
    for k, v in body.items():
        out.append(prefix + k)
        if isinstance(v, dict) and k not in OPAQUE:
            out += key_paths(v, prefix + k + ".")
    return sorted(out)


# listing options, on the objects shape_traffic makes (the oracle's amq.rabbitmq.trace and warren's
# are both there); connections' and channels' names differ between brokers, so only counts are kept
PAGES = [
    ("page_first", "/api/queues?page=1&page_size=1"),
    ("page_reverse", "/api/queues?page=2&page_size=1&sort=name&sort_reverse=true"),
    ("page_default_size", "/api/queues?page=1"),
    ("page_empty_after_last", "/api/queues?page=3&page_size=1"),
    ("page_out_of_range", "/api/queues?page=4&page_size=1"),
    ("page_zero", "/api/queues?page=0"),
    ("page_zero_sized", "/api/queues?page=1&page_size=0"),
    ("page_too_big", "/api/queues?page=1&page_size=501"),
    ("page_not_a_number", "/api/queues?page=abc"),
    ("page_size_not_a_number", "/api/queues?page_size=abc"),
    ("page_name_substring", "/api/queues?page=1&name=QQ"),
    ("page_name_regex", "/api/queues?page=1&name=^shape_q$&use_regex=true"),
    ("page_name_bad_regex", "/api/queues?page=1&name=q%5B&use_regex=true"),
    ("page_columns", "/api/queues?page=1&page_size=1&columns=name,messages"),
    ("page_vhost", "/api/queues/%2F?page=1&page_size=1&sort=messages&sort_reverse=true"),
    ("name_without_page", "/api/queues?name=qq"),
    ("sort_dotted", "/api/queues?sort=message_stats.publish&sort_reverse=true"),
    ("exchanges_filtered", "/api/exchanges?page=2&page_size=3&name=amq"),
    ("exchanges_by_type", "/api/exchanges?page=1&sort=type"),
    ("vhosts_page", "/api/vhosts?page=1"),
    ("connections_page", "/api/connections?page=1"),
    ("channels_page", "/api/channels?page=1&page_size=1"),
]
NAMELESS = {"connections_page", "channels_page"}


def page_summary(name: str, status: int, body: object) -> dict:
    """What the tests compare of a listing answer: its status, and the error, or the page's
    counts and key order, or the items' names."""
    entry: dict = {"status": status}
    if status >= 400:
        entry["body"] = body
    elif isinstance(body, dict):
        entry["keys"] = list(body)
        entry["counts"] = {k: v for k, v in body.items() if k != "items"}
        if name not in NAMELESS:
            entry["items"] = [item if len(item) < 3 else item["name"] for item in body["items"]]
    else:
        entry["items"] = [item["name"] for item in body]
    return entry


def shape_traffic(amqp_port: int) -> pika.BlockingConnection:
    """The objects and traffic the shapes are recorded with (the tests make the same on warren):
    a classic and a quorum queue with 50 messages each, a topic exchange, a consumer holding 5."""
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", amqp_port))
    ch = conn.channel()
    ch.confirm_delivery()
    ch.queue_declare("shape_q", durable=True)
    ch.queue_declare("shape_qq", durable=True, arguments={"x-queue-type": "quorum"})
    ch.exchange_declare("shape_x", "topic", durable=True)
    ch.queue_bind("shape_q", "shape_x", "a.#")
    for i in range(50):
        ch.basic_publish("shape_x", "a.b", b"hello %d" % i)
        ch.basic_publish("", "shape_qq", b"q%d" % i)
    ch2 = conn.channel()
    ch2.basic_qos(prefetch_count=5)
    ch2.basic_consume("shape_q", lambda *_: None)
    return conn


def main(mgmt_port: int, amqp_port: int) -> None:
    base = f"http://127.0.0.1:{mgmt_port}"

    def req(method: str, path: str, body: object = None, user: str | None = "guest:guest") -> tuple[int, object]:
        headers = {"Content-Type": "application/json"}
        if user:
            headers["Authorization"] = "Basic " + base64.b64encode(user.encode()).decode()
        r = urllib.request.Request(base + path, method=method, headers=headers,
                                   data=None if body is None else json.dumps(body).encode())
        try:
            with urllib.request.urlopen(r) as resp:
                data = resp.read()
                return resp.status, json.loads(data) if data else None
        except urllib.error.HTTPError as e:
            data = e.read()
            try:
                return e.code, json.loads(data)
            except ValueError:
                return e.code, data.decode()

    shapes: dict[str, dict] = {}

    def rec(name: str, method: str, path: str, body: object = None, **kw: object) -> None:
        status, answer = req(method, path, body, **kw)
        entry: dict = {"method": method, "path": path, "status": status}
        if status >= 400 or not isinstance(answer, (dict, list)):
            entry["body"] = answer
        else:
            entry["keys"] = key_paths(answer)
        shapes[name] = entry

    conn = shape_traffic(amqp_port)
    deadline = time.monotonic() + 12  # two of the oracle's 5 s samples, so message_stats exist
    while time.monotonic() < deadline:
        conn.process_data_events(0.5)
    for name, path in [("overview", "/api/overview"), ("nodes", "/api/nodes"), ("connections", "/api/connections"),
                       ("channels", "/api/channels"), ("consumers", "/api/consumers"),
                       ("exchanges", "/api/exchanges"), ("exchange", "/api/exchanges/%2F/shape_x"),
                       ("exchange_missing", "/api/exchanges/%2F/nope"), ("queues", "/api/queues"),
                       ("queue", "/api/queues/%2F/shape_q"), ("queue_qq", "/api/queues/%2F/shape_qq"),
                       ("queue_missing", "/api/queues/%2F/nope"), ("queues_missing_vhost", "/api/queues/nope"),
                       ("bindings", "/api/bindings"), ("vhosts", "/api/vhosts"), ("vhost", "/api/vhosts/%2F"),
                       ("users", "/api/users"), ("user", "/api/users/guest"), ("whoami", "/api/whoami"),
                       ("permissions", "/api/permissions"), ("definitions", "/api/definitions"),
                       ("not_found_path", "/api/nonsense")]:
        rec(name, "GET", path)
    rec("noauth", "GET", "/api/overview", user=None)
    rec("badauth", "GET", "/api/overview", user="guest:wrong")
    steps = [
        ("put_vhost", "PUT", "/api/vhosts/shape_v", {}), ("put_vhost_again", "PUT", "/api/vhosts/shape_v", {}),
        ("put_user", "PUT", "/api/users/shape_u", {"password": "pw", "tags": "monitoring"}),
        ("put_user_update", "PUT", "/api/users/shape_u", {"password": "pw", "tags": "monitoring"}),
        ("put_perm", "PUT", "/api/permissions/shape_v/shape_u", {"configure": ".*", "write": ".*", "read": ".*"}),
        ("permission", "GET", "/api/permissions/shape_v/shape_u", None),
        ("put_perm_novhost", "PUT", "/api/permissions/nov/shape_u", {"configure": ".*", "write": ".*", "read": ".*"}),
        ("put_policy", "PUT", "/api/policies/%2F/shape_p",
         {"pattern": "^shape_q$", "definition": {"max-length": 100}, "apply-to": "queues", "priority": 1}),
        ("policies", "GET", "/api/policies", None), ("policy", "GET", "/api/policies/%2F/shape_p", None),
        ("put_exchange", "PUT", "/api/exchanges/%2F/shape_x2", {"type": "direct", "durable": True}),
        ("put_exchange_same", "PUT", "/api/exchanges/%2F/shape_x2", {"type": "direct", "durable": True}),
        ("put_exchange_conflict", "PUT", "/api/exchanges/%2F/shape_x2", {"type": "fanout", "durable": True}),
        ("put_exchange_badtype", "PUT", "/api/exchanges/%2F/shape_x3", {"type": "nonsense"}),
        ("put_queue", "PUT", "/api/queues/%2F/shape_q2", {"durable": True, "arguments": {}}),
        ("put_queue_same", "PUT", "/api/queues/%2F/shape_q2", {"durable": True, "arguments": {}}),
        ("put_queue_conflict", "PUT", "/api/queues/%2F/shape_q2", {"durable": False}),
        ("put_queue_novhost", "PUT", "/api/queues/nov/shape_q2", {"durable": True}),
        ("post_binding", "POST", "/api/bindings/%2F/e/shape_x2/q/shape_q2", {"routing_key": "rk", "arguments": {}}),
        ("bindings_between", "GET", "/api/bindings/%2F/e/shape_x2/q/shape_q2", None),
        ("binding", "GET", "/api/bindings/%2F/e/shape_x2/q/shape_q2/rk", None),
        ("delete_binding", "DELETE", "/api/bindings/%2F/e/shape_x2/q/shape_q2/rk", None),
        ("publish", "POST", "/api/exchanges/%2F/amq.default/publish",
         {"properties": {}, "routing_key": "shape_q2", "payload": "hi", "payload_encoding": "string"}),
        ("publish_unrouted", "POST", "/api/exchanges/%2F/amq.default/publish",
         {"properties": {}, "routing_key": "none", "payload": "hi", "payload_encoding": "string"}),
        ("publish_missing_exchange", "POST", "/api/exchanges/%2F/nope/publish",
         {"properties": {}, "routing_key": "none", "payload": "hi", "payload_encoding": "string"}),
        ("get", "POST", "/api/queues/%2F/shape_q2/get", {"count": 5, "ackmode": "ack_requeue_true", "encoding": "auto"}),
        ("get_bad", "POST", "/api/queues/%2F/shape_q2/get", {"count": 5}),
        ("purge", "DELETE", "/api/queues/%2F/shape_q2/contents", None),
        ("delete_queue", "DELETE", "/api/queues/%2F/shape_q2", None),
        ("delete_queue_missing", "DELETE", "/api/queues/%2F/shape_q2", None),
        ("delete_exchange", "DELETE", "/api/exchanges/%2F/shape_x2", None),
        ("delete_policy", "DELETE", "/api/policies/%2F/shape_p", None),
        ("delete_user", "DELETE", "/api/users/shape_u", None),
        ("delete_vhost", "DELETE", "/api/vhosts/shape_v", None),
        ("delete_vhost_missing", "DELETE", "/api/vhosts/shape_v", None),
    ]
    for name, method, path, body in steps:
        rec(name, method, path, body)
    pages = {name: page_summary(name, *req("GET", path)) for name, path in PAGES}
    for user, tag in [("mon", "monitoring"), ("mgm", "management"), ("pol", "policymaker"), ("none", "")]:
        req("PUT", f"/api/users/{user}", {"password": "pw", "tags": tag})
        req("PUT", f"/api/permissions/%2F/{user}", {"configure": ".*", "write": ".*", "read": ".*"})
        for name, method, path, body in [("users", "GET", "/api/users", None), ("nodes", "GET", "/api/nodes", None),
                                         ("overview", "GET", "/api/overview", None),
                                         ("put_policy", "PUT", f"/api/policies/%2F/p_{user}",
                                          {"pattern": "^zz", "definition": {"max-length": 1}}),
                                         ("put_vhost", "PUT", f"/api/vhosts/v_{user}", {})]:
            rec(f"as_{user}_{name}", method, path, body, user=f"{user}:pw")
        req("DELETE", f"/api/policies/%2F/p_{user}")
        req("DELETE", f"/api/users/{user}")
    conn.close()
    metrics = {}
    for path in ("/metrics", "/metrics/per-object"):
        with urllib.request.urlopen(f"http://127.0.0.1:{mgmt_port + 20}{path}") as resp:
            text = resp.read().decode()
        metrics[path] = sorted({line.split()[2] for line in text.splitlines()
                                if line.startswith("# TYPE rabbitmq_")})
    OUT.write_text(json.dumps({"api": shapes, "metrics": metrics, "pages": pages}, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
