"""The management API on a real node: RabbitMQ's shapes, codes and error bodies (against the 3.10
oracle's recording, tests/mgmt/oracle_shapes.json), listing options (sort, pagination, filters),
tags, rabbitmqadmin unchanged, Prometheus text (Raft and WAL families included), exchange counters."""
from __future__ import annotations

import subprocess
import sys

import pika
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.admin_support import ok
from tests.mgmt.record_oracle import PAGES, page_summary, shape_traffic
from tests.mgmt.support import RABBITMQADMIN, key_paths, oracle, start_mgmt_node
from tests.waiting import until

pytestmark = pytest.mark.integration
ORACLE = oracle()
# what RabbitMQ takes from the Erlang VM or has and warren does not (see mgmt/shapes.py)
ERLANG_ONLY = {"garbage_collection", "reductions", "reductions_details", "backing_queue_status", "open_files",
               "recv_cnt", "recv_oct", "recv_oct_details", "send_cnt", "send_oct", "send_oct_details", "send_pend",
               "channel_details.peer_host", "channel_details.peer_port", "channel_details.user"}
# node facts of the Erlang VM and its IO layer, and what warren does not count yet (per-exchange stats)
NODE_ERLANG = ("io_", "gc_", "mnesia_", "msg_store_", "queue_index_", "context_switches", "metrics_gc_queue_length",
               "ra_open_file_metrics")
NOT_YET: dict[str, set[str]] = {}
WAL_BYTES = 256 * 1024  # the test node's raft.wal_max_size_bytes: a few hundred messages roll the WAL over
# what rabbitmq_prometheus shows from RabbitMQ 4.2 on (its metrics.md and rabbit_prometheus_http_SUITE),
# beside the 3.10 families the oracle lists
NEWER_FAMILIES = {"/metrics": {"rabbitmq_raft_max_num_segments", "rabbitmq_raft_max_commit_latency_seconds",
                               "rabbitmq_raft_wal_files", "rabbitmq_raft_bytes_written", "rabbitmq_raft_mem_tables",
                               "rabbitmq_raft_entries", "rabbitmq_raft_segments"},
                  "/metrics/per-object": {"rabbitmq_raft_num_segments", "rabbitmq_raft_wal_files",
                                          "rabbitmq_raft_bytes_written", "rabbitmq_raft_mem_tables",
                                          "rabbitmq_raft_entries", "rabbitmq_raft_segments"}}


@pytest.fixture(scope="module")
def mgmt(tmp_path_factory):
    m = start_mgmt_node(tmp_path_factory.mktemp("mgmt"), conf_lines=(f"raft.wal_max_size_bytes = {WAL_BYTES}",))
    conn = shape_traffic(m.node.port)
    conn.process_data_events(0.2)
    until(lambda: m.get("/api/queues/%2F/shape_q").get("message_stats", {}).get("deliver") == 5
          and m.get("/api/channels"), "the sample to show the consumer's deliveries")
    m.conn = conn
    yield m
    conn.close()
    m.node.stop()


def missing_keys(name: str, body) -> set[str]:
    expected = set(ORACLE["api"][name]["keys"])
    return {k for k in expected - key_paths(body) if k.split(".")[0] not in ERLANG_ONLY | NOT_YET.get(name, set())
            and k not in ERLANG_ONLY and not (name == "nodes" and k.startswith(NODE_ERLANG))
            and not (name == "nodes" and k.split(".")[0].removesuffix("_details") in NODE_SAMPLES)}


NODE_SAMPLES = {"fd_used", "mem_used", "proc_used", "sockets_used", "disk_free"}  # their histories are not kept


@pytest.mark.parametrize("name", ["overview", "queues", "queue", "queue_qq", "exchanges", "exchange", "bindings",
                                  "vhosts", "vhost", "users", "user", "whoami", "permissions", "definitions",
                                  "connections", "channels", "consumers", "nodes"])
def test_fields_are_rabbitmqs(mgmt, name):
    recorded = ORACLE["api"][name]
    status, body, _ = mgmt.http("GET", recorded["path"])
    assert status == recorded["status"]
    assert missing_keys(name, body) == set()


@pytest.mark.parametrize("name", ["exchange_missing", "queue_missing", "queues_missing_vhost", "not_found_path",
                                  "badauth", "noauth"])
