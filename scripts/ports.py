"""Loopback ports: pick a free one, and ask whether something listens on one."""
from __future__ import annotations

import socket

probe_timeout_s = 0.5


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=probe_timeout_s):
            return True
    except OSError:
        return False
