"""Policies and operator policies: validation, matching, and the settings they give a queue.

Theory of operation (RabbitMQ 3.10's rabbit_policy, checked against its rabbitmqctl):
- A policy is (vhost, name, pattern, apply-to, definition, priority). It matches a queue or an
  exchange when apply-to allows the kind and the pattern is found in the name (an unanchored
  search, as re:run); and a queue only when its type supports every key of the definition
  (rabbit_queue_type:is_policy_applicable/2, `UNSUPPORTED`): a policy setting delivery-limit does
  not apply to a classic queue at all, nor one setting queue-mode to a quorum queue. Of the
  matching policies the one with the highest priority applies; equal priorities go to the name
  that sorts first. Operator policies are chosen the same way, independently, and may set only
  `OPERATOR_KEYS`.
- Policy and operator policy merge per key (RabbitMQ 4.0's merge strategies, rabbit_policies and
  rabbit_quorum_queue): the smaller value for expires, message-ttl, max-length and
  max-length-bytes; for delivery-limit the smaller unless either is negative (then the larger);
  the operator's overflow; the larger target-group-size. 4.0 lets operator policies set those
  keys; others are refused as unrecognised.
- A queue's own x-arguments then meet the merged policy per key: for expires, message-ttl,
  max-length and max-length-bytes the smaller value wins; for dead-letter-exchange,
  dead-letter-routing-key, overflow and queue-mode the argument wins (rabbit_amqqueue_process's
  res_min / res_arg table). max-priority is not a policy key in 3.10 (rejected as unrecognised).
  That is a classic queue's resolution; a quorum queue is told the merged policy as it is
  (`queue_policy`) and resolves its own arguments with 4.0's quorum rules, where the policy's
  overflow wins (actors/quorum/config.py).
- target-group-size is read by quorum membership reconciliation only (actors/node/quorum_membership.py),
  queue-leader-locator by a new quorum queue's placement (actors/node/quorum_queues.py).
- alternate-exchange applies to exchanges; an exchange's own argument wins.
Validation errors carry rabbitmqctl's texts; values are printed as Erlang terms (<<"x">>, 5, true).
`PolicyTable` holds the policies of every vhost, changed only by `PolicySet` / `PolicyCleared`
records (changes.py); its commands `SetPolicy` / `ClearPolicy` (commands.py) validate and emit them.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from metadata import arguments as qargs
from metadata import stream
from metadata.access import compile_pattern
from metadata.admin_errors import EX_UNAVAILABLE, AdminError, no_vhost
from metadata.changes import Change, Emit, PolicyCleared, PolicySet
from metadata.commands import ClearPolicy, SetPolicy

if TYPE_CHECKING:
    from metadata.records import QueueRecord

# 4.0 also applies a policy to one queue type ("classic_queues", "quorum_queues", "streams")
TYPED_APPLY_TO = {"classic_queues": "classic", "quorum_queues": "quorum", "streams": "stream"}
APPLY_TO = ("queues", "exchanges", "all", *TYPED_APPLY_TO)
MIN_KEYS = ("expires", "message-ttl", "max-length", "max-length-bytes")
ARG_KEYS = ("dead-letter-exchange", "dead-letter-routing-key", "overflow", "queue-mode")
TARGET_GROUP_SIZE = "target-group-size"
LEADER_LOCATOR = "queue-leader-locator"  # where a new quorum queue's leader goes (metadata/quorum.py)
# keys only quorum queues read (a quorum queue resolves them against its arguments itself,
# actors/quorum/config.py; target-group-size is the membership reconciliation's)
QUORUM_KEYS = ("delivery-limit", "dead-letter-strategy", TARGET_GROUP_SIZE)
# keys only streams read (metadata/stream.py resolves them against a stream's arguments)
STREAM_KEYS = ("max-age", "stream-max-segment-size-bytes")
QUEUE_KEYS = MIN_KEYS + ARG_KEYS
POLICY_KEYS = frozenset(QUEUE_KEYS + QUORUM_KEYS + STREAM_KEYS + ("alternate-exchange", LEADER_LOCATOR))
# each queue type's capabilities(): unsupported_policies, of the keys warren knows
UNSUPPORTED = {"classic": frozenset(("delivery-limit", "dead-letter-strategy", TARGET_GROUP_SIZE) + STREAM_KEYS),
               "quorum": frozenset(("queue-mode",) + STREAM_KEYS),
               "stream": POLICY_KEYS - {"max-length-bytes", LEADER_LOCATOR, "alternate-exchange", *STREAM_KEYS}}
LEADER_LOCATOR_VALUES = ("client-local", "balanced", "random", "least-leaders")  # 4.0 maps the last two to balanced
DEAD_LETTER_STRATEGIES = ("at-most-once", "at-least-once")
OPERATOR_KEYS = frozenset(MIN_KEYS + ("delivery-limit", "overflow", TARGET_GROUP_SIZE))
OVERFLOW_VALUES = ("drop-head", "reject-publish", "reject-publish-dlx")
QUEUE_MODES = ("default", "lazy")


@dataclass(frozen=True, slots=True)
class Policy:
    vhost: str
    name: str
    pattern: str
    apply_to: str
    definition: dict[str, Any] = field(compare=False, hash=False)
    priority: int = 0
    operator: bool = False

    def matches(self, kind: str, name: str, queue_type: str = "classic") -> bool:
        typed = TYPED_APPLY_TO.get(self.apply_to)
        if typed is not None:
            if kind != "queue" or typed != queue_type:
                return False
        elif self.apply_to != "all" and self.apply_to != kind + "s":
            return False
        if kind == "queue" and not UNSUPPORTED.get(queue_type, frozenset()).isdisjoint(self.definition):
            return False
        compiled = compile_pattern(self.pattern)
        return not isinstance(compiled, str) and compiled.search(name) is not None


def erlang_term(value: Any) -> str:
    """How RabbitMQ prints a decoded JSON value in its validation errors."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'<<"{value}">>'
    if isinstance(value, dict):
        return "[" + ",".join(f"{{{erlang_term(k)},{erlang_term(v)}}}" for k, v in value.items()) + "]"
    if isinstance(value, list):
        return "[" + ",".join(erlang_term(v) for v in value) + "]"
    return json.dumps(value)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# key -> (accepts, what the error calls it)