def test_errors_are_rabbitmqs(mgmt, name):
    recorded = ORACLE["api"][name]
    user = {"noauth": None, "badauth": "guest:wrong"}.get(name, "guest:guest")
    status, body, headers = mgmt.http(recorded["method"], recorded["path"], user=user)
    assert (status, body or "") == (recorded["status"], recorded["body"])
    if name == "noauth":
        assert headers["WWW-Authenticate"] == 'Basic realm="RabbitMQ Management"'


@pytest.mark.parametrize("name,path", PAGES)
def test_listing_options_are_rabbitmqs(mgmt, name, path):
    """Sort, pagination, name filters and columns as the oracle answered them (before the tests
    below add objects; connections and channels are the sample's, so they are waited for)."""
    def summary() -> dict:
        return page_summary(name, *mgmt.http("GET", path)[:2])
    expected = ORACLE["pages"][name]
    if name.startswith(("connections", "channels")):
        until(lambda: summary() == expected, f"{path} as the oracle's")
    assert summary() == expected


def test_quorum_queue_shows_leader_and_members(mgmt):
    q = mgmt.get("/api/queues/%2F/shape_qq")
    node = mgmt.get("/api/overview")["node"]
    assert (q["type"], q["leader"], q["members"], q["messages"]) == ("quorum", node, [node], 50)


def test_counts_and_message_stats_follow_traffic(mgmt):
    q = mgmt.get("/api/queues/%2F/shape_q")
    assert (q["messages"], q["messages_ready"], q["messages_unacknowledged"], q["consumers"]) == (50, 45, 5, 1)
    assert q["message_stats"]["publish"] == 50
    overview = mgmt.get("/api/overview")
    assert overview["object_totals"]["queues"] == 2 and overview["queue_totals"]["messages"] == 100
    assert overview["message_stats"]["publish"] == 100 and overview["message_stats"]["confirm"] == 100
    channels = mgmt.get("/api/channels")
    assert sorted(c["message_stats"].get("publish", 0) for c in channels) == [0, 100]


CHANGES = ["put_vhost", "put_vhost_again", "put_user", "put_user_update", "put_perm", "permission",
           "put_perm_novhost", "put_policy", "policy", "put_exchange", "put_exchange_same", "put_exchange_conflict",
           "put_exchange_badtype", "put_queue", "put_queue_same", "put_queue_conflict", "put_queue_novhost",
           "post_binding", "bindings_between", "binding", "delete_binding", "publish", "publish_unrouted",
           "publish_missing_exchange", "get", "get_bad", "purge", "delete_queue", "delete_queue_missing",
           "delete_exchange", "delete_policy", "delete_user", "delete_vhost", "delete_vhost_missing"]
BODIES = {  # the request bodies record_oracle.py sent
    "put_vhost": {}, "put_vhost_again": {}, "put_user": {"password": "pw", "tags": "monitoring"},
    "put_user_update": {"password": "pw", "tags": "monitoring"},
    "put_perm": {"configure": ".*", "write": ".*", "read": ".*"},
    "put_perm_novhost": {"configure": ".*", "write": ".*", "read": ".*"},
    "put_policy": {"pattern": "^shape_q$", "definition": {"max-length": 100}, "apply-to": "queues", "priority": 1},
    "put_exchange": {"type": "direct", "durable": True}, "put_exchange_same": {"type": "direct", "durable": True},
    "put_exchange_conflict": {"type": "fanout", "durable": True}, "put_exchange_badtype": {"type": "nonsense"},
    "put_queue": {"durable": True, "arguments": {}}, "put_queue_same": {"durable": True, "arguments": {}},
    "put_queue_conflict": {"durable": False}, "put_queue_novhost": {"durable": True},
    "post_binding": {"routing_key": "rk", "arguments": {}},
    "publish": {"properties": {}, "routing_key": "shape_q2", "payload": "hi", "payload_encoding": "string"},
    "publish_unrouted": {"properties": {}, "routing_key": "none", "payload": "hi", "payload_encoding": "string"},
    "publish_missing_exchange": {"properties": {}, "routing_key": "none", "payload": "hi",
                                 "payload_encoding": "string"},
    "get": {"count": 5, "ackmode": "ack_requeue_true", "encoding": "auto"}, "get_bad": {"count": 5},
}


