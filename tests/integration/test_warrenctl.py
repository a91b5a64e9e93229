"""warrenctl against a real node: output in both formatters, exit codes, one-line errors. Its `main`
runs in this process (tests/integration/admin_support.py); test_status and test_usage_errors_and_no_node
run the real command as a subprocess."""
from __future__ import annotations

import json
import subprocess

import pika
import pytest

from tests.integration.admin_support import connect, ok, warrenctl, warrenctl_process
from scripts.local_cluster import HOST
from tests.integration.nodes import REPO, module_node, queue_host

pytestmark = pytest.mark.integration  # starts real node processes


node = module_node("ctl")


def fails(node, code, *args):
    r = warrenctl(node, *args)
    assert r.returncode == code, (args, r.returncode, r.stderr)
    assert r.stderr.startswith("Error: ") and r.stderr.count("\n") == 1, r.stderr
    return r.stderr


def test_status(node):
    as_json, as_table = (warrenctl_process(node, "status", *formatter) for formatter in (["--formatter", "json"], []))
    assert (as_json.returncode, as_table.returncode) == (0, 0), (as_json.stderr, as_table.stderr)
    st = json.loads(as_json.stdout)
    assert st["users"] >= 1 and st["queue_hosts"] == ["conn0", "conn1"] and st["connection_hosts"]
    assert "queue_hosts\t" in as_table.stdout


def test_list_queues_table_and_json(node):
    with connect(node) as conn:
        ch = conn.channel()
        ch.queue_declare("ctl.q")
        for _ in range(3):
            ch.basic_publish("", "ctl.q", b"m")
        ch.basic_get("ctl.q")  # one unacked until the connection closes
        table = ok(node, "list_queues", "name", "messages", "messages_ready", "messages_unacknowledged", "state")
        assert table.splitlines()[0] == "name\tmessages\tmessages_ready\tmessages_unacknowledged\tstate"
        assert "ctl.q\t3\t2\t1\trunning" in table.splitlines()
        rows = json.loads(ok(node, "--formatter", "json", "list_queues"))
        assert {"name": "ctl.q", "messages": 3} in rows
        conns = json.loads(ok(node, "list_connections", "user", "state", "channels", "--formatter", "json"))
        assert {"user": "guest", "state": "running", "channels": 1} in conns
        chans = json.loads(ok(node, "list_channels", "user", "messages_unacknowledged", "--formatter", "json"))
        assert {"user": "guest", "messages_unacknowledged": 1} in chans


def test_queues_held_by_connection_hosts_show_in_flow_and_store_summary(node):
    """By default the classic queues run in the connection hosts: warrenctl finds them there."""
    with connect(node) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        for name in ("ctl.held.a", "ctl.held.d"):  # placed on conn1 and conn0
            ch.queue_declare(name, durable=True)
            ch.basic_publish("", name, b"m" * 5000, pika.BasicProperties(delivery_mode=2))  # not embedded
        hosts = {name: f"data@{HOST}:{queue_host(node, name)}" for name in ("ctl.held.a", "ctl.held.d")}
        assert sorted(h.rpartition(":")[2] for h in hosts.values()) == ["conn0", "conn1"]
        links = {link["name"]: link for link in json.loads(ok(node, "flow", "--once", "--formatter", "json"))["links"]}
        for name, host in hosts.items():
            assert links[f"{host}/q:/:{name}"]["downstream"] == [f"{host}/msg_store"]
            assert links[f"{host}/msg_store"]["kind"] == "store"
        stores = json.loads(ok(node, "store_summary", "--formatter", "json"))
        held = {row["host"] for row in stores if row["store"] == "persistent" and row["messages"] >= 1}
        assert held >= {h.rpartition(":")[2] for h in hosts.values()}
        for name in hosts:
            ch.queue_delete(name)


def test_list_queues_has_rabbitmqs_columns(node):
    """The values RabbitMQ 3.10 prints for the same declarations (scripts/rabbitmq_oracle)."""
    with connect(node) as conn:
        ch = conn.channel()
        ch.queue_declare("ctl.classic", durable=True)
        ch.queue_declare("ctl.quorum", durable=True, arguments={"x-queue-type": "quorum"})
        ch.queue_declare("ctl.excl", exclusive=True)
        for q in ("ctl.classic", "ctl.quorum"):
            ch.basic_publish("", q, b"hello", pika.BasicProperties(delivery_mode=2))
            ch.basic_publish("", q, b"world!")
        ch.basic_get("ctl.classic")  # "hello" stays unacked until the connection closes
        ch.basic_consume("ctl.excl", lambda *a: None, consumer_tag="solo", exclusive=True)
        columns = ["name", "type", "messages", "messages_unacknowledged_ram", "message_bytes",
                   "message_bytes_ready", "message_bytes_unacknowledged", "messages_persistent",
                   "exclusive_consumer_tag", "leader", "members", "online", "pid", "owner_pid", "slave_pids"]
        rows = {r["name"]: r for r in json.loads(ok(node, "list_queues", *columns, "--formatter", "json"))}
    node_name = f"{node.data_dir.name}@{HOST}"
    assert {k: rows["ctl.classic"][k] for k in columns[1:9]} == {
        "type": "classic", "messages": 2, "messages_unacknowledged_ram": 1, "message_bytes": 11,
        "message_bytes_ready": 6, "message_bytes_unacknowledged": 5, "messages_persistent": 1,
        "exclusive_consumer_tag": None}
    assert (rows["ctl.classic"]["leader"], rows["ctl.classic"]["members"]) == (None, None)
    quorum = rows["ctl.quorum"]
    assert (quorum["type"], quorum["leader"], quorum["members"], quorum["online"]) == (
        "quorum", node_name, [node_name], [node_name])
    assert rows["ctl.excl"]["exclusive_consumer_tag"] == "solo" and rows["ctl.excl"]["owner_pid"]
    assert all(r["pid"] and r["slave_pids"] is None for r in rows.values())


