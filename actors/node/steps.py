"""The steps a NodeCore operation yields (actors/node/core.py): `Apply` a registry command, `Ask`
an actor. Their own module so that operations kept outside the core (quorum_membership.py) yield
the same steps without importing the core."""
from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from actors.runtime.address import Address
from metadata.admin_errors import AdminError
from metadata.commands import Command
from wire.errors import AmqpError


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


Op = Generator[Apply | Ask, Any, Any]
