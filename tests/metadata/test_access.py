"""Users, password hashes and permission checks (RabbitMQ 3.10's internal auth backend)."""
import base64
import hashlib

import pytest

from metadata import passwords
from metadata.changes import PermissionCleared, PermissionSet, PolicyCleared, UserDeleted, VhostDeleted
from metadata.commands import ChangePassword, RemoveUser
from metadata.registry import Registry

SALT = b"\x01\x02\x03\x04"


def test_hash_is_rabbitmqs_sha256_scheme():
    stored = passwords.hash_password("secret", SALT)
    raw = base64.b64decode(stored)
    assert raw[:4] == SALT and raw[4:] == hashlib.sha256(SALT + b"secret").digest()


def test_a_hash_exported_by_rabbitmq_verifies():
    # rabbitmqctl hash_password guest -> what `export_definitions` shows for guest/guest
    stored = base64.b64encode(b"abcd" + hashlib.sha256(b"abcdguest").digest()).decode()
    assert passwords.check_password("guest", stored)
    assert not passwords.check_password("guesT", stored)


@pytest.mark.parametrize("stored", ["", "not base64!", base64.b64encode(b"short").decode()])
def test_malformed_or_empty_hashes_never_match(stored):
    assert not passwords.check_password("", stored)


def registry_with_bob(conf="^bob.*", write="^bob.*", read="^bob.*") -> Registry:
    r = Registry()
    r.add_user("bob", passwords.hash_password("pw", SALT))
    assert r.set_permissions("bob", "/", conf, write, read) == (None, [PermissionSet("bob", "/", conf, write, read)])
    return r


def test_login_checks_the_hash():
    r = registry_with_bob()
    assert r.check_login("bob", "pw")
    assert not r.check_login("bob", "PW")
    assert not r.check_login("nobody", "pw")


# (perm, kind, name, allowed) for a user with ^bob.* everywhere; texts from the oracle
CASES = [
    ("configure", "queue", "bobq", True),
    ("configure", "queue", "q", False),
    ("read", "queue", "other", False),
    ("write", "exchange", "amq.direct", False),
    ("configure", "exchange", "x", False),
    ("write", "exchange", "bob.x", True),
    ("write", "exchange", "", False),
]


@pytest.mark.parametrize("perm,kind,name,allowed", CASES)
def test_permission_checks(perm, kind, name, allowed):
    error = registry_with_bob().check_permission("bob", "/", perm, kind, name)
    if allowed:
        assert error is None
    else:
        shown = name or "amq.default"
        assert error.code == 403
        assert error.text == f"ACCESS_REFUSED - access to {kind} '{shown}' in vhost '/' refused for user 'bob'"


def test_regex_is_an_unanchored_search_and_empty_means_nothing():
    r = registry_with_bob(conf="ob", write="", read="^amq\\.default$")
    assert r.check_permission("bob", "/", "configure", "queue", "xboby") is None  # re:run finds it
    assert r.check_permission("bob", "/", "write", "exchange", "bobx") is not None  # "" is "^$": nothing
    assert r.check_permission("bob", "/", "read", "exchange", "") is None         # default exchange alias


def test_no_permissions_in_a_vhost_refuses_everything_and_the_vhost():
    r = registry_with_bob()
    r.add_vhost("v1")
    assert r.check_permission("bob", "v1", "read", "queue", "bobq").code == 403
    err = r.vhost_access_error("bob", "v1")
    assert (err.code, err.text, err.class_id, err.method_id) == (
        530, "NOT_ALLOWED - access to vhost 'v1' refused for user 'bob'", 10, 40)
    assert r.vhost_access_error("bob", "/") is None


def test_admin_errors_match_rabbitmqctl():
    r = registry_with_bob()
    assert r.add_user("bob", "h")[0].message == 'User "bob" already exists'
    assert r.add_user("bob", "h")[0].exit_code == 70
    assert r.apply_command(RemoveUser("nobody"))[0].message == 'User "nobody" does not exist'
    assert r.set_permissions("nobody", "/", ".*", ".*", ".*")[0].message == "User nobody does not exist"
    assert r.set_permissions("bob", "nov", ".*", ".*", ".*")[0].message == "Virtual host nov does not exist"
    assert r.set_permissions("bob", "/", "(", ".*", ".*")[0].message.startswith("invalid regular expression '('")
    assert r.delete_vhost("nov")[0].message == "Virtual host 'nov' does not exist"


def test_delete_user_clears_permissions_and_login():
    r = registry_with_bob()
    err, changes = r.apply_command(RemoveUser("bob"))
    assert err is None and changes == [PermissionCleared("bob", "/"), UserDeleted("bob")]
    assert not r.check_login("bob", "pw") and r.permissions() == []


def test_a_replica_fed_change_records_answers_the_same():
    r = registry_with_bob()
    r.add_vhost("v1")
    r.set_policy("/", "p", "^bob", {"max-length": 3})
    replica = Registry()
    replica.apply(r.snapshot())
    _, changes = r.apply_command(ChangePassword("bob", passwords.hash_password("new", SALT)))
    replica.apply(changes)
    _, changes = r.delete_vhost("v1")
    replica.apply(changes)
    assert replica.check_login("bob", "new") and not replica.check_login("bob", "pw")
    assert replica.snapshot() == r.snapshot()
    assert all("pw" not in repr(c) and "new" not in repr(c) for c in changes)


def test_deleting_a_vhost_takes_its_queues_permissions_and_policies():
    r = registry_with_bob()
    r.add_vhost("v1")
    r.set_permissions("bob", "v1", ".*", ".*", ".*")
    r.set_policy("v1", "p", ".*", {"max-length": 1})
    r.declare_queue("v1", "q1")
    gone, changes = r.delete_vhost("v1")
    assert [q.name for q in gone] == ["q1"]
    assert changes == [PermissionCleared("bob", "v1"), PolicyCleared("v1", "p", False), VhostDeleted("v1")]
    assert not r.vhost_exists("v1") and r.policies("v1") == [] and r.permissions(vhost="v1") == []


def test_a_missing_users_password_is_checked_as_an_existing_ones(monkeypatch):
    """The same work either way (bench/login_timing.py measures it): one hash, one compare."""
    r = registry_with_bob()
    checked = []
    real = passwords.check_password
    monkeypatch.setattr(passwords, "check_password", lambda pw, stored: checked.append(stored) or real(pw, stored))
    assert not r.check_login("bob", "wrong") and not r.check_login("nobody", "wrong")
    assert len(checked) == 2 and len(checked[0]) == len(checked[1])
