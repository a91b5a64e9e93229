"""The management plugin's pure decisions: paths, credentials and tags, change plans, metric families."""
from __future__ import annotations

import base64
import json
import random

from mgmt import auth, changes, listing, metrics, paths, peek, rows
from actors.stats.rates import Rates
from mgmt.rows import Row
from actors.stats.sample import Sample
from mgmt.shapes import View, printable, properties_key
from metadata.registry import Registry
from metadata.passwords import hash_password


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def registry() -> Registry:
    reg = Registry(random.Random(1))
    reg.add_user("admin", hash_password("pw", b"salt"), ["administrator"])
    reg.add_user("mon", hash_password("pw", b"salt"), ["monitoring"])
    reg.add_user("mgm", hash_password("pw", b"salt"), ["management"])
    reg.add_user("pol", hash_password("pw", b"salt"), ["policymaker"])
    reg.add_user("plain", hash_password("pw", b"salt"), [])
    reg.add_vhost("v1")
    reg.set_permissions("mgm", "v1", ".*", ".*", ".*")
    reg.set_permissions("pol", "/", ".*", ".*", ".*")
    return reg


PATHS = [
    ("/api/queues/%2F/orders", ("queue", {"vhost": "/", "name": "orders"})),
    ("/api/queues/%2F/a%2Fb", ("queue", {"vhost": "/", "name": "a/b"})),
    ("/api/queues/%2F/orders/get", ("queue_get", {"vhost": "/", "name": "orders"})),
    ("/api/exchanges/%2F/amq.default/publish", ("exchange_publish", {"vhost": "/", "name": "amq.default"})),
    ("/api/bindings/%2F/e/x/q/q1/a.%23", ("binding", {"vhost": "/", "source": "x", "kind": "q", "destination": "q1",
                                                       "props": "a.#"})),
    ("/api/queues?columns=name,messages", ("queues", {})),
    ("/api/overview/", ("overview", {})),
    ("/api/queues/%2F/", ("queues_vhost", {"vhost": "/"})),  # a trailing slash is dropped
    ("/api/queues/%2F//get", None),  # an empty name is no queue
    ("/api/nonsense", None),
]


def test_paths_decode_each_segment_after_splitting():
    for raw, expected in PATHS:
        assert paths.match(raw) == expected, raw


def test_credentials_from_a_basic_header():
    assert auth.credentials(basic("a", "b:c")) == ("a", "b:c")
    assert auth.credentials("Basic !!") is None
    assert auth.credentials("Bearer x") is None
    assert auth.credentials(None) is None


def test_login_and_tags():
    reg = registry()
    assert auth.login(reg, None) == auth.Refused(401, None)
    assert auth.login(reg, basic("admin", "wrong")) == auth.Refused(401, {"error": "not_authorized",
                                                                          "reason": "Login failed"})
    assert auth.login(reg, basic("plain", "pw")) == auth.Refused(401, {"error": "not_authorised",
                                                                       "reason": "Not management user"})
    grants = {name: auth.login(reg, basic(name, "pw")).grants for name in ("admin", "mon", "mgm", "pol")}
    assert grants == {"admin": {"management", "policymaker", "monitoring", "administrator"},
                      "mon": {"management", "monitoring"}, "mgm": {"management"},
                      "pol": {"management", "policymaker"}}
    mgm = auth.login(reg, basic("mgm", "pw"))
    assert auth.visible_vhosts(reg, mgm) == {"v1"}
    assert auth.visible_vhosts(reg, auth.login(reg, basic("mon", "pw"))) == {"/", "v1"}
    assert mgm.refusal(auth.MONITORING) == auth.Refused(401, {"error": "not_authorised", "reason": "Not monitor user"})


def plan(reg, user, route, args, method="PUT", body=None, query=None):
    return changes.plan(reg, auth.login(reg, basic(user, "pw")), route, args, method, body or {}, query or {})


