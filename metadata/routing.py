"""Routing a publish through a registry's topology: which queues a message reaches.

Theory of operation: routing walks exchange-to-exchange bindings and alternate exchanges
breadth-first with a seen set (RabbitMQ's route1/3): an exchange whose own bindings match nothing
hands the message to its alternate exchange, which is its `alternate-exchange` argument or, without
one, the one its policy names. Each exchange's matcher (matchers.py) answers which bindings match a
routing key (and headers). The default exchange routes to the queue named by the routing key.

Results of walks that touch no headers exchange are cached per (vhost, exchange, routing key), at
most `route_cache_entries_max` of them; the registry clears the cache on every applied change
record (metadata changes are rare, routes are not). This module reads the topology and policies
and never changes them.
"""
from __future__ import annotations

from metadata import texts
from metadata.policies import PolicyTable
from metadata.records import QUEUE, ExchangeRecord
from metadata.topology import DEFAULT_EXCHANGE, Topology
from wire.errors import AmqpError

route_cache_entries_max = 16384


class Router:
    __slots__ = ("_topology", "_policies", "_cache")

    def __init__(self, topology: Topology, policies: PolicyTable) -> None:
        self._topology = topology
        self._policies = policies
        self._cache: dict[tuple[str, str, str], tuple[str, ...]] = {}

    def clear(self) -> None:
        self._cache.clear()

    def exchange_for_publish(self, vhost: str, name: str) -> ExchangeRecord | AmqpError:
        vh = self._topology.vhosts.get(vhost)
        x = vh.exchanges.get(name) if vh is not None else None
        if x is None:
            return texts.not_found("exchange", name, vhost)
        if x.internal:
            return texts.publish_to_internal(name, vhost)
        return x

    def route(self, vhost: str, exchange: str, routing_key: str, headers: dict | None = None) -> list[str]:
        """Names of the queues a message reaches, deduplicated; [] when none (or no such exchange)."""
        vh = self._topology.vhosts.get(vhost)
        if vh is None:
            return []
        if exchange == DEFAULT_EXCHANGE:
            return [routing_key] if routing_key in vh.queues else []
        cache_key = (vhost, exchange, routing_key)
        hit = self._cache.get(cache_key)
        if hit is not None:
            return list(hit)
        x = vh.exchanges.get(exchange)
        if x is None:
            return []
        queues: dict[str, None] = {}
        seen = {exchange}
        work = [x]
        cacheable = True
        while work:
            x = work.pop(0)
            if x.type == "headers":
                cacheable = False
            matcher = vh.matchers.get(x.name)
            next_exchanges: list[str] = []
            matched = False
            for kind, name in (matcher.match(routing_key, headers) if matcher is not None else ()):
                matched = True
                if kind == QUEUE:
                    queues[name] = None
                else:
                    next_exchanges.append(name)
            alternate = x.alternate if x.alternate is not None else self._policies.alternate(vhost, x.name)
            if not matched and alternate is not None:
                next_exchanges.append(alternate)
            for name in next_exchanges:
                if name not in seen:
                    seen.add(name)
                    nx = vh.exchanges.get(name)
                    if nx is not None:
                        work.append(nx)
        result = tuple(queues)
        if cacheable:
            if len(self._cache) >= route_cache_entries_max:
                self._cache.clear()
            self._cache[cache_key] = result
        return list(result)
