"""The steps a NodeCore operation yields (actors/node/core.py): `Apply` a registry command, `Ask`
an actor, `AskAll` several at once; the errors steps end with; and `command` / `admin_command`,
the operations that are one `Apply`. Their own module so that operations kept outside the core
(admin.py, access_admin.py, quorum_membership.py) yield the same steps without importing the core."""
from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from actors.placement import node_of
from actors.runtime.address import Address
from metadata import texts
from metadata.admin_errors import EX_SOFTWARE, AdminError
from metadata.commands import Command
from metadata.records import QueueRecord
from wire.errors import NOT_FOUND, AmqpError


@dataclass(frozen=True, slots=True)
class Apply:
    """An operation's step: propose `cmd`; resumes with (result, changes) once applied here, or
    ends the operation with `timeout_error` (None: propose again) when that takes too long."""

    cmd: Command
    timeout_error: AmqpError | AdminError | None = None


@dataclass(frozen=True, slots=True)
class Ask:
    """An operation's step: send `request(rid)` to `to`; resumes with the Reply, or with a Reply
    carrying `missing` when the target does not exist, or `down` when its node is down."""

    to: Address
    request: Callable[[int], Any]
    missing: AmqpError
    down: AmqpError | None = None  # None: the same as `missing`
    # not None: a target missing for now (its host restarting: a durable classic queue comes back
    # with it) is asked again until the call's time-out, which ends it with this error
    # (RabbitMQ's rabbit_amqqueue:with retries a queue whose process is being restarted)
    absent: AmqpError | None = None
    # how long the call may take, the queue's elections it waits through included (None: the
    # node's metadata time-out); a call whose target has a deadline of its own outlives it
    timeout_ms: int | None = None


@dataclass(frozen=True, slots=True)
class AskAll:
    """An operation's step: every ask at once; resumes with their Replies, in the asks' order."""

    asks: tuple[Ask, ...]


Op = Generator[Apply | Ask | AskAll, Any, Any]
# an admin change that no majority took in time (every admin operation's Apply)
ADMIN_TIMEOUT = AdminError("the operation timed out: the metadata store has no majority", EX_SOFTWARE)
RETRY_LATER = AdminError("retried later")  # a clean-up's time-out: made again after the requests queued meanwhile
MISSING = AmqpError(NOT_FOUND, "the actor does not exist")  # an Ask's marker: its target is gone


def queue_down(name: str) -> AmqpError:
    """What a call to a queue ends with when no actor or member of it answers."""
    return AmqpError(NOT_FOUND, f"queue '{name}' is down or inaccessible")


def home_down(rec: QueueRecord) -> AmqpError:
    """What a call to a queue ends with when its node is down: a classic queue's home node, RabbitMQ's
    text; a quorum queue's any member may lead, so its Ask is never to a node known down."""
    if rec.quorum or rec.replicas:  # a replicated stream: likewise, any member may lead
        return queue_down(rec.name)
    return texts.home_node_down(node_of(rec.home), rec.name, rec.vhost)


def command(cmd: Command, timeout_error: AmqpError | AdminError) -> Op:
    """Apply one command; its result."""
    result, _ = yield Apply(cmd, timeout_error)
    return result


def admin_command(cmd: Command) -> Op:
    """Apply one admin command; its result, or {"ok": True} for a command that returns none."""
    result = yield from command(cmd, ADMIN_TIMEOUT)
    return {"ok": True} if result is None else result
