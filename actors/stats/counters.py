"""Message counters: what one channel or one queue has done with messages, as RabbitMQ's
`message_stats` names it.

Theory of operation: a counter is a plain int attribute bumped on the hot path, once per batch
where the path handles a batch (a queue's enqueue, a delivery to one consumer) and once per
message only where the path already touches each message (a channel's publish). Nothing else
happens per message: no timestamps, no samples. The host's reporter reads the counters when the
node samples (every `collect_statistics_interval`, RabbitMQ's 5 s) and the node turns two samples
into rates (rates.py). A counter only grows; when its actor goes away its totals move to the host's
`retired` sums, so node-wide totals (Prometheus' `*_total`) never go back.

Per exchange, a channel counts publish_in (every publish into it) and publish_out (one per queue
the publish was routed to), as RabbitMQ's exchange `message_stats`: one dict lookup and two
additions per publish, in `ExchangeCounts` (exchange name -> [publish_in, publish_out]).

Left out: byte counters.
"""
from __future__ import annotations

FIELDS = ("publish", "confirm", "return_unroutable", "drop_unroutable", "deliver", "deliver_no_ack", "get",
          "get_no_ack", "get_empty", "ack", "redeliver")


class MessageCounters:
    """One actor's counts; `as_dict` gives RabbitMQ's message_stats keys (and deliver_get)."""

    __slots__ = FIELDS

    def __init__(self) -> None:
        for name in FIELDS:
            setattr(self, name, 0)

    def as_dict(self) -> dict[str, int]:
        out = {name: getattr(self, name) for name in FIELDS}
        out["deliver_get"] = out["deliver"] + out["deliver_no_ack"] + out["get"] + out["get_no_ack"]
        return out


ExchangeCounts = dict[str, list[int]]  # one vhost's exchanges: name -> [publish_in, publish_out]


def add_exchange_counts(total: dict[tuple[str, str], list[int]], vhost: str, counts: ExchangeCounts) -> None:
    """Add one channel's exchange counts into `total` ((vhost, name) -> [publish_in, publish_out])."""
    for name, (n_in, n_out) in counts.items():
        pair = total.get((vhost, name))
        if pair is None:
            total[(vhost, name)] = [n_in, n_out]
        else:
            pair[0] += n_in
            pair[1] += n_out


def add_into(total: dict[str, int], counts: dict[str, int]) -> dict[str, int]:
    """Add `counts` into `total` (in place) and return it."""
    for name, n in counts.items():
        total[name] = total.get(name, 0) + n
    return total
