"""`control`: how warrenctl, tests and benchmarks ask a host of a running node something.

It is a Thespian client of the node's admin port: it asks the Supervisor (by its global name) to
forward a `ControlAsk` to the named host, which answers directly. Control messages travel through
Thespian (pickled, a few hundred per second); no data-path message ever does.
"""
from __future__ import annotations

import socket
from typing import Any

from actors.runtime.control import ControlAsk, supervisor_name
from actors.runtime.supervisor import Supervisor

admin_probe_timeout_s = 1.0


def _admin_listening(admin_port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", admin_port), timeout=admin_probe_timeout_s):
            return True
    except OSError:
        return False


def control(admin_port: int, host: str, op: str, args: dict, timeout: float = 10) -> Any:
    """Ask `host` of the node whose Thespian admin listens on `admin_port` to run `op`.

    Returns the host's answer; raises ConnectionError if no node is there, TimeoutError if the
    host did not answer in time, RuntimeError carrying the host's error text otherwise.
    """
    # Without this probe ActorSystem() would quietly start a fresh admin on that port.
    if not _admin_listening(admin_port):
        raise ConnectionError(f"no warren node on admin port {admin_port}")
    from thespian.actors import ActorSystem  # only a client process pays for it

    # transientUnique: a process may talk to several nodes; never the process-wide singleton
    system = ActorSystem("multiprocTCPBase", {"Admin Port": admin_port}, transientUnique=True)
    try:
        supervisor = system.createActor(Supervisor, globalName=supervisor_name)
        reply = system.ask(supervisor, ControlAsk(host, op, dict(args), timeout), timeout + 1)
    finally:
        # close our endpoint only: shutdown() would stop the node's actor system
        system._systemBase.transport.close()
    if reply is None:
        raise TimeoutError(f"host {host!r} did not answer {op!r} within {timeout} s")
    if not reply.ok:
        raise RuntimeError(reply.value)
    return reply.value
