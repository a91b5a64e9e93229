"""Topic permissions in the registry: commands, records, cascades and the check
(rabbit_auth_backend_internal 3.10; texts and behaviour from the oracle, tests/access/)."""
import pytest

from metadata.access import expand_topic_pattern
from metadata.changes import TopicPermissionCleared, TopicPermissionSet
from metadata.commands import ClearTopicPermissions, RemoveUser, SetTopicPermissions
from metadata.registry import Registry

from tests.metadata.registries import bob_and_vhost

AMQP_VARIABLES = {"username": "bob", "vhost": "/"}


def registry() -> Registry:
    return bob_and_vhost("v1")


def test_set_emits_the_record_and_the_check_expands_username_and_vhost():
    r = registry()
    result, changes = r.apply_command(SetTopicPermissions("bob", "/", "amq.topic", "^{username}\\.", "^{vhost}"))
    assert (result, changes) == (None, [TopicPermissionSet("bob", "/", "amq.topic", "^{username}\\.", "^{vhost}")])
    assert r.check_topic_permission("bob", "/", "amq.topic", "write", "bob.x", AMQP_VARIABLES) is None
    refused = r.check_topic_permission("bob", "/", "amq.topic", "write", "alice.x", AMQP_VARIABLES)
    assert refused.text == ("ACCESS_REFUSED - access to topic 'alice.x' in exchange 'amq.topic' in vhost '/' "
                            "refused for user 'bob'")
    assert r.check_topic_permission("bob", "/", "amq.topic", "read", "/.x", AMQP_VARIABLES) is None
    assert r.check_topic_permission("bob", "/", "amq.topic", "read", "x", AMQP_VARIABLES) is not None


@pytest.mark.parametrize("exchange,write,read,checks", [
    # without a topic permission for the exchange (or in the vhost), everything is allowed
    ("amq.topic", "^a$", "^a$", [("/", "other", "write", "zzz", True), ("v1", "amq.topic", "write", "zzz", True)]),
    # an empty pattern matches only the empty key
    ("t", "", "", [("/", "t", "write", "", True), ("/", "t", "write", "a", False)]),
    # AMQP 0-9-1's map has no client_id (3.10's oracle: '^{client_id}$' allows the key "{client_id}")
    ("amq.topic", "^{client_id}$", ".*", [("/", "amq.topic", "write", "{client_id}", True),
                                          ("/", "amq.topic", "write", "cid1", False)]),
], ids=["no permission for the exchange", "empty pattern", "client_id stays literal"])
def test_which_keys_a_topic_permission_allows(exchange, write, read, checks):
    r = registry()
    r.apply_command(SetTopicPermissions("bob", "/", exchange, write, read))
    allowed = [(vhost, x, perm, key, r.check_topic_permission("bob", vhost, x, perm, key, AMQP_VARIABLES) is None)
               for vhost, x, perm, key, _ in checks]
    assert allowed == checks


def test_client_id_is_expanded_where_the_variable_map_has_it():
    assert expand_topic_pattern("^{client_id}\\.", {**AMQP_VARIABLES, "client_id": "c1"}) == "^c1\\."


@pytest.mark.parametrize("cmd,message,code", [
    (SetTopicPermissions("nobody", "/", "x", "a", "b"), "User nobody does not exist", 67),
    (SetTopicPermissions("bob", "nov", "x", "a", "b"), "Virtual host nov does not exist", 69),
    (ClearTopicPermissions("nobody", "/"), "User nobody does not exist", 67),
    (ClearTopicPermissions("bob", "nov"), "Virtual host nov does not exist", 69),
])
def test_refusals_have_rabbitmqctls_texts_and_codes(cmd, message, code):
    error, changes = registry().apply_command(cmd)
    assert (error.message, error.exit_code, changes) == (message, code, [])


def test_an_invalid_regex_is_refused_first():
    error, _ = registry().apply_command(SetTopicPermissions("nobody", "/", "x", "(", "b"))
    assert error.message.startswith("invalid regular expression '('") and error.exit_code == 69


def test_clear_one_exchange_or_all_of_a_vhost():
    r = registry()
    for x in ("a", "b"):
        r.apply_command(SetTopicPermissions("bob", "/", x, ".*", ".*"))
    r.apply_command(SetTopicPermissions("bob", "v1", "a", ".*", ".*"))
    assert r.apply_command(ClearTopicPermissions("bob", "/", "a"))[1] == [TopicPermissionCleared("bob", "/", "a")]
    assert r.apply_command(ClearTopicPermissions("bob", "/"))[1] == [TopicPermissionCleared("bob", "/", "b")]
    assert [(t.vhost, t.exchange) for t in r.topic_permissions()] == [("v1", "a")]


def test_they_go_with_their_user_and_with_their_vhost():
    r = registry()
    r.apply_command(SetTopicPermissions("bob", "/", "a", ".*", ".*"))
    r.apply_command(SetTopicPermissions("bob", "v1", "a", ".*", ".*"))
    _, changes = r.delete_vhost("v1")
    assert TopicPermissionCleared("bob", "v1", "a") in changes
    _, changes = r.apply_command(RemoveUser("bob"))
    assert TopicPermissionCleared("bob", "/", "a") in changes and r.topic_permissions() == []


def test_a_replica_fed_the_snapshot_holds_them():
    r = registry()
    r.apply_command(SetTopicPermissions("bob", "/", "amq.topic", "^w", "^r"))
    copy = Registry()
    copy.apply(r.snapshot())
    assert copy.topic_permissions() == r.topic_permissions()
