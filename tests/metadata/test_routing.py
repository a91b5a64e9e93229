"""Routing through the registry: default exchange, e2e bindings, alternate exchanges, auto-delete."""
import ast
import pathlib

import metadata
from metadata import Registry
from metadata.changes import ExchangeDeleted, QueueDeleted, Unbound

VH = "/"


def setup(*queues):
    r = Registry()
    for q in queues:
        r.declare_queue(VH, q)
    return r


def test_default_exchange_routes_by_queue_name():
    r = setup("q")
    assert r.route(VH, "", "q", None) == ["q"]
    assert r.route(VH, "", "nope", None) == []


def test_direct_fanout_headers():
    r = setup("q1", "q2")
    r.bind_queue(VH, "q1", "amq.direct", "k", None, None)
    r.bind_queue(VH, "q1", "amq.direct", "k", {"other": 1}, None)  # second binding, same queue
    r.bind_queue(VH, "q1", "amq.fanout", "", None, None)
    r.bind_queue(VH, "q2", "amq.fanout", "", None, None)
    r.bind_queue(VH, "q2", "amq.headers", "", {"a": 1}, None)
    assert r.route(VH, "amq.direct", "k", None) == ["q1"]
    assert sorted(r.route(VH, "amq.fanout", "whatever", None)) == ["q1", "q2"]
    assert r.route(VH, "amq.headers", "", {"a": 1}) == ["q2"]
    assert r.route(VH, "amq.headers", "", {"a": 2}) == []
    r.unbind_queue(VH, "q1", "amq.direct", "k", None, None)
    assert r.route(VH, "amq.direct", "k", None) == ["q1"]  # the binding with arguments remains
    r.unbind_queue(VH, "q1", "amq.direct", "k", {"other": 1}, None)
    assert r.route(VH, "amq.direct", "k", None) == []


def test_exchange_to_exchange_with_cycle_and_internal():
    r = setup("q")
    r.declare_exchange(VH, "a", "fanout")
    r.declare_exchange(VH, "b", "fanout", internal=True)
    r.bind_exchange(VH, "b", "a", "", None)
    r.bind_exchange(VH, "a", "b", "", None)  # cycle
    r.bind_queue(VH, "q", "b", "", None, None)
    assert r.route(VH, "a", "k", None) == ["q"]
    assert r.exchange_for_publish(VH, "b").code == 403


def test_alternate_exchange_transitive_and_cycle_safe():
    r = setup("q", "unrouted")
    r.declare_exchange(VH, "x", "direct", arguments={"alternate-exchange": "ae1"})
    r.declare_exchange(VH, "ae1", "direct", arguments={"alternate-exchange": "ae2"})
    r.declare_exchange(VH, "ae2", "fanout", arguments={"alternate-exchange": "x"})
    r.bind_queue(VH, "q", "x", "k", None, None)
    assert r.route(VH, "x", "k", None) == ["q"]
    assert r.route(VH, "x", "other", None) == []  # ae2 has no bindings; its AE is x, already seen
    r.bind_queue(VH, "unrouted", "ae2", "", None, None)
    assert r.route(VH, "x", "other", None) == ["unrouted"]


def test_missing_alternate_exchange_is_skipped():
    r = setup()
    r.declare_exchange(VH, "x", "direct", arguments={"alternate-exchange": "nope"})
    assert r.route(VH, "x", "k", None) == []


def test_auto_delete_exchanges_cascade():
    r = setup("q")
    r.declare_exchange(VH, "top", "fanout", auto_delete=True)
    r.declare_exchange(VH, "mid", "fanout", auto_delete=True)
    r.bind_exchange(VH, "mid", "top", "", None)
    r.bind_queue(VH, "q", "mid", "", None, None)
    assert r.route(VH, "top", "", None) == ["q"]
    record, changes = r.delete_queue(VH, "q", None)
    assert record.name == "q"
    names = {x.name for x in r.exchanges(VH)}
    assert "mid" not in names and "top" not in names
    assert [type(c) for c in changes] == [Unbound, QueueDeleted, Unbound, ExchangeDeleted, ExchangeDeleted]


def test_unbinding_last_binding_deletes_auto_delete_exchange():
    r = setup("q")
    r.declare_exchange(VH, "ad", "direct", auto_delete=True)
    r.bind_queue(VH, "q", "ad", "k", None, None)
    r.unbind_queue(VH, "q", "ad", "k", None, None)
    assert "ad" not in {x.name for x in r.exchanges(VH)}


def test_delete_exchange_removes_bindings_both_ways():
    r = setup("q")
    r.declare_exchange(VH, "x", "direct")
    r.bind_queue(VH, "q", "x", "k", None, None)
    r.bind_exchange(VH, "x", "amq.fanout", "", None)
    r.delete_exchange(VH, "x")
    assert r.bindings(VH) == []
    assert r.route(VH, "amq.fanout", "", None) == []


def test_connection_closed_removes_exclusive_queues():
    r = setup("shared")
    r.declare_queue(VH, "mine", exclusive=True, owner="c1")
    r.declare_queue(VH, "theirs", exclusive=True, owner="c2")
    r.bind_queue(VH, "mine", "amq.fanout", "", None, "c1")
    removed, changes = r.connection_closed("c1")
    assert [q.name for q in removed] == ["mine"]
    assert sorted(q.name for q in r.queues(VH)) == ["shared", "theirs"]
    assert r.bindings(VH) == []


def test_cache_is_invalidated_by_changes():
    r = setup("q")
    assert r.route(VH, "amq.topic", "a.b", None) == []
    r.bind_queue(VH, "q", "amq.topic", "a.*", None, None)
    assert r.route(VH, "amq.topic", "a.b", None) == ["q"]
    r.unbind_queue(VH, "q", "amq.topic", "a.*", None, None)
    assert r.route(VH, "amq.topic", "a.b", None) == []


def test_snapshot_rebuilds_a_replica():
    r = setup("q")
    r.declare_exchange(VH, "t", "topic", arguments={"alternate-exchange": "amq.fanout"})
    r.bind_queue(VH, "q", "t", "a.#", None, None)
    r.add_vhost("other")
    replica = Registry()
    replica.apply(r.snapshot())
    assert replica.snapshot() == r.snapshot()
    assert replica.route(VH, "t", "a.b", None) == ["q"]


def test_core_modules_import_nothing_impure():
    forbidden = {"zmq", "socket", "os", "time", "random", "threading", "asyncio", "select"}
    root = pathlib.Path(metadata.__file__).parent
    for path in sorted(root.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not _type_checking_only(tree, node):
                mods = [node.module]
            else:
                mods = []
            for mod in mods:
                assert mod.split(".")[0] not in forbidden, f"{path.name} imports {mod}"
        assert ast.get_docstring(tree), f"{path.name} lacks a docstring"


def _type_checking_only(tree, node) -> bool:
    for stmt in ast.walk(tree):
        if isinstance(stmt, ast.If) and isinstance(stmt.test, ast.Name) and stmt.test.id == "TYPE_CHECKING":
            if node in stmt.body:
                return True
    return False
