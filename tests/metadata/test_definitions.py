"""The definitions file: round trip through the registry, files of earlier versions, and corruption
refused as a value."""
import json
from decimal import Decimal
from pathlib import Path

from metadata import definitions, passwords
from metadata.definitions import DefinitionsError
from metadata.registry import Registry


def populated() -> Registry:
    r = Registry()
    r.add_vhost("v1")
    r.add_user("guest", passwords.hash_password("guest", b"salt"), ["administrator"])
    r.add_user("bob", passwords.hash_password("pw", b"1234"))
    r.set_permissions("guest", "/", ".*", ".*", ".*")
    r.set_permissions("bob", "v1", "^bob", "", ".*")
    r.set_policy("v1", "p", "^q", {"max-length": 3, "overflow": "reject-publish"}, priority=2, apply_to="queues")
    r.set_policy("/", "o", ".*", {"message-ttl": 10}, operator=True)
    r.declare_queue("/", "not-saved")  # clients' declarations are not definitions
    return r


def test_round_trip_restores_users_permissions_vhosts_and_policies():
    r = populated()
    data = definitions.encode(r.snapshot())
    assert b"not-saved" not in data and b'"pw"' not in data
    fresh = Registry()
    fresh.load_definitions(definitions.decode(data))
    assert fresh.check_login("bob", "pw") and fresh.check_login("guest", "guest")
    assert fresh.permissions() == r.permissions()
    assert fresh.policies() == r.policies() and fresh.policies()[0].definition == r.policies()[0].definition
    assert [u.tags for u in fresh.users()] == [(), ("administrator",)]
    assert {x.name for x in fresh.exchanges("v1")} >= {"amq.direct", "amq.topic", ""}  # vhost fully made
    assert definitions.encode(fresh.snapshot()) == data


def test_rabbitmq_shape():
    doc = json.loads(definitions.encode(populated().snapshot()))
    bob = next(u for u in doc["users"] if u["name"] == "bob")
    assert bob["hashing_algorithm"] == "rabbit_password_hashing_sha256"
    assert {"vhost": "/", "name": "o", "pattern": ".*", "apply-to": "all", "definition": {"message-ttl": 10},
            "priority": 0} in doc["operator_policies"]


def test_a_flipped_byte_is_refused():
    data = bytearray(definitions.encode(populated().snapshot()))
    i = data.index(b"^bob")
    data[i + 1] = ord("c")
    got = definitions.decode(bytes(data))
    assert isinstance(got, DefinitionsError) and "checksum" in got.reason


def test_truncated_and_non_json_files_are_refused():
    data = definitions.encode(populated().snapshot())
    assert isinstance(definitions.decode(data[: len(data) // 2]), DefinitionsError)
    assert isinstance(definitions.decode(b"\x00\xff"), DefinitionsError)
    assert isinstance(definitions.decode(b"{}"), DefinitionsError)


OLD_FILE = Path(__file__).parent / "data" / "definitions_v1.json"  # written by the registry of de100cd


def test_a_file_written_before_the_records_were_typed_still_loads():
    """A node upgraded in place keeps its users, permissions, policies and durable topology."""
    data = OLD_FILE.read_bytes()
    r = Registry()
    r.load_definitions(definitions.decode(data))
    assert r.check_login("bob", "pw") and r.check_login("guest", "guest") and not r.check_login("bob", "guest")
    assert [(u.name, u.tags) for u in r.users()] == [("bob", ("monitoring", "policymaker")),
                                                     ("guest", ("administrator",))]
    assert [(p.user, p.vhost, p.configure, p.write, p.read) for p in r.permissions()] == [
        ("bob", "v1", "^bob", "", ".*"), ("guest", "/", ".*", ".*", ".*")]
    assert [(p.vhost, p.name, p.operator, p.definition) for p in r.policies()] == [
        ("/", "ae", False, {"alternate-exchange": "amq.fanout"}), ("/", "o", True, {"message-ttl": 10}),
        ("v1", "p", False, {"max-length": 3, "overflow": "reject-publish"})]
    orders = next(x for x in r.exchanges("/") if x.name == "orders")
    assert (orders.type, orders.durable, orders.arguments) == (
        "topic", True, {"alternate-exchange": "ae-x", "blob": b"\x00\xff", "n": Decimal("1.5")})
    auto = next(x for x in r.exchanges("v1") if x.name == "auto")
    assert (auto.type, auto.auto_delete, auto.internal) == ("headers", True, True)
    assert [(q.vhost, q.name, q.durable, q.arguments) for q in r.queues()] == [
        ("/", "jobs", True, {"x-dead-letter-exchange": "ae-x", "x-max-length": 10}),
        ("v1", "q-lazy", True, {"x-queue-mode": "lazy"})]
    assert r.route("/", "orders", "order.new") == ["jobs"]
    assert r.route("/", "amq.direct", "jobs") == ["jobs"]
    assert r.route("v1", "auto", "", {"a": 1}) == ["q-lazy"]
    assert {x.name for x in r.exchanges("v1")} >= {"amq.direct", "amq.topic", ""}  # predeclared ones made anew
    assert definitions.encode(r.snapshot()) == data  # and it is written back byte for byte