def test_plans_of_changes():
    reg = registry()
    assert plan(reg, "admin", "vhost", {"vhost": "v2"}) == changes.Admin("add_vhost", {"name": "v2"}, 201)
    assert plan(reg, "admin", "vhost", {"vhost": "v1"}) == changes.Admin("add_vhost", {"name": "v1"}, 204)
    assert plan(reg, "admin", "vhost", {"vhost": "nope"}, "DELETE") == changes.Answer(404, changes.NOT_FOUND)
    assert plan(reg, "mon", "vhost", {"vhost": "v2"}) == changes.Answer(401, {"error": "not_authorised",
                                                                               "reason": "Not administrator user"})
    assert plan(reg, "admin", "user", {"user": "u"}, body={"password": "p", "tags": "monitoring,management"}) == \
        changes.Admin("put_user", {"name": "u", "tags": ["monitoring", "management"], "password": "p"}, 201)
    assert plan(reg, "admin", "user", {"user": "u"}, body={"password": "p"}) == changes.bad_request("[{key_missing,tags}]")
    assert plan(reg, "admin", "permission", {"vhost": "nope", "user": "mon"},
                body={"configure": "", "write": "", "read": ""}) == changes.bad_request("vhost_or_user_not_found")
    # a management user manages its own vhost's objects, not another's; policies need policymaker
    assert plan(reg, "mgm", "queue", {"vhost": "v1", "name": "q"}) == changes.Admin(
        "declare_queue", {"vhost": "v1", "name": "q", "durable": True, "auto_delete": False, "arguments": {}}, 201)
    assert plan(reg, "mgm", "queue", {"vhost": "/", "name": "q"}) == changes.Answer(401, changes.ACCESS)
    assert plan(reg, "mgm", "policy", {"vhost": "v1", "name": "p"}) == changes.Answer(401, changes.ACCESS)
    assert plan(reg, "pol", "policy", {"vhost": "/", "name": "p"}, body={"pattern": "^a", "definition": {}}) == \
        changes.Admin("set_policy", {"vhost": "/", "name": "p", "pattern": "^a", "definition": {}, "priority": 0,
                                     "apply_to": "all"}, 201)
    assert plan(reg, "admin", "queue", {"vhost": "nope", "name": "q"}) == changes.Answer(
        404, {"error": "not_found", "reason": "vhost_not_found"})
    assert plan(reg, "admin", "queue", {"vhost": "/", "name": "q"}, "DELETE") == changes.Answer(404, changes.NOT_FOUND)
    assert plan(reg, "admin", "exchange", {"vhost": "/", "name": "amq.topic"}, "DELETE", query={"if-unused": "true"}) \
        == changes.Admin("delete_exchange", {"vhost": "/", "name": "amq.topic", "if_unused": True})


def test_outcomes_of_node_answers():
    admin = changes.Admin("declare_queue", {}, 201)
    assert changes.outcome(admin, {"ok": True}) == changes.Answer(201)
    assert changes.outcome(admin, {"error": "no queue 'q'", "exit": 70, "code": 404}) == changes.Answer(
        404, {"error": "not_found", "reason": "no queue 'q'"})
    assert changes.outcome(admin, {"error": "inequivalent arg", "exit": 70, "code": 406}) == \
        changes.bad_request("inequivalent arg")


def test_publish_and_get_bodies():
    assert peek.parse_publish({"routing_key": "k", "payload": "aGk=", "payload_encoding": "base64",
                               "properties": {"delivery_mode": 2}}) == ("k", {"delivery_mode": 2}, b"hi")
    assert peek.parse_get({"count": 5}) == changes.bad_request("[{key_missing,ackmode},{key_missing,encoding}]")
    assert peek.parse_get({"count": "2", "ackmode": "ack_requeue_true", "encoding": "auto"}) == \
        (2, "ack_requeue_true", "auto", None)
    row = peek.get_row("", "q", False, 3, {}, b"\xff\x00", "auto", None)
    assert (row["payload"], row["payload_encoding"], row["properties"]) == ("/wA=", "base64", [])


def test_properties_key():
    assert properties_key("a.#", {}) == "a.#"
    assert properties_key("", {}) == "~"
    assert properties_key("k", {"x": 1}).startswith("k~")


def test_arguments_print_as_rabbitmq_mgmt_format_prints_them():
    """rabbit_mgmt_format:amqp_value: a decimal {Scale, Value} as the float "Scale.Value", a
    binary that is not UTF-8 as a base64 note, every integer width as a plain number."""
    from decimal import Decimal

    from wire.codec import ByteArray, Timestamp
    from wire.field_types import Int8, Int64
    table = {"d": Decimal("1.25"), "x": b"\xff\x00", "ok": ByteArray(b"hi"), "n": [Int8(-1), Int64(2**40)],
             "t": Timestamp(5), "v": None}
    assert printable(table) == {"d": 2.125, "x": "Not UTF-8, base64 is: /wA=", "ok": "hi", "n": [-1, 2**40],
                                "t": 5, "v": None}
    assert json.loads(json.dumps(printable(table))) == printable(table)


def test_metric_families_aggregate_or_label_per_object():
    reg = registry()
    sample = Sample(0, queues={("/", "a"): {"messages_ready": 2}, ("/", "b"): {"messages_ready": 3}},
                    totals={"publish": 7, "connections_opened": 2, "connections": 1})
    view = View(reg, sample, Rates(), "n@localhost")
    agg = {name: samples for name, _, _, samples in metrics.families(view, False)}
    assert agg["rabbitmq_queue_messages_ready"] == [({}, 5)]
    assert agg["rabbitmq_global_messages_received_total"] == [({"protocol": "amqp091"}, 7)]
    assert agg["rabbitmq_connections_closed_total"] == [({}, 1)]
    per = {name: samples for name, _, _, samples in metrics.families(view, True)}
    assert per["rabbitmq_queue_messages_ready"] == [({"vhost": "/", "queue": "a"}, 2), ({"vhost": "/", "queue": "b"}, 3)]
    assert "rabbitmq_alarms_memory_used_watermark" not in per


