"""Errors of administrative commands (warrenctl), as values.

Theory of operation: an admin command that fails returns `AdminError(message, exit_code)`; the
control op hands it to warrenctl, which prints the message on one line and exits with the code.
Messages and codes follow rabbitmqctl 3.10 (sysexits: 64 usage, 65 data error such as a missing
vhost, 67 no such user, 69 unavailable / validation failed, 70 software error such as an existing user).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from metadata.records import QueueRecord
    from metadata.registry import Registry

EX_USAGE, EX_DATAERR, EX_NOUSER, EX_UNAVAILABLE, EX_SOFTWARE = 64, 65, 67, 69, 70


@dataclass(frozen=True, slots=True)
class AdminError:
    message: str
    exit_code: int = EX_UNAVAILABLE


def no_user(name: str) -> AdminError:
    return AdminError(f'User "{name}" does not exist', EX_NOUSER)


def no_vhost(vhost: str) -> AdminError:
    return AdminError(f"Virtual host '{vhost}' does not exist", EX_DATAERR)


def named_queue(registry: Registry, a: dict) -> QueueRecord | AdminError:
    """The queue an admin call names (`vhost`, default "/", and `name`), or rabbitmqctl's error."""
    vhost = a.get("vhost", "/")
    if not registry.vhost_exists(vhost):
        return no_vhost(vhost)
    rec = registry.queue(vhost, a["name"])
    return AdminError("not_found", EX_UNAVAILABLE) if rec is None else rec
