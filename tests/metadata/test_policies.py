"""Policies: validation texts (rabbitmqctl 3.10), matching, precedence, effective settings, routing."""
import pytest

from metadata import policies
from metadata.commands import ClearPolicy, PutQueue
from metadata.policies import Policy
from metadata.registry import Registry

VALIDATION = [  # (definition, pattern, apply_to, operator, rabbitmqctl's reason)
    ({"max-priority": 5}, "^q", "all", False, '[{<<"max-priority">>,5}] are not recognised policy settings'),
    ({"max-length": -1}, "^q", "all", False, "-1 is not a valid maximum length"),
    ({"max-length": True}, "^q", "all", False, "true is not a valid maximum length"),
    ({"bogus": 1}, "^q", "all", False, '[{<<"bogus">>,1}] are not recognised policy settings'),
    ({"max-length": 1}, "(", "all", False, "pattern should be regular expression but is invalid: "),
    ({"overflow": "bad"}, "^q", "all", False, '<<"bad">> is not a valid overflow value'),
    ({"message-ttl": "x"}, "^q", "all", False, '<<"x">> is not a valid message TTL'),
    ({"message-ttl": 1.5}, "^q", "all", False, "1.5 is not a valid message TTL"),
    ({"max-length": 5}, "^q", "foo", False, "apply-to 'foo' unrecognised; should be 'queues', 'exchanges' or 'all'"),
    ({"max-length-bytes": "x", "expires": 0}, "^q", "all", False, "0 is not a valid queue expiry"),
    ({"dead-letter-exchange": 5}, "^q", "all", False, "5 is not a valid dead letter exchange name"),
    ({"queue-mode": "bad"}, "^q", "all", False, '<<"bad">> is not a valid queue-mode value'),
    ({}, "^q", "all", False, "no policy provided"),
    ({"dead-letter-exchange": "x"}, "^q", "all", True,
     '[{<<"dead-letter-exchange">>,<<"x">>}] are not recognised policy settings'),
]


@pytest.mark.parametrize("definition,pattern,apply_to,operator,reason", VALIDATION)
def test_validation_errors_read_as_rabbitmqctl_prints_them(definition, pattern, apply_to, operator, reason):
    error = policies.validate(pattern, apply_to, definition, operator=operator)
    assert error is not None and error.exit_code == 69
    assert error.message.startswith("Validation failed\n\n" + reason)


@pytest.mark.parametrize("definition", [{"max-length": 5}, {"queue-mode": "lazy", "expires": 1},
                                        {"alternate-exchange": "ae", "dead-letter-routing-key": "k"}])
def test_valid_definitions(definition):
    assert policies.validate("^q", "all", definition, operator=False) is None


def test_json_errors():
    assert policies.parse_definition("notjson").message == "JSON decoding error. Reason: badarg"


def P(name, pattern=".*", priority=0, apply_to="all", operator=False, **d):
    return Policy("/", name, pattern, apply_to, {k.replace("_", "-"): v for k, v in d.items()}, priority, operator)


def test_highest_priority_wins_then_the_first_name():
    pols = [P("zz", max_length=1), P("aa", max_length=2), P("mm", max_length=3)]
    assert policies.select(pols, "queue", "tq").name == "aa"  # the oracle picked aa among equal priorities
    pols.append(P("low", priority=-3))
    pols.append(P("high", priority=2, pattern="^t"))
    assert policies.select(pols, "queue", "tq").name == "high"
    assert policies.select(pols, "queue", "xq").name == "aa"


def test_apply_to_and_unanchored_patterns():
    pols = [P("ex", pattern="q", apply_to="exchanges")]
    assert policies.select(pols, "queue", "aqa") is None
    assert policies.select(pols, "exchange", "aqa").name == "ex"


