"""Which connection host a running connection should move to, if any.

Theory of operation: a message that crosses from one connection host to another wakes a second
process, and that wake-up is most of what warren's idle path costs beyond RabbitMQ's (docs/DESIGN.md
§4). A classic queue lives on one connection host (a hash of its name); the acceptor spreads
connections over the hosts by count. So a steady publisher, its queue and its consumer usually
sit on two hosts. Moving a connection where its queue is takes the crossing away; doing it for a
connection that keeps a host busy would put a flat-out publisher and its consumer on one core.
The rules, from what each host's slot on the load board says (its connection count and the share
of a core its process used over the last second):

- a connection about to start consuming (its first consumer) moves to the queue's host when that
  host is not busy and serves no more connections than its own host: a consumer and its queue
  belong together (deliveries and acks then cross nothing), and the count rule keeps a crowd of
  consumers of one queue spread over the hosts;
- a publisher that is slow (fewer than `slow_msgs` a second and `slow_bytes`) and whose publishes
  all went to queues on one other host moves there when that host is not busy;
- a fast publisher on a busy host moves to the least busy other host, if that one is not busy:
  this undoes a move-in when a slow publisher turns into a flat-out one.

The numbers are conservative on purpose: a move costs a pause of the connection's reading and two
datagrams, and a wrong one is undone only by the shedding rule. Pure: the reader's mover
(actors/reader/mover.py) measures, asks and moves.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

slow_msgs = 2_000      # publishes a second below which a publisher is slow
slow_bytes = 8 << 20   # and bytes a second
busy_in = 0.6          # a host busier than this (share of one core) takes no connection
busy_out = 0.85        # a host busier than this sheds its fast publishers


@dataclass(frozen=True, slots=True)
class HostLoad:
    connections: int
    busy: float  # share of one core its process used over the last second


def for_consumer(me: int, queue_host: int, loads: Sequence[HostLoad]) -> int | None:
    """Where a connection on host `me` that starts consuming from a queue on `queue_host` goes."""
    if queue_host == me or not 0 <= queue_host < len(loads):
        return None
    there, here = loads[queue_host], loads[me]
    if there.busy >= busy_in or there.connections > here.connections:
        return None
    return queue_host


def is_slow(msgs_per_s: float, bytes_per_s: float) -> bool:
    return msgs_per_s < slow_msgs and bytes_per_s < slow_bytes


def for_publisher(me: int, destinations: set[int], msgs_per_s: float, bytes_per_s: float,
                  loads: Sequence[HostLoad]) -> int | None:
    """Where a publisher on host `me` goes, given the hosts of the queues it published to (all of
    them local connection hosts) and its rate over the last second."""
    if is_slow(msgs_per_s, bytes_per_s):
        if msgs_per_s <= 0 or len(destinations) != 1:
            return None
        (there,) = destinations
        if there == me or loads[there].busy >= busy_in:
            return None
        return there
    if loads[me].busy <= busy_out:
        return None
    others = [i for i in range(len(loads)) if i != me]
    if not others:
        return None
    calmest = min(others, key=lambda i: loads[i].busy)
    return calmest if loads[calmest].busy < busy_in else None
