"""Ports: pick a free loopback one, ask whether something listens on one, or whether we may."""
from __future__ import annotations

import socket

probe_timeout_s = 0.5


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=probe_timeout_s):
            return True
    except OSError:
        return False


def can_listen(port: int, host: str = "127.0.0.1") -> bool:
    """Whether nothing listens on `host`:`port`. The connection hosts listen with SO_REUSEPORT,
    which would let a second node share a port another node (of the same user) already serves;
    a plain bind (SO_REUSEADDR only, so sockets in TIME_WAIT do not count) refuses that."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True