def test_list_exchanges_bindings_consumers(node):
    assert "amq.topic\ttopic" in ok(node, "list_exchanges").splitlines()
    with connect(node) as conn:
        ch = conn.channel()
        ch.queue_declare("ctl.c")
        ch.queue_bind("ctl.c", "amq.direct", "rk")
        ch.basic_consume("ctl.c", lambda *a: None, consumer_tag="tag1")
        bindings = json.loads(ok(node, "list_bindings", "--formatter", "json"))
        assert {"source_name": "amq.direct", "source_kind": "exchange", "destination_name": "ctl.c",
                "destination_kind": "queue", "routing_key": "rk", "arguments": {}} in bindings
        consumers = json.loads(ok(node, "list_consumers", "--formatter", "json"))
        assert any(c["consumer_tag"] == "tag1" and c["queue_name"] == "ctl.c" for c in consumers)


def test_user_commands_and_their_errors(node):
    ok(node, "add_user", "dan", "pw")
    assert "User \"dan\" already exists" in fails(node, 70, "add_user", "dan", "pw")
    ok(node, "change_password", "dan", "pw2")
    assert "does not exist" in fails(node, 67, "change_password", "nobody", "x")
    assert "does not exist" in fails(node, 67, "delete_user", "nobody")
    assert "Virtual host nov does not exist" in fails(node, 69, "set_permissions", "-p", "nov", "dan", ".*", ".*", ".*")
    ok(node, "set_permissions", "dan", ".*", ".*", ".*")
    with connect(node, "dan", "pw2"):
        pass
    assert "dan\t.*\t.*\t.*" in ok(node, "list_permissions").splitlines()
    ok(node, "delete_user", "dan")
    assert "dan" not in ok(node, "list_users")


def test_policy_commands(node):
    ok(node, "set_policy", "--priority", "3", "--apply-to", "queues", "ttl", "^t", '{"message-ttl": 5000}')
    rows = json.loads(ok(node, "list_policies", "--formatter", "json"))
    assert {"vhost": "/", "name": "ttl", "pattern": "^t", "apply-to": "queues", "definition": '{"message-ttl":5000}',
            "priority": 3} in rows
    assert fails(node, 69, "set_policy", "bad", "^q", '{"max-length": -1}') == \
        "Error: Validation failed: -1 is not a valid maximum length\n"
    assert "JSON decoding error" in fails(node, 69, "set_policy", "bad", "^q", "notjson")
    assert "Parameter does not exist" in fails(node, 69, "clear_policy", "nope")
    assert "does not exist" in fails(node, 65, "set_policy", "-p", "nov", "p", "^q", '{"max-length": 1}')
    ok(node, "clear_policy", "ttl")


def test_purge_delete_and_close_connection(node):
    conn = connect(node)
    ch = conn.channel()
    ch.queue_declare("ctl.p")
    ch.basic_publish("", "ctl.p", b"m")
    ch.basic_publish("", "ctl.p", b"m")
    assert "2 messages" in ok(node, "purge_queue", "ctl.p")
    ok(node, "delete_queue", "ctl.p")
    assert "does not exist" in fails(node, 69, "purge_queue", "ctl.p")
    names = [r["name"] for r in json.loads(ok(node, "list_connections", "name", "--formatter", "json"))]
    for name in names:
        ok(node, "close_connection", name, "go away")
    with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as e:
        conn.process_data_events(time_limit=10)
        conn.channel()
    assert (e.value.reply_code, e.value.reply_text) == (320, "CONNECTION_FORCED - go away")
    fails(node, 69, "close_connection", "conn9:999", "x")


def test_usage_errors_and_no_node(node, tmp_path):
    fails(node, 64, "no_such_command")
    r = warrenctl_process(node, "no_such_command")
    assert r.returncode == 64 and r.stderr.startswith("Error: ") and r.stderr.count("\n") == 1, r.stderr
    fails(node, 64, "add_user", "only-name")
    r = warrenctl(node, "list_queues", "name", "no_such_column", "other")
    assert (r.returncode, r.stderr) == (64, "Error (argument validation): Info key(s) no_such_column,other "
                                            "are not supported\n")  # rabbitmqctl's text and code
    r = subprocess.run([str(REPO / "scripts" / "warrenctl"), "-n", str(tmp_path / "nothing"), "status"],
                       capture_output=True, text=True)
    assert r.returncode == 69 and r.stderr.startswith("Error: no warren node in")
