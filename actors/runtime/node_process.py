"""run_node: one node's main process - the Thespian actor system, the Supervisor, the hosts.

Startup: pick Unix socket endpoints for the hosts that the directory does not name, start a
multiprocTCPBase ActorSystem on the admin port, create the Supervisor (globalName
"warren-supervisor") and hand it the specs, wait until every host answers "ping", then write
`<data_dir>/ready`. Shutdown on SIGTERM/SIGINT: remove `ready`, stop the hosts, shut the actor
system down, wait until every process of the node has exited (process_tree.py keeps them under
this one), remove the socket directory.

Before the actor system starts, this process imports what the hosts run and freezes the garbage
collector's view of it: every process of the node is forked from this one (admin, supervisor,
hosts), so they share those pages instead of importing a copy each: an idle node's PSS summed over
its processes fell from 108 to 79 MiB (each host's USS from 18 to 9 MiB; bench/idle_memory.py;
the management listener, imported by the node host alone when its port is set, adds ~20 MiB).

Unix socket paths must fit sockaddr_un (~107 bytes): when `<data_dir>/sock/<host>` would not,
the sockets live in a short directory under /tmp named by a hash of data_dir.
"""
from __future__ import annotations

import gc
import hashlib
import json
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import structlog
from thespian.actors import ActorSystem

from actors.runtime import process_tree
from actors.runtime.control import ControlAsk, HostSpec, StartNode, StopNode, supervisor_name
from actors.runtime.host import resolve_entry
from actors.runtime.supervisor import Supervisor

log = structlog.get_logger("warren.node")

unix_path_max = 100  # sockaddr_un.sun_path is 108 bytes; keep a margin for the NUL and the OS
ready_timeout_s = 60.0
ask_timeout_s = 10.0
stop_poll_s = 0.2
host_name_max = 32  # for the socket-path budget


def socket_dir(data_dir: Path) -> Path:
    """Where this node's Unix sockets live: under data_dir if the paths fit, else under /tmp."""
    preferred = Path(data_dir).resolve() / "sock"
    if len(str(preferred)) + 1 + host_name_max <= unix_path_max:
        return preferred
    digest = hashlib.sha1(str(Path(data_dir).resolve()).encode()).hexdigest()[:12]
    return Path("/tmp") / f"warren-{digest}"


def local_directory(data_dir: Path, specs: list[HostSpec]) -> dict[str, str]:
    """unix:// endpoints for the hosts of `specs` on this node, by their runtime names (a spec's
    `host`, else its name); the socket file is named by the spec's short name."""
    sock = socket_dir(data_dir)
    for spec in specs:
        assert 0 < len(spec.name) <= host_name_max and "/" not in spec.name, spec.name
    return {spec.config.get("host", spec.name): f"unix://{sock}/{spec.name}" for spec in specs}


def run_node(node_name: str, specs: list[HostSpec], directory: dict[str, str], admin_port: int,
             data_dir: Path, *, ready_timeout_s: float = ready_timeout_s) -> None:
    """Run the node until SIGTERM/SIGINT. Blocks."""
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    sock = socket_dir(data_dir)
    sock.mkdir(parents=True, exist_ok=True)
    full_directory = {**local_directory(data_dir, specs), **directory}
    ready = data_dir / "ready"
    ready.unlink(missing_ok=True)

    process_tree.adopt_orphans()
    _share_with_hosts(specs)
    asys = ActorSystem("multiprocTCPBase", {"Admin Port": admin_port})
    process_tree.reap()  # the admin's daemonising parent, which has exited
    # installed after the admin process was forked, so it keeps Thespian's own handlers
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        supervisor = asys.createActor(Supervisor, globalName=supervisor_name)
        asys.ask(supervisor, StartNode(tuple(specs), full_directory, os.getpid(), node_name, str(data_dir)), ask_timeout_s)
        _wait_ready(asys, supervisor, specs, stop, ready_timeout_s)
        if not stop.is_set():
            ready.write_text(json.dumps({"node": node_name, "pid": os.getpid(),
                                         "hosts": [s.name for s in specs]}))
            log.info("node.ready", node=node_name, hosts=[s.name for s in specs], admin_port=admin_port)
        while not stop.wait(stop_poll_s):
            process_tree.reap()  # an orphan below us that exited (a host whose supervisor died)
        log.info("node.stopping", node=node_name)
        ready.unlink(missing_ok=True)
        asys.ask(supervisor, StopNode(), ask_timeout_s)
    finally:
        asys.shutdown()
        process_tree.end_descendants()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if sock.parent != data_dir.resolve():
            shutil.rmtree(sock, ignore_errors=True)
        log.info("node.stopped", node=node_name)


def _share_with_hosts(specs: list[HostSpec]) -> None:
    """Import the hosts' entries here, before anything forks, and keep the collector off them."""
    for spec in specs:
        resolve_entry(spec.entry)
    gc.freeze()


def _wait_ready(asys: ActorSystem, supervisor: object, specs: list[HostSpec], stop: threading.Event,
                timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    waiting = [s.name for s in specs]
    while waiting and not stop.is_set():
        if time.monotonic() > deadline:
            raise TimeoutError(f"hosts did not become ready: {waiting}")
        reply = asys.ask(supervisor, ControlAsk(waiting[0], "ping", {}, ask_timeout_s), ask_timeout_s + 1)
        if reply is not None and reply.ok:
            waiting.pop(0)
        else:
            stop.wait(stop_poll_s)  # the host is still starting; ask again shortly
