"""Per-exchange binding indexes: which destinations a routing key (and headers) reach.

Theory of operation: one matcher per source exchange, chosen by exchange type. Destinations are
(kind, name) tuples. Several bindings may share a destination and key (they differ in arguments),
so direct, fanout and topic matchers count them and drop a destination only when its last binding
goes; headers bindings are matched one by one, each by its parsed pattern. `match` returns an
iterable of destinations that callers must not mutate.
"""
from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

from metadata.fieldvalues import table_key
from metadata.headers import HeadersPattern
from metadata.topic import TopicTrie


def _incr(counts: dict[Hashable, int], dest: Hashable) -> None:
    counts[dest] = counts.get(dest, 0) + 1


def _decr(counts: dict[Hashable, int], dest: Hashable) -> None:
    left = counts[dest] - 1
    if left:
        counts[dest] = left
    else:
        del counts[dest]


class DirectMatcher:
    __slots__ = ("_keys",)

    def __init__(self) -> None:
        self._keys: dict[str, dict[Hashable, int]] = {}

    def add(self, routing_key: str, args: dict[str, Any], dest: Hashable) -> None:
        _incr(self._keys.setdefault(routing_key, {}), dest)

    def remove(self, routing_key: str, args: dict[str, Any], dest: Hashable) -> None:
        counts = self._keys[routing_key]
        _decr(counts, dest)
        if not counts:
            del self._keys[routing_key]

    def match(self, routing_key: str, headers: dict[str, Any] | None) -> Iterable[Hashable]:
        return self._keys.get(routing_key, ())


class FanoutMatcher:
    __slots__ = ("_dests",)

    def __init__(self) -> None:
        self._dests: dict[Hashable, int] = {}

    def add(self, routing_key: str, args: dict[str, Any], dest: Hashable) -> None:
        _incr(self._dests, dest)

    def remove(self, routing_key: str, args: dict[str, Any], dest: Hashable) -> None:
        _decr(self._dests, dest)

    def match(self, routing_key: str, headers: dict[str, Any] | None) -> Iterable[Hashable]:
        return self._dests


class TopicMatcher:
    __slots__ = ("_trie",)

    def __init__(self) -> None:
        self._trie = TopicTrie()

    def add(self, routing_key: str, args: dict[str, Any], dest: Hashable) -> None:
        self._trie.add(routing_key, dest)

    def remove(self, routing_key: str, args: dict[str, Any], dest: Hashable) -> None:
        self._trie.remove(routing_key, dest)

    def match(self, routing_key: str, headers: dict[str, Any] | None) -> Iterable[Hashable]:
        return self._trie.match(routing_key)


class HeadersMatcher:
    __slots__ = ("_patterns",)

    def __init__(self) -> None:
        # keyed by (dest, args identity): the registry keeps bindings unique, so no counts
        self._patterns: dict[tuple[Hashable, str, tuple], tuple[HeadersPattern, Hashable]] = {}

    def add(self, routing_key: str, args: dict[str, Any], dest: Hashable) -> None:
        self._patterns[(dest, routing_key, table_key(args))] = (HeadersPattern(args), dest)

    def remove(self, routing_key: str, args: dict[str, Any], dest: Hashable) -> None:
        del self._patterns[(dest, routing_key, table_key(args))]

    def match(self, routing_key: str, headers: dict[str, Any] | None) -> Iterable[Hashable]:
        return dict.fromkeys(dest for pattern, dest in self._patterns.values() if pattern.matches(headers))


MATCHERS = {"direct": DirectMatcher, "fanout": FanoutMatcher, "topic": TopicMatcher, "headers": HeadersMatcher}
Matcher = DirectMatcher | FanoutMatcher | TopicMatcher | HeadersMatcher
