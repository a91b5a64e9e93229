"""Declaring quorum queues: RabbitMQ's codes and texts, exactly, and where members and leaders go.

The texts are the oracle's (Debian's RabbitMQ 3.10, scripts/rabbitmq_oracle, pika, queue "q1" in
vhost "/"); where 4.0 answers differently (its sources, v4.0.9) the 4.0 answer is asserted and
the case says so.
"""
from __future__ import annotations

import random

import pytest

from metadata import quorum
from wire.errors import PRECONDITION_FAILED, RESOURCE_LOCKED, AmqpError

Q = {"x-queue-type": "quorum"}


def err(text: str, code: int = PRECONDITION_FAILED) -> AmqpError:
    return AmqpError(code, text)


NEW_CASES = [  # (durable, exclusive, auto_delete, arguments) -> the oracle's answer
    ((False, False, False, Q), "invalid property 'non-durable' for queue 'q1' in vhost '/'"),
    ((True, True, False, Q), "invalid property 'exclusive-owner' for queue 'q1' in vhost '/'"),
    ((False, True, False, Q), "invalid property 'exclusive-owner' for queue 'q1' in vhost '/'"),
    ((True, False, True, Q), "invalid property 'auto-delete' for queue 'q1' in vhost '/'"),
    ((False, True, True, Q), "invalid property 'auto-delete' for queue 'q1' in vhost '/'"),
    ((True, False, False, {**Q, "x-max-priority": 5}),
     "invalid arg 'x-max-priority' for queue 'q1' in vhost '/' of queue type rabbit_quorum_queue"),
    ((True, False, False, {**Q, "x-max-priority": -5}),  # not even type-checked: not a quorum argument
     "invalid arg 'x-max-priority' for queue 'q1' in vhost '/' of queue type rabbit_quorum_queue"),
    ((True, False, False, {**Q, "x-queue-mode": "lazy"}),
     "invalid arg 'x-queue-mode' for queue 'q1' in vhost '/' of queue type rabbit_quorum_queue"),
    ((True, False, False, {**Q, "x-queue-master-locator": "min-masters"}),
     "invalid arg 'x-queue-master-locator' for queue 'q1' in vhost '/' of queue type rabbit_quorum_queue"),
    ((True, False, False, {**Q, "x-max-age": "1D"}),
     "invalid arg 'x-max-age' for queue 'q1' in vhost '/' of queue type rabbit_quorum_queue"),
    ((True, False, False, {**Q, "x-queue-mode": "lazy", "x-max-priority": 5}),  # the client's order
     "invalid arg 'x-queue-mode' for queue 'q1' in vhost '/' of queue type rabbit_quorum_queue"),
    ((True, False, False, {"x-max-priority": 5, **Q, "x-queue-mode": "lazy"}),
     "invalid arg 'x-max-priority' for queue 'q1' in vhost '/' of queue type rabbit_quorum_queue"),
    ((True, False, False, {"x-max-priority": 5, **Q, "x-message-ttl": -1}),  # typed checks first
     "invalid arg 'x-message-ttl' for queue 'q1' in vhost '/': {value_negative,-1}"),
    ((False, False, False, {"x-max-priority": 5, **Q}),  # arguments before properties
     "invalid arg 'x-max-priority' for queue 'q1' in vhost '/' of queue type rabbit_quorum_queue"),
    ((True, False, False, {**Q, "x-quorum-initial-group-size": 0}),
     "invalid arg 'x-quorum-initial-group-size' for queue 'q1' in vhost '/': {value_zero,0}"),
    ((True, False, False, {**Q, "x-quorum-initial-group-size": -1}),
     "invalid arg 'x-quorum-initial-group-size' for queue 'q1' in vhost '/': {value_negative,-1}"),
    ((True, False, False, {**Q, "x-quorum-initial-group-size": "3"}),
     "invalid arg 'x-quorum-initial-group-size' for queue 'q1' in vhost '/': \"expected integer, got longstr\""),
    ((True, False, False, {**Q, "x-queue-leader-locator": "nope"}),
     "invalid arg 'x-queue-leader-locator' for queue 'q1' in vhost '/': invalid_queue_locator_arg"),
    ((True, False, False, {**Q, "x-queue-leader-locator": 5}),
     "invalid arg 'x-queue-leader-locator' for queue 'q1' in vhost '/': {unacceptable_type,signedint}"),
]

