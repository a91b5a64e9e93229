"""Declaring a quorum queue as RabbitMQ 4.0 answers it: the checks, the group size, where members go.

Theory of operation. A queue.declare of `x-queue-type = quorum` meets, in this order (rabbit_channel,
rabbit_amqqueue, rabbit_quorum_queue, rabbit_queue_location in 4.0):
1. `server_named_error`: an empty name is refused at once ("Cannot declare a server-named queue for
   type rabbit_quorum_queue"), before anything else is looked at.
2. An existing queue: `redeclare_error`. 4.0 first fills an absent x-queue-type with the default
   type ("classic"), then checks exclusive access (405), durable, auto_delete and the quorum type's
   arguments, the first difference winning. With `relaxed` (rabbitmq.conf's
   quorum_queue.property_equivalence.relaxed_checks_on_redeclaration, the 4.1 guide; also in 4.0.x)
   a redeclaration as "classic" (explicit or filled in) of a quorum queue compares only seven
   arguments (RELAXED_KEYS) and nothing else.
3. A new queue: `new_queue_error`: the x-dead-letter-exchange type, the x-queue-type, each quorum
   argument's typed check in rabbit_amqqueue's declare_args order (QUORUM_CHECKS), then any known
   argument a quorum queue does not take, in the client's order ("invalid arg 'x-max-priority' for
   queue 'q' in vhost '/' of queue type rabbit_quorum_queue"), then the properties: auto-delete,
   exclusive-owner (an exclusive declare is also non-durable, but this comes first), non-durable.
   Every refusal is 406 PRECONDITION_FAILED with RabbitMQ's text (metadata/texts.py).
4. Placement: `group_size` (x-quorum-initial-group-size, else quorum_cluster_size, default 3, at most
   the cluster's nodes), `leader_locator` (the policy's queue-leader-locator, else the argument,
   else queue-master-locator likewise, else the configured default; client-local unless balanced;
   the deprecated random, least-leaders and min-masters mean balanced), and `place`: the members are
   the declaring node plus the others, running nodes first, then (under 1,000 queues) those holding
   the fewest members, else in random order; the leader is the declaring node (client-local) or,
   balanced, the running member leading the fewest quorum queues (random above 1,000 queues).

Checked against Debian's RabbitMQ 3.10 (scripts/rabbitmq_oracle) and 4.0.9's sources. Where they
differ, 4.0 wins:
- a redeclaration without x-queue-type: 4.0 says "received 'classic' but current is 'quorum'" (it
  fills the default type in), 3.10 "received none but current is the value 'quorum' of type 'longstr'";
- x-delivery-limit has no check in either (3.10 takes -1 and "x" alike; 4.0 reads -1 as unlimited),
  and x-queue-leader-locator must be one of the locators in both (invalid_queue_locator_arg): two
  checks the 3.10-based metadata/arguments.py gets wrong for quorum queues, so QUORUM_CHECKS replaces
  them. x-overflow reject-publish-dlx is accepted and runs as drop-head (4.0 logs a warning).
Left out: vhost default queue types and queue-count limits (warren has neither yet).
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Protocol, Sequence

from metadata import arguments as qargs
from metadata import texts
from metadata.fieldvalues import MISSING, as_text, inequivalence, type_name
from wire.errors import PRECONDITION_FAILED, AmqpError

TYPE = "quorum"
TYPE_MODULE = qargs.TYPE_MODULES[TYPE]
CLUSTER_SIZE_DEFAULT = 3  # quorum_cluster_size
CLIENT_LOCAL, BALANCED = "client-local", "balanced"
LEADER_LOCATORS = (CLIENT_LOCAL, BALANCED, "random", "least-leaders", "min-masters")
QUEUE_COUNT_START_RANDOM_SELECTION = 1_000
RELAXED_KEYS = ("x-dead-letter-exchange", "x-dead-letter-routing-key", "x-expires", "x-max-length",
                "x-max-length-bytes", "x-single-active-consumer", "x-message-ttl")


def _leader_locator_arg(value: Any, _args: dict[str, Any]) -> str | None:
    if not isinstance(value, (str, bytes)):
        return f"{{unacceptable_type,{type_name(value)}}}"
    return None if as_text(value) in LEADER_LOCATORS else "invalid_queue_locator_arg"


_FOR_4_0: dict[str, Callable[[Any, dict[str, Any]], str | None] | None] = {
    "x-delivery-limit": None,  # no check: -1 (unlimited) and anything else are taken
    "x-queue-leader-locator": _leader_locator_arg,
}
QUORUM_CHECKS = tuple((key, _FOR_4_0.get(key, check)) for key, check in qargs.DECLARE_ORDER
                      if key in qargs.TYPE_ARGUMENTS[TYPE] and _FOR_4_0.get(key, check) is not None)
REFUSED_ARGUMENTS = qargs.KNOWN_QUEUE_ARGUMENTS - set(qargs.TYPE_ARGUMENTS[TYPE])


def is_quorum(arguments: Mapping[str, Any]) -> bool:
    value = arguments.get("x-queue-type")
    return isinstance(value, (str, bytes)) and as_text(value) == TYPE


def server_named_error(arguments: Mapping[str, Any]) -> AmqpError | None:
    """A declare with an empty queue name (after stripping CR/LF) of a quorum queue."""
    if is_quorum(arguments):
        return AmqpError(PRECONDITION_FAILED, f"Cannot declare a server-named queue for type {TYPE_MODULE}")
    return None


def new_queue_error(name: str, vhost: str, args: dict[str, Any], *, durable: bool, exclusive: bool,
                    auto_delete: bool) -> AmqpError | None:
    """RabbitMQ 4.0's checks of a quorum queue about to be created; the first failure wins."""
    dlx = args.get("x-dead-letter-exchange", MISSING)
    if dlx is not MISSING and not isinstance(dlx, (str, bytes)):
        return texts.invalid_arg_type("queue", name, vhost, "x-dead-letter-exchange", type_name(dlx))
    for key, check in QUORUM_CHECKS:
        if key in args:
            reason = check(args[key], args)
            if reason is not None:
                return texts.invalid_arg(name, vhost, key, reason)
    for key in args:
        if key in REFUSED_ARGUMENTS:
            return texts.invalid_arg_for_queue_type(name, vhost, key, TYPE_MODULE)
    for refused, prop in ((auto_delete, "auto-delete"), (exclusive, "exclusive-owner"),
                          (not durable, "non-durable")):
        if refused:
            return texts.invalid_property(name, vhost, prop)
    return None