def test_changes_answer_as_rabbitmq_in_order(mgmt):
    """The oracle's sequence of changes, replayed: the same status for each, the same error bodies."""
    seen = []
    for name in CHANGES:
        recorded = ORACLE["api"][name]
        status, body, _ = mgmt.http(recorded["method"], recorded["path"], BODIES.get(name))
        seen.append((name, status, body if status >= 400 else None))
    expected = [(name, ORACLE["api"][name]["status"], ORACLE["api"][name].get("body")
                 if ORACLE["api"][name]["status"] >= 400 else None) for name in CHANGES]
    # RabbitMQ's policy validation text is Erlang's (HTML-escaped); warren's names the same setting
    assert seen == expected


@pytest.mark.parametrize("user,tag", [("mon", "monitoring"), ("mgm", "management"), ("pol", "policymaker"),
                                      ("none", "")])
def test_tags_decide_what_a_user_may_do(mgmt, user, tag):
    assert mgmt.http("PUT", f"/api/users/{user}", {"password": "pw", "tags": tag})[0] == 201
    assert mgmt.http("PUT", f"/api/permissions/%2F/{user}", {"configure": ".*", "write": ".*", "read": ".*"})[0] == 201
    for name in ("users", "nodes", "overview", "put_policy", "put_vhost"):
        recorded = ORACLE["api"][f"as_{user}_{name}"]
        body = {"pattern": "^zz", "definition": {"max-length": 1}} if name == "put_policy" else (
            {} if name == "put_vhost" else None)
        status, answer, _ = mgmt.http(recorded["method"], recorded["path"], body, user=f"{user}:pw")
        assert (name, status) == (name, recorded["status"])
        if status >= 400:
            assert answer == recorded["body"]
    mgmt.http("DELETE", f"/api/policies/%2F/p_{user}")
    mgmt.http("DELETE", f"/api/users/{user}")


def test_definitions_export_then_import_round_trip(mgmt):
    exported = mgmt.get("/api/definitions")
    assert {q["name"] for q in exported["queues"]} >= {"shape_q", "shape_qq"}
    doc = {"vhosts": [{"name": "imported"}], "users": [{"name": "imp", "password_hash": exported["users"][0][
        "password_hash"], "tags": "management"}], "permissions": [{"user": "imp", "vhost": "imported",
                                                                  "configure": ".*", "write": ".*", "read": ".*"}],
           "exchanges": [{"name": "ix", "vhost": "imported", "type": "fanout", "durable": True, "auto_delete": False,
                          "internal": False, "arguments": {}}],
           "queues": [{"name": "iq", "vhost": "imported", "durable": True, "auto_delete": False, "arguments": {}}],
           "bindings": [{"source": "ix", "vhost": "imported", "destination": "iq", "destination_type": "queue",
                         "routing_key": "", "arguments": {}}]}
    assert mgmt.http("POST", "/api/definitions", doc)[0] == 204
    assert [b["source"] for b in mgmt.get("/api/bindings/imported")] == ["", "ix"]
    # the imported user logs in with the guest password: its hash was carried over unchanged
    assert mgmt.get("/api/whoami", user="imp:guest") == {"name": "imp", "tags": ["management"]}
    assert mgmt.http("DELETE", "/api/vhosts/imported")[0] == 204


