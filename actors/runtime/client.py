"""`control`: how warrenctl, tests and benchmarks ask a host of a running node something.

It is a Thespian client of the node's admin port: it asks the Supervisor (by its global name) to
forward a `ControlAsk` to the named host, which answers directly. Control messages travel through
Thespian (pickled, a few hundred per second); no data-path message ever does.

A client never starts an admin: Thespian's actor system starts one on the port when it finds none
there, and a client that asked while the node's admin was being restarted would have left an
admin of its own on the node's port (orphaned, holding it). Its system base refuses instead.
"""
from __future__ import annotations

import socket
import threading
from typing import Any, Callable

from actors.runtime.control import ControlAsk, supervisor_name
from actors.runtime.supervisor import Supervisor

admin_probe_timeout_s = 1.0


def _admin_listening(admin_port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", admin_port), timeout=admin_probe_timeout_s):
            return True
    except OSError:
        return False


class _Capabilities:
    def __init__(self, admin_port: int) -> None:
        self.capabilities = {"Admin Port": admin_port}


def _client_system(admin_port: int) -> Any:
    """A transient multiprocTCPBase actor system on `admin_port` that never starts an admin."""
    from thespian.actors import ActorSystem, InvalidActorAddress  # only a client process pays for it
    from thespian.system.multiprocTCPBase import ActorSystemBase

    class ClientBase(ActorSystemBase):
        def _startAdmin(self, *args: Any, **kwargs: Any) -> None:
            self.transport.close()
            raise ConnectionError(f"no warren node on admin port {admin_port}")

    try:
        base = ClientBase(_Capabilities(admin_port))
    except InvalidActorAddress as e:  # something listens there that is no admin (or no longer)
        raise ConnectionError(f"no warren node on admin port {admin_port}: {e}") from None
    # transientUnique: a process may talk to several nodes; never the process-wide singleton
    return ActorSystem(systemBase=base, transientUnique=True)


def _within(call: Callable[[], Any], timeout_s: float, admin_port: int) -> Any:
    """`call()`'s result, or ConnectionError after `timeout_s`: Thespian waits 50 s for the answer
    to an actor lookup, whatever the caller's time-out, and an admin that died after it took the
    request (a control-plane restart) never answers. The call runs on a daemon thread, left to
    fail on the endpoint closed after it."""
    outcome: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as e:  # handed to the caller
            outcome["error"] = e
        finally:
            done.set()
    threading.Thread(target=run, name="thespian-lookup", daemon=True).start()
    if not done.wait(timeout_s):
        raise ConnectionError(f"the node on admin port {admin_port} did not answer within {timeout_s:g} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def control(admin_port: int, host: str, op: str, args: dict, timeout: float = 10) -> Any:
    """Ask `host` of the node whose Thespian admin listens on `admin_port` to run `op`.

    Returns the host's answer; raises ConnectionError if no node is there, TimeoutError if the
    host did not answer in time, RuntimeError carrying the host's error text otherwise.
    """
    if not _admin_listening(admin_port):  # at once, where the actor system would try for a while
        raise ConnectionError(f"no warren node on admin port {admin_port}")
    from thespian.actors import ActorSystemException

    system = _client_system(admin_port)
    try:
        supervisor = _within(lambda: system.createActor(Supervisor, globalName=supervisor_name), timeout, admin_port)
        reply = system.ask(supervisor, ControlAsk(host, op, dict(args), timeout), timeout + 1)
    except ActorSystemException as e:  # the admin went away while we asked (the node stops or restarts)
        raise ConnectionError(f"the node on admin port {admin_port} went away: {e}") from None
    finally:
        # close our endpoint only: shutdown() would stop the node's actor system
        system._systemBase.transport.close()
    if reply is None:
        raise TimeoutError(f"host {host!r} did not answer {op!r} within {timeout} s")
    if not reply.ok:
        raise RuntimeError(reply.value)
    return reply.value