def test_operator_policy_merges_by_minimum_and_arguments_win_as_rabbitmq_decides():
    values = policies.merged(P("p", max_length=2, overflow="reject-publish"), P("o", operator=True, max_length=7,
                                                                                 message_ttl=100))
    assert values == {"max-length": 2, "overflow": "reject-publish", "message-ttl": 100}
    settings = policies.queue_settings({"x-max-length": 4, "x-overflow": "drop-head", "x-message-ttl": 50}, values)
    assert settings == {"max-length": 2, "overflow": "drop-head", "message-ttl": 50}


def test_registry_reports_effective_policy_per_queue():
    r = Registry()
    r.set_policy("/", "aa", "^t", {"max-length": 2})
    r.set_policy("/", "op", "^t", {"max-length": 7, "message-ttl": 100}, operator=True)
    q, _ = r.declare_queue("/", "tq", arguments={"x-max-length": 4})
    assert r.queue_policy(q) == ("aa", "op", {"max-length": 2, "message-ttl": 100})
    other, _ = r.declare_queue("/", "other")
    assert r.queue_policy(other) == ("", "", {})


def test_clear_policy_errors_and_vhost_checks():
    r = Registry()
    assert r.apply_command(ClearPolicy("/", "nope"))[0].message == "Parameter does not exist"
    assert r.set_policy("nov", "p", ".*", {"max-length": 1})[0].message == "Virtual host 'nov' does not exist"
    assert r.set_policy("nov", "p", ".*", {"max-length": 1})[0].exit_code == 65


def test_policy_alternate_exchange_routes_unroutable_messages():
    r = Registry()
    r.declare_exchange("/", "x", "direct")
    r.declare_exchange("/", "ae", "fanout")
    r.declare_queue("/", "unrouted")
    r.bind_queue("/", "unrouted", "ae", "", None, None)
    assert r.route("/", "x", "k") == []
    r.set_policy("/", "aepol", "^x$", {"alternate-exchange": "ae"}, apply_to="exchanges")
    assert r.route("/", "x", "k") == ["unrouted"]
    r.declare_exchange("/", "ae2", "fanout")
    r.declare_exchange("/", "x2", "direct", arguments={"alternate-exchange": "ae2"})
    r.set_policy("/", "aepol2", "^x2$", {"alternate-exchange": "ae"})
    assert r.route("/", "x2", "k") == []  # the exchange's own argument wins
    r.apply_command(ClearPolicy("/", "aepol"))
    assert r.route("/", "x", "k") == []


def test_4_0_applies_a_policy_to_one_queue_type_and_passes_quorum_keys_on_as_set():
    quorum_only = P("qq", apply_to="quorum_queues", delivery_limit=5, dead_letter_strategy="at-least-once",
                    max_length=3)
    classic_only = P("cq", apply_to="classic_queues", max_length=9)
    assert policies.validate("^q", "quorum_queues", quorum_only.definition, operator=False) is None
    assert policies.select([quorum_only, classic_only], "queue", "q", "quorum") is quorum_only
    assert policies.select([quorum_only, classic_only], "queue", "q", "classic") is classic_only
    assert policies.select([quorum_only], "exchange", "q") is None
    reason = policies.validate("^q", "all", {"dead-letter-strategy": "sometimes"}, operator=False).message
    assert reason.endswith('<<"sometimes">> is not a valid dead letter strategy')


def quorum_queue(r: Registry, name: str, arguments: dict | None = None):
    r.apply_command(PutQueue("/", name, True, False, False, arguments or {"x-queue-type": "quorum"},
                             home=f"quorum!{name}", members=("n1@box",)))
    return r.queue("/", name)


def test_a_quorum_queue_is_given_the_merged_policy_and_resolves_its_arguments_itself():
    """A classic queue's arguments win for overflow (rabbit_amqqueue_process's res_arg); a quorum
    queue's policy does (rabbit_quorum_queue:gather_policy_config), so the quorum queue is told the
    policy as it is and actors/quorum/config.py resolves it against its arguments."""
    r = Registry()
    r.set_policy("/", "p", "^q", {"overflow": "reject-publish", "max-length": 5})
    args = {"x-overflow": "drop-head", "x-max-length": 2}
    classic, _ = r.declare_queue("/", "qc", arguments=args)
    quorum_q = quorum_queue(r, "qq", {"x-queue-type": "quorum", **args})
    assert r.queue_policy(classic)[2] == {"overflow": "drop-head", "max-length": 2}
    assert r.queue_policy(classic)[0] == r.queue_policy(quorum_q)[0] == "p"
    assert r.queue_policy(quorum_q)[2] == {"overflow": "reject-publish", "max-length": 5}


