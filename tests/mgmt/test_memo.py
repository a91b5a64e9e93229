"""The kept rows of long listings (mgmt/memo.py) against rows made afresh for every request:
whatever happens between requests -- samples with moving or still counts, queues and exchanges
declared, deleted or declared again with other arguments, policies set and cleared -- the listing
made through the memo is the listing made without it, byte for byte."""
from __future__ import annotations

import random

from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule

from mgmt import auth, reads, rows
from mgmt.memo import RowMemo
from actors.stats.rates import Rates
from actors.stats.sample import Sample, rate_values
from mgmt.shapes import View
from metadata.commands import ClearPolicy
from metadata.passwords import hash_password
from metadata.registry import Registry

NAMES = ["a", "b", "c", "d"]
ADMIN = "Basic Z3Vlc3Q6Z3Vlc3Q="  # guest:guest


class MemoMatchesFreshRows(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.reg = Registry(random.Random(1))
        self.reg.add_user("guest", hash_password("guest", b"salt"), ["administrator"])
        self.reg.set_permissions("guest", "/", ".*", ".*", ".*")
        self.memo = RowMemo()
        self.rates = Rates()
        self.sample = Sample(0)
        self.now_ms = 0

    @rule(name=st.sampled_from(NAMES), ttl=st.sampled_from([None, 1000, 2000]))
    def declare(self, name: str, ttl: int | None) -> None:
        self.reg.declare_queue("/", name, arguments={} if ttl is None else {"x-message-ttl": ttl})
        self.reg.declare_exchange("/", f"x{name}", "fanout")

    @rule(name=st.sampled_from(NAMES))
    def delete(self, name: str) -> None:
        self.reg.delete_queue("/", name, None)
        self.reg.delete_exchange("/", f"x{name}")

    @rule(pattern=st.sampled_from(["^a", "^[ab]", "."]), length=st.integers(1, 3))
    def set_policy(self, pattern: str, length: int) -> None:
        self.reg.set_policy("/", "p", pattern, {"max-length": length})

    @rule()
    def clear_policy(self) -> None:
        self.reg.apply_command(ClearPolicy("/", "p"))

    @rule(counts=st.dictionaries(st.sampled_from(NAMES), st.integers(0, 3)), step_ms=st.sampled_from([1000, 5000]))
    def new_sample(self, counts: dict[str, int], step_ms: int) -> None:
        """The hosts' answers: a few depths and counters that come and go (rates move and stop)."""
        self.now_ms += step_ms
        queues = {("/", n): {"vhost": "/", "name": n, "messages": c, "messages_ready": c, "messages_unacknowledged": 0,
                             "consumers": 0, "state": "running", "message_stats": {"publish": c}}
                  for n, c in counts.items()}
        exchanges = {("/", f"x{n}"): {"publish_in": c, "publish_out": 2 * c} for n, c in counts.items() if c}
        self.sample = Sample(self.now_ms, queues=queues, exchanges=exchanges)
        self.rates.observe(self.now_ms, rate_values(self.sample))

    @rule()
    def listings_are_the_same(self) -> None:
        """A request (not after every step: what happens between two requests is what the memo
        must notice)."""
        caller = auth.login(self.reg, ADMIN)
        kept = View(self.reg, self.sample, self.rates, "n@h", memo=self.memo)
        fresh = View(self.reg, self.sample, self.rates, "n@h")
        for route in ("queues", "exchanges"):
            for _ in reads.prepare(kept, route, {}, slice_rows=2):
                pass
            answer = reads.answer(kept, caller, route, {}, {})
            assert rows.encode(answer.body) == rows.encode(reads.answer(fresh, caller, route, {}, {}).body)


MemoMatchesFreshRows.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
TestMemoMatchesFreshRows = MemoMatchesFreshRows.TestCase


def run(steps: list[tuple]) -> None:
    """One scenario of the machine's rules, in order."""
    machine = MemoMatchesFreshRows()
    for name, *args in steps:
        getattr(machine, name)(*args)


def test_a_rate_that_moved_and_came_back_between_two_requests():
    """5 (still), 7, 5: the third sample's row shows a rate again, though its counts are the first's."""
    run([("declare", "a", None), ("new_sample", {"a": 2}, 5000), ("new_sample", {"a": 2}, 5000),
         ("listings_are_the_same",), ("new_sample", {"a": 3}, 5000), ("new_sample", {"a": 2}, 5000),
         ("listings_are_the_same",)])


def test_a_queue_declared_again_with_other_arguments_between_two_requests():
    run([("declare", "a", 1000), ("new_sample", {"a": 1}, 5000), ("listings_are_the_same",), ("delete", "a"),
         ("declare", "a", 2000), ("listings_are_the_same",)])
