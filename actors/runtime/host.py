"""HostActor: the Thespian actor that owns one host process and runs its Runtime.

Thespian gives each HostActor its own OS process. On `StartHost` it starts a thread running an
asyncio loop with a `Runtime` and the host's entry function, and answers `HostStarted` once the
entry has returned. Control asks are run on that loop with `run_coroutine_threadsafe`; the
Thespian thread only waits for the answer. The loop also watches the node's main process and
exits the host process if it is gone, so a kill -9 of the node leaves nothing running. Before that
(from its first moment) the process watches its parent, the Supervisor: a host the Supervisor forked
just as the node went down may never get its StartHost, and nothing else would ever stop it.

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
import multiprocessing
import os
import threading
import time
from typing import Any

import psutil
import structlog
from thespian.actors import ActorExitRequest, ActorTypeDispatcher

from actors.runtime import logs
from actors.runtime.control import ControlReply, Forwarded, HostSpec, HostStarted, StartHost
from actors.runtime.cluster_secret import link_key, read_or_create_cookie
from actors.runtime.heap import HeapKeeper
from actors.runtime.mailbox import Runtime

log = structlog.get_logger("warren.host")

node_watch_interval_s = 0.5  # how often a host checks that the node's main process still lives
host_start_timeout_s = 60.0
host_stop_timeout_s = 10.0


def resolve_entry(entry: str) -> Any:
    """"module:function" -> the function."""
    module_name, _, attr = entry.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def process_alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting for its parent counts as dead)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def forked_by() -> int:
    """The pid of the process that forked this one, as multiprocessing recorded it before the fork:
    `os.getppid()` asked later names whoever adopted the process once that parent was gone (a
    host whose Supervisor died before the host's first instruction watched PID 1 for ever)."""
    parent = multiprocessing.parent_process()
    return parent.pid if parent is not None else os.getppid()


def _exit_when_orphaned(parent: int) -> None:
    """A host lives only as long as the Supervisor that forked it: nothing re-adopts it."""
    while os.getppid() == parent:
        time.sleep(node_watch_interval_s)
    os._exit(0)


class HostActor(ActorTypeDispatcher):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        threading.Thread(target=_exit_when_orphaned, args=(forked_by(),), name="parent-watch", daemon=True).start()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runtime: Runtime | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._name = "?"

    def receiveMsg_StartHost(self, msg: StartHost, sender: Any) -> None:
        if self._thread is not None:
            return
        self._name = msg.spec.name
        started = threading.Event()
        outcome: dict[str, str | None] = {"error": None}
        self._thread = threading.Thread(
            target=self._run, args=(msg, started, outcome), name=f"host-{msg.spec.name}", daemon=True)
        self._thread.start()
        if not started.wait(host_start_timeout_s):
            outcome["error"] = "host did not start in time"
        self.send(sender, HostStarted(msg.spec.name, os.getpid(), outcome["error"]))

    def receiveMsg_Forwarded(self, forwarded: Forwarded, sender: Any) -> None:
        msg, sender = forwarded.ask, forwarded.reply_to
        if self._loop is None or self._runtime is None:
            self.send(sender, ControlReply(False, f"host {self._name} is not running"))
            return
        future = asyncio.run_coroutine_threadsafe(self._runtime.ask(msg.op, msg.args), self._loop)
        try:
            reply = ControlReply(True, future.result(msg.timeout))
        except TimeoutError:
            future.cancel()
            reply = ControlReply(False, f"host {self._name} timed out on {msg.op}")
        except Exception as exc:
            log.exception("host.control_failed", host=self._name, op=msg.op)
            reply = ControlReply(False, f"{type(exc).__name__}: {exc}")
        self.send(sender, reply)

    def receiveMsg_ActorExitRequest(self, msg: ActorExitRequest, sender: Any) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(host_stop_timeout_s)

    def _run(self, msg: StartHost, started: threading.Event, outcome: dict) -> None:
        logs.configure(msg.spec.name, msg.spec.config.get("data_dir"))
        try:
            asyncio.run(self._main(msg, started, outcome))
        except Exception:
            log.exception("host.crashed", host=msg.spec.name)
            outcome["error"] = outcome["error"] or "host loop crashed"
            started.set()
            os._exit(1)  # let the supervisor see the exit and restart us

    async def _main(self, msg: StartHost, started: threading.Event, outcome: dict) -> None:
        spec: HostSpec = msg.spec
        config = spec.config
        remote = None
        if config.get("tcp_bind"):  # a host other nodes reach: tcp links opened with the cluster's secret
            remote = (config["tcp_bind"], link_key(read_or_create_cookie(config["cookie_file"])))
        runtime = Runtime(config.get("host", spec.name), msg.directory,
                          credit_initial=config.get("credit_initial", 400),
                          credit_more_after=config.get("credit_more_after", 200), remote=remote)
        self._stop = asyncio.Event()
        await runtime.start()
        try:
            result = resolve_entry(spec.entry)(runtime, spec)
            if inspect.isawaitable(result):
                await result
        except Exception as exc:
            log.exception("host.entry_failed", host=spec.name, entry=spec.entry)
            outcome["error"] = f"{type(exc).__name__}: {exc}"
        self._runtime = runtime
        self._loop = asyncio.get_running_loop()
        HeapKeeper(spec.name).start()
        log.info("host.started", host=spec.name, pid=os.getpid())
        started.set()
        while not self._stop.is_set():
            if not process_alive(msg.node_pid):
                log.warning("host.node_gone", host=spec.name, node_pid=msg.node_pid)
                os._exit(0)
            try:
                await asyncio.wait_for(self._stop.wait(), node_watch_interval_s)
            except TimeoutError:
                pass
        await runtime.close()
        log.info("host.stopped", host=spec.name)
