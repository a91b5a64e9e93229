"""Ports: pick a free loopback one, ask whether something listens on one, or whether we may."""
from __future__ import annotations

import random
import socket

probe_timeout_s = 0.5


def free_port() -> int:
    """A loopback port nothing listens on now (the OS picks it from its ephemeral range), for a
    port this process binds at once; one handed to another process takes `stable_port`."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Below Linux's ephemeral range (32768-60999): a port picked here and bound later (by a node
# started after others, or bound again when a node restarts) could meanwhile become the local end
# of some outgoing connection if it came from the ephemeral range, which made nodes fail with
# "Address already in use" (CI: the second node of a cluster, its AMQP port taken while the first
# started).
_stable_range = (20000, 32768)
_handed_out: set[int] = set()


def stable_port() -> int:
    """A loopback port nothing listens on, outside the ephemeral range (see above) and never one
    this process handed out before: for ports another process binds, or binds again."""
    while True:
        port = random.randrange(*_stable_range)
        if port not in _handed_out and can_listen(port):
            _handed_out.add(port)
            return port


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
