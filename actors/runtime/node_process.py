"""run_node: one node's main process, the top of the node's supervision tree.

Startup: pick Unix socket endpoints for the hosts that the directory does not name, make the pipe
every process of the node watches (lifeline.py: they all end within moments of this process,
however it ends), become the child subreaper of what Thespian forks (process_tree.py), start the
control plane (control_plane.py: a multiprocTCPBase actor system on the admin port and the
Supervisor, which starts the hosts), and wait until the Supervisor says every host serves: then
write `<data_dir>/ready`, log `node.ready` and tell systemd READY=1 (sd_notify.py).

Above the Supervisor this process is a one_for_all supervisor of the control plane: when the
admin, its logger or the Supervisor exits (the others cannot go on without it: a dead admin takes
the Supervisor out of reach, a dead Supervisor its hosts with it), it kills every process below it
and starts a new control plane, which starts every host again, with a backoff and a restart
intensity of its own (`plane_policy`); past it, the node stops with an error. A node whose
Supervisor gives up on a host (restarts.py) stops the same way, naming the host and its cause;
`run_node` returns the exit status: 0 after SIGTERM or SIGINT, 1 after a failure.

Shutdown: remove `ready`, tell systemd STOPPING=1, ask the Supervisor to stop the hosts (it kills
the ones still running after `stop_timeout_s`, logged), shut the actor system down, wait until
every process of the node has exited (killing what is left, logged), remove the socket directory.

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
from dataclasses import dataclass
from pathlib import Path

import structlog

from actors.placement import NODE_KIND
from actors.runtime import lifeline, process_tree, sd_notify
from actors.runtime.control import ControlAsk, ControlReply, HostSpec, NodeFailed, NodeServing, StartNode
from actors.runtime.control_plane import ControlPlane
from actors.runtime.host import resolve_entry
from actors.runtime.restarts import Intensity

log = structlog.get_logger("warren.node")

unix_path_max = 100  # sockaddr_un.sun_path is 108 bytes; keep a margin for the NUL and the OS
ready_timeout_s = 60.0
cluster_status_timeout_s = 5.0  # the node host's cluster view, asked for a start that timed out
stop_timeout_s = 30.0  # the hosts' stop deadline; then they are killed
stop_margin_s = 5.0    # for the rest of a stop: the actor system's shutdown, the last exits
poll_s = 0.2
plane_policy = (10, 60_000, (0, 0, 500, 1000, 2000))  # control-plane restarts: intensity, period (ms), backoff (ms)
host_name_max = 32  # for the socket-path budget


def socket_dir(data_dir: Path) -> Path:
    """Where this node's Unix sockets live: under data_dir if the paths fit, else under /tmp."""
    preferred = Path(data_dir).resolve() / "sock"
    if len(str(preferred)) + 1 + host_name_max <= unix_path_max:
        return preferred
    digest = hashlib.sha1(str(Path(data_dir).resolve()).encode()).hexdigest()[:12]
    return Path("/tmp") / f"warren-{digest}"


def local_directory(data_dir: Path, specs: list[HostSpec]) -> dict[str, str]:
    """ipc:// endpoints for the hosts of `specs` on this node, by their runtime names (a spec's
    `host`, else its name); the socket file is named by the spec's short name."""
    sock = socket_dir(data_dir)
    for spec in specs:
        assert 0 < len(spec.name) <= host_name_max and "/" not in spec.name, spec.name
    return {spec.config.get("host", spec.name): f"ipc://{sock}/{spec.name}" for spec in specs}


