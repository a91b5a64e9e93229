"""Vhost and user limits in the registry: validation texts (rabbitmqctl 3.10's, from the oracle),
replace versus merge, cascades, and the refusals."""
import pytest

from metadata.changes import UserLimitsSet, VhostLimitsCleared, VhostLimitsSet
from metadata.commands import (ClearUserLimits, ClearVhostLimits, RemoveUser, SetUserLimits, SetVhostLimits)
from metadata.limits import erlang_term
from metadata.registry import Registry

from tests.metadata.registries import bob_and_vhost


def registry() -> Registry:
    return bob_and_vhost("lim")


def test_vhost_limits_replace_and_the_http_form_merges():
    r = registry()
    r.apply_command(SetVhostLimits("lim", {"max-connections": 2}))
    assert r.apply_command(SetVhostLimits("lim", {"max-queues": -1}))[1] == [VhostLimitsSet("lim", {"max-queues": -1})]
    assert r.apply_command(SetVhostLimits("lim", {"max-connections": 3}, merge=True))[1] == [
        VhostLimitsSet("lim", {"max-queues": -1, "max-connections": 3})]
    assert r.apply_command(ClearVhostLimits("lim", "max-queues"))[1] == [VhostLimitsSet("lim", {"max-connections": 3})]
    assert r.apply_command(ClearVhostLimits("lim"))[1] == [VhostLimitsCleared("lim")]
    assert r.apply_command(ClearVhostLimits("lim"))[0].message == "Parameter does not exist"


@pytest.mark.parametrize("limits,message", [
    ({"max-foo": 2}, 'Validation failed\n\nUnrecognised terms [{<<"max-foo">>,2}] in limits\n'),
    ({"max-queues": "x"}, 'Validation failed\n\nmax-queues should be a number, actually was <<"x">>\n'),
    ({"max-connections": 1.5}, "Validation failed\n\nmax-connections should be a number, actually was 1.5\n"),
])
def test_vhost_limit_validation_texts(limits, message):
    error, changes = registry().apply_command(SetVhostLimits("/", limits))
    assert (error.message, error.exit_code, changes) == (message, 69, [])


def test_a_missing_vhost_is_reported_as_rabbitmqctl_does():
    error, _ = registry().apply_command(SetVhostLimits("nov", {"max-queues": 1}))
    assert (error.message, error.exit_code) == ("Virtual host 'nov' does not exist", 65)


@pytest.mark.parametrize("cmd,message", [
    (SetUserLimits("nobody", {"max-connections": 2}), '{:no_such_user, "nobody"}'),
    (ClearUserLimits("nobody", "all"), '{:no_such_user, "nobody"}'),
    (SetUserLimits("bob", {"max-foo": 2}), 'Unrecognised terms [{<<"max-foo">>,2}] in user-limits'),
    (SetUserLimits("bob", {"max-channels": "x"}), 'max-channels should be a number, actually was <<"x">>'),
])
def test_user_limit_refusals(cmd, message):
    error, _ = registry().apply_command(cmd)
    assert (error.message, error.exit_code) == (message, 69)


def test_user_limits_merge_and_clear_one_or_all_and_go_with_the_user():
    r = registry()
    r.apply_command(SetUserLimits("bob", {"max-connections": 2, "max-channels": 3}))
    assert r.apply_command(SetUserLimits("bob", {"max-connections": 5}))[1] == [
        UserLimitsSet("bob", {"max-connections": 5, "max-channels": 3})]
    assert r.apply_command(ClearUserLimits("bob", "max-channels"))[1] == [UserLimitsSet("bob", {"max-connections": 5})]
    assert r.apply_command(ClearUserLimits("bob", "max-foo"))[0] is None
    r.apply_command(RemoveUser("bob"))
    assert r.user_limits("bob") == {}


def test_refusals_count_against_the_limit_and_a_negative_limit_is_none():
    r = registry()
    r.apply_command(SetVhostLimits("lim", {"max-connections": 1}))
    r.apply_command(SetUserLimits("bob", {"max-connections": 2, "max-channels": 0}))
    assert r.limits.connection_refusal("bob", "lim", 0, 0) is None
    assert r.limits.connection_refusal("bob", "lim", 1, 0).text == (
        "NOT_ALLOWED - access to vhost 'lim' refused for user 'bob': connection limit (1) is reached")
    assert r.limits.connection_refusal("bob", "/", 5, 2).text == (
        "NOT_ALLOWED - connection refused for user 'bob': user connection limit (2) is reached")
    assert r.limits.channel_refusal("bob", 0).text == (
        "NOT_ALLOWED - number of channels opened for user 'bob' has reached the maximum allowed user limit of (0)")
    r.apply_command(SetVhostLimits("lim", {"max-connections": -1}))
    assert r.limits.connection_refusal("bob", "lim", 100, 0) is None
    assert r.limits.tracked_vhosts() == frozenset() and r.limits.tracked_users() == {"bob"}


def test_max_queues_refuses_new_queues_only():
    r = registry()
    r.apply_command(SetVhostLimits("lim", {"max-queues": 1}))
    assert not hasattr(r.declare_queue("lim", "q1")[0], "code")
    assert r.queue_limit_error("lim", "q1") is None  # a redeclare
    refused = r.declare_queue("lim", "q2")[0]
    assert refused.text == "PRECONDITION_FAILED - cannot declare queue 'q2': queue limit in vhost 'lim' (1) is reached"
    assert r.queue_limit_error("lim", "q2") == refused


def test_limits_go_with_their_vhost_and_survive_a_snapshot():
    r = registry()
    r.apply_command(SetVhostLimits("lim", {"max-queues": 4}))
    r.apply_command(SetUserLimits("bob", {"max-channels": 4}))
    copy = Registry()
    copy.apply(r.snapshot())
    assert (copy.vhost_limits(), copy.user_limits("bob")) == ({"lim": {"max-queues": 4}}, {"max-channels": 4})
    r.delete_vhost("lim")
    assert r.vhost_limits() == {}


@pytest.mark.parametrize("value,printed", [("x", '<<"x">>'), (1.5, "1.5"), (1e20, "1.0e20"), (True, "true"),
                                           (None, "null"), ([1, "a"], '[1,<<"a">>]')])
def test_json_values_print_as_erlang_does(value, printed):
    assert erlang_term(value) == printed
