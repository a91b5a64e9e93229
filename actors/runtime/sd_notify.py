"""systemd's readiness protocol (sd_notify(3)): with `Type=notify` a service tells the manager
READY=1 once it serves and STOPPING=1 when it begins to stop, as datagrams on the Unix socket
named by $NOTIFY_SOCKET (a path, or an abstract name written with a leading "@"). Without the
variable, nothing is sent: the node runs the same outside systemd.
"""
from __future__ import annotations

import os
import socket


def notify(*assignments: str) -> bool:
    """Send "KEY=VALUE" lines to the service manager; False when there is none (or it is gone)."""
    where = os.environ.get("NOTIFY_SOCKET")
    if not where:
        return False
    address = "\0" + where[1:] if where.startswith("@") else where
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.connect(address)
            s.sendall("\n".join(assignments).encode())
        return True
    except OSError:
        return False