_VALIDATORS: dict[str, tuple[Any, str]] = {
    "message-ttl": (lambda v: _is_int(v) and v >= 0, "a valid message TTL"),
    "expires": (lambda v: _is_int(v) and v >= 1, "a valid queue expiry"),
    "max-length": (lambda v: _is_int(v) and v >= 0, "a valid maximum length"),
    "max-length-bytes": (lambda v: _is_int(v) and v >= 0, "a valid maximum length in bytes"),
    "overflow": (lambda v: v in OVERFLOW_VALUES, "a valid overflow value"),
    "dead-letter-exchange": (lambda v: isinstance(v, str), "a valid dead letter exchange name"),
    "dead-letter-routing-key": (lambda v: isinstance(v, str), "a valid dead letter routing key"),
    "alternate-exchange": (lambda v: isinstance(v, str), "a valid alternate exchange name"),
    "queue-mode": (lambda v: v in QUEUE_MODES, "a valid queue-mode value"),
    "delivery-limit": (_is_int, "a valid delivery limit"),
    "dead-letter-strategy": (lambda v: v in DEAD_LETTER_STRATEGIES, "a valid dead letter strategy"),
    TARGET_GROUP_SIZE: (lambda v: _is_int(v) and v > 0, "a valid qq target count value"),
    LEADER_LOCATOR: (lambda v: v in LEADER_LOCATOR_VALUES, "a valid queue leader locator value"),
    "max-age": (lambda v: isinstance(v, str) and _max_age(v), "a valid max age"),
    "stream-max-segment-size-bytes": (lambda v: _is_int(v) and v >= 0, "a valid segment size"),
}


def _max_age(text: str) -> bool:
    try:
        return stream.interval_ms(text) is not None
    except stream.Crash:
        return False


