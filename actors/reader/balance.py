"""Which connection host of a node serves a connection one of them just accepted.

Theory of operation: every connection host listens on the AMQP port with SO_REUSEPORT, and the
kernel places each new connection by a hash of its addresses, so two connections land on the same
host half of the time on a two-host node. A publisher and its consumer then share one host's
event loop while the other idles: measured at 16 KiB (confirms 1000, prefetch 300) 4,600 msg/s
and p50 130 ms against 6,500-7,200 msg/s and 94-118 ms when they are apart. So the host that
accepts a connection asks `destination`: it keeps the connection unless another host serves
fewer connections than it does now, and then hands it to the one serving fewest (the lowest
index among equals). The count is open connections, not their traffic: a connection's load is
unknown when it arrives, and a fair share of hosts between connections is what the rule gives.
A handed connection is never handed again, so it moves at most once, before its first byte is
read. Pure: the shell (actors/reader/acceptor.py) reads the hosts' counts and moves the socket.
"""
from __future__ import annotations

from typing import Sequence


def destination(me: int, loads: Sequence[int]) -> int:
    """The index of the host that should serve a connection host `me` accepted, given how many
    connections each host serves now (`me`'s count not including the new one)."""
    least = min(range(len(loads)), key=loads.__getitem__)
    return me if loads[me] <= loads[least] else least