ACCEPTED = [  # the oracle (and 4.0) take these
    {**Q, "x-delivery-limit": -1}, {**Q, "x-delivery-limit": "x"}, {**Q, "x-delivery-limit": 0},
    {**Q, "x-quorum-initial-group-size": 7}, {**Q, "x-queue-leader-locator": "balanced"},
    {**Q, "x-queue-leader-locator": "random"}, {**Q, "x-overflow": "reject-publish-dlx"},
    {**Q, "x-max-in-memory-length": 5}, {**Q, "x-foo": 1}, Q,
]


@pytest.mark.parametrize("declare, text", NEW_CASES)
def test_a_new_quorum_queue_is_refused_as_rabbitmq_refuses_it(declare, text):
    durable, exclusive, auto_delete, arguments = declare
    assert quorum.new_queue_error("q1", "/", dict(arguments), durable=durable, exclusive=exclusive,
                                  auto_delete=auto_delete) == err(text)


@pytest.mark.parametrize("arguments", ACCEPTED)
def test_arguments_rabbitmq_accepts(arguments):
    assert quorum.new_queue_error("q1", "/", dict(arguments), durable=True, exclusive=False,
                                  auto_delete=False) is None


def test_a_server_named_quorum_queue_is_refused_first():
    assert quorum.server_named_error({"x-max-priority": 5, **Q}) == err(
        "Cannot declare a server-named queue for type rabbit_quorum_queue")
    assert quorum.server_named_error({}) is None and quorum.server_named_error({"x-queue-type": "classic"}) is None


def redeclare(received: dict, *, durable: bool = True, auto_delete: bool = False, owner_matches: bool = True,
              relaxed: bool = False, current: dict | None = None) -> AmqpError | None:
    return quorum.redeclare_error("qq", "/", dict(current or Q), received, durable=durable,
                                  auto_delete=auto_delete, owner_matches=owner_matches, relaxed=relaxed)


def test_redeclaring_with_another_queue_type_is_406():
    assert redeclare({"x-queue-type": "classic"}) == err(
        "inequivalent arg 'x-queue-type' for queue 'qq' in vhost '/': received 'classic' but current is 'quorum'")
    assert redeclare({"x-queue-type": "stream"}) == err(
        "inequivalent arg 'x-queue-type' for queue 'qq' in vhost '/': received 'stream' but current is 'quorum'")


def test_redeclaring_without_a_queue_type_is_406_as_4_0_says_it():
    """4.0 fills the default type in before comparing; 3.10 answered "received none but current is
    the value 'quorum' of type 'longstr'"."""
    assert redeclare({}) == err(
        "inequivalent arg 'x-queue-type' for queue 'qq' in vhost '/': received 'classic' but current is 'quorum'")


@pytest.mark.parametrize("kwargs, received, expected", [
    (dict(durable=False), Q, err("inequivalent arg 'durable' for queue 'qq' in vhost '/': "
                                 "received 'false' but current is 'true'")),
    (dict(auto_delete=True), Q, err("inequivalent arg 'auto_delete' for queue 'qq' in vhost '/': "
                                    "received 'true' but current is 'false'")),
    (dict(owner_matches=False), Q, err("cannot obtain exclusive access to locked queue 'qq' in vhost '/'. It "
                                       "could be originally declared on another connection or the exclusive "
                                       "property value does not match that of the original declaration.",
                                       RESOURCE_LOCKED)),
    ({}, {**Q, "x-delivery-limit": 5}, err("inequivalent arg 'x-delivery-limit' for queue 'qq' in vhost '/': "
                                           "received the value '5' of type 'signedint' but current is none")),
    ({}, {**Q, "x-max-priority": 5}, None),  # not a quorum argument: not compared (the oracle agrees)
    ({}, Q, None),
])
def test_redeclaration_equivalence(kwargs, received, expected):
    assert redeclare(received, **kwargs) == expected


