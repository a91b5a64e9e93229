"""warrenctl's node commands: `status` (the node's name, ports, uptime, memory and processes) and
`stop` (rabbitmqctl stop: ask the node's main process to stop and wait until it has).

The supervisor answers the node's facts (actors/runtime/node_status.py), the node host its
counts (vhosts, users, queues ...). The table output is "key<TAB>value" lines, then a blank line
and the processes as a table; `--formatter json` gives one object with a "processes" list.
"""
from __future__ import annotations

import json
import os
import signal
import time
from typing import Any, Protocol

import psutil

stop_timeout_s = 60.0
poll_s = 0.05
PROCESS_COLUMNS = ("name", "pid", "restarts", "rss", "pss")


class Node(Protocol):
    def ask(self, host: str, op: str, args: dict | None = None) -> Any: ...

    def status(self) -> dict: ...


def status(node: Node) -> dict:
    facts = node.ask("$supervisor", "node_status")
    counts = {k: v for k, v in node.status().items() if k != "pid"}
    return {**{k: v for k, v in facts.items() if k != "processes"}, **counts, "processes": facts["processes"]}


def render_status(st: dict, formatter: str, cell: Any) -> str:
    if formatter == "json":
        return json.dumps(st)
    lines = [f"{k}\t{cell(v)}" for k, v in st.items() if k != "processes"]
    lines += ["", "\t".join(PROCESS_COLUMNS)]
    lines += ["\t".join(cell(p.get(c)) for c in PROCESS_COLUMNS) for p in st["processes"]]
    return "\n".join(lines)


def stop(node: Node, out: Any) -> None:
    """Stop the node as SIGTERM does and return once its main process has exited."""
    facts = node.ask("$supervisor", "node_status")
    out(f"Stopping and halting node {facts['node']} ...")
    try:
        main = psutil.Process(facts["pid"])
        os.kill(main.pid, signal.SIGTERM)
    except (psutil.NoSuchProcess, ProcessLookupError):
        return  # it had stopped already
    deadline = time.monotonic() + stop_timeout_s
    while _running(main):  # it exits after every other process of the node
        if time.monotonic() > deadline:
            raise TimeoutError(f"node {facts['node']} did not stop within {stop_timeout_s:.0f} s")
        time.sleep(poll_s)


def _running(process: psutil.Process) -> bool:
    """Not exited; an exited process its parent has not waited for yet (a zombie) has stopped."""
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
