"""Topic matching: RabbitMQ 3.10's answers (recorded from the oracle) and a regex reference."""
import re

from hypothesis import given, settings, strategies as st

from metadata.topic import TopicTrie

# routing key -> binding keys that matched, as RabbitMQ 3.10 routed them
ORACLE = {"": ["#", "", "#.#"], "a": ["#", "*", "a", "a.#", "#.a", "#.#", "#.*"], "b": ["#", "*", "#.#", "#.*", "#.b.#"], "a.b": ["#", "a.*", "a.#", "a.#.b", "*.*", "#.#", "a.*.#", "#.*", "*.#.*", "a.#.#.b", "#.b.#"], "a.a": ["#", "a.*", "a.#", "#.a", "*.*", "#.#", "a.*.#", "#.*", "*.#.*"], "a.x.b": ["#", "a.#", "a.#.b", "#.#", "a.*.#", "#.*", "*.#.*", "a.#.#.b", "#.b.#", "a.*.b"], "a.x.y.b": ["#", "a.#", "a.#.b", "#.#", "a.*.#", "#.*", "*.#.*", "a.#.#.b", "#.b.#"], ".": ["#", "*.*", "#.#", "#.*", "*.#.*", ".", "*.", "#."], "a.": ["#", "a.*", "a.#", "*.*", "#.#", "a.*.#", "#.*", "*.#.*", "a.", "*.", "#."], ".a": ["#", "#.a", "*.*", "#.#", "#.*", "*.#.*", ".a"], "x.a": ["#", "#.a", "*.*", "#.#", "#.*", "*.#.*"], "a.b.c": ["#", "a.#", "#.#", "a.*.#", "#.*", "*.#.*", "#.b.#"], "x.a.y": ["#", "#.#", "#.*", "*.#.*", "*.a.*"], "..": ["#", "#.#", "#.*", "*.#.*", "#."], "a..b": ["#", "a.#", "a.#.b", "#.#", "a.*.#", "#.*", "*.#.*", "a.#.#.b", "#.b.#", "a.*.b"], "b.a.b": ["#", "#.#", "#.*", "*.#.*", "#.b.#", "*.a.*"], "a.b.b": ["#", "a.#", "a.#.b", "#.#", "a.*.#", "#.*", "*.#.*", "a.#.#.b", "#.b.#", "a.*.b"]}
PATTERNS = ["#", "*", "", "a", "a.*", "a.#", "#.a", "a.#.b", "*.*", "#.#", "a.*.#", "#.*", "*.#.*", ".", "a.",
            ".a", "*.", "#.", "a.#.#.b", "#.b.#", "a.*.b", "*.a.*"]


def test_trie_routes_as_rabbitmq():
    trie = TopicTrie()
    for p in PATTERNS:
        trie.add(p, p)
    for key, expected in ORACLE.items():
        assert sorted(trie.match(key)) == sorted(expected), key


def test_remove_prunes_and_counts_duplicates():
    trie = TopicTrie()
    trie.add("a.#", "q")
    trie.add("a.#", "q")  # two bindings, same destination (different arguments)
    trie.add("a.*", "r")
    trie.remove("a.#", "q")
    assert sorted(trie.match("a.b")) == ["q", "r"]
    trie.remove("a.#", "q")
    assert list(trie.match("a.b")) == ["r"]
    trie.remove("a.*", "r")
    assert trie._root.empty()


def regex_for(binding_key: str) -> re.Pattern:
    """Each word is rendered followed by '.', so zero words is the empty string."""
    parts = []
    for word in (binding_key.split(".") if binding_key else []):
        parts.append({"*": r"[^.]*\.", "#": r"(?:[^.]*\.)*"}.get(word, re.escape(word) + r"\."))
    return re.compile("".join(parts))


def regex_match(binding_key: str, routing_key: str) -> bool:
    subject = "".join(w + "." for w in (routing_key.split(".") if routing_key else []))
    return regex_for(binding_key).fullmatch(subject) is not None


def test_regex_reference_agrees_with_oracle():
    for key, expected in ORACLE.items():
        assert sorted(p for p in PATTERNS if regex_match(p, key)) == sorted(expected), key


words = st.sampled_from(["a", "b", ""])
pattern_words = st.sampled_from(["a", "b", "", "*", "#"])
keys = st.lists(words, max_size=5).map(".".join)
patterns = st.lists(pattern_words, max_size=5).map(".".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(patterns, max_size=12), st.lists(keys, max_size=8), st.data())
def test_trie_matches_regex_reference(bindings, routing_keys, data):
    trie = TopicTrie()
    for i, p in enumerate(bindings):
        trie.add(p, i)
    removed = data.draw(st.sets(st.sampled_from(range(len(bindings)))) if bindings else st.just(set()))
    for i in removed:
        trie.remove(bindings[i], i)
    for key in routing_keys:
        expected = {i for i, p in enumerate(bindings) if i not in removed and regex_match(p, key)}
        assert set(trie.match(key)) == expected