def test_relaxed_equivalence_ignores_the_queue_type_and_the_properties_but_not_the_seven_arguments():
    """4.1 guide: quorum_queue.property_equivalence.relaxed_checks_on_redeclaration = true."""
    assert redeclare({"x-queue-type": "classic"}, relaxed=True) is None
    assert redeclare({}, relaxed=True, durable=False, owner_matches=False) is None
    assert redeclare({"x-max-length": 5}, relaxed=True, current={**Q, "x-max-length": 10}) == err(
        "inequivalent arg 'x-max-length' for queue 'qq' in vhost '/': received '5' but current is '10'")
    assert redeclare({"x-delivery-limit": 5}, relaxed=True) is None  # not among the seven
    assert redeclare({**Q, "x-delivery-limit": 5}, relaxed=True) is not None  # quorum: full checks


# -- group size, leader locator, placement -------------------------------------------------------------

@pytest.mark.parametrize("arguments, nodes, cluster_size, size", [
    ({}, 5, 3, 3), ({}, 2, 3, 2), ({"x-quorum-initial-group-size": 5}, 7, 3, 5),
    ({"x-quorum-initial-group-size": 7}, 3, 3, 3), ({}, 7, 5, 5), ({}, 1, 3, 1),
])
def test_group_size_is_the_argument_or_the_default_capped_at_the_nodes(arguments, nodes, cluster_size, size):
    assert quorum.group_size(arguments, nodes, cluster_size) == size


@pytest.mark.parametrize("arguments, policy, configured, locator", [
    ({}, None, None, "client-local"),
    ({"x-queue-leader-locator": "balanced"}, None, None, "balanced"),
    ({"x-queue-leader-locator": "balanced"}, {"queue-leader-locator": "client-local"}, None, "client-local"),
    ({}, None, "balanced", "balanced"),
    ({"x-queue-leader-locator": "least-leaders"}, None, None, "balanced"),  # deprecated aliases
    ({}, {"queue-master-locator": "min-masters"}, None, "balanced"),
    ({"x-queue-leader-locator": "client-local"}, {"queue-master-locator": "random"}, None, "client-local"),
])
def test_leader_locator(arguments, policy, configured, locator):
    assert quorum.leader_locator(arguments, policy, configured) == locator


NODES = ["n1", "n2", "n3", "n4", "n5"]


def test_members_are_the_declaring_node_and_the_least_loaded_running_ones():
    leader, followers = quorum.place(3, "client-local", "n2", NODES, ["n1", "n2", "n3", "n5"], 10,
                                     {"n1": 4, "n3": 1, "n4": 0, "n5": 1}, {}, random.Random(0))
    assert (leader, followers) == ("n2", ["n3", "n5"])  # n4 holds fewest but is down


def test_a_balanced_leader_is_the_member_leading_fewest():
    leader, followers = quorum.place(3, "balanced", "n1", NODES[:3], NODES[:3], 10, {},
                                     {"n1": 5, "n2": 2, "n3": 2}, random.Random(0))
    assert (leader, followers) == ("n2", ["n1", "n3"])


def test_many_queues_pick_members_and_a_balanced_leader_at_random():
    picks = [quorum.place(2, "balanced", "n1", NODES, NODES, 5000, {}, {}, random.Random(seed))
             for seed in range(40)]
    assert {leader for leader, _ in picks} >= {"n1", "n2"}
    assert all("n1" in [leader, *followers] for leader, followers in picks)  # the declaring node always
    assert len({tuple(sorted([leader, *followers])) for leader, followers in picks}) > 2
