"""Routing cost on the registry's hot path: prints microseconds per route (not a test).

Run: .venv/bin/python -m bench.routing_bench
Topic is measured cold (the route cache cleared before each route, so the trie walk is timed)
and warm (repeated keys served from the cache).
"""
from __future__ import annotations

import random
import timeit

from metadata import Registry

BINDINGS = 10_000
VH = "/"


def _per_route_us(fn, number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def main() -> None:
    rng = random.Random(42)
    words = [f"w{i}" for i in range(40)]
    reg = Registry(rng)
    for i in range(BINDINGS):
        reg.declare_queue(VH, f"q{i}")
    for i in range(BINDINGS):
        pattern = [rng.choice(words) for _ in range(4)]
        roll = rng.random()
        if roll < 0.1:
            pattern[rng.randrange(4)] = "*"
        elif roll < 0.15:
            pattern[rng.randrange(1, 4)] = "#"
        reg.bind_queue(VH, f"q{i}", "amq.topic", ".".join(pattern), None, None)
        reg.bind_queue(VH, f"q{i}", "amq.direct", f"key{i}", None, None)
    reg.declare_exchange(VH, "fan", "fanout")
    for i in range(10):
        reg.bind_queue(VH, f"q{i}", "fan", "", None, None)
    for i in range(100):
        reg.bind_queue(VH, f"q{i}", "amq.headers", "", {"x-match": "any", "h": i, "g": str(i)}, None)

    topic_keys = [".".join(rng.choice(words) for _ in range(4)) for _ in range(1000)]
    state = {"i": 0}

    def topic_cold() -> None:
        reg._router.clear()
        state["i"] = (state["i"] + 1) % 1000
        reg.route(VH, "amq.topic", topic_keys[state["i"]], None)

    def topic_warm() -> None:
        state["i"] = (state["i"] + 1) % 1000
        reg.route(VH, "amq.topic", topic_keys[state["i"]], None)

    hits = sum(bool(reg.route(VH, "amq.topic", k, None)) for k in topic_keys)
    print(f"topic, {BINDINGS} bindings, cold (trie walk): {_per_route_us(topic_cold, 2000):7.2f} us/route "
          f"({hits}/1000 keys match something)")
    print(f"topic, {BINDINGS} bindings, warm (cached):    {_per_route_us(topic_warm, 20000):7.2f} us/route")
    print(f"direct, {BINDINGS} bindings:                  "
          f"{_per_route_us(lambda: reg.route(VH, 'amq.direct', 'key4242', None), 50000):7.2f} us/route")
    reg._router.clear()
    print(f"direct, cold:                              "
          f"{_per_route_us(lambda: (reg._router.clear(), reg.route(VH, 'amq.direct', 'key4242', None)), 50000):7.2f} us/route")
    print(f"default exchange:                          "
          f"{_per_route_us(lambda: reg.route(VH, '', 'q77', None), 50000):7.2f} us/route")
    print(f"fanout to 10 queues:                       "
          f"{_per_route_us(lambda: reg.route(VH, 'fan', '', None), 50000):7.2f} us/route")
    print(f"headers, 100 bindings (never cached):      "
          f"{_per_route_us(lambda: reg.route(VH, 'amq.headers', '', {'h': 42}), 2000):7.2f} us/route")


if __name__ == "__main__":
    main()