def run_node(node_name: str, specs: list[HostSpec], directory: dict[str, str], admin_port: int,
             data_dir: Path, *, ready_timeout_s: float = ready_timeout_s,
             stop_timeout_s: float = stop_timeout_s) -> int:
    """Run the node until SIGTERM/SIGINT (0) or until it fails (1). Blocks."""
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    sock = socket_dir(data_dir)
    sock.mkdir(parents=True, exist_ok=True)
    ready = data_dir / "ready"
    ready.unlink(missing_ok=True)
    start = StartNode(tuple(specs), {**local_directory(data_dir, specs), **directory}, os.getpid(), node_name,
                      str(data_dir), int(stop_timeout_s * 1000))

    lifeline.anchor()
    process_tree.adopt_orphans()
    _share_with_hosts(specs)
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)}
    plane_restarts = Intensity(*plane_policy)
    failure: str | None = None
    plane: ControlPlane | None = None
    try:
        while not stop.is_set():
            plane = ControlPlane(admin_port)
            outcome = _supervise(plane, start, stop, ready, ready_timeout_s)
            if not isinstance(outcome, Lost):
                failure = outcome
                break
            ready.unlink(missing_ok=True)
            log.error("node.control_plane_lost", node=node_name, process=outcome.what)
            plane.abandon()
            process_tree.kill_descendants()
            delay_ms = plane_restarts.restart(int(time.monotonic() * 1000))
            if delay_ms is None:
                failure = (f"its control plane failed {plane_restarts.recent()} times within "
                           f"{plane_policy[1] / 1000:g} s; the last time: {outcome.what} exited")
                break
            if stop.wait(delay_ms / 1000):
                break
            log.warning("node.control_plane_restarting", node=node_name)
        if failure:
            log.error("node.failed", node=node_name, reason=failure)
        log.info("node.stopping", node=node_name)
        ready.unlink(missing_ok=True)
        sd_notify.notify("STOPPING=1")
        if plane is not None and plane.asys is not None and not plane.lost():
            if not plane.stop(time.monotonic() + stop_timeout_s + stop_margin_s):
                log.warning("node.stop_incomplete", node=node_name)
    finally:
        if plane is not None:
            plane.abandon()
        process_tree.end_descendants(stop_margin_s)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if sock.parent != data_dir.resolve():
            shutil.rmtree(sock, ignore_errors=True)
        log.info("node.stopped", node=node_name)
    return 1 if failure else 0


@dataclass(frozen=True)
class Lost:
    what: str  # the control-plane process that exited, or why the control plane could not start


def _supervise(plane: ControlPlane, start: StartNode, stop: threading.Event, ready: Path,
               ready_timeout_s: float) -> Lost | str | None:
    """Start the control plane and watch it until a stop (None), a failure (its text) or the loss
    of one of its processes (Lost)."""
    try:
        plane.start(start)
    except Exception as exc:  # a broken start is a lost control plane: it is restarted
        return Lost(f"the control plane's start ({type(exc).__name__}: {exc})")
    deadline = time.monotonic() + ready_timeout_s
    serving = False
    while not stop.is_set():
        lost = plane.lost()
        if lost:
            return Lost(lost)
        event = plane.event(poll_s)
        if isinstance(event, NodeServing):
            serving = True
            ready.write_text(json.dumps({"node": start.node_name, "pid": os.getpid(),
                                         "hosts": [s.name for s in start.specs]}))
            log.info("node.ready", node=start.node_name, hosts=[s.name for s in start.specs],
                     admin_port=plane.admin_port)
            sd_notify.notify("READY=1", f"STATUS=serving: {', '.join(s.name for s in start.specs)}",
                             f"MAINPID={os.getpid()}")
        elif isinstance(event, NodeFailed):
            return event.reason
        elif not serving and time.monotonic() > deadline:
            return _not_serving(plane, start, ready_timeout_s)
        process_tree.reap()  # an orphan below us that exited
    return None


def _not_serving(plane: ControlPlane, start: StartNode, ready_timeout_s: float) -> str:
    """Why a start failed: the hosts still waiting and, from the node host's cluster view, what they
    wait for (a restarted node that hears from none of its peers cannot serve)."""
    state = plane.ask(ControlAsk("$supervisor", "state", {}))
    waiting = state.value.get("not_serving") if isinstance(state, ControlReply) else "?"
    reason = f"hosts {waiting} did not serve within {ready_timeout_s:g} s"
    if any(spec.name == NODE_KIND for spec in start.specs):
        view = plane.ask(ControlAsk(NODE_KIND, "cluster_status", {}, cluster_status_timeout_s))
        if isinstance(view, ControlReply) and view.ok and isinstance(view.value, dict):
            reason += cluster_cause(view.value)
    return reason


def cluster_cause(view: dict) -> str:
    """What a node's cluster view (ClusterActor.status) says about a start that cannot finish."""
    peers = sorted(set(view.get("members", ())) - {view.get("node")})
    unheard = [p for p in peers if p in view.get("down", ())]
    if peers and unheard == peers:
        return (f": it has heard from none of its peers ({', '.join(peers)}); are they running, and is "
                "their cluster port reachable from here with the same cookie?")
    if view.get("metadata_leader") is None:
        return f": the metadata group has no leader (voters {view.get('metadata_voters')}, down {unheard})"
    return ""


def _share_with_hosts(specs: list[HostSpec]) -> None:
    """Import the hosts' entries here, before anything forks, and keep the collector off them."""
    for spec in specs:
        resolve_entry(spec.entry)
    gc.freeze()