def test_raft_families_sum_the_members_or_label_them():
    members = [{"vhost": "/", "queue": "b", "term": 2, "snapshot_index": 4, "last_applied": 10, "commit_index": 11,
                "last_written_index": 12, "commit_latency_ms": 4, "segments": 2},
               {"vhost": "/", "queue": "a", "term": 1, "snapshot_index": 0, "last_applied": 5, "commit_index": 5,
                "last_written_index": 5, "commit_latency_ms": 2, "segments": 0}]
    wal = {"wal_files": 2, "bytes_written": 900, "segment_bytes": 300, "mem_tables": 1, "segments": 3,
           "segment_entries": 7, "batches": 5, "writes": 9}
    agg = {name: (kind, samples) for name, kind, _, samples in metrics.raft(members, wal, False)}
    assert agg["rabbitmq_raft_term_total"] == (metrics.COUNTER, [({}, 3)])
    assert agg["rabbitmq_raft_log_commit_index"] == (metrics.GAUGE, [({}, 16)])
    assert agg["rabbitmq_raft_entry_commit_latency_seconds"] == (metrics.GAUGE, [({}, 0.003)])  # the mean, as 3.10
    assert agg["rabbitmq_raft_max_num_segments"] == (metrics.GAUGE, [({"ra_system": "quorum_queues"}, 2)])
    assert agg["rabbitmq_raft_max_commit_latency_seconds"] == (metrics.GAUGE, [({"ra_system": "quorum_queues"}, 0.004)])
    assert agg["rabbitmq_raft_bytes_written"] == (metrics.UNTYPED, [
        ({"ra_system": "quorum_queues", "module": "ra_log_wal"}, 900),
        ({"ra_system": "quorum_queues", "module": "ra_log_segment_writer"}, 300)])
    assert agg["rabbitmq_raft_entries"][1] == [({"ra_system": "quorum_queues", "module": "ra_log_segment_writer"}, 7)]
    per = {name: samples for name, _, _, samples in metrics.raft(members, wal, True)}
    assert per["rabbitmq_raft_log_last_written_index"] == [({"vhost": "/", "queue": "a"}, 5),
                                                           ({"vhost": "/", "queue": "b"}, 12)]
    assert per["rabbitmq_raft_num_segments"] == [({"vhost": "/", "queue": "a"}, 0), ({"vhost": "/", "queue": "b"}, 2)]
    assert "rabbitmq_raft_max_num_segments" not in per and per["rabbitmq_raft_wal_files"][0][1] == 2
    # no quorum queue on the node (and no quorum host's answer yet): RabbitMQ 3.10's zeros only
    none = {name: samples for name, _, _, samples in metrics.raft([], {}, False)}
    assert none == {name: [({}, 0)] for name in ("rabbitmq_raft_term_total", "rabbitmq_raft_log_snapshot_index",
                                                 "rabbitmq_raft_log_last_applied_index", "rabbitmq_raft_log_commit_index",
                                                 "rabbitmq_raft_log_last_written_index",
                                                 "rabbitmq_raft_entry_commit_latency_seconds")}


def test_listing_options_errors_and_erlang_order():
    assert listing.pagination_of({}) is None
    assert listing.pagination_of({"page_size": "7"}) is None  # no page: no pagination
    assert listing.pagination_of({"page": "2"}) == listing.Pagination(2, 100, "", False)
    assert listing.pagination_of({"page": "1", "page_size": "500", "name": "x", "use_regex": "true"}) == \
        listing.Pagination(1, 500, "x", True)
    assert listing.pagination_of({"page": "1.5"}) == listing.INVALID
    assert listing.pagination_of({"page": "-1"}).body["reason"] == \
        "Invalid pagination parameters: page number -1, page size undefined"
    ordered = [3, 10.5, False, True, None, {}, {"a": 1}, [], [1], "", "a", "b"]
    assert sorted(reversed(ordered), key=listing.erlang_order) == ordered
    rows = [{"name": "b", "vhost": "/", "n": 2}, {"name": "a", "vhost": "/"}, {"name": "c", "vhost": "/", "n": 1}]
    assert [r["name"] for r in listing.sort(rows, {"sort": "n"}, listing.BY_NAME)] == ["a", "c", "b"]
    assert listing.sort(rows, {"sort": ""}, listing.BY_NAME) == rows  # an empty sort= keeps the order
    assert listing.pick({"a": {"b": 1, "c": 2}, "d": None}, ["a.b", "d", "e"]) == {"a": {"b": 1}, "d": None}


def test_rows_are_spliced_into_the_json_of_listings_and_pages():
    a, b = Row.of({"name": "a", "n": [1, 2]}), Row.of({"name": "é"})
    for body, plain in [([a, b], [a.value, b.value]), ({"total_count": 2, "items": [a, b], "page": 1},
                                                       {"total_count": 2, "items": [a.value, b.value], "page": 1}),
                        ([], []), ({"x": None}, {"x": None}), (a, a.value)]:
        assert rows.encode(body) == json.dumps(plain).encode()