def parse_definition(text: str) -> dict[str, Any] | AdminError:
    try:
        value = json.loads(text)
    except ValueError:
        return AdminError("JSON decoding error. Reason: badarg", EX_UNAVAILABLE)
    if not isinstance(value, dict):
        return AdminError(f"{erlang_term(value)} is not a valid policy definition", EX_UNAVAILABLE)
    return value


def validate(pattern: str, apply_to: str, definition: dict[str, Any], *, operator: bool) -> AdminError | None:
    """The first problem rabbitmqctl would report, as "Validation failed\\n\\n<reason>"."""
    reason = _reason(pattern, apply_to, definition, operator)
    return None if reason is None else AdminError(f"Validation failed\n\n{reason}", EX_UNAVAILABLE)


def _reason(pattern: str, apply_to: str, definition: dict[str, Any], operator: bool) -> str | None:
    compiled = compile_pattern(pattern)
    if isinstance(compiled, str):
        return f"pattern should be regular expression but is invalid: {compiled}"
    if apply_to not in APPLY_TO:
        return f"apply-to '{apply_to}' unrecognised; should be 'queues', 'exchanges' or 'all'"
    if not definition:
        return "no policy provided"
    allowed = OPERATOR_KEYS if operator else POLICY_KEYS
    unknown = {k: v for k, v in definition.items() if k not in allowed}
    if unknown:
        return f"{erlang_term(unknown)} are not recognised policy settings"
    for key in sorted(definition):
        accepts, what = _VALIDATORS[key]
        if not accepts(definition[key]):
            return f"{erlang_term(definition[key])} is not {what}"
    return None


def select(policies: list[Policy], kind: str, name: str, queue_type: str = "classic") -> Policy | None:
    """The policy that applies to `name`: highest priority, then the name that sorts first."""
    best: Policy | None = None
    for p in policies:
        if p.matches(kind, name, queue_type) and (best is None or (-p.priority, p.name) < (-best.priority, best.name)):
            best = p
    return best


def _delivery_limit(value: int, operator_value: int) -> int:
    """-1 (unlimited) on either side: the larger, the more conservative; else the smaller."""
    return max(value, operator_value) if value < 0 or operator_value < 0 else min(value, operator_value)


# key -> (policy value, operator policy value) -> the value that applies; min for the others
_MERGE: dict[str, Callable[[Any, Any], Any]] = {
    "delivery-limit": _delivery_limit,
    "overflow": lambda _value, operator_value: operator_value,
    TARGET_GROUP_SIZE: max,
}


def merged(policy: Policy | None, operator: Policy | None) -> dict[str, Any]:
    """The policy's definition with the operator policy's merged in (rabbit_policy:get/2)."""
    out = dict(policy.definition) if policy is not None else {}
    for key, value in (operator.definition.items() if operator is not None else ()):
        out[key] = _MERGE.get(key, min)(out[key], value) if key in out else value
    return out


def queue_settings(arguments: dict[str, Any], policy_values: dict[str, Any]) -> dict[str, Any]:
    """The queue's effective settings (keys as in QUEUE_KEYS, absent = not set): args meet policy."""
    out: dict[str, Any] = {}
    for key in QUEUE_KEYS:
        arg = arguments.get("x-" + key)
        pol = policy_values.get(key)
        if isinstance(arg, bytes):
            arg = arg.decode("utf-8", "replace")
        if arg is None:
            value = pol
        elif pol is None or key in ARG_KEYS:
            value = arg
        else:
            value = min(arg, pol)
        if value is not None:
            out[key] = value
    return out


