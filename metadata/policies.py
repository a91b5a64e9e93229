"""Policies and operator policies: validation, matching, and the settings they give a queue.

Theory of operation (RabbitMQ 3.10's rabbit_policy, checked against its rabbitmqctl):
- A policy is (vhost, name, pattern, apply-to, definition, priority). It matches a queue or an
  exchange when apply-to allows the kind and the pattern is found in the name (an unanchored
  search, as re:run). Of the matching policies the one with the highest priority applies; equal
  priorities go to the name that sorts first. Operator policies are chosen the same way,
  independently, and may set only expires, message-ttl, max-length and max-length-bytes.
- Policy and operator policy merge: for a key both set, the smaller value wins.
- A queue's own x-arguments then meet the merged policy per key: for expires, message-ttl,
  max-length and max-length-bytes the smaller value wins; for dead-letter-exchange,
  dead-letter-routing-key, overflow and queue-mode the argument wins (rabbit_amqqueue_process's
  res_min / res_arg table). max-priority is not a policy key in 3.10 (rejected as unrecognised).
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
# keys only quorum queues read, passed on as the policy has them: the queue resolves them against
# its arguments itself (actors/quorum/config.py, 4.0's rules: -1 on either side lifts the limit)
QUORUM_KEYS = ("delivery-limit", "dead-letter-strategy")
QUEUE_KEYS = MIN_KEYS + ARG_KEYS
POLICY_KEYS = frozenset(QUEUE_KEYS + QUORUM_KEYS + ("alternate-exchange",))
DEAD_LETTER_STRATEGIES = ("at-most-once", "at-least-once")
OPERATOR_KEYS = frozenset(MIN_KEYS)
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
}


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


def merged(policy: Policy | None, operator: Policy | None) -> dict[str, Any]:
    out = dict(policy.definition) if policy is not None else {}
    for key, value in (operator.definition.items() if operator is not None else ()):
        out[key] = min(out[key], value) if key in out else value
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
    out.update((key, policy_values[key]) for key in QUORUM_KEYS if key in policy_values)
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
        """(policy name, operator policy name, effective settings) for a queue; names "" when none."""
        pols = list(self._by_vhost.get(q.vhost, {}).values())
        queue_type = "quorum" if q.quorum else "classic"
        policy = select([p for p in pols if not p.operator], "queue", q.name, queue_type)
        operator = select([p for p in pols if p.operator], "queue", q.name, queue_type)
        return (policy.name if policy else "", operator.name if operator else "",
                queue_settings(q.arguments, merged(policy, operator)))

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