def redeclare_error(name: str, vhost: str, current: dict[str, Any], received: dict[str, Any], *,
                    durable: bool, auto_delete: bool, owner_matches: bool,
                    relaxed: bool = False) -> AmqpError | None:
    """A declare of an existing quorum queue (stored arguments `current`): 4.0's equivalence."""
    if "x-queue-type" not in received:
        received = {**received, "x-queue-type": "classic"}  # 4.0 fills in the default type
    if relaxed and as_text(received["x-queue-type"]) == "classic":
        return _args_error(name, vhost, current, received, RELAXED_KEYS)
    if not owner_matches:
        return texts.resource_locked(name, vhost)
    for key, have, got in (("durable", True, durable), ("auto_delete", False, auto_delete)):
        pair = inequivalence(have, got)
        if pair is not None:
            return texts.inequivalent("queue", name, vhost, key, *pair)
    return _args_error(name, vhost, current, received, qargs.TYPE_ARGUMENTS[TYPE])


def _args_error(name: str, vhost: str, current: dict[str, Any], received: dict[str, Any],
                keys: Sequence[str]) -> AmqpError | None:
    for key in keys:
        pair = inequivalence(current.get(key, MISSING), received.get(key, MISSING))
        if pair is not None:
            return texts.inequivalent("queue", name, vhost, key, *pair)
    return None


# -- placement ---------------------------------------------------------------------------------------

def group_size(arguments: Mapping[str, Any], nodes: int, cluster_size: int = CLUSTER_SIZE_DEFAULT) -> int:
    """How many members: x-quorum-initial-group-size (checked positive at declaration), else the
    configured quorum_cluster_size, capped at the cluster's nodes."""
    size = arguments.get("x-quorum-initial-group-size")
    if isinstance(size, bool) or not isinstance(size, int):
        size = cluster_size
    return max(1, min(size, nodes))


def leader_locator(arguments: Mapping[str, Any], policy: Mapping[str, Any] | None = None,
                   configured: str | None = None) -> str:
    """client-local or balanced (rabbit_queue_location:leader_locator/1: a policy wins over the
    argument, queue-leader-locator over queue-master-locator, then queue_leader_locator's config)."""
    policy = policy or {}
    for key in ("queue-leader-locator", "queue-master-locator"):
        value = policy.get(key, arguments.get("x-" + key))
        if value is not None:
            break
    else:
        value = configured
    text = as_text(value) if isinstance(value, (str, bytes)) else None
    return BALANCED if text in LEADER_LOCATORS and text != CLIENT_LOCAL else CLIENT_LOCAL


class Rng(Protocol):
    def random(self) -> float: ...


def place(size: int, locator: str, local: str, nodes: Sequence[str], running: Sequence[str],
          queue_count: int, members_on: Mapping[str, int], leaders_on: Mapping[str, int],
          rng: Rng) -> tuple[str, list[str]]:
    """(leader, followers) of a new quorum queue declared through `local` (rabbit_queue_location).
    `members_on` / `leaders_on`: how many quorum queue members / leaders each node holds now."""
    assert local in nodes, f"the declaring node {local} is not a cluster member"
    is_up = set(running).__contains__
    if len(nodes) <= size:
        members = list(nodes)
    else:
        others = [n for n in nodes if n != local]
        if queue_count >= QUEUE_COUNT_START_RANDOM_SELECTION:
            others.sort(key=lambda n: rng.random())
            others.sort(key=lambda n: not is_up(n))
        else:
            others.sort(key=lambda n: (not is_up(n), members_on.get(n, 0), n))
        members = [local] + others[:size - 1]
    if locator == CLIENT_LOCAL:
        leader = local
    else:
        candidates = [n for n in members if is_up(n)] or members
        if queue_count >= QUEUE_COUNT_START_RANDOM_SELECTION:
            leader = candidates[int(rng.random() * len(candidates))]
        else:
            leader = min(candidates, key=lambda n: (leaders_on.get(n, 0), n))
    return leader, [n for n in members if n != leader]
