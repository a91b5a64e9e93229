"""The definitions file: round trip through the registry, and corruption refused as a value."""
import json

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