class PolicyTable:
    """Policies and operator policies by vhost, and which one applies to a queue or an exchange."""

    def __init__(self, vhost_exists: Callable[[str], bool]) -> None:
        self._by_vhost: dict[str, dict[tuple[str, bool], Policy]] = {}  # vhost -> (name, operator) -> policy
        self._vhost_exists = vhost_exists

    # ---------------------------------------------------------------- change records
    def policy_set(self, c: PolicySet) -> None:
        p = Policy(c.vhost, c.name, c.pattern, c.apply_to, dict(c.definition), c.priority, c.operator)
        self._by_vhost.setdefault(c.vhost, {})[(c.name, c.operator)] = p

    def policy_cleared(self, c: PolicyCleared) -> None:
        del self._by_vhost[c.vhost][(c.name, c.operator)]

    def vhost_deleted(self, vhost: str) -> None:
        self._by_vhost.pop(vhost, None)

    def reset(self) -> None:
        self._by_vhost.clear()

    def snapshot(self) -> list[Change]:
        return [PolicySet(p.vhost, p.name, p.pattern, p.apply_to, dict(p.definition), p.priority, p.operator)
                for p in self.list()]

    # ---------------------------------------------------------------- commands
    def set(self, cmd: SetPolicy, emit: Emit) -> AdminError | None:
        if not self._vhost_exists(cmd.vhost):
            return no_vhost(cmd.vhost)
        error = validate(cmd.pattern, cmd.apply_to, cmd.definition, operator=cmd.operator)
        if error is not None:
            return error
        emit(PolicySet(cmd.vhost, cmd.name, cmd.pattern, cmd.apply_to, dict(cmd.definition), cmd.priority,
                       cmd.operator))
        return None

    def clear(self, cmd: ClearPolicy, emit: Emit) -> AdminError | None:
        if not self._vhost_exists(cmd.vhost):
            return no_vhost(cmd.vhost)
        if (cmd.name, cmd.operator) not in self._by_vhost.get(cmd.vhost, {}):
            return AdminError("Parameter does not exist")
        emit(PolicyCleared(cmd.vhost, cmd.name, cmd.operator))
        return None

    def cleared_with_vhost(self, vhost: str) -> list[PolicyCleared]:
        """The records that clear every policy of `vhost` (before the vhost itself goes)."""
        return [PolicyCleared(vhost, name, operator) for name, operator in sorted(self._by_vhost.get(vhost, {}))]

    # ---------------------------------------------------------------- queries
    def list(self, vhost: str | None = None, *, operator: bool | None = None) -> list[Policy]:
        """By vhost, then priority (highest first), then name, as list_policies shows them."""
        return [p for v in sorted(self._by_vhost) if vhost is None or v == vhost
                for p in sorted(self._by_vhost[v].values(), key=lambda p: (-p.priority, p.name))
                if operator is None or p.operator == operator]

    def queue_policy(self, q: QueueRecord) -> tuple[str, str, dict[str, Any]]:
        """(policy name, operator policy name, effective settings) for a queue; names "" when none.
        A classic queue's settings are its arguments met with the merged policy; a quorum queue's
        and a stream's are the merged policy as it is: they resolve their own arguments (see the
        module docstring)."""
        qtype = "quorum" if q.quorum else qargs.queue_type(q.arguments)
        policy, operator = self._policies_of(q.vhost, q.name, qtype)
        definition = merged(policy, operator)
        return (policy.name if policy else "", operator.name if operator else "",
                definition if qtype != "classic" else queue_settings(q.arguments, definition))

    def definition(self, vhost: str, name: str, queue_type: str) -> dict[str, Any]:
        """The merged policy and operator policy that apply to a queue of that name and type, as it
        is or about to be declared (rabbit_policy:get/2 per key)."""
        return merged(*self._policies_of(vhost, name, queue_type))

    def _policies_of(self, vhost: str, name: str, queue_type: str) -> tuple[Policy | None, Policy | None]:
        pols = list(self._by_vhost.get(vhost, {}).values())
        return (select([p for p in pols if not p.operator], "queue", name, queue_type),
                select([p for p in pols if p.operator], "queue", name, queue_type))

    def exchange_policy(self, vhost: str, exchange: str) -> Policy | None:
        pols = [p for p in self._by_vhost.get(vhost, {}).values() if not p.operator]
        return select(pols, "exchange", exchange) if pols else None

    def alternate(self, vhost: str, exchange: str) -> str | None:
        """The alternate exchange a policy gives `exchange` (its own argument, if any, wins)."""
        policy = self.exchange_policy(vhost, exchange)
        value = policy.definition.get("alternate-exchange") if policy is not None else None
        return value if isinstance(value, str) else None


def definition_json(p: Policy) -> str:
    """As rabbitmqctl list_policies prints it: compact JSON, keys sorted."""
    return json.dumps(p.definition, sort_keys=True, separators=(",", ":"))
