"""Topic matching: a trie over binding-key words with `*` and `#` branches.

Theory of operation: keys split on "." into words exactly as rabbit_exchange_type_topic does: the
empty key is zero words, and "a." is the two words "a" and "". A binding key is a path in the trie;
`*` matches one word, `#` zero or more. Matching walks the trie with the routing key's words; at a
node with a `#` child the walk continues into it at every remaining position. Runs of `#` are
collapsed on insert ("#.#" and "#" match the same keys) so the walk stays linear in the common
case. Each node holds a count per destination, because several bindings (different arguments) can
put the same destination on the same key; a destination leaves only when its count reaches zero.
Invariant: a node with no destinations and no children is removed, so the trie holds no garbage.
"""
from __future__ import annotations

from collections.abc import Hashable
from typing import Any


def split_words(key: str) -> list[str]:
    return key.split(".") if key else []


def _normalise(words: list[str]) -> tuple[str, ...]:
    out: list[str] = []
    for word in words:
        if word == "#" and out and out[-1] == "#":
            continue
        out.append(word)
    return tuple(out)


class _Node:
    __slots__ = ("children", "star", "hash", "dests")

    def __init__(self) -> None:
        self.children: dict[str, _Node] = {}
        self.star: _Node | None = None
        self.hash: _Node | None = None
        self.dests: dict[Hashable, int] = {}

    def empty(self) -> bool:
        return not (self.children or self.star or self.hash or self.dests)

    def child(self, word: str) -> "_Node | None":
        if word == "*":
            return self.star
        if word == "#":
            return self.hash
        return self.children.get(word)

    def set_child(self, word: str, node: "_Node | None") -> None:
        if word == "*":
            self.star = node
        elif word == "#":
            self.hash = node
        elif node is None:
            del self.children[word]
        else:
            self.children[word] = node


class TopicTrie:
    """Destinations (any hashable) reachable by binding keys; `match` returns those a key reaches."""

    def __init__(self) -> None:
        self._root = _Node()

    def add(self, binding_key: str, dest: Hashable) -> None:
        node = self._root
        for word in _normalise(split_words(binding_key)):
            nxt = node.child(word)
            if nxt is None:
                nxt = _Node()
                node.set_child(word, nxt)
            node = nxt
        node.dests[dest] = node.dests.get(dest, 0) + 1

    def remove(self, binding_key: str, dest: Hashable) -> None:
        words = _normalise(split_words(binding_key))
        path = [self._root]
        for word in words:
            nxt = path[-1].child(word)
            assert nxt is not None, f"removing unknown topic binding {binding_key!r}"
            path.append(nxt)
        leaf = path[-1]
        count = leaf.dests[dest] - 1
        if count:
            leaf.dests[dest] = count
        else:
            del leaf.dests[dest]
        for depth in range(len(words), 0, -1):  # prune now-empty nodes bottom-up
            if not path[depth].empty():
                break
            path[depth - 1].set_child(words[depth - 1], None)

    def match(self, routing_key: str) -> dict[Hashable, None]:
        """Destinations matched by `routing_key`, deduplicated, in a deterministic order."""
        out: dict[Any, None] = {}
        words = split_words(routing_key)
        _walk(self._root, words, 0, len(words), out)
        return out


def _walk(node: _Node, words: list[str], i: int, n: int, out: dict[Any, None]) -> None:
    hash_node = node.hash
    if hash_node is not None:
        for j in range(i, n + 1):
            _walk(hash_node, words, j, n, out)
    if i == n:
        if node.dests:
            out.update(dict.fromkeys(node.dests))
        return
    child = node.children.get(words[i])
    if child is not None:
        _walk(child, words, i + 1, n, out)
    if node.star is not None:
        _walk(node.star, words, i + 1, n, out)