@pytest.mark.skipif(RABBITMQADMIN is None, reason="Debian's rabbitmq-server (its rabbitmqadmin) is not installed")
def test_rabbitmqadmin_unchanged(mgmt):
    def admin(*args: str) -> str:
        out = subprocess.run([sys.executable, str(RABBITMQADMIN), "-P", str(mgmt.api_port), "-u", "guest", "-p",
                              "guest", *args], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, (args, out.stdout, out.stderr)
        return out.stdout
    assert admin("declare", "queue", "name=adm_q", "durable=true").strip() == "queue declared"
    admin("declare", "exchange", "name=adm_x", "type=topic")
    admin("declare", "binding", "source=adm_x", "destination=adm_q", "routing_key=a.#")
    assert admin("publish", "exchange=adm_x", "routing_key=a.b", "payload=hello").strip() == "Message published"
    assert "hello" in admin("get", "queue=adm_q", "ackmode=ack_requeue_false")
    until(lambda: "adm_q" in admin("-f", "tsv", "list", "queues"), "adm_q in the listing")
    assert "adm_x\ttopic" in admin("-f", "tsv", "list", "exchanges")
    assert "adm_x\tadm_q\ta.#" in admin("-f", "tsv", "list", "bindings")
    admin("delete", "binding", "source=adm_x", "destination_type=queue", "destination=adm_q", "properties_key=a.#")
    admin("delete", "queue", "name=adm_q")
    admin("delete", "exchange", "name=adm_x")
    assert "adm_q" not in admin("-f", "tsv", "list", "queues")


def test_prometheus_text_has_rabbitmq_families(mgmt):
    for path in ("/metrics", "/metrics/per-object"):
        families = {f.name: f for f in text_string_to_metric_families(mgmt.metrics(path))}
        # prometheus_client's parser names counters without _total; RabbitMQ's list has it
        names = {f.name + ("_total" if f.type == "counter" else "") for f in families.values()}
        ours = {n for n in names if n.startswith("rabbitmq_")}
        assert ours <= set(ORACLE["metrics"][path]) | NEWER_FAMILIES[path], sorted(ours - set(ORACLE["metrics"][path]))
        assert NEWER_FAMILIES[path] <= names
        assert {n for n in ORACLE["metrics"][path] if n.startswith("rabbitmq_raft_")} <= names
        for wanted in ("rabbitmq_queue_messages_ready", "rabbitmq_queue_messages_unacked", "rabbitmq_connections",
                       "rabbitmq_channels", "rabbitmq_global_messages_received_total",
                       "rabbitmq_global_messages_delivered_total", "rabbitmq_global_messages_confirmed_total",
                       "rabbitmq_global_messages_acknowledged_total", "rabbitmq_process_resident_memory_bytes"):
            assert wanted in names, wanted
        assert ("rabbitmq_alarms_memory_used_watermark" in names) == (path == "/metrics")  # as rabbitmq_prometheus
    per_object = {f.name: f for f in text_string_to_metric_families(mgmt.metrics("/metrics/per-object"))}
    ready = {s.labels["queue"]: s.value for s in per_object["rabbitmq_queue_messages_ready"].samples}
    assert ready["shape_qq"] == 50
    aggregated = {f.name: f for f in text_string_to_metric_families(mgmt.metrics())}
    assert aggregated["rabbitmq_global_messages_received"].samples[0].value >= 100


def test_the_node_object_and_metrics_show_the_monitors_limits_and_alarms(mgmt):
    """What blocks publishers is what the API shows: the resource monitor's readings and alarms."""
    def node() -> dict:
        return mgmt.get("/api/nodes")[0]
    assert node()["mem_alarm"] is False and node()["mem_limit"] > node()["mem_used"] > 0
    ok(mgmt.node, "set_vm_memory_high_watermark", "absolute", "1")
    try:
        until(lambda: node()["mem_alarm"] is True and node()["mem_limit"] == 1, "the alarm in the API")
        assert "rabbitmq_alarms_memory_used_watermark 1.0" in mgmt.metrics()
    finally:
        ok(mgmt.node, "set_vm_memory_high_watermark", "0.4")
    until(lambda: node()["mem_alarm"] is False, "the alarm cleared in the API")
    assert node()["disk_free"] > node()["disk_free_limit"] == 50_000_000 and node()["disk_free_alarm"] is False


def families(mgmt, path: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(mgmt.metrics(path))}


def test_raft_and_wal_families_follow_a_quorum_queue(mgmt):
    """The Raft indexes, term and commit latency of the node's member of a quorum queue, summed at
    /metrics; the WAL rolled over into segments once it held more than raft.wal_max_size_bytes."""
    ch = mgmt.conn.channel()
    ch.confirm_delivery()
    ch.queue_declare("raft_qq", durable=True, arguments={"x-queue-type": "quorum"})
    body = b"r" * 2048
    for _ in range(2 * WAL_BYTES // len(body)):
        ch.basic_publish("", "raft_qq", body)

    def member(name: str) -> float:
        per_object = families(mgmt, "/metrics/per-object")
        return {s.labels["queue"]: s.value for s in per_object[name].samples}.get("raft_qq", -1)
    published = 2 * WAL_BYTES // len(body)
    until(lambda: member("rabbitmq_raft_log_last_applied_index") > published, "the member's applied index")
    until(lambda: member("rabbitmq_raft_num_segments") >= 1, "the member's entries in segment files")
    per_object = families(mgmt, "/metrics/per-object")

    def value(name: str, queue: str = "raft_qq") -> float:
        return next(s.value for s in per_object[name].samples if s.labels["queue"] == queue)
    assert value("rabbitmq_raft_term") >= 1  # prometheus_client's parser drops _total from counters
    assert value("rabbitmq_raft_log_commit_index") >= value("rabbitmq_raft_log_last_applied_index") > published
    assert value("rabbitmq_raft_log_last_written_index") >= value("rabbitmq_raft_log_commit_index")
    assert 0 <= value("rabbitmq_raft_entry_commit_latency_seconds") < 60
    assert {s.labels["queue"] for s in per_object["rabbitmq_raft_log_commit_index"].samples} == {"shape_qq", "raft_qq"}

    def summed() -> bool:  # the aggregate and the per-object text of one sample
        total = families(mgmt, "/metrics")["rabbitmq_raft_log_last_written_index"].samples[0].value
        return total == sum(s.value for s in families(mgmt, "/metrics/per-object")[
            "rabbitmq_raft_log_last_written_index"].samples)
    until(summed, "the aggregate equal to the members' sum")
    wal = {(f.name, s.labels["module"]): s.value for f in families(mgmt, "/metrics").values()
           if f.name.startswith("rabbitmq_raft_") for s in f.samples if "module" in s.labels}
    assert wal[("rabbitmq_raft_wal_files", "ra_log_wal")] >= 2
    assert wal[("rabbitmq_raft_bytes_written", "ra_log_wal")] > published * len(body)
    assert wal[("rabbitmq_raft_entries", "ra_log_segment_writer")] >= 1
    assert wal[("rabbitmq_raft_segments", "ra_log_segment_writer")] >= 1
    assert wal[("rabbitmq_raft_mem_tables", "ra_log_segment_writer")] >= 1
    assert wal[("rabbitmq_raft_bytes_written", "ra_log_segment_writer")] >= len(body)
    ch.queue_delete("raft_qq")
    ch.close()


def test_exchange_message_stats_count_publishes_in_and_routed_out(mgmt):
    """publish_in per publish into the exchange, publish_out per queue it reached (RabbitMQ's,
    checked by hand against the oracle: a fanout to two queues counts 3 in, 6 out; an exchange that
    routed nothing shows publish_in only); counts outlive the channel that made them."""
    x = mgmt.get("/api/exchanges/%2F/shape_x")["message_stats"]
    assert (x["publish_in"], x["publish_out"]) == (50, 50) and x["publish_in_details"]["rate"] >= 0
    default = mgmt.get("/api/exchanges/%2F/amq.default")["message_stats"]
    assert default["publish_in"] >= 50 and default["publish_out"] >= 50
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", mgmt.node.port))
    ch = conn.channel()
    ch.exchange_declare("stats_fx", "fanout")
    ch.exchange_declare("stats_none", "fanout")
    for q in ("stats_q1", "stats_q2"):
        ch.queue_declare(q)
        ch.queue_bind(q, "stats_fx")
    for _ in range(3):
        ch.basic_publish("stats_fx", "", b"x")
    for _ in range(4):
        ch.basic_publish("stats_none", "", b"x")
    conn.close()

    def stats(name: str) -> dict:
        return {k: v for k, v in mgmt.get(f"/api/exchanges/%2F/{name}").get("message_stats", {}).items()
                if not k.endswith("_details")}
    until(lambda: stats("stats_fx") == {"publish_in": 3, "publish_out": 6}, "the fanout's counts")
    until(lambda: stats("stats_none") == {"publish_in": 4}, "the unrouted exchange's counts")
    listed = {x["name"]: x for x in mgmt.get("/api/exchanges?columns=name,message_stats")}
    assert listed["stats_fx"]["message_stats"]["publish_out"] == 6 and "message_stats" not in listed["amq.topic"]
    for q in ("stats_q1", "stats_q2"):
        assert mgmt.http("DELETE", f"/api/queues/%2F/{q}")[0] == 204
    for x in ("stats_fx", "stats_none"):
        assert mgmt.http("DELETE", f"/api/exchanges/%2F/{x}")[0] == 204
