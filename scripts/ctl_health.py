"""warrenctl's health checks, as RabbitMQ operators use rabbitmq-diagnostics' (and rabbitmqctl's
await_startup): the same names, texts in their shape, the same exit codes. Checked against
RabbitMQ 3.10's: every failure exits 69 (EX_UNAVAILABLE), the node unreachable included; a check
that needs a booted node, asked of one still booting, exits 64 as RabbitMQ's does when its app
is not running.

- `ping`: the node's control plane answers (its main process, Thespian's admin, the supervisor).
- `check_running`: the node has fully booted (every host serves, the AMQP port is open) and is
  not stopping.
- `check_local_alarms`: no memory or disk alarm of this node is in force.
- `check_port_connectivity`: a TCP connection to each of the node's listeners (AMQP, AMQPS, the
  cluster port, the management and Prometheus ports) opens.
- `await_startup [--timeout S]`: waits until the node has fully booted (default 300 s); fails
  when no process of a node holds the data dir (data_dir_lock.py) after `appear_s`, the time a
  node started just before needs to take it, as RabbitMQ's fails on a node that is not running.
The output is the result line that rabbitmq-diagnostics prints under its banner (as with its
`-q`); with `--formatter json`, its JSON. A failed check prints "Error:" and its lines on stderr
(its JSON on stdout).
"""
from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

from actors.runtime import data_dir_lock

EX_OK, EX_USAGE, EX_UNAVAILABLE = 0, 64, 69
COMMANDS = ("ping", "check_running", "check_local_alarms", "check_port_connectivity", "await_startup")
await_startup_timeout_s = 300.0
appear_s = 10.0  # a node started just before await_startup takes its data dir's lock within this
connect_timeout_s = 5.0
poll_s = 0.2
ALARM_TEXTS = {"memory": "Memory alarm on node {node}", "disk": "Free disk space alarm on node {node}"}


class Outcome:
    """A check's result: what to print and the exit code."""

    def __init__(self, code: int, text: str = "", doc: Any = None) -> None:
        self.code, self.text, self.doc = code, text, doc

    def render(self, formatter: str) -> tuple[str, str]:
        """(stdout, stderr)."""
        if formatter == "json" and self.doc is not None:
            return json.dumps(self.doc), ""
        if self.code == EX_OK:
            return self.text, ""
        return "", f"Error:\n{self.text}"


def add_parsers(cmd: Any) -> None:
    cmd("ping", help="health check: the node's control plane answers")
    cmd("check_running", help="health check: the node has fully booted and runs")
    cmd("check_local_alarms", help="health check: no memory or disk alarm of this node is in force")
    cmd("check_port_connectivity", help="health check: a TCP connection to each listener of the node opens")
    cmd("await_startup", help="wait until the node has fully booted").add_argument(
        "--timeout", "-t", type=float, default=await_startup_timeout_s, help="seconds (default 300)")


def run(node: Any, command: str, args: Any, unavailable: type[Exception]) -> Outcome:
    """`unavailable`: the exception `node.ask` raises when the node cannot be reached."""
    if command == "await_startup":
        return await_startup(node, args.timeout, unavailable)
    if command == "ping":
        node.ask("$supervisor", "status")
        return Outcome(EX_OK, "Ping succeeded", {"message": "Ping succeeded"})
    try:
        state = node.ask("$supervisor", "state")
    except unavailable as e:
        if getattr(e, "code", None) == EX_UNAVAILABLE:
            raise
        state = {"node": "(booting)", "serving": False}  # its supervisor has not taken the node yet
    name = state["node"]
    if command == "check_running":
        if state["serving"]:
            text = f"warren on node {name} is fully booted and running"
            return Outcome(EX_OK, text, {"message": text})
        text = f"warren on node {name} is not running or has not fully booted yet"
        return Outcome(EX_UNAVAILABLE, text, {"message": text, "result": "error"})
    if not state["serving"]:
        text = "this command requires the node to be fully booted and running (see warrenctl await_startup)"
        return Outcome(EX_USAGE, text, {"message": text, "result": "error"})
    if command == "check_local_alarms":
        return local_alarms(name, node.ask("node", "status")["alarms"])
    return port_connectivity(name, state["listeners"])


def local_alarms(name: str, alarms: list) -> Outcome:
    lines = [ALARM_TEXTS[resource].format(node=node) for node, resource in alarms if node == name]
    if not lines:
        return Outcome(EX_OK, f"Node {name} reported no local alarms", {"result": "ok"})
    return Outcome(EX_UNAVAILABLE, "\n".join(lines),
                   {"result": "error", "local": lines, "message": f"Node {name} reported local alarms"})


def port_connectivity(name: str, listeners: list[dict]) -> Outcome:
    failed = [listener for listener in listeners if not _connects(listener["interface"], listener["port"])]
    if not failed:
        ports = ", ".join(str(p) for p in sorted(listener["port"] for listener in listeners))
        return Outcome(EX_OK, f"Successfully connected to ports {ports} on node {name}.",
                       {"result": "ok", "node": name, "listeners": listeners})
    lines = [f"Connection to ports of the following listeners on node {name} failed: "]
    lines += [f"Interface: {x['interface']}, port: {x['port']}, protocol: {x['protocol']}, purpose: {x['purpose']}"
              for x in failed]
    return Outcome(EX_UNAVAILABLE, "\n".join(lines), {"result": "error", "node": name, "failures": failed})


def await_startup(node: Any, timeout_s: float, unavailable: type[Exception]) -> Outcome:
    """Until the node has fully booted, or `timeout_s`; at once when no node runs in its data dir."""
    began = time.monotonic()
    deadline = began + timeout_s
    while True:
        if node.data_dir is not None:
            if data_dir_lock.held(Path(node.data_dir)) is None and time.monotonic() - began > appear_s:
                return Outcome(EX_UNAVAILABLE, f"no warren node is running in {node.data_dir}")
            try:  # each start may pick another admin port
                node.admin_port = int((Path(node.data_dir) / "admin_port").read_text())
            except (OSError, ValueError):
                pass  # not written yet
        try:
            if node.admin_port and node.ask("$supervisor", "state")["serving"]:
                return Outcome(EX_OK)
        except unavailable:  # not up to answering yet
            pass
        if time.monotonic() > deadline:
            return Outcome(EX_UNAVAILABLE, f"the node has not fully booted within {timeout_s:g} s")
        time.sleep(poll_s)  # the node is booting: ask again shortly


def _connects(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=connect_timeout_s):
            return True
    except OSError:
        return False
