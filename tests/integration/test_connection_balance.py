"""A node's connection hosts share its connections evenly, whichever host the kernel's SO_REUSEPORT
hash gives each one to (actors/reader/acceptor.py): real node, real clients, the hosts named by
`warrenctl list_connections`."""
from __future__ import annotations

import json
from collections import Counter

import pytest

from tests.integration.admin_support import connect, ok
from tests.integration.nodes import module_node
from tests.waiting import until

pytestmark = pytest.mark.integration  # starts real node processes


node = module_node("balance")


def names(node) -> set[str]:
    """The node's connections, named "n1@vm:conn0:<incarnation>.<n>" by the host serving them."""
    return {row["name"] for row in json.loads(ok(node, "list_connections", "name", "--formatter", "json"))}


def host(name: str) -> str:
    return name.rsplit(":", 2)[1]


def open_one(node, served: dict) -> None:
    """A connection, and the name its host gave it (the one that was not listed before)."""
    before = names(node)
    conn = connect(node)
    (name,) = names(node) - before
    served[name] = conn


def test_connections_opened_one_after_another_alternate_between_the_hosts(node):
    until(lambda: not names(node), "the node's readiness probe to be gone")
    served: dict = {}
    try:
        for _ in range(6):
            open_one(node, served)
        assert Counter(map(host, served)) == {"conn0": 3, "conn1": 3}
        # the hosts count what they serve: close two on one host, and the next two go there
        for name in [n for n in served if host(n) == "conn0"][:2]:
            served.pop(name).close()
        until(lambda: Counter(map(host, names(node))) == {"conn0": 1, "conn1": 3},
              "the closed connections to be gone")
        for _ in range(2):
            open_one(node, served)
        assert Counter(map(host, served)) == {"conn0": 3, "conn1": 3}
        for conn in served.values():  # every connection works, handed over or not
            conn.channel().queue_declare("", exclusive=True)
    finally:
        for conn in served.values():
            conn.close()
