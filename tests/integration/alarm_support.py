"""Shared by the alarm and overload tests: a node's status and connection states asked in-process,
and a pika connection that records connection.blocked / unblocked as pika reports them."""
from __future__ import annotations

import pika

from actors.runtime.client import control
from tests.waiting import until


def ask(node, host: str, op: str):
    """The node's answer, asked in-process (polling through warrenctl would start a process each time)."""
    return control(int((node.data_dir / "admin_port").read_text()), host, op, {})


def status(node) -> dict:
    return ask(node, "node", "status")


def states(node) -> dict[str, str]:
    return {row["name"]: row["state"] for host in status(node)["connection_hosts"]
            for row in ask(node, host, "list_connections")}


class Watched:
    """A pika connection that records connection.blocked / unblocked as pika reports them."""

    def __init__(self, node) -> None:
        self.conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", node.port))
        self.events: list[tuple] = []
        self.conn.add_on_connection_blocked_callback(lambda _c, f: self.events.append(("blocked", f.method.reason)))
        self.conn.add_on_connection_unblocked_callback(lambda _c, _f: self.events.append(("unblocked",)))
        self.ch = self.conn.channel()

    def wait_for(self, events: list[tuple], what: str) -> None:
        until(lambda: self.conn.process_data_events(0) or self.events == events, what)

    def close(self) -> None:
        if self.conn.is_open:
            self.conn.close()
