"""HostActor: the Thespian actor that owns one host process and runs its Runtime.

Thespian gives each HostActor its own OS process. On `StartHost` it starts a thread running an
asyncio loop with a `Runtime` and the host's entry function, and answers `HostStarted` once the
entry has returned, or with the error that ended it (the process then stays until the supervisor
kills it, so the answer always gets out); it looks for the outcome on Thespian's timer, so the
actor still answers (stop, control asks) while a host waits long for its start, as a
connection host does for the metadata group. A host whose loop fails after it started exits at
once (status 1): the supervisor sees the exit and restarts it. `Listen` runs the entry's
OPEN_LISTENERS control op. Control asks are run on the loop with `run_coroutine_threadsafe`; the
Thespian thread only waits for the answer.

The process dies with the node's main process (lifeline.py: its at-fork hook watches the main
process's pipe) and with its parent, the Supervisor (`die_with_parent`, from its first moment: a
host the Supervisor forked just as it died may never get its StartHost).

Every host process keeps its C heap (actors/runtime/heap.py): memory freed in bulk, a long queue
drained, goes back to the OS.

Logs: Thespian routes the stdlib logging of its actor processes to its own logger process, which
keeps only its own records, so a host renders its structlog events itself (logs.py): one line each
to the stderr it inherited from the node's main process and one JSON line to the node's log file,
tagged with the host's name.
"""
from __future__ import annotations

import asyncio
import importlib
import inspect
import os
import threading
from datetime import timedelta
from typing import Any

import structlog
from thespian.actors import ActorExitRequest, ActorTypeDispatcher, WakeupMessage

from actors.runtime import lifeline, logs, memory_probe
from actors.runtime.control import (OPEN_LISTENERS, ControlReply, Forwarded, HostSpec, HostStarted, Listen,
                                    Listening, StartHost)
from actors.runtime.cluster_secret import read_or_create_cookie
from actors.runtime.curve import CurveKeys
from actors.runtime.heap import HeapKeeper
from actors.runtime.mailbox import Runtime

log = structlog.get_logger("warren.host")

start_poll_s = 0.02  # how often the actor looks whether the entry has returned
listen_timeout_s = 30.0
host_stop_timeout_s = 10.0


def resolve_entry(entry: str) -> Any:
    """"module:function" -> the function."""
    module_name, _, attr = entry.partition(":")
    return getattr(importlib.import_module(module_name), attr)


class HostActor(ActorTypeDispatcher):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        lifeline.die_with_parent(lifeline.forked_by())
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runtime: Runtime | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._error: str | None = None
        self._reply_to: Any = None
        self._name = "?"

    def receiveMsg_StartHost(self, msg: StartHost, sender: Any) -> None:
        if self._thread is not None:
            return
        self._name = msg.spec.name
        self._reply_to = sender
        self._thread = threading.Thread(target=self._run, args=(msg,), name=f"host-{msg.spec.name}", daemon=True)
        self._thread.start()
        self.wakeupAfter(timedelta(seconds=start_poll_s))

    def receiveMsg_WakeupMessage(self, msg: WakeupMessage, sender: Any) -> None:
        if self._reply_to is None:
            return  # answered already
        if not self._started.is_set():
            self.wakeupAfter(timedelta(seconds=start_poll_s))
            return
        self.send(self._reply_to, HostStarted(self._name, os.getpid(), self._error))
        self._reply_to = None

    def receiveMsg_Listen(self, msg: Listen, sender: Any) -> None:
        error = None
        try:
            answer = self._on_loop(OPEN_LISTENERS, {}, listen_timeout_s)
            if isinstance(answer, dict) and "error" in answer:
                error = str(answer["error"])
        except Exception as exc:
            log.exception("host.listeners_failed", host=self._name)
            error = f"{type(exc).__name__}: {exc}"
        self.send(sender, Listening(self._name, os.getpid(), error))

    def receiveMsg_Forwarded(self, forwarded: Forwarded, sender: Any) -> None:
        msg, sender = forwarded.ask, forwarded.reply_to
        if self._loop is None or self._runtime is None:
            self.send(sender, ControlReply(False, f"host {self._name} is not running"))
            return
        try:
            reply = ControlReply(True, self._on_loop(msg.op, msg.args, msg.timeout))
        except TimeoutError:
            reply = ControlReply(False, f"host {self._name} timed out on {msg.op}")
        except Exception as exc:
            log.exception("host.control_failed", host=self._name, op=msg.op)
            reply = ControlReply(False, f"{type(exc).__name__}: {exc}")
        self.send(sender, reply)

    def _on_loop(self, op: str, args: dict, timeout_s: float) -> Any:
        """Run the control op on the host's loop and wait for its answer (TimeoutError after `timeout_s`)."""
        if self._loop is None or self._runtime is None:
            raise RuntimeError(f"host {self._name} is not running")
        future = asyncio.run_coroutine_threadsafe(self._runtime.ask(op, args), self._loop)
        try:
            return future.result(timeout_s)
        except TimeoutError:
            future.cancel()
            raise

    def receiveMsg_ActorExitRequest(self, msg: ActorExitRequest, sender: Any) -> None:
        if self._loop is None or self._stop is None:
            return  # still starting (or failed): nothing to close; the thread ends with the process
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(host_stop_timeout_s)

    def _run(self, msg: StartHost) -> None:
        logs.configure(msg.spec.name, msg.spec.config.get("data_dir"))
        memory_probe.start_if_wanted()  # WARREN_TRACEMALLOC=1 only: the control op `memory` then diffs allocations
        try:
            asyncio.run(self._main(msg))
        except Exception as exc:
            if not self._started.is_set():
                log.exception("host.start_failed", host=msg.spec.name)
                self._error = f"{type(exc).__name__}: {exc}"
                self._started.set()  # the actor reports it; the supervisor kills this process
                return
            log.exception("host.crashed", host=msg.spec.name)
            os._exit(1)  # the supervisor sees the exit and restarts the host

    async def _main(self, msg: StartHost) -> None:
        spec: HostSpec = msg.spec
        config = spec.config
        remote = None
        if config.get("tcp_bind"):  # a host other nodes reach: tcp with CURVE keyed by the cluster's cookie
            remote = (config["tcp_bind"], CurveKeys(read_or_create_cookie(config["cookie_file"])))
        runtime = Runtime(config.get("host", spec.name), msg.directory,
                          credit_initial=config.get("credit_initial", 400),
                          credit_more_after=config.get("credit_more_after", 200), remote=remote)
        self._stop = asyncio.Event()
        await runtime.start()
        result = resolve_entry(spec.entry)(runtime, spec)
        if inspect.isawaitable(result):
            await result
        self._runtime = runtime
        self._loop = asyncio.get_running_loop()
        HeapKeeper(spec.name).start()
        log.info("host.started", host=spec.name, pid=os.getpid())
        self._started.set()
        await self._stop.wait()
        await runtime.close()
        log.info("host.stopped", host=spec.name)