@pytest.mark.parametrize("key, value, operator_value, applies", [
    ("max-length", 5, 3, 3),
    ("message-ttl", 100, 500, 100),
    ("delivery-limit", 5, 3, 3),
    ("delivery-limit", -1, 3, 3),   # -1 on either side: the larger, the more conservative
    ("delivery-limit", 4, -1, 4),
    ("overflow", "drop-head", "reject-publish", "reject-publish"),  # the operator's
    ("target-group-size", 3, 5, 5),  # the larger (rabbit_quorum_queue:merge_policy_value/3)
    ("target-group-size", 5, 3, 5),
])
def test_operator_policies_merge_per_key_as_4_0(key, value, operator_value, applies):
    op = P("o", operator=True, **{key.replace("-", "_"): operator_value})
    assert policies.validate(".*", "all", op.definition, operator=True) is None
    assert policies.merged(P("p", **{key.replace("-", "_"): value}), op) == {key: applies}


@pytest.mark.parametrize("value, shown", [(0, "0"), (-2, "-2"), ("3", '<<"3">>'), (1.5, "1.5"), (True, "true")])
def test_target_group_size_is_a_positive_integer(value, shown):
    """rabbit_quorum_queue:validate_policy/1 (4.0), for policies and operator policies alike."""
    for operator in (False, True):
        error = policies.validate(".*", "quorum_queues", {"target-group-size": value}, operator=operator)
        assert error.message == f"Validation failed\n\n{shown} is not a valid qq target count value"
    assert policies.validate(".*", "quorum_queues", {"target-group-size": 3}, operator=False) is None


def test_the_policy_definition_of_a_queue_merges_policy_and_operator_policy():
    r = Registry()
    r.set_policy("/", "p", "^q", {"target-group-size": 3, "queue-leader-locator": "balanced"})
    r.set_policy("/", "o", "^q", {"target-group-size": 5}, operator=True)
    assert r.queue_policy_definition("/", "qq", "quorum") == {"target-group-size": 5,
                                                              "queue-leader-locator": "balanced"}
    assert r.queue_policy_definition("/", "other", "quorum") == {}


def test_a_policy_applies_only_to_queue_types_that_support_all_its_keys():
    """rabbit_queue_type:is_policy_applicable/2 (4.0): the next policy down applies instead."""
    both = P("both", priority=0, max_length=9)
    quorum_keys = P("qq-keys", priority=5, max_length=1, delivery_limit=3)
    classic_keys = P("cq-keys", priority=5, max_length=2, queue_mode="lazy")
    assert policies.select([both, quorum_keys], "queue", "q", "classic") is both
    assert policies.select([both, quorum_keys], "queue", "q", "quorum") is quorum_keys
    assert policies.select([both, classic_keys], "queue", "q", "quorum") is both
    assert policies.select([both, classic_keys], "queue", "q", "classic") is classic_keys
    assert policies.select([P("tgs", target_group_size=3)], "queue", "q", "classic") is None


@pytest.mark.parametrize("value, error", [
    ("client-local", None), ("balanced", None), ("random", None), ("least-leaders", None),
    ("min-masters", '<<"min-masters">> is not a valid queue leader locator value'),
    (1, "1 is not a valid queue leader locator value"),
])
def test_queue_leader_locator_policy_values(value, error):
    result = policies.validate(".*", "all", {"queue-leader-locator": value}, operator=False)
    assert (result if result is None else result.message) == (error if error is None else
                                                              "Validation failed\n\n" + error)
